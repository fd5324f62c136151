#include "platform/rw_lock.h"

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
using Clock = std::chrono::steady_clock;

// Generous: only reached when the property under test is broken (or the machine stalls for
// this long, which is not a run worth trusting anyway).
constexpr auto kDeadline = std::chrono::seconds(10);

void WaitFor(const std::atomic<bool>& flag) {
  while (!flag.load(std::memory_order_acquire)) std::this_thread::yield();
}

// A namespace-scope lock: constant-initialized (constexpr constructor).
RWLock g_global_lock("global-rw");

TEST_CASE("RWLock: a namespace-scope lock works", "[platform][rwlock]") {
  REQUIRE(std::string(g_global_lock.name()) == "global-rw");
  AutoLockExclusive lock(g_global_lock);
  REQUIRE(g_global_lock.IsLockedExclusiveOnCurrentThread());
}

TEST_CASE("RWLock: tracks its exclusive owner", "[platform][rwlock]") {
  RWLock lock("owner-rw");
  REQUIRE_FALSE(lock.IsLockedExclusiveOnCurrentThread());

  lock.LockExclusive();
  REQUIRE(lock.IsLockedExclusiveOnCurrentThread());
  lock.AssertCurrentThreadOwnsExclusive();
  bool other_sees_itself_owner = true;
  std::thread([&] { other_sees_itself_owner = lock.IsLockedExclusiveOnCurrentThread(); }).join();
  REQUIRE_FALSE(other_sees_itself_owner);
  lock.UnlockExclusive();
  REQUIRE_FALSE(lock.IsLockedExclusiveOnCurrentThread());

  // Shared holders are not exclusive owners.
  {
    AutoLockShared shared(lock);
    REQUIRE_FALSE(lock.IsLockedExclusiveOnCurrentThread());
  }
  {
    AutoLockExclusive exclusive(lock);
    REQUIRE(lock.IsLockedExclusiveOnCurrentThread());
  }
  REQUIRE_FALSE(lock.IsLockedExclusiveOnCurrentThread());
}

TEST_CASE("RWLock: many readers hold it at the same time", "[platform][rwlock]") {
  RWLock lock("readers-rw");
  constexpr int kReaders = 4;
  std::atomic<int> holding{0};
  std::atomic<int> saw_all{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&] {
      AutoLockShared shared(lock);
      holding.fetch_add(1);
      // Every reader must see every other reader inside: impossible if shared were exclusive.
      const auto deadline = Clock::now() + kDeadline;
      while (holding.load() < kReaders && Clock::now() < deadline) std::this_thread::yield();
      if (holding.load() == kReaders) saw_all.fetch_add(1);
    });
  }
  for (auto& t : readers) t.join();
  REQUIRE(saw_all.load() == kReaders);
}

TEST_CASE("RWLock: exclusive holder excludes readers and writers", "[platform][rwlock]") {
  RWLock lock("writer-excludes-rw");
  std::atomic<bool> main_holds{false}, other_tried{false}, main_releasing{false};
  std::atomic<bool> reader_got_it{false};
  bool try_shared = true, try_exclusive = true;
  bool reader_got_it_before_release = false;

  lock.LockExclusive();
  std::thread other([&] {
    WaitFor(main_holds);
    try_shared = lock.TryLockShared();
    if (try_shared) lock.UnlockShared();
    try_exclusive = lock.TryLockExclusive();
    if (try_exclusive) lock.UnlockExclusive();
    other_tried.store(true, std::memory_order_release);
    // Blocks until main releases.
    lock.LockShared();
    reader_got_it_before_release = !main_releasing.load(std::memory_order_acquire);
    reader_got_it.store(true, std::memory_order_release);
    lock.UnlockShared();
  });
  main_holds.store(true, std::memory_order_release);
  WaitFor(other_tried);
  // Give the reader time to (wrongly) get in while the writer still holds the lock.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const bool got_in_early = reader_got_it.load();
  main_releasing.store(true, std::memory_order_release);
  lock.UnlockExclusive();
  other.join();

  REQUIRE_FALSE(try_shared);
  REQUIRE_FALSE(try_exclusive);
  REQUIRE_FALSE(got_in_early);
  REQUIRE_FALSE(reader_got_it_before_release);
  REQUIRE(reader_got_it.load());
}

TEST_CASE("RWLock: a reader excludes writers but not other readers", "[platform][rwlock]") {
  RWLock lock("reader-excludes-rw");
  bool try_exclusive = true, try_shared = false;
  AutoLockShared shared(lock);
  std::thread([&] {
    try_exclusive = lock.TryLockExclusive();
    if (try_exclusive) lock.UnlockExclusive();
    try_shared = lock.TryLockShared();
    if (try_shared) lock.UnlockShared();
  }).join();
  REQUIRE_FALSE(try_exclusive);
  REQUIRE(try_shared);
}

