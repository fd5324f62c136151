// Monotonic time stamps and durations with nanosecond resolution.
//
// TimeStamp is a point on the Strata clock: CLOCK_MONOTONIC's nanoseconds, read from the TSC
// where it can be (platform/strata_clock_table.h: the tick counter converted by a
// piecewise-linear function that the sampler thread keeps within the calibration error of
// CLOCK_MONOTONIC, a few hundred ns), from clock_gettime(CLOCK_MONOTONIC) where it cannot
// (no invariant TSC, a kernel clock source other than the TSC, a thread that forbade rdtsc,
// before the sampler's first calibration, or no session ever started). Inside a process the
// clock never goes back and every reading of every thread is on the same function, so time
// stamps order exactly; time stamps of a parent and its children compare within their
// calibration errors (docs/sampling.md, "One clock"). TimeDuration is a signed difference.
// Both are plain 64-bit integers of nanoseconds: trivially copyable, safe to store in the
// profile buffer and to send across processes (ToNanoseconds/FromNanoseconds).
//
// Thread safety: value types; TimeStamp::Now() is thread-safe.
// Async-signal safety: Now() is async-signal-safe (rdtscp and a lock-free table read, ~23 ns
// here; or clock_gettime through the vDSO, ~21-26 ns); everything else is arithmetic.
//
// Threads that may not read the TSC. The vDSO's clock_gettime(CLOCK_MONOTONIC) executes
// rdtsc when the clock source is the TSC, and a thread that forbade it
// (prctl(PR_SET_TSC, PR_TSC_SIGSEGV), or seccomp strict mode) gets SIGSEGV from it (measured
// on 6.18 with clocksource tsc: the kernel does not fall back, the vDSO faults; the
// clock_gettime system call and the CPU-time clocks work). On such a thread Now() makes the
// system call instead (~100+ ns), when strata_t_tsc_forbidden is set for it
// (base/internal/process/thread_restrictions.h sets it before the thread forbids the TSC): its time
// stamps are CLOCK_MONOTONIC's, within the calibration error of the other threads'. Every
// other clock read of Strata's goes through ReadClock() below, which honours the same mark
// (issue 33: the exit save's CLOCK_REALTIME read through the vDSO killed a main thread that
// had forbidden the TSC, 3/3).
#ifndef STRATA_PLATFORM_TIME_STAMP_H_
#define STRATA_PLATFORM_TIME_STAMP_H_

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <ctime>

// True on a thread that may not execute rdtsc (see above). One per process: defined in
// time_stamp.cc, exported by libstrata_base.so. Set only by the thread itself.
extern __thread bool strata_t_tsc_forbidden __attribute__((tls_model("initial-exec")));

namespace strata {

// The one clock read of Strata's code (TimeStamp::Now() and every other clock_gettime of
// Strata's, for any clock id: CLOCK_REALTIME for the profile's epoch, the CPU-time clocks):
// clock_gettime(id, ts), except on a thread marked strata_t_tsc_forbidden, where it is the
// raw system call (neither the vDSO, which executes rdtsc, nor a syscall() interposer).
// Returns 0, or -1 with *ts zeroed when the clock cannot be read; errno is never changed.
// Async-signal-safe; thread-safe.
inline int ReadClock(clockid_t id, timespec* ts) {
#if defined(__x86_64__)
  if (__builtin_expect(strata_t_tsc_forbidden, 0)) {
    long rc;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "0"(static_cast<long>(SYS_clock_gettime)), "D"(static_cast<long>(id)),
                       "S"(ts)
                     : "rcx", "r11", "memory");
    if (rc == 0) return 0;
    ts->tv_sec = 0;
    ts->tv_nsec = 0;
    return -1;
  }
#endif
  const int saved_errno = errno;
  if (clock_gettime(id, ts) == 0) return 0;
  errno = saved_errno;
  ts->tv_sec = 0;
  ts->tv_nsec = 0;
  return -1;
}

// The Strata clock's nanoseconds now (TimeStamp::Now()). Async-signal-safe; thread-safe.
int64_t StrataClockNowNanoseconds();

class TimeDuration {
 public:
  constexpr TimeDuration() = default;
  static constexpr TimeDuration FromNanoseconds(int64_t ns) { return TimeDuration(ns); }
  // The floating-point factories round to the nearest nanosecond (1.001 ms is 1001000 ns,
  // not the 1000999 that truncating 1.001 * 1e6 gives) and saturate at the int64 range
  // (NaN gives 0), so no input is undefined behaviour.
  static constexpr TimeDuration FromMicroseconds(double us) {
    return TimeDuration(RoundToNanoseconds(us * 1e3));
  }
  static constexpr TimeDuration FromMilliseconds(double ms) {
    return TimeDuration(RoundToNanoseconds(ms * 1e6));
  }
  static constexpr TimeDuration FromSeconds(double s) {
    return TimeDuration(RoundToNanoseconds(s * 1e9));
  }

