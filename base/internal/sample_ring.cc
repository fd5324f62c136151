#include "base/internal/sample_ring.h"

#include <sys/mman.h>

namespace strata {
namespace base_internal {

SampleRing::SampleRing() {
  const size_t bytes = sizeof(SampleSlot) * kSlots;
  const long page = 4096;
  mapped_bytes_ = (bytes + page - 1) / page * page;
  void* memory = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (memory == MAP_FAILED) {
    mapped_bytes_ = 0;
    return;
  }
  slots_ = static_cast<SampleSlot*>(memory);
}

SampleRing::~SampleRing() {
  if (slots_) munmap(slots_, mapped_bytes_);
}

}  // namespace base_internal
}  // namespace strata
