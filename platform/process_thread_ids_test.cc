#include "platform/process_thread_ids.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <set>
#include <thread>
#include <type_traits>
#include <vector>

#include "catch2/catch.hpp"
#include "platform/fork_for_testing.h"

namespace strata {
namespace {

pid_t KernelTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// Pids and tids are different types: neither converts to the other, nor from a number.
static_assert(!std::is_convertible_v<ProcessId, ThreadId>);
static_assert(!std::is_convertible_v<ThreadId, ProcessId>);
static_assert(!std::is_convertible_v<int32_t, ThreadId>);
static_assert(std::is_trivially_copyable_v<ThreadId>);

TEST_CASE("TypedId: unspecified by default, round-trips its number", "[platform][ids]") {
  constexpr ThreadId unspecified;
  STATIC_REQUIRE_FALSE(unspecified.IsSpecified());
  STATIC_REQUIRE(unspecified.ToNumber() == 0);

  constexpr ThreadId a = ThreadId::FromNumber(1234);
  constexpr ThreadId b = ThreadId::FromNumber(1235);
  STATIC_REQUIRE(a.IsSpecified());
  STATIC_REQUIRE(a.ToNumber() == 1234);
  REQUIRE(a == ThreadId::FromNumber(1234));
  REQUIRE(a != b);
  REQUIRE(a < b);
  REQUIRE_FALSE(b < a);
  REQUIRE(ProcessId::FromNumber(77).ToNumber() == 77);
}

TEST_CASE("CurrentProcessId is getpid on every thread", "[platform][ids]") {
  REQUIRE(CurrentProcessId().ToNumber() == getpid());
  ProcessId from_thread;
  std::thread([&] { from_thread = CurrentProcessId(); }).join();
  REQUIRE(from_thread == CurrentProcessId());
}

TEST_CASE("CurrentThreadId is the kernel tid, distinct on each thread", "[platform][ids]") {
  const ThreadId main_id = CurrentThreadId();
  REQUIRE(main_id.ToNumber() == KernelTid());
  // Cached value stays right on the second call.
  REQUIRE(CurrentThreadId() == main_id);

  constexpr int kThreads = 4;
  std::vector<ThreadId> first(kThreads), second(kThreads);
  std::vector<pid_t> kernel(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      first[i] = CurrentThreadId();
      second[i] = CurrentThreadId();
      kernel[i] = KernelTid();
    });
  }
  for (auto& t : threads) t.join();

  std::set<int32_t> distinct{main_id.ToNumber()};
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i);
    REQUIRE(first[i].ToNumber() == kernel[i]);
    REQUIRE(second[i] == first[i]);
    REQUIRE(first[i] != main_id);
    distinct.insert(first[i].ToNumber());
  }
  // All threads were alive at once only partly, but the kernel does not reuse tids this fast.
  REQUIRE(distinct.size() == kThreads + 1);
}

TEST_CASE("Main thread: the initial thread by default, or the one that called Init",
          "[platform][ids]") {
  // Catch2's main runs on the process's initial thread, whose tid is the pid.
  REQUIRE(CurrentThreadId().ToNumber() == getpid());
  REQUIRE(MainThreadId().ToNumber() == getpid());
  REQUIRE(IsMainThread());

  bool other_is_main = true;
  std::thread([&] { other_is_main = IsMainThread(); }).join();
  REQUIRE_FALSE(other_is_main);

  // Another thread declares itself main; then the real main thread takes the role back.
  ThreadId declared;
  bool declared_sees_itself_main = false;
  std::thread([&] {
    InitMainThreadId();
    declared = CurrentThreadId();
    declared_sees_itself_main = IsMainThread();
  }).join();
  REQUIRE(declared_sees_itself_main);
  REQUIRE(MainThreadId() == declared);
  REQUIRE_FALSE(IsMainThread());

  InitMainThreadId();
  REQUIRE(MainThreadId() == CurrentThreadId());
  REQUIRE(IsMainThread());
}

TEST_CASE("fork child sees a fresh pid and tid, and is its own main thread",
          "[platform][ids][fork]") {
  const pid_t parent_pid = getpid();
  const ThreadId parent_tid = CurrentThreadId();  // warms this thread's cache
  InitMainThreadId();

  const testing::ChildResult child = testing::RunInForkedChild([&] {
    using testing::ChildCheck;
    ChildCheck(CurrentProcessId().ToNumber() == getpid(), "pid is getpid");
    ChildCheck(CurrentProcessId().ToNumber() != parent_pid, "pid differs from parent's");
    ChildCheck(CurrentThreadId().ToNumber() == KernelTid(), "tid is the kernel tid");
    ChildCheck(CurrentThreadId() != parent_tid, "tid cache was reset");
    ChildCheck(MainThreadId().ToNumber() == getpid(), "main thread is the child's only thread");
    ChildCheck(IsMainThread(), "IsMainThread in child");
  });
  INFO(child.Describe());
  REQUIRE(child.ExitedWith(0));
}

TEST_CASE("fork from a secondary thread: the child's only thread is its main thread",
          "[platform][ids][fork]") {
  InitMainThreadId();
  testing::ChildResult child;
  ThreadId forking_tid;
  std::thread([&] {
    forking_tid = CurrentThreadId();  // warms the forking thread's cache
    child = testing::RunInForkedChild([&] {
      using testing::ChildCheck;
      ChildCheck(CurrentThreadId().ToNumber() == KernelTid(), "tid is the kernel tid");
      ChildCheck(CurrentThreadId() != forking_tid, "tid cache was reset");
      // The forking thread is the child's initial thread: its tid is the child's pid.
      ChildCheck(CurrentThreadId().ToNumber() == getpid(), "tid equals the child's pid");
      ChildCheck(IsMainThread(), "the forking thread is main in the child");
    });
  }).join();
  INFO(child.Describe());
  REQUIRE(child.ExitedWith(0));
  // The parent's record is untouched.
  REQUIRE(IsMainThread());
}

}  // namespace
}  // namespace strata
