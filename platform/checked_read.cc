// Reads of the program's memory that never fault (checked_read.h).
#include "platform/checked_read.h"

#include <errno.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <cstring>

#include "platform/raw_syscall.h"

namespace strata {

// Not instrumented: called from walks that run while a sanitizer's runtime starts
// (ServeDlIteratePhdrDuringWalk, CheckedAccessMem) and from signal handlers.
__attribute__((no_sanitize("address", "thread"))) bool ProbeReadable(uintptr_t address) {
  return RawSyscall(SYS_rt_sigprocmask, -1, static_cast<long>(address & ~uintptr_t{7}), 0, 8) ==
         -EINVAL;
}

__attribute__((no_sanitize("address", "thread"))) bool CheckedRead(const void* source,
                                                             void* destination,
                                                             size_t length) {
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
