// Reads of the program's memory that never fault: for code that reads memory the program
// owns and may have made unreadable (mprotect PROT_NONE, munmap) since Strata learnt its
// address, such as an object's program headers or notes (issue 33).
//
// CheckedRead() copies with process_vm_readv on this very process (the kernel reads the
// source as a debugger would: an unreadable page makes it stop, no signal). Where that system
// call is refused (seccomp: ENOSYS, EPERM), each 4 KiB of the source is first probed with
// rt_sigprocmask(invalid how, address), which copies 8 bytes from it (EFAULT when
// unreadable) and then refuses `how` (EINVAL), changing nothing, and the bytes are copied
// only when every probe passed (a page unmapped by another thread in between could still
// fault there: the probe is the fallback only).
//
// Thread safety: thread-safe. Async-signal safety: async-signal-safe (raw system calls,
// errno untouched, no lock, no allocation).
#ifndef STRATA_PLATFORM_CHECKED_READ_H_
#define STRATA_PLATFORM_CHECKED_READ_H_

#include <errno.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "platform/raw_syscall.h"

namespace strata {

// True when the 8 aligned bytes around `address` can be read (no fault, nothing read into
// the program's view).
inline bool ProbeReadable(uintptr_t address) {
  return RawSyscall(SYS_rt_sigprocmask, -1, static_cast<long>(address & ~uintptr_t{7}), 0, 8) ==
         -EINVAL;
}

// Copies `length` bytes from `source` to `destination` and returns true, or returns false
// (destination unspecified) when some of them cannot be read.
inline bool CheckedRead(const void* source, void* destination, size_t length) {
  if (length == 0) return true;
  const uintptr_t from = reinterpret_cast<uintptr_t>(source);
  if (from + length < from) return false;
  iovec local = {destination, length};
  iovec remote = {const_cast<void*>(source), length};
  const long copied = RawSyscall(SYS_process_vm_readv, RawSyscall(SYS_getpid),
                                 reinterpret_cast<long>(&local), 1,
                                 reinterpret_cast<long>(&remote), 1, 0);
  if (copied >= 0) return static_cast<size_t>(copied) == length;
  if (copied != -ENOSYS && copied != -EPERM) return false;
  for (uintptr_t page = from & ~uintptr_t{4095}; page <= from + length - 1; page += 4096) {
    if (!ProbeReadable(page < from ? from : page)) return false;
  }
  std::memcpy(destination, source, length);
  return true;
}

}  // namespace strata

#endif  // STRATA_PLATFORM_CHECKED_READ_H_
