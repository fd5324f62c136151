// SampleRing's memory (issue 17): 1 024 native frames per slot, of which only the first
// kFaultedInNativeFrames are resident from the start, so a thread with shallow stacks costs
// what it did with a 128-frame cap; a deep walk's frames are written and read back whole.
#include "base/internal/sample_ring.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "catch2/catch.hpp"

namespace strata {
namespace base_internal {
namespace {

constexpr uintptr_t kPage = 4096;

// Resident pages among those that [begin, end) touches.
size_t ResidentPages(const void* begin, const void* end) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(begin) & ~(kPage - 1);
  const uintptr_t last = (reinterpret_cast<uintptr_t>(end) + kPage - 1) & ~(kPage - 1);
  std::vector<unsigned char> resident((last - first) / kPage);
  REQUIRE(mincore(reinterpret_cast<void*>(first), last - first, resident.data()) == 0);
  size_t count = 0;
  for (unsigned char r : resident) count += r & 1;
  return count;
}

size_t PagesSpanned(const void* begin, const void* end) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(begin) & ~(kPage - 1);
  const uintptr_t last = (reinterpret_cast<uintptr_t>(end) + kPage - 1) & ~(kPage - 1);
  return (last - first) / kPage;
}

}  // namespace

TEST_CASE("A slot holds 1 024 native frames; only the first 128 are resident at first") {
  static_assert(SampleSlot::kMaxNativeFrames == 1024, "Firefox's limit");
  static_assert(SampleSlot::kFaultedInNativeFrames <= SampleSlot::kMaxNativeFrames, "");
  SampleRing ring;
  REQUIRE(ring.ok());
  SampleSlot* slot = ring.TryBeginWrite();
  REQUIRE(slot != nullptr);

  // What a usual sample writes is resident: the header, labels, script part and the first
  // kFaultedInNativeFrames frames.
  const NativeFrame* faulted_end = slot->natives + SampleSlot::kFaultedInNativeFrames;
  CHECK(ResidentPages(slot, faulted_end) == PagesSpanned(slot, faulted_end));
  // The pages wholly beyond them are not (the deep part costs nothing until used).
  const uintptr_t deep_begin =
      (reinterpret_cast<uintptr_t>(faulted_end) + kPage - 1) & ~(kPage - 1);
  const NativeFrame* deep_end = slot->natives + SampleSlot::kMaxNativeFrames;
  const size_t deep_pages = PagesSpanned(reinterpret_cast<void*>(deep_begin), deep_end);
  REQUIRE(deep_pages >= 3);  // Up to 1 024 frames of 16 bytes: 16 KiB.
  const size_t resident_whole_ring =
      ResidentPages(slot, reinterpret_cast<const char*>(slot) + sizeof(SampleSlot) * SampleRing::kSlots);
  INFO("resident ring pages: " << resident_whole_ring << " of "
                               << PagesSpanned(slot, reinterpret_cast<const char*>(slot) +
                                                         sizeof(SampleSlot) * SampleRing::kSlots));
  CHECK(ResidentPages(reinterpret_cast<void*>(deep_begin), deep_end) == 0);
  // 2 pages per slot (40 KiB for the 4 slots of 128 inline frames before issue 17).
  CHECK(resident_whole_ring * kPage <= SampleRing::kSlots * 2 * kPage);

  // A walk that fills every frame: all kept, and read back in order.
  for (uint32_t i = 0; i < SampleSlot::kMaxNativeFrames; ++i) {
    slot->natives[i] = NativeFrame{0x1000 + i, 0x100000 + 16 * i};
  }
  slot->native_count = SampleSlot::kMaxNativeFrames;
  slot->label_count = 0;
  slot->script_frame_count = 0;
  ring.CommitWrite();
  const SampleSlot* read = ring.TryBeginRead();
  REQUIRE(read == slot);
  CHECK(read->natives[SampleSlot::kMaxNativeFrames - 1].pc == 0x1000 + 1023);
  CHECK(ResidentPages(reinterpret_cast<void*>(deep_begin), deep_end) == deep_pages);
  ring.EndRead();
}

}  // namespace base_internal
}  // namespace strata
