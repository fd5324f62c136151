#include "platform/private_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdint>
#include <utility>

#include "platform/page_allocation.h"
#include "platform/raw_syscall.h"
#include "platform/tsan_startup.h"

#if STRATA_TSAN_BUILD
#include <dlfcn.h>
#endif

namespace strata {
namespace {

// The number to ask F_DUPFD_CLOEXEC for: the floor, or the upper half of a soft limit
// below it. -1 when the limit leaves no room above the standard streams.
int HighFloor() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY ||
      limit.rlim_cur > static_cast<rlim_t>(kPrivateDescriptorFloor) * 2) {
    return kPrivateDescriptorFloor;
  }
  const int half = static_cast<int>(limit.rlim_cur / 2);
  return half > 3 ? half : -1;
}

void SetCloseOnExec(int fd) {
  const int flags = fcntl(fd, F_GETFD);
  if (flags >= 0 && (flags & FD_CLOEXEC) == 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

// What the helper process of MoveDescriptorAboveSoftLimit does, in the caller's memory.
struct AboveLimitJob {
  int fd;
  long floor;       // The caller's soft limit: the lowest number asked for.
  long new_soft;    // The helper's own soft limit while it duplicates (the hard limit).
  long hard;
  long result = -1;  // The duplicate's number, or -errno.
};

// The helper: raw system calls only (it shares the caller's memory and thread pointer, so it
// must not touch errno or libc state); it ends when this returns (glibc's clone wrapper then
// makes the exit system call).
// Not instrumented: a sanitizer's runtime would keep state for it in the caller's thread
// (suspended meanwhile: CLONE_VFORK).
__attribute__((no_sanitize("address", "thread", "undefined"))) int AboveLimitHelper(
    void* argument) {
  AboveLimitJob* job = static_cast<AboveLimitJob*>(argument);
  struct rlimit raised;
  raised.rlim_cur = static_cast<rlim_t>(job->new_soft);
  raised.rlim_max = static_cast<rlim_t>(job->hard);
  const long set = RawSyscall(SYS_prlimit64, 0, RLIMIT_NOFILE, reinterpret_cast<long>(&raised), 0);
  if (set != 0) {
    job->result = set;
    return 0;
  }
  job->result = RawSyscall(SYS_fcntl, job->fd, F_DUPFD_CLOEXEC, job->floor);
  return 0;
}


using CloneFunction = int (*)(int (*)(void*), void*, int, void*, ...);

#if STRATA_TSAN_BUILD
// ThreadSanitizer builds: glibc's clone itself, not TSan's interceptor (which the plain name
// binds to). The interceptor treats every clone as a fork: ForkBefore in the caller, then
// ForkChildAfter in the child and ForkParentAfter in the caller. With CLONE_VM the child's
// half runs on the caller's own TSan state (same memory, same thread pointer): the caller's
// ignore_interceptors was left at -1, so TSan took its later atomics for plain accesses and
// its locks for nothing (a false race reported on the registry by every preloaded exit
// save), and in a multi-threaded process the child would mark the whole process as forked.
// The helper is uninstrumented and makes raw system calls only: TSan has nothing to track.
std::atomic<CloneFunction> g_libc_clone{nullptr};

CloneFunction LibcClone() {
  CloneFunction found = g_libc_clone.load(std::memory_order_acquire);
  if (found != nullptr) return found;
  // By libc's handle (already loaded: RTLD_NOLOAD loads nothing; the handle is kept).
  void* const libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void* const symbol = libc != nullptr ? dlsym(libc, "clone") : nullptr;
  found = symbol != nullptr ? reinterpret_cast<CloneFunction>(symbol) : &::clone;
  g_libc_clone.store(found, std::memory_order_release);
  return found;
}
#else
CloneFunction LibcClone() { return &::clone; }
#endif

constexpr size_t kHelperStackBytes = 16 * 1024;
// How far above the soft limit the helper lets itself go when the hard limit is unlimited or
// (privileged) equal to the soft one.
constexpr long kRoomAboveSoftLimit = 4096;
// The soft limit at which raising the helper's hard limit was refused (EPERM), or -1.
std::atomic<long> g_raise_refused_at_soft{-1};

// Valgrind's RUNNING_ON_VALGRIND client request (valgrind.h's x86-64 sequence, written out
// here: no build dependency). Natively the four rotations (3 + 13 + 61 + 51 = 128 bits) leave
// %rdi as it was and %rdx keeps 0; Valgrind recognises the sequence and answers in %rdx.
// Valgrind runs no clone() but a thread's, fork's or vfork's: the helper below would make it
// end the program ("Valgrind does not support general clone()").
bool RunningUnderValgrind() {
#if defined(__x86_64__)
  volatile unsigned long request[6] = {0x1001 /* RUNNING_ON_VALGRIND */, 0, 0, 0, 0, 0};
  unsigned long answer = 0;
  __asm__ volatile(
      "rolq $3, %%rdi\n\trolq $13, %%rdi\n\trolq $61, %%rdi\n\trolq $51, %%rdi\n\t"
      "xchgq %%rbx, %%rbx"
      : "=d"(answer)
      : "a"(&request[0]), "0"(answer)
      : "cc", "memory");
  return answer != 0;
#else
  return false;
#endif
}

}  // namespace

#if STRATA_TSAN_BUILD
// TSan keeps a record per descriptor number (its creation and the accesses its interceptors
// saw); only a close it sees resets it. Closed behind its back (a raw system call, or this
// library's own `close`, which -Bsymbolic-functions binds to its wrapper, whose next
// definition is libc's: past TSan's interceptor in a program linked with TSan), the record
// stays, and the next descriptor given that number (the sampler's opendir, whose closedir TSan
// sees) is reported racing with the one closed unseen (ipc_limit_test: the Waker's eventfd,
// moved high; ipc_hostile_test: the listening socket; a symbol file mmap()ed at save, whose
// mmap TSan's interceptor saw). So this closes through the first `close` of the global scope:
// TSan's interceptor in a program linked with TSan, or this library's wrapper, which forwards
// to it, in a preloaded one.
void CloseSeenByTsan(int fd) {
  using CloseFunction = int (*)(int);
  static std::atomic<CloseFunction> first{nullptr};
  CloseFunction close_function = first.load(std::memory_order_acquire);
  if (close_function == nullptr) {
    close_function = reinterpret_cast<CloseFunction>(dlsym(RTLD_DEFAULT, "close"));
    if (close_function == nullptr) close_function = &::close;
    first.store(close_function, std::memory_order_release);
  }
  close_function(fd);
}
#endif

int MoveDescriptorAboveSoftLimit(int fd, long* soft_limit_out, long* hard_limit_out) {
  if (fd < 0) return -1;
  struct rlimit limit;
  if (RawSyscall(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, reinterpret_cast<long>(&limit)) != 0) {
    return -1;
  }
  if (soft_limit_out) *soft_limit_out = static_cast<long>(limit.rlim_cur);
  if (hard_limit_out) *hard_limit_out = static_cast<long>(limit.rlim_max);
  // Already at or above the soft limit, or no limit to stay under.
  if (limit.rlim_cur == RLIM_INFINITY || static_cast<rlim_t>(fd) >= limit.rlim_cur) return fd;
  AboveLimitJob job;
  job.fd = fd;
  job.floor = static_cast<long>(limit.rlim_cur);
  if (limit.rlim_max > limit.rlim_cur) {
    // Room under the hard limit: the helper raises its own soft limit to it.
    job.new_soft = limit.rlim_max == RLIM_INFINITY ? job.floor + kRoomAboveSoftLimit
                                                    : static_cast<long>(limit.rlim_max);
    job.hard = static_cast<long>(limit.rlim_max);
  } else {
    // No room: the helper raises its own hard limit too, which needs CAP_SYS_RESOURCE (root,
    // often in containers, where soft and hard are set alike). Refused once at this soft
    // limit: not tried again there.
    if (g_raise_refused_at_soft.load(std::memory_order_relaxed) == job.floor) return -1;
    job.new_soft = job.floor + kRoomAboveSoftLimit;
    job.hard = job.new_soft;
  }
  if (RunningUnderValgrind()) return -1;  // The caller keeps its share below the limit.
  void* stack = AllocatePages(kHelperStackBytes);
  if (stack == nullptr) return -1;
  // Every signal blocked around the clone: the helper inherits the mask, and must never run a
  // handler of the program's (it shares the caller's memory and thread pointer).
  uint64_t every_signal = ~uint64_t{0};
  uint64_t previous_mask = 0;
  RawSyscall(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&every_signal),
             reinterpret_cast<long>(&previous_mask), sizeof(every_signal));
  // No exit signal (the low byte of the flags is 0): no SIGCHLD reaches the program, and its
  // wait(-1) (without __WCLONE/__WALL) cannot reap the helper.
  const int saved_errno = errno;
  const int pid = LibcClone()(&AboveLimitHelper, static_cast<char*>(stack) + kHelperStackBytes,
                              CLONE_VM | CLONE_FILES | CLONE_VFORK, &job);
  errno = saved_errno;
  if (pid > 0) {
    long waited;
    do {
      waited = RawSyscall(SYS_wait4, pid, 0, __WCLONE, 0);
    } while (waited == -EINTR);
  }
  RawSyscall(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&previous_mask), 0,
             sizeof(previous_mask));
  FreePages(stack, kHelperStackBytes);
  if (pid > 0 && job.result == -EPERM && limit.rlim_max <= limit.rlim_cur) {
    g_raise_refused_at_soft.store(job.floor, std::memory_order_relaxed);
  }
  if (pid <= 0 || job.result < 0) return -1;
