// Test support: a known call chain for the stack-walker tests, with C names so that dladdr()
// finds them unmangled (link the test with -rdynamic).
//
//   strata_test_chain_outer -> strata_test_chain_middle -> strata_test_chain_inner
//     -> strata_test_frameless_leaf
//
// The three chain functions are ordinary functions with frame pointers, never inlined,
// cloned or tail-called. The leaf lives in its own file compiled with -O2
// -fomit-frame-pointer: it has no frame record, and nearly all of the chain's time is spent in
// it, so most samples land there. Thread safety: thread-safe (pure computation).
// Async-signal safety: async-signal-safe, not that it matters.
#ifndef STRATA_PLATFORM_SAMPLING_CALL_CHAIN_FOR_TESTING_H_
#define STRATA_PLATFORM_SAMPLING_CALL_CHAIN_FOR_TESTING_H_

#include <cstdint>

extern "C" {

// Runs `calls` calls of the leaf through the chain; returns a value that depends on all of
// them.
uint64_t strata_test_chain_outer(uint64_t calls);
uint64_t strata_test_chain_middle(uint64_t calls);
uint64_t strata_test_chain_inner(uint64_t calls);

// ~200 dependent multiply-adds, no stack frame.
uint64_t strata_test_frameless_leaf(uint64_t x);

}  // extern "C"

#endif  // STRATA_PLATFORM_SAMPLING_CALL_CHAIN_FOR_TESTING_H_
