#include "base/internal/sample_ring.h"

#include <sys/mman.h>

#include <cstddef>

namespace strata {
namespace base_internal {

SampleRing::SampleRing() {
  const size_t bytes = sizeof(SampleSlot) * kSlots;
  const long page = 4096;
  mapped_bytes_ = (bytes + page - 1) / page * page;
  void* memory = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    mapped_bytes_ = 0;
    return;
  }
  slots_ = static_cast<SampleSlot*>(memory);
  // Fault in what a usual sample writes: each slot up to its first kFaultedInNativeFrames
  // native frames (the deeper frames fault in when first written, sample_ring.h).
  constexpr size_t kFaultedInBytes =
      offsetof(SampleSlot, natives) + sizeof(NativeFrame) * SampleSlot::kFaultedInNativeFrames;
  for (uint32_t i = 0; i < kSlots; ++i) {
    volatile char* const start = reinterpret_cast<volatile char*>(&slots_[i]);
    for (size_t offset = 0; offset < kFaultedInBytes; offset += page) start[offset] = 0;
    start[kFaultedInBytes - 1] = 0;
  }
}

SampleRing::~SampleRing() {
  if (slots_) munmap(slots_, mapped_bytes_);
}

}  // namespace base_internal
}  // namespace strata
