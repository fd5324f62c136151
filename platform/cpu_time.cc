#include "platform/cpu_time.h"

namespace strata {
namespace {

TimeDuration ToDuration(const timespec& ts) {
  return TimeDuration::FromNanoseconds(static_cast<int64_t>(ts.tv_sec) * 1000000000 +
                                       ts.tv_nsec);
}

// The kernel's encoding of a per-thread CPU clock (include/linux/posix-timers.h:
// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)), the same one glibc's pthread_getcpuclockid
// computes. A stable ABI: glibc depends on it.
constexpr clockid_t kCpuClockPerThreadMask = 4;
constexpr clockid_t kCpuClockSched = 2;
constexpr int kCpuClockShift = 3;

constexpr clockid_t MakeThreadCpuClock(pid_t tid) {
  return static_cast<clockid_t>((~static_cast<unsigned>(tid) << kCpuClockShift) |
                                kCpuClockSched | kCpuClockPerThreadMask);
}

}  // namespace

TimeDuration CurrentThreadCpuTime() {
  timespec ts;
  if (ReadClock(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return TimeDuration();
  return ToDuration(ts);
}

TimeDuration ProcessCpuTime() {
  timespec ts;
  if (ReadClock(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return TimeDuration();
  return ToDuration(ts);
}

ThreadCpuClock ThreadCpuClock::ForCurrentThread() { return ForThreadId(CurrentThreadId()); }

std::optional<ThreadCpuClock> ThreadCpuClock::ForThread(pthread_t thread) {
  clockid_t id;
  if (pthread_getcpuclockid(thread, &id) != 0) return std::nullopt;
  return ThreadCpuClock(id);
}

ThreadCpuClock ThreadCpuClock::ForThreadId(ThreadId tid) {
  // Tid 0 would encode "the calling thread" to the kernel, silently reading the wrong clock.
  if (tid.ToNumber() <= 0) return ThreadCpuClock();
  return ThreadCpuClock(MakeThreadCpuClock(tid.ToNumber()));
}

std::optional<TimeDuration> ThreadCpuClock::Read() const {
  if (!valid_) return std::nullopt;
  timespec ts;
  if (ReadClock(id_, &ts) != 0) return std::nullopt;
  return ToDuration(ts);
}

}  // namespace strata
