// SampleRing (issue 17): variable-size records in a byte ring. A thread holds ~130 typical
// samples (40 native frames, 4 labels) in 88 KiB resident, where 8 fixed slots held 8 in
// 64 KiB; deep samples (1 024 frames) still fit; a record that does not fit is dropped
// whole and the ring is intact; a record is never read before its commit.
#include "base/internal/sampling/sample_ring.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/internal/sampling/sampler_thread.h"
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

// The labels' static strings (records keep the pointers).
const char* const kLabelNames[] = {"main loop", "parse", "render frame", "flush"};

// Fills `slot` as a handler would, deterministically from `seed`: `natives` frames with stack
// pointers growing from `stack_top`, `labels` labels (every other one with dynamic text), and
// `script_frames` script frames with text.
void FillSample(SampleSlot* slot, uint64_t seed, uint32_t natives, uint32_t labels,
                uint32_t script_frames = 0, uintptr_t stack_top = 0x7ffd00000000) {
  slot->time_ns = static_cast<int64_t>(1000000 * seed);
  slot->cpu_ns = static_cast<int64_t>(999 * seed);
  slot->overruns = static_cast<int32_t>(seed % 3);
  slot->in_system_call = seed % 2 == 1;
  slot->charged_system_call = seed % 3 == 1;
  slot->missed_wait = seed % 5 == 2;
  slot->native_count = natives;
  for (uint32_t i = 0; i < natives; ++i) {
    slot->natives[i] = NativeFrame{0x400000 + seed * 7 + i, stack_top + 96 * i};
  }
  slot->label_count = labels;
  for (uint32_t i = 0; i < labels; ++i) {
    SampleSlot::Label& label = slot->labels[i];
    label.label = kLabelNames[i % 4];
    label.stack_address = stack_top + 96 * (2 * i + 1) + 8;
    label.push_site = i % 3 == 2 ? 0 : 0x555500001000 + 16 * i + seed;
    label.category = (seed + i) % 7;
    label.has_dynamic = i % 2 == 0;
    if (label.has_dynamic) {
      snprintf(label.dynamic, sizeof(label.dynamic), "item %llu/%u",
               static_cast<unsigned long long>(seed), i);
    }
  }
  slot->script_frame_count = script_frames;
  slot->script_text_bytes = 0;
  for (uint32_t i = 0; i < script_frames; ++i) {
    char text[32];
    const int length = snprintf(text, sizeof(text), "fn%u@%llu", i,
                                static_cast<unsigned long long>(seed));
    SampleSlot::ScriptFrame& frame = slot->script_frames[i];
    frame = SampleSlot::ScriptFrame{stack_top + 50 * i, i + 1, 2 * i,
                                    static_cast<uint16_t>(slot->script_text_bytes),
                                    static_cast<uint16_t>(length), 1, 2, 3, 0};
    std::memcpy(slot->script_text + slot->script_text_bytes, text, length);
    slot->script_text_bytes += length;
  }
}

// Whether `read` holds what FillSample(seed, ...) wrote (its used parts).
void CheckSample(const SampleSlot& read, uint64_t seed, uint32_t natives, uint32_t labels,
                 uint32_t script_frames = 0, uintptr_t stack_top = 0x7ffd00000000) {
  auto expected = std::make_unique<SampleSlot>();
  FillSample(expected.get(), seed, natives, labels, script_frames, stack_top);
  INFO("seed " << seed);
  REQUIRE(read.time_ns == expected->time_ns);
  CHECK(read.cpu_ns == expected->cpu_ns);
  CHECK(read.overruns == expected->overruns);
  CHECK(read.in_system_call == expected->in_system_call);
  CHECK(read.charged_system_call == expected->charged_system_call);
  CHECK(read.missed_wait == expected->missed_wait);
  REQUIRE(read.native_count == natives);
  for (uint32_t i = 0; i < natives; ++i) {
    REQUIRE(read.natives[i].pc == expected->natives[i].pc);
    REQUIRE(read.natives[i].sp == expected->natives[i].sp);
  }
  REQUIRE(read.label_count == labels);
  for (uint32_t i = 0; i < labels; ++i) {
    CHECK(read.labels[i].label == expected->labels[i].label);
    CHECK(read.labels[i].stack_address == expected->labels[i].stack_address);
    CHECK(read.labels[i].push_site == expected->labels[i].push_site);
    CHECK(read.labels[i].category == expected->labels[i].category);
    CHECK(read.labels[i].has_dynamic == expected->labels[i].has_dynamic);
    if (expected->labels[i].has_dynamic) {
      CHECK(std::string(read.labels[i].dynamic) == expected->labels[i].dynamic);
    }
  }
  REQUIRE(read.script_frame_count == script_frames);
  REQUIRE(read.script_text_bytes == expected->script_text_bytes);
  CHECK(std::memcmp(read.script_text, expected->script_text, expected->script_text_bytes) == 0);
  for (uint32_t i = 0; i < script_frames; ++i) {
    CHECK(std::memcmp(&read.script_frames[i], &expected->script_frames[i],
                      sizeof(SampleSlot::ScriptFrame)) == 0);
  }
}

