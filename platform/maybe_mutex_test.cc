#include "platform/maybe_mutex.h"

#include <signal.h>

#include <atomic>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "platform/fork_for_testing.h"

namespace strata {
namespace {

using Catch::Matchers::Contains;

TEST_CASE("MaybeMutex: single-threaded is a no-op", "[platform][mutex]") {
  MaybeMutex mutex(ThreadSafety::kSingleThreaded, "single");
  REQUIRE_FALSE(mutex.IsThreadSafe());
  // With no mutex, every thread "holds" it: callers' assertions pass without locking.
  REQUIRE(mutex.IsLockedOnCurrentThread());
  mutex.AssertCurrentThreadOwns();

  // A real Mutex aborts on each of these; the single-threaded one must not. Run them in a
  // child so that a regression is reported as a failed check, not a dead test binary.
  const auto child = testing::RunInForkedChild([] {
    MaybeMutex m(ThreadSafety::kSingleThreaded, "single-in-child");
    m.Lock();
    m.Lock();
    m.Unlock();
    m.Unlock();
    m.Unlock();
    MaybeAutoLock a(m);
    MaybeAutoLock b(m);
  });
  INFO(child.Describe());
  REQUIRE(child.ExitedWith(0));
}

TEST_CASE("MaybeMutex: thread-safe locks and tracks its owner", "[platform][mutex]") {
  MaybeMutex mutex(ThreadSafety::kThreadSafe, "safe");
  REQUIRE(mutex.IsThreadSafe());
  REQUIRE_FALSE(mutex.IsLockedOnCurrentThread());
  {
    MaybeAutoLock lock(mutex);
    REQUIRE(mutex.IsLockedOnCurrentThread());
    bool other_thread_owns = true;
    std::thread([&] { other_thread_owns = mutex.IsLockedOnCurrentThread(); }).join();
    REQUIRE_FALSE(other_thread_owns);
  }
  REQUIRE_FALSE(mutex.IsLockedOnCurrentThread());
}

TEST_CASE("MaybeMutex: thread-safe excludes concurrent holders", "[platform][mutex]") {
  MaybeMutex mutex(ThreadSafety::kThreadSafe, "safe-exclusion");
  int64_t counter = 0;  // guarded by `mutex` only (TSan checks)
  int inside = 0;
  std::atomic<bool> overlap{false};
  constexpr int kThreads = 4;
  constexpr int kIterations = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIterations; ++i) {
        MaybeAutoLock lock(mutex);
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

TEST_CASE("MaybeMutex: thread-safe keeps Mutex's misuse checks", "[platform][mutex][death]") {
  const auto child = testing::RunInForkedChild([] {
    MaybeMutex m(ThreadSafety::kThreadSafe, "maybe-victim");
    m.Lock();
    m.Lock();
  });
  INFO(child.Describe());
  REQUIRE(child.KilledBy(SIGABRT));
  REQUIRE_THAT(child.stderr_output, Contains("mutex 'maybe-victim' locked recursively"));
}

}  // namespace
}  // namespace strata