#if STRATA_TSAN_BUILD
  CloseSeenByTsan(fd);
#else
  RawSyscall(SYS_close, fd);
#endif
  return static_cast<int>(job.result);
}

int MoveDescriptorHigh(int fd) {
  if (fd < 0) return -1;
  const int saved_errno = errno;
  const int floor = HighFloor();
  if (floor >= 0 && fd < floor) {
    const int high = fcntl(fd, F_DUPFD_CLOEXEC, floor);
    if (high >= 0) {
#if STRATA_TSAN_BUILD
      CloseSeenByTsan(fd);
#else
      close(fd);
#endif
      errno = saved_errno;
      return high;
    }
  }
  SetCloseOnExec(fd);
  errno = saved_errno;
  return fd;
}

PrivateDescriptor::PrivateDescriptor(PrivateDescriptor&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), device_(other.device_), inode_(other.inode_) {}

PrivateDescriptor& PrivateDescriptor::operator=(PrivateDescriptor&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    device_ = other.device_;
    inode_ = other.inode_;
  }
  return *this;
}

bool PrivateDescriptor::Adopt(int fd) {
  Close();
  if (fd < 0) return false;
  fd = MoveDescriptorHigh(fd);
  struct stat status;
  if (fstat(fd, &status) != 0) {
    close(fd);
    return false;
  }
  fd_ = fd;
  device_ = status.st_dev;
  inode_ = status.st_ino;
  return true;
}

bool PrivateDescriptor::IsStillOurs() {
  if (fd_ < 0) return false;
  const int saved_errno = errno;
  struct stat status;
  const bool ours =
      fstat(fd_, &status) == 0 && status.st_dev == device_ && status.st_ino == inode_;
  errno = saved_errno;
  if (!ours) fd_ = -1;  // Closed by the program, or its number reused: not ours to touch.
  return ours;
}

void PrivateDescriptor::Close() {
  if (IsStillOurs()) {
    const int saved_errno = errno;
    close(fd_);
    errno = saved_errno;
  }
  fd_ = -1;
}

int PrivateDescriptor::Release() { return std::exchange(fd_, -1); }

}  // namespace strata
