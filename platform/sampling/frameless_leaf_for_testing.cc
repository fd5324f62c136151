// Compiled with -O2 -fomit-frame-pointer (see BUILD.bazel): a frameless leaf, as g++ 12
// makes every leaf even under -fno-omit-frame-pointer.
#include "platform/sampling/call_chain_for_testing.h"

extern "C" uint64_t strata_test_frameless_leaf(uint64_t x) {
  for (int i = 0; i < 200; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}
