#include "platform/sampling/thread_sampling_timer.h"

#include <errno.h>
#include <pthread.h>

#include <cstdint>
#include <atomic>
#include <cstring>
#include <utility>

namespace strata {
namespace {

// si_value of every sampling-timer signal: a fixed 64-bit pattern rather than an address,
// so that two copies of this code in one process (a preloaded tier and a later one)
// recognise each other's timers.
constexpr uintptr_t kSamplingTimerMarker = 0x5354524154415331;  // "STRATAS1"

std::atomic<int> g_live_timers{0};

}  // namespace

ThreadSamplingTimer::ThreadSamplingTimer(ThreadSamplingTimer&& other) noexcept
    : timer_(other.timer_),
      created_(std::exchange(other.created_, false)),
      target_(other.target_),
      signal_number_(other.signal_number_) {}

ThreadSamplingTimer& ThreadSamplingTimer::operator=(ThreadSamplingTimer&& other) noexcept {
  if (this != &other) {
    Destroy();
    timer_ = other.timer_;
    created_ = std::exchange(other.created_, false);
    target_ = other.target_;
    signal_number_ = other.signal_number_;
  }
  return *this;
}

int ThreadSamplingTimer::CreateForCurrentThread(int signal_number, TimerClock clock) {
  clockid_t clock_id = CLOCK_MONOTONIC;
  if (clock == TimerClock::kThreadCpuTime) {
    const int error = pthread_getcpuclockid(pthread_self(), &clock_id);
    if (error != 0) return error;
  }
  return Create(CurrentThreadId(), clock_id, signal_number);
}

int ThreadSamplingTimer::CreateForThread(ThreadId thread, clockid_t clock, int signal_number) {
  return Create(thread, clock, signal_number);
}

int ThreadSamplingTimer::Create(ThreadId thread, clockid_t clock, int signal_number) {
  if (created_) return EBUSY;
  if (!thread.IsSpecified() || signal_number <= 0 || signal_number >= NSIG) return EINVAL;
  struct sigevent event;
  std::memset(&event, 0, sizeof(event));
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = signal_number;
  event.sigev_value.sival_ptr = reinterpret_cast<void*>(kSamplingTimerMarker);
  event._sigev_un._tid = thread.ToNumber();  // glibc 2.36 has no sigev_notify_thread_id.
  if (timer_create(clock, &event, &timer_) != 0) return errno;
  created_ = true;
  g_live_timers.fetch_add(1, std::memory_order_relaxed);
  target_ = thread;
  signal_number_ = signal_number;
  return 0;
}

int ThreadSamplingTimer::Arm(TimeDuration interval) {
  if (!created_) return EBADF;
  const int64_t ns = interval.ToNanoseconds();
  if (ns <= 0) return EINVAL;
  struct itimerspec spec;
  spec.it_interval.tv_sec = static_cast<time_t>(ns / 1000000000);
  spec.it_interval.tv_nsec = static_cast<long>(ns % 1000000000);
  spec.it_value = spec.it_interval;
  return timer_settime(timer_, 0, &spec, nullptr) == 0 ? 0 : errno;
}

int ThreadSamplingTimer::Disarm() {
  if (!created_) return EBADF;
  struct itimerspec spec;
  std::memset(&spec, 0, sizeof(spec));
  return timer_settime(timer_, 0, &spec, nullptr) == 0 ? 0 : errno;
}

void ThreadSamplingTimer::Destroy() {
  if (!created_) return;
  const int saved_errno = errno;
  timer_delete(timer_);
  errno = saved_errno;
  created_ = false;
  g_live_timers.fetch_sub(1, std::memory_order_relaxed);
}

int ThreadSamplingTimer::LiveCount() { return g_live_timers.load(std::memory_order_relaxed); }

bool ThreadSamplingTimer::IsSamplingTimerSignal(const siginfo_t& info) {
  return info.si_code == SI_TIMER &&
         reinterpret_cast<uintptr_t>(info.si_value.sival_ptr) == kSamplingTimerMarker;
}

int ThreadSamplingTimer::Overruns(const siginfo_t& info) {
  return info.si_code == SI_TIMER ? info.si_overrun : 0;
}

}  // namespace strata
