// CPU time consumed by the calling thread, by another thread of this process, and by the
// whole process, as TimeDuration (user + system time, nanosecond resolution, from the
// scheduler's accounting).
//
// Costs here (docs/benchmarks.md): each read is a real clock_gettime syscall, ~1.3 µs (the
// vDSO does not serve CPU clocks). ThreadCpuClock::ForThread itself is pure computation.
//
// Reading another thread's clock: capture its ThreadCpuClock once (at registration, from
// the thread itself or from its pthread_t), and keep it. Caveat: the clock names the
// thread by its kernel tid. After the thread exits, Read() fails (nullopt), until the
// kernel gives that tid to a new thread of this process, whose CPU time it then reads.
// Drop the clock when the thread unregisters.
//
// Thread safety: everything here is thread-safe; ThreadCpuClock is an immutable value type.
// Async-signal safety: CurrentThreadCpuTime, ProcessCpuTime, ThreadCpuClock::Read,
// ForThreadId and ForCurrentThread are async-signal-safe (clock_gettime is, by POSIX; no
// lock, no allocation). ForThread(pthread_t) calls pthread_getcpuclockid, which glibc
// implements as pure computation but POSIX does not list as async-signal-safe.
// Each of these may set errno on failure; a signal handler should save and restore errno
// (it must anyway).
#ifndef STRATA_PLATFORM_CPU_TIME_H_
#define STRATA_PLATFORM_CPU_TIME_H_

#include <pthread.h>
#include <time.h>

#include <optional>

#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"

namespace strata {

// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID).
TimeDuration CurrentThreadCpuTime();

// CPU time of the whole process, all threads including those that have exited
// (CLOCK_PROCESS_CPUTIME_ID).
TimeDuration ProcessCpuTime();

// The CPU-time clock of one thread of this process.
class ThreadCpuClock {
 public:
  // Invalid: Read() gives nullopt.
  constexpr ThreadCpuClock() = default;

  // The calling thread's clock, usable from any thread of the process (unlike
  // CLOCK_THREAD_CPUTIME_ID, which always means "the caller").
  static ThreadCpuClock ForCurrentThread();

  // The clock of `thread`, which must be a live (not joined or detached-and-exited)
  // thread of this process; nullopt when pthread_getcpuclockid fails (the thread has exited).
  static std::optional<ThreadCpuClock> ForThread(pthread_t thread);

  // The clock of the thread with kernel id `tid` in this process, built from the kernel's
  // clock-id encoding (the one glibc's pthread_getcpuclockid uses). Invalid when `tid` is
  // unspecified. Useful when only the tid was recorded (e.g. in a registry).
  static ThreadCpuClock ForThreadId(ThreadId tid);

  bool IsValid() const { return valid_; }
  // The clockid_t, for clock_gettime or timer_create (a CPU-time timer on this thread).
  // Meaningless when invalid.
  clockid_t id() const { return id_; }

  // The thread's CPU time so far; nullopt when invalid or when the thread has exited.
  std::optional<TimeDuration> Read() const;

  friend bool operator==(const ThreadCpuClock& a, const ThreadCpuClock& b) {
    return a.valid_ == b.valid_ && (!a.valid_ || a.id_ == b.id_);
  }
  friend bool operator!=(const ThreadCpuClock& a, const ThreadCpuClock& b) { return !(a == b); }

 private:
  constexpr explicit ThreadCpuClock(clockid_t id) : id_(id), valid_(true) {}
  clockid_t id_ = 0;
  bool valid_ = false;
};

}  // namespace strata

#endif  // STRATA_PLATFORM_CPU_TIME_H_
