// An unmodified program for the `strata record` scenarios (tests/cli): no Strata include, no
// Strata call. Built -O2 -g.
//
//   process_tree [--ms N] [--exit-code N]
//       forks two children that exec this program again as `--child alpha` and
//       `--child beta`; meanwhile the parent spins in parent_spin(); it waits for both and
//       returns --exit-code (default 0).
//   process_tree --child alpha|beta [--ms N]
//       spins N ms of CPU (default 400) in alpha_child_work() / beta_child_work(), whose hot
//       loop is an always-inlined function (alpha_inlined_kernel / beta_inlined_kernel): the
//       symbolizer must show it as a frame of its own, with this file and its line.
//   process_tree --forever
//       spins in forever_spin() until a signal ends it (the Ctrl-C scenario).
//
// Prints "process_tree: role=R pid=P cpu_ms=X" per process.
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

volatile uint64_t g_sink;

double CpuMs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

}  // namespace

// The hot loops, inlined into their callers (different constants: nothing folds them).
static inline __attribute__((always_inline)) uint64_t alpha_inlined_kernel(uint64_t x) {
  for (int i = 0; i < 64; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;  // ALPHA_KERNEL_LINE
    x ^= x >> 29;
  }
  return x;
}

static inline __attribute__((always_inline)) uint64_t beta_inlined_kernel(uint64_t x) {
  for (int i = 0; i < 64; ++i) {
    x = x * 2862933555777941757ULL + 3037000493ULL;  // BETA_KERNEL_LINE
    x ^= x >> 31;
  }
  return x;
}

__attribute__((noinline)) void alpha_child_work(double ms) {
  uint64_t x = 1;
  const double end = CpuMs() + ms;
  while (CpuMs() < end) {
    for (int i = 0; i < 2000; ++i) x = alpha_inlined_kernel(x);
  }
  g_sink = x;
}

__attribute__((noinline)) void beta_child_work(double ms) {
  uint64_t x = 2;
  const double end = CpuMs() + ms;
  while (CpuMs() < end) {
    for (int i = 0; i < 2000; ++i) x = beta_inlined_kernel(x);
  }
  g_sink = x;
}

__attribute__((noipa)) uint64_t parent_spin_step(uint64_t x) {
  for (int i = 0; i < 64; ++i) {
    x = x * 1103515245ULL + 12345ULL;
    x ^= x >> 17;
  }
  return x;
}

__attribute__((noinline)) void parent_spin(double ms) {
  uint64_t x = 3;
  const double end = CpuMs() + ms;
  while (CpuMs() < end) {
    for (int i = 0; i < 2000; ++i) x = parent_spin_step(x);
  }
  g_sink = x;
}

__attribute__((noipa)) uint64_t forever_step(uint64_t x) {
  for (int i = 0; i < 64; ++i) {
    x = x * 6364136223846793005ULL + 7ULL;
    x ^= x >> 23;
  }
  return x;
}

// Written by forever_spin through an atomic: under TSan a signal's handler (Strata's SIGINT
// handler, the sampler's SIGPROF) runs only at the thread's next intercepted call or atomic
// operation, and a loop with neither would never end on Ctrl-C. A relaxed store is a plain
// store in the normal build.
std::atomic<uint64_t> g_forever_sink{0};

__attribute__((noinline)) void forever_spin() {
  uint64_t x = 4;
  for (;;) {
    for (int i = 0; i < 2000; ++i) x = forever_step(x);
    g_forever_sink.store(x, std::memory_order_relaxed);
  }
}

int main(int argc, char** argv) {
  double ms = 400;
  int exit_code = 0;
  const char* child = nullptr;
  bool forever = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--ms") == 0 && i + 1 < argc) {
      ms = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--exit-code") == 0 && i + 1 < argc) {
      exit_code = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--child") == 0 && i + 1 < argc) {
      child = argv[++i];
    } else if (std::strcmp(argv[i], "--forever") == 0) {
      forever = true;
    } else {
      std::fprintf(stderr, "usage: process_tree [--ms N] [--exit-code N] [--child alpha|beta] [--forever]\n");
      return 2;
    }
  }
  if (forever) {
    std::printf("process_tree: role=forever pid=%d\n", getpid());
    std::fflush(stdout);
    forever_spin();
  }
  if (child != nullptr) {
    if (std::strcmp(child, "alpha") == 0) {
      alpha_child_work(ms);
    } else {
      beta_child_work(ms);
    }
    std::printf("process_tree: role=%s pid=%d cpu_ms=%.1f\n", child, getpid(), CpuMs());
    return 0;
  }
  pid_t pids[2];
  const char* roles[2] = {"alpha", "beta"};
  char ms_text[32];
  std::snprintf(ms_text, sizeof(ms_text), "%g", ms);
  std::fflush(stdout);
  for (int i = 0; i < 2; ++i) {
    pids[i] = fork();
    if (pids[i] == 0) {
      execl("/proc/self/exe", argv[0], "--child", roles[i], "--ms", ms_text, static_cast<char*>(nullptr));
      std::perror("process_tree: exec");
      _exit(127);
    }
  }
  parent_spin(ms / 2);
  int failures = 0;
  for (pid_t pid : pids) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  std::printf("process_tree: role=parent pid=%d cpu_ms=%.1f children_failed=%d\n", getpid(), CpuMs(), failures);
  return failures > 0 ? 1 : exit_code;
}