TEST_CASE("RWLock: a waiting writer keeps new readers out (writer preference)",
          "[platform][rwlock]") {
  RWLock lock("preference-rw");
  std::atomic<bool> writer_done{false};
  lock.LockShared();  // reader 1: main
  std::thread writer([&] {
    lock.LockExclusive();  // waits for main's shared lock
    lock.UnlockExclusive();
    writer_done.store(true);
  });
  // Once the writer is queued, another reader's TryLockShared must fail. The writer needs a
  // moment to queue, so poll until it does (a reader-preferring lock never fails here).
  bool new_reader_refused = false;
  std::thread reader2([&] {
    const auto deadline = Clock::now() + kDeadline;
    while (!new_reader_refused && Clock::now() < deadline) {
      if (lock.TryLockShared()) {
        lock.UnlockShared();
        std::this_thread::yield();
      } else {
        new_reader_refused = true;
      }
    }
  });
  reader2.join();
  REQUIRE_FALSE(writer_done.load());
  lock.UnlockShared();
  writer.join();
  REQUIRE(new_reader_refused);
  REQUIRE(writer_done.load());
}

TEST_CASE("RWLock: readers never see a writer's half-done update", "[platform][rwlock]") {
  RWLock lock("invariant-rw");
  // Guarded by `lock` only (TSan checks): the invariant is a == b.
  int64_t a = 0, b = 0;
  std::atomic<bool> broken{false};
  std::atomic<int64_t> reads{0};
  constexpr int kWriters = 2, kReaders = 2, kWrites = 5000, kReadsEach = 5000;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&] {
      for (int i = 0; i < kWrites; ++i) {
        AutoLockExclusive exclusive(lock);
        ++a;
        if (i % 64 == 0) std::this_thread::yield();  // widen the window
        ++b;
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&] {
      for (int i = 0; i < kReadsEach; ++i) {
        AutoLockShared shared(lock);
        if (a != b) broken.store(true);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE_FALSE(broken.load());
  REQUIRE(a == int64_t{kWriters} * kWrites);
  REQUIRE(b == a);
  REQUIRE(reads.load() == int64_t{kReaders} * kReadsEach);
}

TEST_CASE("RWLock: misuse aborts with the lock's name", "[platform][rwlock][death]") {
  struct Case {
    const char* label;
    void (*body)();
    const char* message;
  };
  const Case cases[] = {
      {"recursive exclusive",
       [] {
         RWLock l("v1");
         l.LockExclusive();
         l.LockExclusive();
       },
       "rw-lock 'v1' locked exclusive recursively"},
      {"recursive try-exclusive",
       [] {
         RWLock l("v2");
         l.LockExclusive();
         (void)l.TryLockExclusive();
       },
       "rw-lock 'v2' try-locked exclusive recursively"},
      {"shared while exclusive",
       [] {
         RWLock l("v3");
         l.LockExclusive();
         l.LockShared();
       },
       "rw-lock 'v3' locked shared by the thread that holds it exclusive"},
      {"try-shared while exclusive",
       [] {
         RWLock l("v4");
         l.LockExclusive();
         (void)l.TryLockShared();
       },
       "rw-lock 'v4' try-locked shared by the thread that holds it exclusive"},
      {"unlock exclusive without holding",
       [] {
         RWLock l("v5");
         l.UnlockExclusive();
       },
       "rw-lock 'v5' unlocked exclusive by a thread that does not hold it exclusive"},
      {"unlock exclusive while holding shared",
       [] {
         RWLock l("v6");
         l.LockShared();
         l.UnlockExclusive();
       },
       "rw-lock 'v6' unlocked exclusive by a thread that does not hold it exclusive"},
      {"unlock shared while holding exclusive",
       [] {
         RWLock l("v7");
         l.LockExclusive();
         l.UnlockShared();
       },
       "rw-lock 'v7' unlocked shared by the thread that holds it exclusive"},
      {"destroyed while exclusive",
       [] {
         auto* l = new RWLock("v8");
         l->LockExclusive();
         delete l;
       },
       "rw-lock 'v8' destroyed while locked"},
      {"destroyed while shared",
       [] {
         auto* l = new RWLock("v9");
         l->LockShared();
         delete l;
       },
       "rw-lock 'v9' destroyed while locked"},
      {"assert without holding",
       [] {
         RWLock l("v10");
         AutoLockShared shared(l);
         l.AssertCurrentThreadOwnsExclusive();
       },
       "rw-lock 'v10' not held exclusive by the current thread"},
  };
  for (const Case& c : cases) {
    const auto child = testing::RunInForkedChild(c.body);
    INFO(c.label << ": " << child.Describe());
    CHECK(child.KilledBy(SIGABRT));
    CHECK_THAT(child.stderr_output, Contains(std::string("strata: fatal: ") + c.message));
  }

  // And correct use in the same harness ends normally.
  const auto fine = testing::RunInForkedChild([] {
    RWLock l("fine");
    { AutoLockShared s(l); }
    { AutoLockExclusive e(l); }
    { AutoLockShared s(l); }
  });
  INFO(fine.Describe());
  REQUIRE(fine.ExitedWith(0));
}

}  // namespace
}  // namespace strata
