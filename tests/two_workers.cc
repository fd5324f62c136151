// An unmodified workload for Strata's scenario tests: it has no Strata include and makes no
// Strata call. The profiler reaches it only through LD_PRELOAD and STRATA_* variables.
//
// The main thread starts two pthreads that name themselves "worker-alpha" and "worker-beta"
// (pthread_setname_np, first thing, as most programs do) and spin a fixed amount of work each
// in their own, distinctly named functions:
//
//   alpha_thread_main -> alpha_work_loop -> spin_alpha_leaf
//   beta_thread_main  -> beta_work_loop  -> spin_beta_leaf
//
// The functions are `noipa` (no inlining, cloning, identical-code folding or
// interprocedural propagation), so each keeps exactly its own symbol at -O2, and their results
// go to volatile sinks, so the work cannot be optimised away. The leaf does most of the work:
// with frame pointers, a frameless leaf is exactly where a frame-pointer walk loses the caller.
//
// Built twice (tests/BUILD.bazel): with -fno-omit-frame-pointer and with -fomit-frame-pointer.
//
// Usage: two_workers [--iterations N] [--exit-code N]
//   --iterations N  outer iterations per worker (default 22000000, about 1.2 s of CPU each on
//                   the project's machine kind)
//   --exit-code N   status returned from main (to check that the profiler keeps it)
// Prints one line per worker: "two_workers: thread=NAME cpu_ms=X wall_ms=W result=Y" (its own
// CPU time and lifetime: cpu_ms / wall_ms is the share of a CPU it got).
#include <pthread.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

volatile uint64_t g_sink_alpha;
volatile uint64_t g_sink_beta;
long g_iterations = 22000000;

double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double MonotonicMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

}  // namespace

// Different constants in alpha and beta, so that no optimisation could fold them together.
__attribute__((noipa)) uint64_t spin_alpha_leaf(uint64_t x) {
  for (int i = 0; i < 32; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    x ^= x >> 29;
  }
  return x;
}

__attribute__((noipa)) uint64_t spin_beta_leaf(uint64_t x) {
  for (int i = 0; i < 32; ++i) {
    x = x * 2862933555777941757ULL + 3037000493ULL;
    x ^= x >> 31;
  }
  return x;
}

__attribute__((noipa)) uint64_t alpha_work_loop(long iterations) {
  uint64_t x = 1;
  for (long i = 0; i < iterations; ++i) x = spin_alpha_leaf(x) ^ (x >> 17);
  return x;
}

__attribute__((noipa)) uint64_t beta_work_loop(long iterations) {
  uint64_t x = 2;
  for (long i = 0; i < iterations; ++i) x = spin_beta_leaf(x) ^ (x >> 13);
  return x;
}

__attribute__((noipa)) void* alpha_thread_main(void*) {
  const double start_ms = MonotonicMs();
  pthread_setname_np(pthread_self(), "worker-alpha");
  g_sink_alpha = alpha_work_loop(g_iterations);
  std::printf("two_workers: thread=worker-alpha cpu_ms=%.1f wall_ms=%.1f result=%llu\n",
              ThreadCpuMs(), MonotonicMs() - start_ms,
              static_cast<unsigned long long>(g_sink_alpha));
  return nullptr;
}

__attribute__((noipa)) void* beta_thread_main(void*) {
  const double start_ms = MonotonicMs();
  pthread_setname_np(pthread_self(), "worker-beta");
  g_sink_beta = beta_work_loop(g_iterations);
  std::printf("two_workers: thread=worker-beta cpu_ms=%.1f wall_ms=%.1f result=%llu\n",
              ThreadCpuMs(), MonotonicMs() - start_ms,
              static_cast<unsigned long long>(g_sink_beta));
  return nullptr;
}

int main(int argc, char** argv) {
  int exit_code = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      g_iterations = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--exit-code") == 0 && i + 1 < argc) {
      exit_code = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--iterations N] [--exit-code N]\n", argv[0]);
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("two_workers: start iterations=%ld\n", g_iterations);

  pthread_t alpha, beta;
  if (pthread_create(&alpha, nullptr, alpha_thread_main, nullptr) != 0 ||
      pthread_create(&beta, nullptr, beta_thread_main, nullptr) != 0) {
    std::perror("pthread_create");
    return 3;
  }
  pthread_join(alpha, nullptr);
  pthread_join(beta, nullptr);
  std::printf("two_workers: done exit_code=%d\n", exit_code);
  return exit_code;
}