  constexpr int64_t ToNanoseconds() const { return ns_; }
  constexpr double ToMicroseconds() const { return static_cast<double>(ns_) / 1e3; }
  constexpr double ToMilliseconds() const { return static_cast<double>(ns_) / 1e6; }
  constexpr double ToSeconds() const { return static_cast<double>(ns_) / 1e9; }

  // Sums and differences wrap around (two's complement) instead of overflowing: values read
  // from damaged data (a recovered flight recorder file) give wrong numbers, never undefined
  // behaviour. Same instructions as plain int64_t arithmetic.
  constexpr TimeDuration operator+(TimeDuration o) const {
    return TimeDuration(WrappingAdd(ns_, o.ns_));
  }
  constexpr TimeDuration operator-(TimeDuration o) const {
    return TimeDuration(WrappingSubtract(ns_, o.ns_));
  }
  TimeDuration& operator+=(TimeDuration o) { ns_ = WrappingAdd(ns_, o.ns_); return *this; }
  TimeDuration& operator-=(TimeDuration o) { ns_ = WrappingSubtract(ns_, o.ns_); return *this; }
  static constexpr int64_t WrappingAdd(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  }
  static constexpr int64_t WrappingSubtract(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  }
  constexpr bool operator==(TimeDuration o) const { return ns_ == o.ns_; }
  constexpr bool operator!=(TimeDuration o) const { return ns_ != o.ns_; }
  constexpr bool operator<(TimeDuration o) const { return ns_ < o.ns_; }
  constexpr bool operator<=(TimeDuration o) const { return ns_ <= o.ns_; }
  constexpr bool operator>(TimeDuration o) const { return ns_ > o.ns_; }
  constexpr bool operator>=(TimeDuration o) const { return ns_ >= o.ns_; }

 private:
  constexpr explicit TimeDuration(int64_t ns) : ns_(ns) {}
  static constexpr int64_t RoundToNanoseconds(double ns) {
    // 9223372036854775807 is not a double; 2^63 is, and is the first value out of range.
    constexpr double kTwoTo63 = 9223372036854775808.0;
    if (!(ns == ns)) return 0;  // NaN
    if (ns >= kTwoTo63) return INT64_MAX;
    if (ns <= -kTwoTo63) return INT64_MIN;
    const int64_t truncated = static_cast<int64_t>(ns);
    const double rest = ns - static_cast<double>(truncated);
    if (rest >= 0.5) return truncated + 1;
    if (rest <= -0.5) return truncated - 1;
    return truncated;
  }
  int64_t ns_ = 0;
};

class TimeStamp {
 public:
  // The null time stamp (IsNull()), used for "not set yet".
  constexpr TimeStamp() = default;

  // Now on the Strata clock (top of this file). Async-signal-safe. Never executes rdtsc on
  // a thread marked strata_t_tsc_forbidden. Out of line (time_stamp.cc): the conversion's
  // ~25 instructions once, not at each of the library's ~60 callers.
  static TimeStamp Now() { return TimeStamp(StrataClockNowNanoseconds()); }
  // Now on CLOCK_MONOTONIC itself (clock_gettime through ReadClock), whatever the Strata
  // clock reads: for the Strata clock's calibration, and deadlines given to the kernel.
  static TimeStamp MonotonicNow() {
    timespec ts;
    ReadClock(CLOCK_MONOTONIC, &ts);
    return TimeStamp(static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec);
  }
  static constexpr TimeStamp FromNanoseconds(int64_t ns) { return TimeStamp(ns); }
  constexpr int64_t ToNanoseconds() const { return ns_; }
  constexpr bool IsNull() const { return ns_ == 0; }

  constexpr TimeDuration operator-(TimeStamp o) const {
    return TimeDuration::FromNanoseconds(TimeDuration::WrappingSubtract(ns_, o.ns_));
  }
  constexpr TimeStamp operator+(TimeDuration d) const {
    return TimeStamp(TimeDuration::WrappingAdd(ns_, d.ToNanoseconds()));
  }
  constexpr TimeStamp operator-(TimeDuration d) const {
    return TimeStamp(TimeDuration::WrappingSubtract(ns_, d.ToNanoseconds()));
  }
  constexpr bool operator==(TimeStamp o) const { return ns_ == o.ns_; }
  constexpr bool operator!=(TimeStamp o) const { return ns_ != o.ns_; }
  constexpr bool operator<(TimeStamp o) const { return ns_ < o.ns_; }
  constexpr bool operator<=(TimeStamp o) const { return ns_ <= o.ns_; }
  constexpr bool operator>(TimeStamp o) const { return ns_ > o.ns_; }
  constexpr bool operator>=(TimeStamp o) const { return ns_ >= o.ns_; }

 private:
  constexpr explicit TimeStamp(int64_t ns) : ns_(ns) {}
  int64_t ns_ = 0;
};

}  // namespace strata

#endif  // STRATA_PLATFORM_TIME_STAMP_H_
