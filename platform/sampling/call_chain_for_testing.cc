#include "platform/sampling/call_chain_for_testing.h"

// noinline + noclone keep each function a frame of its own with its own name; the work after
// each call keeps the calls from becoming tail calls at any optimisation level.
#define STRATA_TEST_CHAIN_FUNCTION __attribute__((noinline, noclone))

extern "C" {

STRATA_TEST_CHAIN_FUNCTION uint64_t strata_test_chain_inner(uint64_t calls) {
  uint64_t x = calls | 1;
  for (uint64_t i = 0; i < calls; ++i) x = strata_test_frameless_leaf(x) ^ (x >> 17);
  return x + 1;
}

STRATA_TEST_CHAIN_FUNCTION uint64_t strata_test_chain_middle(uint64_t calls) {
  const uint64_t result = strata_test_chain_inner(calls);
  __asm__ volatile("" : : "r"(result) : "memory");
  return result ^ 3;
}

STRATA_TEST_CHAIN_FUNCTION uint64_t strata_test_chain_outer(uint64_t calls) {
  const uint64_t result = strata_test_chain_middle(calls);
  __asm__ volatile("" : : "r"(result) : "memory");
  return result ^ 5;
}

}  // extern "C"
