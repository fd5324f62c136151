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

#include <cstddef>
#include <cstdint>

namespace strata {

// True when the 8 aligned bytes around `address` can be read (no fault, nothing read into
// the program's view).
bool ProbeReadable(uintptr_t address);

// Copies `length` bytes from `source` to `destination` and returns true, or returns false
// (destination unspecified) when some of them cannot be read. Out of line: it has ~15 callers
// in libstrata_base.so, whose size is budgeted (tests/install:base_size_test).
bool CheckedRead(const void* source, void* destination, size_t length);

}  // namespace strata

#endif  // STRATA_PLATFORM_CHECKED_READ_H_
