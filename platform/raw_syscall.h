// Raw Linux system calls: the `syscall` instruction itself, not libc's wrappers.
//
// Why: code that Strata runs on a program's thread (signal handler, wait wrappers, marker and
// registration paths) must not call anything the program can interpose or that can take a
// lock of the program's (docs/host-contract.md). libc's mmap, futex (through syscall()) and
// the vDSO are all symbols a program (or a sanitizer) can replace. These inline functions
// compile to the instruction, so they reference no symbol at all, and they leave errno
// untouched: the result is the kernel's (>= 0, or -errno).
//
// Thread safety: thread-safe. Async-signal safety: async-signal-safe.
#ifndef STRATA_PLATFORM_RAW_SYSCALL_H_
#define STRATA_PLATFORM_RAW_SYSCALL_H_

#include <sys/syscall.h>
#include <unistd.h>

namespace strata {

#if defined(__x86_64__)
inline long RawSyscall6(long number, long a1, long a2, long a3, long a4, long a5, long a6) {
  register long r10 __asm__("r10") = a4;
  register long r8 __asm__("r8") = a5;
  register long r9 __asm__("r9") = a6;
  long result;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "0"(number), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return result;
}
#elif defined(__aarch64__)
inline long RawSyscall6(long number, long a1, long a2, long a3, long a4, long a5, long a6) {
  register long x8 __asm__("x8") = number;
  register long x0 __asm__("x0") = a1;
  register long x1 __asm__("x1") = a2;
  register long x2 __asm__("x2") = a3;
  register long x3 __asm__("x3") = a4;
  register long x4 __asm__("x4") = a5;
  register long x5 __asm__("x5") = a6;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  return x0;
}
#else
#error "raw_syscall.h: add this architecture's system call instruction"
#endif

inline long RawSyscall(long number, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0,
                       long a5 = 0, long a6 = 0) {
  return RawSyscall6(number, a1, a2, a3, a4, a5, a6);
}

}  // namespace strata

#endif  // STRATA_PLATFORM_RAW_SYSCALL_H_