// A typical sample (issue 17): tens of native frames, a few labels.
constexpr uint32_t kTypicalNatives = 40;
constexpr uint32_t kTypicalLabels = 4;

}  // namespace

TEST_CASE("A ring is 4 pages resident until its consumer makes it resident, then 88 KiB") {
  static_assert(SampleSlot::kMaxNativeFrames == 1024, "Firefox's limit");
  SampleRing ring;
  REQUIRE(ring.ok());
  SampleSlot* slot = ring.BeginWrite();
  REQUIRE(slot != nullptr);
  const char* const mapping_end = reinterpret_cast<const char*>(slot) +
                                  (sizeof(SampleSlot) + kPage - 1) / kPage * kPage +
                                  SampleRing::kRingBytes;
  const char* const ring_begin = mapping_end - SampleRing::kRingBytes;
  // A registered thread never sampled (most of a build's short processes, issue 38): the
  // first 2 pages of the scratch slot and the ring's first kFaultedInRingBytes.
  {
    const size_t resident = ResidentPages(slot, mapping_end);
    INFO("resident pages at construction: " << resident << " of "
                                            << PagesSpanned(slot, mapping_end));
    CHECK(resident * kPage == 2 * kPage + SampleRing::kFaultedInRingBytes);
    CHECK(ResidentPages(ring_begin, ring_begin + SampleRing::kFaultedInRingBytes) ==
          SampleRing::kFaultedInRingBytes / kPage);
  }
  const NativeFrame* faulted_end = slot->natives + SampleSlot::kFaultedInNativeFrames;
  CHECK(ResidentPages(slot, faulted_end) == PagesSpanned(slot, faulted_end));
  // A record written and read leaves the ring as it was.
  FillSample(slot, 1, kTypicalNatives, kTypicalLabels);
  REQUIRE(ring.CommitWrite());
  auto read = std::make_unique<SampleSlot>();
  REQUIRE(ring.TryRead(read.get()));
  CHECK(ResidentPages(ring_begin, mapping_end) == SampleRing::kFaultedInRingBytes / kPage);
  // The consumer makes the whole ring resident (where the kernel has MADV_POPULATE_WRITE,
  // 5.14+; this project's machines do), not the sampled thread, and the ring keeps working.
  ring.MakeResident();
  slot = ring.BeginWrite();
  REQUIRE(slot != nullptr);
  FillSample(slot, 2, kTypicalNatives, kTypicalLabels);
  REQUIRE(ring.CommitWrite());
  REQUIRE(ring.TryRead(read.get()));
  CHECK(read->time_ns == 2 * 1000000);
  {
    const size_t resident = ResidentPages(slot, mapping_end);
    INFO("resident pages after the first read: " << resident << " of "
                                                 << PagesSpanned(slot, mapping_end));
    // The ring (80 KiB) and the first 2 pages of the scratch slot: at most 96 KiB (the 8
    // slots of 2 resident pages before issue 17 were 64 KiB).
    CHECK(resident * kPage <= 96 * 1024);
    CHECK(ResidentPages(ring_begin, mapping_end) == SampleRing::kRingBytes / kPage);
  }
  // A scratch slot's deep frames stay unmapped until a deep walk writes them.
  const uintptr_t deep_begin =
      (reinterpret_cast<uintptr_t>(faulted_end) + kPage - 1) & ~(kPage - 1);
  const NativeFrame* deep_end = slot->natives + SampleSlot::kMaxNativeFrames;
  REQUIRE(PagesSpanned(reinterpret_cast<void*>(deep_begin), deep_end) >= 3);
  CHECK(ResidentPages(reinterpret_cast<void*>(deep_begin), deep_end) == 0);
}

