// std::atomic_thread_fence where ThreadSanitizer allows it (docs/reliability.md, "Sanitizers").
// GCC refuses atomic_thread_fence under -fsanitize=thread (-Werror=tsan: TSan does not model
// fences). StrataThreadFence(order) is that fence in every other build; under TSan it emits
// the same instructions x86-64 needs for it: none for acquire or release (a compiler barrier:
// x86-64 does not reorder loads with loads nor stores with stores) and mfence for seq_cst.
// Only for fences that order accesses to atomics (a sequence lock whose fields are all
// std::atomic): TSan checks nothing there, so not modelling the fence hides no report.
//
// Thread safety: a fence; async-signal-safe; header-only.
#ifndef STRATA_PLATFORM_THREAD_FENCE_H_
#define STRATA_PLATFORM_THREAD_FENCE_H_

#include <atomic>

namespace strata {

__attribute__((always_inline)) inline void StrataThreadFence(std::memory_order order) {
#if defined(__SANITIZE_THREAD__)
  std::atomic_signal_fence(order);
  if (order == std::memory_order_seq_cst) {
#if defined(__x86_64__)
    __asm__ __volatile__("mfence" ::: "memory");
#else
#error "StrataThreadFence: a seq_cst fence under TSan is written for x86-64 only"
#endif
  }
#else
  std::atomic_thread_fence(order);
#endif
}

}  // namespace strata

#endif  // STRATA_PLATFORM_THREAD_FENCE_H_
