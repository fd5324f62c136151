#include "platform/sampling/stack_bounds.h"

#include <pthread.h>
#include <limits.h>
#include <sched.h>

#include <atomic>
#include <cstdint>
#include <utility>

#include "catch2/catch.hpp"

namespace strata {
namespace {

uintptr_t AddressOfALocal() {
  volatile int local = 0;
  return reinterpret_cast<uintptr_t>(&local);
}

TEST_CASE("StackBounds: the main thread's bounds contain its locals", "[platform][sampling]") {
  const StackBounds bounds = StackBounds::OfCurrentThread();
  REQUIRE_FALSE(bounds.IsEmpty());
  CHECK(bounds.Contains(AddressOfALocal()));
  CHECK(bounds.size() >= 64 * 1024);
}

TEST_CASE("StackBounds: the main stack's reach holds the main thread's stack and more",
          "[platform][sampling]") {
  const StackBounds reach = StackBounds::MainStackReach();
  REQUIRE_FALSE(reach.IsEmpty());
  CHECK(reach.Contains(AddressOfALocal()));
  // It can grow down to at least where glibc says the soft limit allows (or the mapping
  // below): the reach is never smaller than the bounds glibc reports.
  const StackBounds bounds = StackBounds::OfCurrentThread();
  CHECK(reach.high >= bounds.high);
  CHECK(reach.low <= AddressOfALocal());
}

TEST_CASE("StackBounds: the main thread's, read from any thread, are what glibc reports",
          "[platform][sampling]") {
  pthread_attr_t attributes;
  REQUIRE(pthread_getattr_np(pthread_self(), &attributes) == 0);
  void* address = nullptr;
  size_t size = 0;
  REQUIRE(pthread_attr_getstack(&attributes, &address, &size) == 0);
  pthread_attr_destroy(&attributes);
  const StackBounds main_stack = StackBounds::OfMainThread();
  CHECK(main_stack.low == reinterpret_cast<uintptr_t>(address));
  CHECK(main_stack.high == reinterpret_cast<uintptr_t>(address) + size);
  const StackBounds own = StackBounds::OfCurrentThread();
  CHECK(own.low == main_stack.low);
  CHECK(own.high == main_stack.high);
}

struct ThreadResult {
  StackBounds bounds;
  uintptr_t local = 0;
  StackBounds glibc;  // pthread_getattr_np's.
};

void* CaptureBounds(void* argument) {
  ThreadResult* result = static_cast<ThreadResult*>(argument);
  result->bounds = StackBounds::OfCurrentThread();
  result->local = AddressOfALocal();
  result->glibc = StackBounds::OfThread(pthread_self());
  return nullptr;
}

TEST_CASE("StackBounds: NarrowedTo keeps the part inside a given stack",
          "[platform][sampling]") {
  StackBounds mapping;
  mapping.low = 0x10000;
  mapping.high = 0x90000;
  StackBounds given;
  given.low = 0x20000;
  given.high = 0x30000;
  const StackBounds narrowed = mapping.NarrowedTo(given);
  CHECK(narrowed.low == given.low);
  CHECK(narrowed.high == given.high);
  const StackBounds unknown = StackBounds().NarrowedTo(given);
  CHECK(unknown.low == given.low);
  CHECK(unknown.high == given.high);
  // No stack given (pthread_create without one): the mapping as it is.
  const StackBounds not_given = mapping.NarrowedTo(StackBounds());
  CHECK(not_given.low == mapping.low);
  CHECK(not_given.high == mapping.high);
}

TEST_CASE("StackBounds: a thread's bounds are its stack, of the size it was given",
          "[platform][sampling]") {
  // 2 MiB, not the default 8 MiB, and above the smallest stack the sanitizers' pthread_create
  // leaves alone: they enlarge a smaller request to their TLS size + 128 KiB
  // (AdjustStackSize in sanitizer_common; under TSan 256 KiB became 921 088 bytes).
  constexpr size_t kStackSize = 2 * 1024 * 1024;
  pthread_attr_t attributes;
  REQUIRE(pthread_attr_init(&attributes) == 0);
  REQUIRE(pthread_attr_setstacksize(&attributes, kStackSize) == 0);
  ThreadResult result;
  pthread_t thread;
  REQUIRE(pthread_create(&thread, &attributes, &CaptureBounds, &result) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attributes);

  REQUIRE_FALSE(result.bounds.IsEmpty());
  CHECK(result.bounds.Contains(result.local));
  CHECK(result.bounds.size() >= kStackSize);
  CHECK(result.bounds.size() <= kStackSize + 64 * 1024);
  // Not the main thread's stack.
  CHECK_FALSE(result.bounds.Contains(AddressOfALocal()));
}

void* CaptureMainThreadBounds(void* argument) {
  auto* main_thread = static_cast<std::pair<pthread_t, StackBounds>*>(argument);
  main_thread->second = StackBounds::OfThread(main_thread->first);
  return nullptr;
}

struct WaitingThread {
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  StackBounds own;
};

void* CaptureBoundsAndWait(void* argument) {
  auto* waiting = static_cast<WaitingThread*>(argument);
  waiting->own = StackBounds::OfCurrentThread();
  waiting->started.store(true);
  while (!waiting->release.load()) sched_yield();
  return nullptr;
}

TEST_CASE("StackBounds: OfThread gives another thread's bounds, as that thread sees them",
          "[platform][sampling]") {
  // The main thread's bounds read from a second thread (the profiler reads them so when
  // sampling starts; for the main thread this parses /proc/self/maps).
  std::pair<pthread_t, StackBounds> main_thread{pthread_self(), StackBounds()};
  pthread_t other;
  REQUIRE(pthread_create(&other, nullptr, &CaptureMainThreadBounds, &main_thread) == 0);
  pthread_join(other, nullptr);
  const StackBounds own = StackBounds::OfCurrentThread();
  REQUIRE_FALSE(own.IsEmpty());
  CHECK(main_thread.second.low == own.low);
  CHECK(main_thread.second.high == own.high);

  // A live second thread's bounds read from the main thread.
  WaitingThread waiting;
  REQUIRE(pthread_create(&other, nullptr, &CaptureBoundsAndWait, &waiting) == 0);
  while (!waiting.started.load()) sched_yield();
  const StackBounds seen = StackBounds::OfThread(other);
  waiting.release.store(true);
  pthread_join(other, nullptr);
  REQUIRE_FALSE(seen.IsEmpty());
  CHECK(seen.low == waiting.own.low);
  CHECK(seen.high == waiting.own.high);
  CHECK_FALSE(seen.Contains(AddressOfALocal()));
}

TEST_CASE("StackBounds: Contains and ContainsRange are half-open and overflow-safe",
          "[platform][sampling]") {
  StackBounds bounds;
  bounds.low = 0x1000;
  bounds.high = 0x2000;
  CHECK(bounds.Contains(0x1000));
  CHECK(bounds.Contains(0x1fff));
  CHECK_FALSE(bounds.Contains(0x2000));
  CHECK_FALSE(bounds.Contains(0xfff));
  CHECK(bounds.ContainsRange(0x1ff0, 16));
  CHECK_FALSE(bounds.ContainsRange(0x1ff8, 16));
  CHECK_FALSE(bounds.ContainsRange(0x1ff8, SIZE_MAX));
  CHECK_FALSE(bounds.ContainsRange(0xff8, 16));
  CHECK(StackBounds().IsEmpty());
  CHECK_FALSE(StackBounds().Contains(0));
}

TEST_CASE("StackBounds: a thread's own bounds, read without allocating, are glibc's",
          "[platform][sampling]") {
  // Read from /proc/self/maps (the mapping that holds the frame), they equal what glibc's
  // pthread_getattr_np reports for stacks it allocated, of every size (last in this file:
  // glibc's stack cache may hand a later thread one of these larger stacks).
  for (const size_t stack_size : {size_t{0}, size_t{PTHREAD_STACK_MIN}, size_t{64 * 1024},
                                  size_t{2 * 1024 * 1024}}) {
    pthread_attr_t attributes;
    REQUIRE(pthread_attr_init(&attributes) == 0);
    if (stack_size != 0) REQUIRE(pthread_attr_setstacksize(&attributes, stack_size) == 0);
    ThreadResult result;
    pthread_t thread;
    REQUIRE(pthread_create(&thread, &attributes, &CaptureBounds, &result) == 0);
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attributes);
    INFO("stack size " << stack_size);
    REQUIRE_FALSE(result.glibc.IsEmpty());
    CHECK(result.bounds.low == result.glibc.low);
    CHECK(result.bounds.high == result.glibc.high);
  }
}

}  // namespace
}  // namespace strata