TEST_CASE("With the consumer stopped, a ring holds over 100 typical samples (100 ms at 1 kHz)") {
  SampleRing ring;
  REQUIRE(ring.ok());
  uint64_t committed = 0;
  for (;;) {
    SampleSlot* slot = ring.BeginWrite();
    if (!slot) break;
    FillSample(slot, committed, kTypicalNatives, kTypicalLabels);
    if (!ring.CommitWrite()) break;
    ++committed;
  }
  auto probe = std::make_unique<SampleSlot>();
  FillSample(probe.get(), committed - 1, kTypicalNatives, kTypicalLabels);
  INFO("typical record: " << SampleRing::RecordBytes(*probe) << " bytes; held " << committed);
  // The 8 fixed slots before held 8: 8 ms at 1 kHz. The sampler thread was seen starved ~30 ms.
  CHECK(committed >= 100);
  CHECK(SampleRing::RecordBytes(*probe) <= SampleRing::kTypicalRecordBytes);
  CHECK(committed >= SampleRing::kTypicalRecords);
  auto read = std::make_unique<SampleSlot>();
  for (uint64_t i = 0; i < committed; ++i) {
    REQUIRE(ring.TryRead(read.get()));
    CheckSample(*read, i, kTypicalNatives, kTypicalLabels);
  }
  CHECK_FALSE(ring.TryRead(read.get()));
}

TEST_CASE("Deep samples (1 024 frames) are kept whole, with stacks of any span") {
  SampleRing ring;
  REQUIRE(ring.ok());
  auto read = std::make_unique<SampleSlot>();
  for (uint64_t round = 0; round < 20; ++round) {
    SampleSlot* slot = ring.BeginWrite();
    REQUIRE(slot != nullptr);
    FillSample(slot, round, SampleSlot::kMaxNativeFrames, SampleSlot::kMaxLabels, 3);
    if (round % 2 == 1) slot->natives[7].sp = 0x1000;  // Over 4 GiB below the others: wide.
    REQUIRE(ring.CommitWrite());
    if (round % 3 == 2) continue;  // Let some accumulate, so that records wrap around.
    while (ring.TryRead(read.get())) {
      REQUIRE(read->native_count == SampleSlot::kMaxNativeFrames);
      CHECK(read->natives[SampleSlot::kMaxNativeFrames - 1].pc ==
            static_cast<uintptr_t>(0x400000 + read->time_ns / 1000000 * 7 + 1023));
      if ((read->time_ns / 1000000) % 2 == 1) CHECK(read->natives[7].sp == 0x1000);
    }
  }
  // A deep record is a few pages: the scratch slot's deep frames are now resident.
  SampleSlot* slot = ring.BeginWrite();
  FillSample(slot, 99, SampleSlot::kMaxNativeFrames, 2);
  REQUIRE(ring.CommitWrite());
  REQUIRE(ring.TryRead(read.get()));
  CheckSample(*read, 99, SampleSlot::kMaxNativeFrames, 2);
}

TEST_CASE("Records of every size wrap around the ring's end intact and in order") {
  SampleRing ring;
  REQUIRE(ring.ok());
  auto read = std::make_unique<SampleSlot>();
  uint64_t written = 0;
  uint64_t next_read = 0;
  size_t bytes_written = 0;
  // Sizes that do not divide the ring, several times round it.
  while (bytes_written < 8 * SampleRing::kRingBytes) {
    for (int burst = 0; burst < 1 + static_cast<int>(written % 5); ++burst) {
      SampleSlot* slot = ring.BeginWrite();
      REQUIRE(slot != nullptr);
      const uint32_t natives = 1 + static_cast<uint32_t>((written * 37) % 300);
      FillSample(slot, written, natives, static_cast<uint32_t>(written % 6),
                 static_cast<uint32_t>(written % 4));
      bytes_written += SampleRing::RecordBytes(*slot);
      REQUIRE(ring.CommitWrite());
      ++written;
    }
    while (ring.TryRead(read.get())) {
      const uint32_t natives = 1 + static_cast<uint32_t>((next_read * 37) % 300);
      CheckSample(*read, next_read, natives, static_cast<uint32_t>(next_read % 6),
                  static_cast<uint32_t>(next_read % 4));
      ++next_read;
    }
  }
  CHECK(next_read == written);
}

