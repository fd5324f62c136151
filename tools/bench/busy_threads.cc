// busy_threads: an unmodified CPU-bound program (no Strata include or call) with N threads
// that each spin a fixed amount of work, for the whole-program comparisons of tools/bench.sh
// (the 16-thread precise-mode row; the two-thread rows use tests/two_workers.cc).
//
// Usage: busy_threads [--threads N] [--iterations M]
//   --threads N     busy threads (default 16), named "busy-0" ... "busy-<N-1>"
//   --iterations M  outer iterations per thread (default 2750000: with 16 threads about the
//                   same total work as two_workers' default)
// Prints: "busy_threads: threads=N work_wall_ms=W cpu_ms=C result=R", where W is the time from
// before the first thread is created to after the last one is joined, C the process's CPU
// time at that point.
#include <pthread.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

long g_iterations = 2750000;
uint64_t g_results[1024];

double ClockMs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

}  // namespace

__attribute__((noipa)) uint64_t busy_leaf(uint64_t x) {
  for (int i = 0; i < 32; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    x ^= x >> 29;
  }
  return x;
}

__attribute__((noipa)) uint64_t busy_work_loop(long iterations, uint64_t seed) {
  uint64_t x = seed;
  for (long i = 0; i < iterations; ++i) x = busy_leaf(x) ^ (x >> 17);
  return x;
}

__attribute__((noipa)) void* busy_thread_main(void* argument) {
  const long index = reinterpret_cast<long>(argument);
  char name[16];
  std::snprintf(name, sizeof(name), "busy-%ld", index);
  pthread_setname_np(pthread_self(), name);
  g_results[index] = busy_work_loop(g_iterations, static_cast<uint64_t>(index) + 1);
  return nullptr;
}

int main(int argc, char** argv) {
  long threads = 16;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      g_iterations = std::atol(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--iterations M]\n", argv[0]);
      return 2;
    }
  }
  if (threads < 1 || threads > 1024) {
    std::fprintf(stderr, "busy_threads: --threads must be 1..1024\n");
    return 2;
  }
  const double start_ms = ClockMs(CLOCK_MONOTONIC);
  std::vector<pthread_t> ids(static_cast<size_t>(threads));
  for (long i = 0; i < threads; ++i) {
    if (pthread_create(&ids[i], nullptr, busy_thread_main, reinterpret_cast<void*>(i)) != 0) {
      std::perror("pthread_create");
      return 3;
    }
  }
  uint64_t result = 0;
  for (long i = 0; i < threads; ++i) {
    pthread_join(ids[i], nullptr);
    result ^= g_results[i];
  }
  std::printf("busy_threads: threads=%ld work_wall_ms=%.1f cpu_ms=%.1f result=%llu\n", threads,
              ClockMs(CLOCK_MONOTONIC) - start_ms, ClockMs(CLOCK_PROCESS_CPUTIME_ID),
              static_cast<unsigned long long>(result));
  return 0;
}
