#include "platform/sampling/perf_task_clock_event.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "platform/raw_syscall.h"

namespace strata {
namespace {

// The table a forked child closes its copies from. A slot's `fd_plus_one` is 0 when free,
// kClaimed while its owner fills it, else the descriptor + 1 (published last, with release).
// Free is all-zero bits so that the table is zero-initialized (.bss): as -1 it put 32 KiB of
// initialized data into libstrata_base.so.
constexpr int kFree = 0;
constexpr int kClaimed = -1;
struct TrackedEvent {
  std::atomic<int> fd_plus_one{kFree};
  dev_t device = 0;
  ino_t inode = 0;
  uint64_t event_id = 0;
};
TrackedEvent g_tracked[PerfTaskClockEvent::kMaxOpenEvents];
std::atomic<int> g_open_count{0};
std::atomic<int> g_below_soft_limit_count{0};

int ClaimSlot() {
  for (int i = 0; i < PerfTaskClockEvent::kMaxOpenEvents; ++i) {
    int expected = kFree;
    if (g_tracked[i].fd_plus_one.compare_exchange_strong(expected, kClaimed, std::memory_order_acquire)) {
      return i;
    }
  }
  return -1;
}

// Whether `fd` names the anonymous inode (device, inode) and, asked through the perf ioctl, is
// the event `event_id`. The ioctl is only issued on an anonymous-inode file (perf events,
// eventfd, epoll, timerfd, signalfd...), none of which gives PERF_EVENT_IOC_ID another
// meaning. Async-signal-safe.
bool NamesEvent(int fd, dev_t device, ino_t inode, uint64_t event_id) {
  if (fd < 0) return false;
  const int saved_errno = errno;
  struct stat status;
  // Raw system calls: this runs in a child made without atfork handlers, on a program's
  // thread, where a program's own fstat or ioctl must not be called (docs/host-contract.md).
  bool ours = RawSyscall(SYS_fstat, fd, reinterpret_cast<long>(&status)) == 0 &&
              status.st_dev == device && status.st_ino == inode;
  if (ours) {
    uint64_t id = 0;
    ours = RawSyscall(SYS_ioctl, fd, static_cast<long>(PERF_EVENT_IOC_ID),
                      reinterpret_cast<long>(&id)) == 0 &&
           id == event_id;
  }
  errno = saved_errno;
  return ours;
}

}  // namespace

int PerfTaskClockEvent::Open(ThreadId thread, TimeDuration period, int signal_number,
                             bool below_soft_limit_allowed,
                             bool above_soft_limit_helper_allowed) {
  if (IsOpen()) return EBUSY;
  if (!thread.IsSpecified() || period.ToNanoseconds() <= 0 || signal_number <= 0 ||
      signal_number >= NSIG) {
    return EINVAL;
  }
  const int slot = ClaimSlot();
  if (slot < 0) return ENOSPC;
  auto release_slot = [slot] { g_tracked[slot].fd_plus_one.store(kFree, std::memory_order_release); };

  struct perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.sample_period = static_cast<uint64_t>(period.ToNanoseconds());
  attr.exclude_hv = 1;
  // Enabled only once the signal is set up: an overflow before F_SETSIG would send SIGIO,
  // whose default action terminates the program.
  attr.disabled = 1;
  // User mode only, also where kernel mode is allowed (root): an overflow while the thread is
  // in a system call would make the signal pending there, and select, poll, nanosleep,
  // usleep... return EINTR at once whatever SA_RESTART says (seen: tests/sleeper_test failed
  // 3 runs in 20 under load with kernel mode counted). A user-mode overflow's signal is
  // delivered at the return from the timer interrupt, before the program's next system call.
  attr.exclude_kernel = 1;
  // The raw system call: libc's syscall() is a symbol the program (and Strata's own seccomp
  // interposer) may define, and this runs on a new thread's registration.
  const long opened = RawSyscall(SYS_perf_event_open, reinterpret_cast<long>(&attr),
                                 static_cast<long>(thread.ToNumber()), -1, -1,
                                 PERF_FLAG_FD_CLOEXEC);
  if (opened < 0) {
    const int error = static_cast<int>(-opened);
    release_slot();
    return error;
  }
  // Moved above the program's soft RLIMIT_NOFILE first (the program's own opens keep every
  // number below it), and before the set-up: fasync records the number it is registered on,
  // and si_fd carries it. Not possible: below the limit if allowed, else no event (ERANGE).
  int kept = above_soft_limit_helper_allowed
                 ? MoveDescriptorAboveSoftLimit(static_cast<int>(opened))
                 : -1;
  below_soft_limit_ = false;
  if (kept < 0) {
    if (!below_soft_limit_allowed) {
      RawSyscall(SYS_close, opened);
      release_slot();
      return ERANGE;
    }
    kept = static_cast<int>(opened);  // Adopt moves it high in the program's range.
    below_soft_limit_ = true;
  }
  if (!descriptor_.Adopt(kept)) {
    release_slot();
    return EBADF;
  }
  const int fd = descriptor_.UncheckedNumber();
  int error = 0;
  struct f_owner_ex owner;
  owner.type = F_OWNER_TID;
  owner.pid = static_cast<pid_t>(thread.ToNumber());
  struct stat status;
  uint64_t id = 0;
  if (fcntl(fd, F_SETSIG, signal_number) != 0 || fcntl(fd, F_SETOWN_EX, &owner) != 0) {
    error = errno;
  } else {
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_ASYNC) != 0) error = errno;
  }
  if (error == 0 && (fstat(fd, &status) != 0 || ioctl(fd, PERF_EVENT_IOC_ID, &id) != 0)) {
    error = errno;
  }
  if (error != 0) {
    descriptor_.Close();  // Never enabled: no signal was sent.
    release_slot();
    return error;
  }
  event_id_ = id;
  TrackedEvent& tracked = g_tracked[slot];
  tracked.device = status.st_dev;
  tracked.inode = status.st_ino;
  tracked.event_id = id;
  tracked.fd_plus_one.store(fd + 1, std::memory_order_release);
  table_slot_ = slot;
  g_open_count.fetch_add(1, std::memory_order_relaxed);
  if (below_soft_limit_) g_below_soft_limit_count.fetch_add(1, std::memory_order_relaxed);
  if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
    error = errno;
    Close();
    return error;
  }
  return 0;
}

