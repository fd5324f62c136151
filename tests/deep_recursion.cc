// A program with a deep native stack (no Strata includes): main -> deep_entry ->
// deep_recurse x DEPTH -> deep_leaf_spin, which burns a fixed amount of work (no clock) at the
// bottom. For tests/deep_stack_test.sh: every sample taken in the recursion must keep the
// root side of the stack (deep_entry, main) although it is DEPTH + 3 frames deep.
//
// With --rounds R (tests/deep_stack_share_test.sh), the work is split in R rounds, each a call
// of deep_entry (the recursion, then the spin) and one of shallow_entry (the same spin, 2
// frames from main); --deep-percent P (default 50) gives the deep side P % of each round's
// iterations. The program measures each side's CPU itself (its thread CPU clock around
// every call) and prints it: the share of the deep side is what a profile's share of samples
// in deep_recurse should be, whatever a stack walk costs.
//
// Usage: deep_recursion [--depth N] [--iterations N] [--rounds R] [--deep-percent P]
//   (defaults 600, 500000000: ~0.4 s of CPU here, 0: no shallow side)
// Prints "deep_recursion: depth=N result=R" and, with --rounds, a line
// "deep_cpu_ns=D shallow_cpu_ns=S"; exits 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace {

volatile unsigned long g_sink;

}  // namespace

extern "C" {

// Called once at the end of the spin so that the spin is not a leaf function: GCC 12 drops a
// leaf's frame pointer even with -fno-omit-frame-pointer, and a frame-pointer walk then
// skips the spin's caller.
__attribute__((noinline)) void deep_spin_done(unsigned long* x) { __asm__ volatile("" : : "r"(x) : "memory"); }

__attribute__((noinline)) unsigned long deep_leaf_spin(unsigned long iterations) {
  unsigned long x = 1;
  for (unsigned long i = 0; i < iterations; ++i) {
    x = x * 6364136223846793005ul + 1442695040888963407ul;
    __asm__ volatile("" : "+r"(x));
  }
  deep_spin_done(&x);
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

__attribute__((noinline)) unsigned long shallow_entry(unsigned long iterations) {
  unsigned long result = deep_leaf_spin(iterations);
  __asm__ volatile("" : "+r"(result) : : "memory");
  return result + 2;
}

}  // extern "C"

namespace {

long long ThreadCpuNs() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<long long>(now.tv_sec) * 1000000000ll + now.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  int depth = 600;
  unsigned long iterations = 500000000ul;
  long rounds = 0;
  long deep_percent = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--depth") == 0) {
      depth = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--iterations") == 0) {
      iterations = std::strtoul(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--rounds") == 0) {
      rounds = std::atol(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--deep-percent") == 0) {
      deep_percent = std::atol(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--depth N] [--iterations N] [--rounds R] [--deep-percent P]\n",
                   argv[0]);
      return 2;
    }
  }
  if (rounds <= 0) {
    g_sink = deep_entry(depth, iterations);
    std::printf("deep_recursion: depth=%d result=%lu\n", depth, g_sink % 1000);
    return 0;
  }
  if (deep_percent < 0 || deep_percent > 100) {
    std::fprintf(stderr, "%s: --deep-percent must be 0..100\n", argv[0]);
    return 2;
  }
  const unsigned long per_round = iterations / static_cast<unsigned long>(rounds);
  const unsigned long deep_part = per_round / 100 * static_cast<unsigned long>(deep_percent);
  const unsigned long shallow_part = per_round - deep_part;
  long long deep_ns = 0;
  long long shallow_ns = 0;
  unsigned long sink = 0;
  for (long r = 0; r < rounds; ++r) {
    const long long t0 = ThreadCpuNs();
    sink += deep_entry(depth, deep_part);
    const long long t1 = ThreadCpuNs();
    sink += shallow_entry(shallow_part);
    const long long t2 = ThreadCpuNs();
    deep_ns += t1 - t0;
    shallow_ns += t2 - t1;
  }
  g_sink = sink;
  std::printf("deep_recursion: depth=%d result=%lu\n", depth, g_sink % 1000);
  std::printf("deep_cpu_ns=%lld shallow_cpu_ns=%lld\n", deep_ns, shallow_ns);
  return 0;
}