TEST_CASE("A full ring drops the record that does not fit, keeps the others, then has room") {
  SampleRing ring;
  REQUIRE(ring.ok());
  uint64_t committed = 0;
  uint64_t dropped = 0;
  // Deep records until one does not fit; every one before it is intact.
  while (dropped == 0) {
    SampleSlot* slot = ring.BeginWrite();
    REQUIRE(slot != nullptr);  // There is room for a small record still.
    FillSample(slot, committed, 600, 2);
    if (ring.CommitWrite()) {
      ++committed;
    } else {
      ++dropped;
    }
  }
  // Small records fill what is left; then the producer is told before its walk.
  uint64_t small = 0;
  while (SampleSlot* slot = ring.BeginWrite()) {
    FillSample(slot, 1000 + small, 1, 0);
    if (!ring.CommitWrite()) break;
    ++small;
  }
  CHECK(ring.BeginWrite() == nullptr);
  auto read = std::make_unique<SampleSlot>();
  for (uint64_t i = 0; i < committed; ++i) {
    REQUIRE(ring.TryRead(read.get()));
    CheckSample(*read, i, 600, 2);
  }
  for (uint64_t i = 0; i < small; ++i) {
    REQUIRE(ring.TryRead(read.get()));
    CheckSample(*read, 1000 + i, 1, 0);
  }
  CHECK_FALSE(ring.TryRead(read.get()));
  // Freed: a deep record fits again.
  SampleSlot* slot = ring.BeginWrite();
  REQUIRE(slot != nullptr);
  FillSample(slot, 7, SampleSlot::kMaxNativeFrames, 0);
  CHECK(ring.CommitWrite());
  ring.DiscardAll();
  CHECK_FALSE(ring.TryRead(read.get()));
}

TEST_CASE("A record is not read before its commit, nor ever torn, with both sides running") {
  SampleRing ring;
  REQUIRE(ring.ok());
  auto read = std::make_unique<SampleSlot>();
  // Filled, not committed (the handler is still walking): nothing to read.
  FillSample(ring.BeginWrite(), 5, kTypicalNatives, kTypicalLabels);
  CHECK_FALSE(ring.TryRead(read.get()));
  REQUIRE(ring.CommitWrite());
  REQUIRE(ring.TryRead(read.get()));
  CheckSample(*read, 5, kTypicalNatives, kTypicalLabels);

  // A producer and a consumer on two threads: every record read is whole and in order, and
  // every record is either read or dropped.
  constexpr uint64_t kRecords = 20000;
  std::atomic<uint64_t> dropped{0};
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (uint64_t i = 0; i < kRecords; ++i) {
      SampleSlot* slot = ring.BeginWrite();
      if (!slot) {
        dropped.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      FillSample(slot, 100 + i, 1 + static_cast<uint32_t>(i % 97), static_cast<uint32_t>(i % 5));
      if (!ring.CommitWrite()) dropped.fetch_add(1, std::memory_order_relaxed);
    }
    done.store(true, std::memory_order_release);
  });
  uint64_t records_read = 0;
  int64_t previous_time = -1;
  bool intact = true;
  for (;;) {
    const bool finished = done.load(std::memory_order_acquire);
    while (ring.TryRead(read.get())) {
      const uint64_t seed = static_cast<uint64_t>(read->time_ns / 1000000);
      const uint64_t i = seed - 100;
      auto expected = std::make_unique<SampleSlot>();
      FillSample(expected.get(), seed, 1 + static_cast<uint32_t>(i % 97),
                 static_cast<uint32_t>(i % 5));
      intact = intact && read->time_ns > previous_time &&
               read->native_count == expected->native_count &&
               read->label_count == expected->label_count &&
               std::memcmp(read->natives, expected->natives,
                           sizeof(NativeFrame) * expected->native_count) == 0 &&
               read->natives[read->native_count - 1].pc ==
                   expected->natives[read->native_count - 1].pc;
      for (uint32_t l = 0; intact && l < read->label_count; ++l) {
        intact = read->labels[l].label == expected->labels[l].label &&
                 read->labels[l].stack_address == expected->labels[l].stack_address &&
                 (!expected->labels[l].has_dynamic ||
                  std::strcmp(read->labels[l].dynamic, expected->labels[l].dynamic) == 0);
      }
      previous_time = read->time_ns;
      ++records_read;
    }
    if (finished) break;
    std::this_thread::yield();
  }
  producer.join();
  CHECK(intact);
  CHECK(records_read + dropped.load() == kRecords);
  CHECK(records_read > 0);
}

