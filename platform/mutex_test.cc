#include "platform/mutex.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "platform/fork_for_testing.h"

namespace strata {
namespace {

using Catch::Matchers::Contains;

// Spins (yielding) until `flag` is set. The tests below use flags as explicit hand-offs so
// that every "the other thread holds it now" statement is true when it is checked.
void WaitFor(const std::atomic<bool>& flag) {
  while (!flag.load(std::memory_order_acquire)) std::this_thread::yield();
}

TEST_CASE("Mutex: tracks its owner", "[platform][mutex]") {
  Mutex mutex("owner-test");
  REQUIRE(std::string(mutex.name()) == "owner-test");
  REQUIRE_FALSE(mutex.IsLockedOnCurrentThread());

  mutex.Lock();
  REQUIRE(mutex.IsLockedOnCurrentThread());
  bool other_thread_sees_itself_owner = true;
  std::thread([&] { other_thread_sees_itself_owner = mutex.IsLockedOnCurrentThread(); }).join();
  REQUIRE_FALSE(other_thread_sees_itself_owner);
  mutex.AssertCurrentThreadOwns();  // would abort if wrong
  mutex.Unlock();
  REQUIRE_FALSE(mutex.IsLockedOnCurrentThread());

  {
    AutoLock lock(mutex);
    REQUIRE(mutex.IsLockedOnCurrentThread());
  }
  REQUIRE_FALSE(mutex.IsLockedOnCurrentThread());
}

TEST_CASE("Mutex: TryLock fails while another thread holds it", "[platform][mutex]") {
  Mutex mutex("trylock-test");
  // Hand-offs, in order: main holds -> other tried -> main released -> other holds ->
  // main tried.
  std::atomic<bool> main_holds{false}, other_tried{false}, main_released{false},
      other_holds{false}, main_tried{false};
  bool other_try_while_main_holds = true;
  bool other_try_after_release = false;
  bool other_owns_after_try = false;

  std::thread other([&] {
    WaitFor(main_holds);
    other_try_while_main_holds = mutex.TryLock();
    if (other_try_while_main_holds) mutex.Unlock();
    other_tried.store(true, std::memory_order_release);

    WaitFor(main_released);
    other_try_after_release = mutex.TryLock();
    other_owns_after_try = mutex.IsLockedOnCurrentThread();
    other_holds.store(true, std::memory_order_release);

    WaitFor(main_tried);
    if (other_try_after_release) mutex.Unlock();
  });

  mutex.Lock();
  main_holds.store(true, std::memory_order_release);
  WaitFor(other_tried);
  mutex.Unlock();
  main_released.store(true, std::memory_order_release);

  WaitFor(other_holds);
  const bool main_try_while_other_holds = mutex.TryLock();
  if (main_try_while_other_holds) mutex.Unlock();
  const bool main_owns_while_other_holds = mutex.IsLockedOnCurrentThread();
  main_tried.store(true, std::memory_order_release);
  other.join();

  REQUIRE_FALSE(other_try_while_main_holds);
  REQUIRE(other_try_after_release);
  REQUIRE(other_owns_after_try);
  REQUIRE_FALSE(main_try_while_other_holds);
  REQUIRE_FALSE(main_owns_while_other_holds);
  // Free again.
  REQUIRE(mutex.TryLock());
  REQUIRE(mutex.IsLockedOnCurrentThread());
  mutex.Unlock();
}

TEST_CASE("Mutex: excludes concurrent holders", "[platform][mutex]") {
  Mutex mutex("exclusion-test");
  // Non-atomic on purpose: only the mutex keeps these increments from racing (TSan checks).
  int64_t counter = 0;
  int inside = 0;
  std::atomic<bool> overlap{false};
  constexpr int kThreads = 4;
  constexpr int kIterations = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIterations; ++i) {
        AutoLock lock(mutex);
        if (++inside != 1) overlap.store(true);
        ++counter;
        --inside;
      }
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE_FALSE(overlap.load());
  REQUIRE(counter == int64_t{kThreads} * kIterations);
}


// Waiters that outlast the spinning phase sleep on the futex; every one must be woken when
// the holder lets go (a lost wake-up would hang here, and the test would time out).
TEST_CASE("Mutex: long holds put waiters to sleep and wake them all", "[platform][mutex]") {
  Mutex mutex("sleep-test");
  constexpr int kRounds = 20;
  constexpr int kWaiters = 3;
  int64_t counter = 0;
  for (int round = 0; round < kRounds; ++round) {
    mutex.Lock();
    std::atomic<int> started{0};
    std::vector<std::thread> waiters;
    for (int w = 0; w < kWaiters; ++w) {
      waiters.emplace_back([&] {
        started.fetch_add(1);
        AutoLock lock(mutex);
        ++counter;
      });
    }
    while (started.load() != kWaiters) std::this_thread::yield();
    // Long enough that the waiters finish spinning and block in the kernel.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    mutex.Unlock();
    for (auto& t : waiters) t.join();
  }
  REQUIRE(counter == int64_t{kRounds} * kWaiters);
}
// Each misuse must abort the process with the mutex's name in the message.
TEST_CASE("Mutex: misuse aborts with the mutex's name", "[platform][mutex][death]") {
  SECTION("recursive Lock") {
    const auto child = testing::RunInForkedChild([] {
      Mutex mutex("recursive-victim");
      mutex.Lock();
      mutex.Lock();  // must abort, not deadlock (the alarm would report a deadlock)
    });
    INFO(child.Describe());
    REQUIRE(child.KilledBy(SIGABRT));
    REQUIRE_THAT(child.stderr_output,
                 Contains("strata: fatal: mutex 'recursive-victim' locked recursively"));
  }
  SECTION("recursive TryLock") {
    const auto child = testing::RunInForkedChild([] {
      Mutex mutex("try-victim");
      mutex.Lock();
      (void)mutex.TryLock();
    });
    INFO(child.Describe());
    REQUIRE(child.KilledBy(SIGABRT));
    REQUIRE_THAT(child.stderr_output, Contains("mutex 'try-victim' try-locked recursively"));
  }
  SECTION("Unlock without holding") {
    const auto child = testing::RunInForkedChild([] {
      Mutex mutex("unlock-victim");
      mutex.Unlock();
    });
    INFO(child.Describe());
    REQUIRE(child.KilledBy(SIGABRT));
    REQUIRE_THAT(child.stderr_output,
                 Contains("mutex 'unlock-victim' unlocked by a thread that does not hold it"));
  }
  SECTION("AssertCurrentThreadOwns without holding") {
    const auto child = testing::RunInForkedChild([] {
      Mutex mutex("assert-victim");
      mutex.AssertCurrentThreadOwns();
    });
    INFO(child.Describe());
    REQUIRE(child.KilledBy(SIGABRT));
    REQUIRE_THAT(child.stderr_output,
                 Contains("mutex 'assert-victim' not held by the current thread"));
  }
  SECTION("destroyed while locked") {
    const auto child = testing::RunInForkedChild([] {
      auto* mutex = new Mutex("destroy-victim");
      mutex->Lock();
      delete mutex;
    });
    INFO(child.Describe());
    REQUIRE(child.KilledBy(SIGABRT));
    REQUIRE_THAT(child.stderr_output, Contains("mutex 'destroy-victim' destroyed while locked"));
  }
  SECTION("correct use does not abort (the harness itself can pass)") {
    const auto child = testing::RunInForkedChild([] {
      Mutex mutex("fine");
      mutex.Lock();
      mutex.Unlock();
      AutoLock lock(mutex);
    });
    INFO(child.Describe());
    REQUIRE(child.ExitedWith(0));
    REQUIRE(child.stderr_output.empty());
  }
}

}  // namespace
}  // namespace strata