void PerfTaskClockEvent::ReleaseTableSlot() {
  if (table_slot_ < 0) return;
  // Already emptied in a forked child (CloseAllInForkedChild): not counted twice.
  if (g_tracked[table_slot_].fd_plus_one.exchange(kFree, std::memory_order_acq_rel) > 0) {
    g_open_count.fetch_sub(1, std::memory_order_relaxed);
    if (below_soft_limit_) g_below_soft_limit_count.fetch_sub(1, std::memory_order_relaxed);
  }
  below_soft_limit_ = false;
  table_slot_ = -1;
}

bool PerfTaskClockEvent::IsStillOurs() {
  if (!IsOpen()) return false;
  const int fd = descriptor_.UncheckedNumber();
  const TrackedEvent& tracked = g_tracked[table_slot_];
  if (NamesEvent(fd, tracked.device, tracked.inode, event_id_)) return true;
  // Closed by the program, or its number reused: forget it, close nothing.
  (void)descriptor_.Release();
  ReleaseTableSlot();
  return false;
}

void PerfTaskClockEvent::Close() {
  if (!IsOpen()) return;
  if (IsStillOurs()) {
    const int saved_errno = errno;
    const int fd = descriptor_.Release();
    // Disabled first: another reference to the event (a forked child's copy not closed yet)
    // would otherwise keep it counting and signalling.
    (void)ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    ReleaseTableSlot();
    close(fd);
    errno = saved_errno;
  }
  event_id_ = 0;
}

bool PerfTaskClockEvent::IsEventSignal(const siginfo_t& info,
                                       const SamplingEventDescriptors& descriptors) {
  if (info.si_code != POLL_IN && info.si_code != POLL_HUP) return false;
  const int fd = info.si_fd;
  if (fd < 0) return false;
  return fd == descriptors.current.load(std::memory_order_relaxed) ||
         fd == descriptors.retired.load(std::memory_order_relaxed);
}

void PerfTaskClockEvent::CloseAllInForkedChild() {
  for (TrackedEvent& tracked : g_tracked) {
    const int fd = tracked.fd_plus_one.load(std::memory_order_acquire) - 1;
    if (fd < 0) {
      // A slot being filled at fork time: its descriptor (if already open) is close-on-exec
      // and stays untracked in this child.
      if (fd + 1 == kClaimed) tracked.fd_plus_one.store(kFree, std::memory_order_relaxed);
      continue;
    }
    if (NamesEvent(fd, tracked.device, tracked.inode, tracked.event_id)) {
      const int saved_errno = errno;
      RawSyscall(SYS_close, fd);  // The child's copy only: the parent's event goes on.
      errno = saved_errno;
    }
    tracked.fd_plus_one.store(kFree, std::memory_order_relaxed);
  }
  g_open_count.store(0, std::memory_order_relaxed);
  g_below_soft_limit_count.store(0, std::memory_order_relaxed);
}

int PerfTaskClockEvent::OpenCount() { return g_open_count.load(std::memory_order_relaxed); }

int PerfTaskClockEvent::BelowSoftLimitCount() {
  return g_below_soft_limit_count.load(std::memory_order_relaxed);
}

int PerfTaskClockEvent::ParanoidLevel() {
  // Raw open and read into a stack array: no stdio buffer from the program's malloc (this
  // runs on a new thread's registration when its event is refused).
  const long fd = RawSyscall(SYS_openat, AT_FDCWD,
                             reinterpret_cast<long>("/proc/sys/kernel/perf_event_paranoid"),
                             O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -100;
  char text[32] = {};
  const long got = RawSyscall(SYS_read, fd, reinterpret_cast<long>(text), sizeof(text) - 1);
  RawSyscall(SYS_close, fd);
  if (got <= 0) return -100;
  int level = 0;
  bool negative = false;
  int i = 0;
  if (text[i] == '-') {
    negative = true;
    ++i;
  }
  if (text[i] < '0' || text[i] > '9') return -100;
  for (; text[i] >= '0' && text[i] <= '9' && level < 100000; ++i) level = level * 10 + (text[i] - '0');
  return negative ? -level : level;
}

}  // namespace strata