namespace {

// A handler run on the writing thread in the middle of a write, as ThreadSanitizer runs the
// sampling handler at the exit of an intercepted call whatever the thread's mask
// (sample_ring.h): it tries a write of its own (seed kNestedSeed), as the handler would.
constexpr uint64_t kNestedSeed = 99;
SampleRing* g_nested_ring = nullptr;
volatile sig_atomic_t g_nested_refused = 0;
volatile sig_atomic_t g_nested_ran = 0;

void WriteFromHandler(int) {
  g_nested_ran = g_nested_ran + 1;
  SampleSlot* slot = g_nested_ring->BeginWrite();
  if (!slot) {
    g_nested_refused = g_nested_refused + 1;
    return;
  }
  FillSample(slot, kNestedSeed, 3, 1);
  g_nested_ring->CommitWrite();
}

// Runs WriteFromHandler on this thread, now, against `ring`.
void RunNestedWrite(SampleRing* ring) {
  struct sigaction action = {};
  struct sigaction previous = {};
  action.sa_handler = &WriteFromHandler;
  sigemptyset(&action.sa_mask);
  REQUIRE(sigaction(SIGUSR1, &action, &previous) == 0);
  g_nested_ring = ring;
  REQUIRE(raise(SIGUSR1) == 0);
  REQUIRE(sigaction(SIGUSR1, &previous, nullptr) == 0);
  REQUIRE(g_nested_ran == 1);
}

}  // namespace

TEST_CASE("A write nested in another on one thread is refused; the one it interrupts stays whole") {
  SampleRing ring;
  REQUIRE(ring.ok());
  auto read = std::make_unique<SampleSlot>();
  g_nested_ran = 0;
  g_nested_refused = 0;
  // The slot filled (the handler walked), a handler runs before the commit: it must neither
  // take the same slot nor commit over the range the outer write is about to reserve.
  SampleSlot* slot = ring.BeginWrite();
  REQUIRE(slot != nullptr);
  FillSample(slot, 1, kTypicalNatives, kTypicalLabels, 2);
  RunNestedWrite(&ring);
  CHECK(g_nested_refused == 1);
  REQUIRE(ring.CommitWrite());
  REQUIRE(ring.TryRead(read.get()));
  CheckSample(*read, 1, kTypicalNatives, kTypicalLabels, 2);
  CHECK_FALSE(ring.TryRead(read.get()));

  // Between writes the thread's handler writes as ever.
  g_nested_ran = 0;
  g_nested_refused = 0;
  RunNestedWrite(&ring);
  CHECK(g_nested_refused == 0);
  REQUIRE(ring.TryRead(read.get()));
  CheckSample(*read, kNestedSeed, 3, 1);

  // Several records of one slot (a call's kernel CPU as several samples): the slot stays the
  // writer's between them, a handler in between is refused, every record is the writer's.
  g_nested_ran = 0;
  g_nested_refused = 0;
  slot = ring.BeginWrite();
  REQUIRE(slot != nullptr);
  FillSample(slot, 7, kTypicalNatives, kTypicalLabels);
  REQUIRE(ring.CommitWriteKeepingSlot());
  RunNestedWrite(&ring);
  CHECK(g_nested_refused == 1);
  REQUIRE(ring.CommitWriteKeepingSlot());
  ring.EndWrite();
  for (int record = 0; record < 2; ++record) {
    REQUIRE(ring.TryRead(read.get()));
    CheckSample(*read, 7, kTypicalNatives, kTypicalLabels);
  }
  CHECK_FALSE(ring.TryRead(read.get()));
  CHECK(ring.BeginWrite() != nullptr);  // Ended: the next write may begin.
}

TEST_CASE("With perf events the sampler's period leaves a starved sampler seven periods of room") {
  // 4 ms at 1 ms (a wake-up every interval costs threads on perf events their perf context
  // switch), and the ring holds eight periods of typical samples at any rate.
  CHECK(SamplerLoopIntervalsWithPerfEvents(TimeDuration::FromMilliseconds(1)) == 4);
  for (double interval_ms : {0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0, 100.0}) {
    INFO("interval " << interval_ms << " ms");
    const int64_t intervals =
        SamplerLoopIntervalsWithPerfEvents(TimeDuration::FromMilliseconds(interval_ms));
    CHECK(intervals >= 1);
    CHECK(static_cast<size_t>(intervals) * 8 <= SampleRing::kTypicalRecords);
    CHECK(intervals * interval_ms <= std::max(4.0, interval_ms) + 1e-9);
  }
}

}  // namespace base_internal
}  // namespace strata
