// Descriptors the profiler opens for itself inside someone else's process.
//
// The program owns its descriptor table: it may close every descriptor above 2
// (close_range(3, ~0U, 0), daemons, fork-exec helpers), dup2() over any number, and reopen its
// own files on the numbers it freed. A descriptor Strata keeps across calls must therefore
// never be trusted by number alone:
//   - it is close-on-exec (never inherited by a program the host execs);
//   - it is moved high (F_DUPFD_CLOEXEC at or above a floor), away from the low numbers that
//     programs hand out and reuse; the floor stays below RLIMIT_NOFILE's soft limit;
//   - its identity (device and inode, from fstat at adoption) is checked before each use
//     that matters; a number that now names something else is never read, written or closed
//     by Strata: the descriptor is forgotten instead (it was closed by the program).
// The identity check leaves a window between the check and the use (the program could close
// and reopen in between, from another thread); it turns a certain corruption into a race that
// needs a close and a reopen inside a few instructions.
//
// Thread safety: PrivateDescriptor is thread-compatible (one owner); the free functions are
// thread-safe. Async-signal safety: IsStillOurs() and Get() are async-signal-safe (fstat);
// Adopt, MoveDescriptorHigh and Close are too (fcntl, fstat, close), but are meant for
// ordinary context.
#ifndef STRATA_PLATFORM_PRIVATE_FD_H_
#define STRATA_PLATFORM_PRIVATE_FD_H_

#include <sys/types.h>

#include "platform/tsan_startup.h"

namespace strata {

#if STRATA_TSAN_BUILD
// ThreadSanitizer builds only: closes `fd` so that TSan sees it (through the global scope's
// first `close`: TSan's interceptor, directly or behind Strata's wrapper), for a descriptor
// TSan saw created or used. The first call looks the function up (dlsym: not
// async-signal-safe); later calls are a load and the call. Not for a fork child's or a signal
// handler's first close.
void CloseSeenByTsan(int fd);
#endif

// The lowest number MoveDescriptorHigh() asks for. Half of the usual 1024 soft limit, where a
// program that counts up from 3 rarely reaches.
inline constexpr int kPrivateDescriptorFloor = 512;

// Returns a close-on-exec duplicate of `fd` numbered at or above kPrivateDescriptorFloor (or,
// when the soft RLIMIT_NOFILE is below that, in the upper half of the allowed range) and
// closes `fd`. When no such number is free, keeps `fd`, makes it close-on-exec and returns it.
// Returns -1 (and closes nothing) for a negative `fd`.
int MoveDescriptorHigh(int fd);

// Returns a close-on-exec duplicate of `fd` numbered at or above the process's soft
// RLIMIT_NOFILE -- outside the range the program's own open() calls can use, so that a
// program that opens files up to its limit opens as many as without Strata -- and closes
// `fd`. Returns -1 and keeps `fd` when that is not possible: the hard limit equals the soft
// one and the process may not raise it (no CAP_SYS_RESOURCE), no number is free up to the
// hard limit, or the helper below cannot be made (also under Valgrind, which runs no such
// clone).
//
// How: a number at or above the soft limit can only be asked for (F_DUPFD) by a process whose
// own soft limit is higher, and changing the program's limit, even briefly, would be seen by
// its other threads (an open() that should fail, a getrlimit, a setrlimit undone). So a
// short-lived helper process shares the descriptor table and the memory (clone with
// CLONE_FILES | CLONE_VM | CLONE_VFORK, no exit signal: the program's wait() never sees it)
// but has its own limits: it raises its own soft limit to the hard one (where the hard limit
// equals the soft one, both, by 4096, when privileged) and duplicates `fd` there; the
// program's limits are never changed. The calling thread waits for it (CLONE_VFORK), then reaps it (wait4 __WCLONE).
// Cost: one process creation (~40-180 us here). `fd` itself was the lowest free number while
// it existed, as every new descriptor is.
//
// `soft_limit_out`, `hard_limit_out` (optional): the limits read.
// Thread-safe. Not async-signal-safe (clone). Raw system calls except glibc's clone wrapper.
int MoveDescriptorAboveSoftLimit(int fd, long* soft_limit_out = nullptr,
                                 long* hard_limit_out = nullptr);

// A descriptor the profiler opened and owns, checked by identity before use.
class PrivateDescriptor {
 public:
  PrivateDescriptor() = default;
  // Takes ownership of `fd` (moved high, close-on-exec) and records its identity. A negative
  // `fd` gives an empty descriptor.
  explicit PrivateDescriptor(int fd) { Adopt(fd); }
  ~PrivateDescriptor() { Close(); }
  PrivateDescriptor(PrivateDescriptor&& other) noexcept;
  PrivateDescriptor& operator=(PrivateDescriptor&& other) noexcept;
  PrivateDescriptor(const PrivateDescriptor&) = delete;
  PrivateDescriptor& operator=(const PrivateDescriptor&) = delete;

  // Closes what is held (if still ours), then takes `fd` as the constructor does. Returns
  // whether a descriptor is now held.
  bool Adopt(int fd);

  // True when a descriptor is held and its number still names the object adopted. When the
  // number was closed or now names another file, forgets it (without closing) and returns
  // false: every later call sees an empty descriptor.
  bool IsStillOurs();

  // The number after an identity check, or -1 when empty or no longer ours.
  int Get() { return IsStillOurs() ? fd_ : -1; }

  // The number without a check (for poll sets rebuilt after a check; logging).
  int UncheckedNumber() const { return fd_; }
  bool empty() const { return fd_ < 0; }

  // Closes the descriptor if it is still ours; forgets it either way.
  void Close();

  // Gives the number up without closing it (ownership passes to the caller); -1 when empty.
  int Release();

 private:
  int fd_ = -1;
  dev_t device_ = 0;
  ino_t inode_ = 0;
};

}  // namespace strata

#endif  // STRATA_PLATFORM_PRIVATE_FD_H_
