// A program with a deep native stack (no Strata includes): main -> deep_entry ->
// deep_recurse x DEPTH -> deep_leaf_spin, which burns a fixed amount of work (no clock) at the
// bottom. For tests/deep_stack_test.sh: every sample taken in the recursion must keep the
// root side of the stack (deep_entry, main) although it is DEPTH + 3 frames deep.
//
// Usage: deep_recursion [--depth N] [--iterations N]   (defaults 600, 500000000: ~0.4 s of CPU here)
// Prints "deep_recursion: depth=N result=R" and exits 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

volatile unsigned long g_sink;

}  // namespace

extern "C" {

__attribute__((noinline)) unsigned long deep_leaf_spin(unsigned long iterations) {
  unsigned long x = 1;
  for (unsigned long i = 0; i < iterations; ++i) {
    x = x * 6364136223846793005ul + 1442695040888963407ul;
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

// Not a tail call (the result is used after it), never inlined: one frame per level.
__attribute__((noinline)) unsigned long deep_recurse(int depth, unsigned long iterations) {
  unsigned long result =
      depth <= 1 ? deep_leaf_spin(iterations) : deep_recurse(depth - 1, iterations);
  __asm__ volatile("" : "+r"(result) : : "memory");
  return result ^ static_cast<unsigned long>(depth);
}

__attribute__((noinline)) unsigned long deep_entry(int depth, unsigned long iterations) {
  unsigned long result = deep_recurse(depth, iterations);
  __asm__ volatile("" : "+r"(result) : : "memory");
  return result + 1;
}

}  // extern "C"

int main(int argc, char** argv) {
  int depth = 600;
  unsigned long iterations = 500000000ul;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--depth") == 0) {
      depth = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--iterations") == 0) {
      iterations = std::strtoul(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--depth N] [--iterations N]\n", argv[0]);
      return 2;
    }
  }
  g_sink = deep_entry(depth, iterations);
  std::printf("deep_recursion: depth=%d result=%lu\n", depth, g_sink % 1000);
  return 0;
}
