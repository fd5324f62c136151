// The kernel's signal mask word (signals 1..64: bit n - 1), the first 8 bytes of a sigset_t,
// read and changed by bit operations. For code on a program's thread: glibc's sigaddset,
// sigdelset, sigismember and sigemptyset are exported functions a program can interpose, and
// refuse glibc's internal signals 32 and 33 (EINVAL). Signal numbers outside 1..64 are
// neither members nor added. Header-only; thread-safe and async-signal-safe (no calls:
// memcpy/memset of fixed size are inlined).
#ifndef STRATA_PLATFORM_KERNEL_SIGNAL_SET_H_
#define STRATA_PLATFORM_KERNEL_SIGNAL_SET_H_

#include <signal.h>

#include <cstdint>
#include <cstring>

namespace strata {

inline uint64_t KernelMaskWord(const sigset_t& set) {
  uint64_t word;
  std::memcpy(&word, &set, sizeof(word));
  return word;
}
inline uint64_t KernelSignalBit(int signal_number) {
  return signal_number >= 1 && signal_number <= 64 ? uint64_t{1} << (signal_number - 1) : 0;
}
inline bool HasSignal(const sigset_t& set, int signal_number) {
  return (KernelMaskWord(set) & KernelSignalBit(signal_number)) != 0;
}
inline void AddSignal(sigset_t* set, int signal_number) {
  const uint64_t word = KernelMaskWord(*set) | KernelSignalBit(signal_number);
  std::memcpy(set, &word, sizeof(word));
}
inline void RemoveSignal(sigset_t* set, int signal_number) {
  const uint64_t word = KernelMaskWord(*set) & ~KernelSignalBit(signal_number);
  std::memcpy(set, &word, sizeof(word));
}
inline void EmptySignalSet(sigset_t* set) { std::memset(set, 0, sizeof(*set)); }

}  // namespace strata

#endif  // STRATA_PLATFORM_KERNEL_SIGNAL_SET_H_
