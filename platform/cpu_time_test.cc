#include "platform/cpu_time.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "catch2/catch.hpp"

namespace strata {
namespace {

using Clock = std::chrono::steady_clock;

TimeDuration Ms(double ms) { return TimeDuration::FromMilliseconds(ms); }

// Burns CPU on the calling thread until its own CPU clock has advanced by `amount`, or the
// wall-clock deadline passes. Returns the CPU time actually burnt.
TimeDuration BurnCpu(TimeDuration amount, std::chrono::seconds deadline = std::chrono::seconds(20)) {
  const TimeDuration start = CurrentThreadCpuTime();
  const auto wall_deadline = Clock::now() + deadline;
  volatile uint64_t sink = 0;
  while (CurrentThreadCpuTime() - start < amount && Clock::now() < wall_deadline) {
    for (int i = 0; i < 10000; ++i) sink = sink + static_cast<uint64_t>(i);
  }
  return CurrentThreadCpuTime() - start;
}

TEST_CASE("CurrentThreadCpuTime advances with work, not with sleep", "[platform][cpu]") {
  const TimeDuration before = CurrentThreadCpuTime();
  REQUIRE(before > TimeDuration());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const TimeDuration slept = CurrentThreadCpuTime() - before;
  // Going to sleep and waking up cost microseconds of CPU, not 100 ms.
  REQUIRE(slept < Ms(10));

  REQUIRE(BurnCpu(Ms(30)) >= Ms(30));
}

TEST_CASE("ThreadCpuClock: own clock matches CLOCK_THREAD_CPUTIME_ID", "[platform][cpu]") {
  const ThreadCpuClock own = ThreadCpuClock::ForCurrentThread();
  REQUIRE(own.IsValid());
  // Same clock id as glibc computes from pthread_self().
  const std::optional<ThreadCpuClock> from_pthread = ThreadCpuClock::ForThread(pthread_self());
  REQUIRE(from_pthread.has_value());
  REQUIRE(from_pthread->id() == own.id());
  REQUIRE(*from_pthread == own);
  REQUIRE(ThreadCpuClock::ForThreadId(CurrentThreadId()) == own);

  // Interleaved reads of the two ways are ordered.
  const TimeDuration a = CurrentThreadCpuTime();
  const std::optional<TimeDuration> b = own.Read();
  const TimeDuration c = CurrentThreadCpuTime();
  REQUIRE(b.has_value());
  REQUIRE(a <= *b);
  REQUIRE(*b <= c);
}

TEST_CASE("ThreadCpuClock: invalid clocks read nothing", "[platform][cpu]") {
  REQUIRE_FALSE(ThreadCpuClock().IsValid());
  REQUIRE_FALSE(ThreadCpuClock().Read().has_value());
  // Tid 0 would mean "the caller" to the kernel: refused rather than silently wrong.
  REQUIRE_FALSE(ThreadCpuClock::ForThreadId(ThreadId()).IsValid());
  REQUIRE(ThreadCpuClock() == ThreadCpuClock::ForThreadId(ThreadId()));
  REQUIRE(ThreadCpuClock() != ThreadCpuClock::ForCurrentThread());
}

// A thread that burns CPU until told to stop, and one that sleeps on a condition variable
// until told to stop; main reads their clocks from outside.
TEST_CASE("ThreadCpuClock: a busy thread's clock runs, a sleeping thread's does not",
          "[platform][cpu]") {
  std::atomic<bool> stop{false};
  std::mutex m;
  std::condition_variable cv;
  bool wake = false;

  std::thread busy([&] {
    volatile uint64_t sink = 0;
    while (!stop.load(std::memory_order_relaxed)) sink = sink + 1;
  });
  std::thread sleeper([&] {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return wake; });
  });

  const std::optional<ThreadCpuClock> busy_clock = ThreadCpuClock::ForThread(busy.native_handle());
  const std::optional<ThreadCpuClock> sleeper_clock =
      ThreadCpuClock::ForThread(sleeper.native_handle());
  REQUIRE(busy_clock.has_value());
  REQUIRE(sleeper_clock.has_value());
  REQUIRE(*busy_clock != *sleeper_clock);
  REQUIRE(*busy_clock != ThreadCpuClock::ForCurrentThread());

  // Let the sleeper reach its wait (its start-up costs a little CPU).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const TimeDuration process0 = ProcessCpuTime();
  const TimeDuration busy0 = busy_clock->Read().value();
  const TimeDuration sleeper0 = sleeper_clock->Read().value();

  // Wait until the busy thread has used 100 ms of CPU. On a loaded 2-vCPU machine that can
  // take longer than 100 ms of wall time, hence a poll with a generous deadline.
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  TimeDuration busy1 = busy0;
  while (busy1 - busy0 < Ms(100) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    busy1 = busy_clock->Read().value();
  }
  const TimeDuration sleeper1 = sleeper_clock->Read().value();
  const TimeDuration process1 = ProcessCpuTime();

  stop.store(true);
  {
    std::lock_guard<std::mutex> lock(m);
    wake = true;
  }
  cv.notify_one();
  busy.join();
  sleeper.join();

  INFO("busy " << (busy1 - busy0).ToMilliseconds() << " ms, sleeper "
               << (sleeper1 - sleeper0).ToMilliseconds() << " ms, process "
               << (process1 - process0).ToMilliseconds() << " ms");
  REQUIRE(busy1 - busy0 >= Ms(100));
  REQUIRE(sleeper1 - sleeper0 < Ms(2));
  // The process clock counts every thread: at least the busy thread's share, read inside
  // the same interval.
  REQUIRE(process1 - process0 >= busy1 - busy0);
}

TEST_CASE("ThreadCpuClock: reading an exited thread's clock fails", "[platform][cpu]") {
  ThreadCpuClock clock;
  TimeDuration used_inside;
  std::thread t([&] {
    clock = ThreadCpuClock::ForCurrentThread();
    used_inside = BurnCpu(Ms(5));
  });
  t.join();
  REQUIRE(clock.IsValid());
  REQUIRE(used_inside >= Ms(5));
  // join() returns when the kernel clears the thread's tid word, a little before it
  // releases the task; after that its tid names no thread (barring reuse of the tid by a new
  // thread of this process, which does not happen this soon). Poll through that window.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (clock.Read().has_value() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE_FALSE(clock.Read().has_value());
}

TEST_CASE("ProcessCpuTime includes threads that have exited", "[platform][cpu]") {
  const TimeDuration before = ProcessCpuTime();
  TimeDuration burnt;
  std::thread([&] { burnt = BurnCpu(Ms(50)); }).join();
  const TimeDuration after = ProcessCpuTime();
  REQUIRE(burnt >= Ms(50));
  REQUIRE(after - before >= burnt);
}

}  // namespace
}  // namespace strata
