#include "platform/sampling/stack_bounds.h"

#include <pthread.h>

#include <cstdint>

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

struct ThreadResult {
  StackBounds bounds;
  uintptr_t local = 0;
};

void* CaptureBounds(void* argument) {
  ThreadResult* result = static_cast<ThreadResult*>(argument);
  result->bounds = StackBounds::OfCurrentThread();
  result->local = AddressOfALocal();
  return nullptr;
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

}  // namespace
}  // namespace strata
