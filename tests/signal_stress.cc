// An unmodified program (no Strata include, no Strata call) that keeps every thread inside
// the code a sampling signal handler must never trip over (issue 10, "signal-safety stress"):
// the allocator's locks, the dynamic loader's locks (dlopen/dlclose, dl_iterate_phdr from the
// C++ unwinder), C++ exception unwinding through several frames, and thread creation and
// exit (the profiler's own registration path). Each kind runs in its own threads, as fast as
// it can, for --seconds:
//
//   st-malloc   malloc/free/realloc and new/delete of sizes 16 B .. 96 KiB (tcache, the
//               arena lock, and mmap above the threshold), a few hundred blocks live
//   st-dlopen   dlopen(--plugin, RTLD_NOW | RTLD_LOCAL), dlsym, call, dlclose
//   st-throw    throw std::runtime_error 6 frames deep, caught at the top (libgcc_s's
//               unwinder, which takes the loader lock through dl_iterate_phdr)
//   st-spawn    pthread_create + pthread_join of short threads ("st-child") that allocate,
//               throw and catch once, then exit
//
// The main thread sleeps until the deadline (resuming after EINTR: wall-clock sampling may
// interrupt it), tells the workers to stop, joins them, and prints one line per kind and a
// summary:
//
//   signal_stress: kind=dlopen threads=1 ops=123456
//   signal_stress: result seconds=5.0 ops=987654 failures=0
//
// A worker that sees a wrong result (a failed dlopen, an exception not caught where thrown to,
// corrupted memory) counts a failure; exit status 1 when there was any. A hang is what the
// caller's watchdog detects (the process does not end); a crash is its exit status.
//
// Usage: signal_stress --plugin PATH [--seconds S] [--threads-per-kind N]
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_failures{0};
const char* g_plugin_path = nullptr;

struct Kind {
  const char* name;
  void (*run)(std::atomic<uint64_t>* ops);
  std::atomic<uint64_t> ops{0};
};

uint64_t NextRandom(uint64_t* state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

// Counts a failure; prints the first few.
void Fail(const char* what) {
  if (g_failures.fetch_add(1) < 10) std::fprintf(stderr, "signal_stress: FAILURE %s\n", what);
}

// --- malloc/free.

void RunMalloc(std::atomic<uint64_t>* ops) {
  constexpr size_t kLive = 256;
  void* live[kLive] = {};
  uint64_t rng = 0x9e3779b97f4a7c15ULL ^ reinterpret_cast<uintptr_t>(&live);
  while (!g_stop.load(std::memory_order_relaxed)) {
    const size_t slot = NextRandom(&rng) % kLive;
    const uint64_t r = NextRandom(&rng);
    if (live[slot]) {
      // The first byte holds the slot's tag: memory corruption shows here.
      if (static_cast<unsigned char*>(live[slot])[0] != static_cast<unsigned char>(slot)) {
        Fail("malloc: block content changed");
      }
      if (r % 4 == 0) {
        const size_t size = 16 + NextRandom(&rng) % (96 * 1024);
        void* grown = std::realloc(live[slot], size);
        if (!grown) {
          Fail("realloc returned null");
          continue;
        }
        live[slot] = grown;
        continue;
      }
      std::free(live[slot]);
      live[slot] = nullptr;
    } else {
      // Mostly small (tcache / fast bins), some medium (arena lock), a few over the mmap
      // threshold.
      const size_t size = r % 8 == 0 ? 16 + r % (96 * 1024) : 16 + r % 512;
      live[slot] = std::malloc(size);
      if (!live[slot]) {
        Fail("malloc returned null");
        continue;
      }
      std::memset(live[slot], static_cast<int>(slot), size < 64 ? size : 64);
    }
    if (r % 16 == 0) delete[] new char[1 + r % 2048];
    ops->fetch_add(1, std::memory_order_relaxed);
  }
  for (void* p : live) std::free(p);
}

// --- dlopen/dlclose.

void RunDlopen(std::atomic<uint64_t>* ops) {
  while (!g_stop.load(std::memory_order_relaxed)) {
    void* handle = dlopen(g_plugin_path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      Fail(dlerror());
      return;
    }
    using Function = int (*)(int);
    auto function = reinterpret_cast<Function>(dlsym(handle, "stress_plugin_square_plus_one"));
    if (!function || function(7) != 50) Fail("dlsym or the plugin's function");
    if (dlclose(handle) != 0) Fail("dlclose");
    ops->fetch_add(1, std::memory_order_relaxed);
  }
}

// --- exceptions through several frames (noinline: real frames for the unwinder).

struct StressError : std::runtime_error {
  explicit StressError(int depth) : std::runtime_error("stress"), depth(depth) {}
  int depth;
};

__attribute__((noinline)) int ThrowAtDepth(int depth, int remaining) {
  if (remaining == 0) throw StressError(depth);
  std::string keep_a_destructor_on_the_path(24, 'x');
  const int result = ThrowAtDepth(depth, remaining - 1);
  return result + static_cast<int>(keep_a_destructor_on_the_path.size());
}

bool ThrowAndCatchOnce(int depth) {
  try {
    ThrowAtDepth(depth, depth);
  } catch (const StressError& error) {
    return error.depth == depth;
  }
  return false;
}

void RunThrow(std::atomic<uint64_t>* ops) {
  while (!g_stop.load(std::memory_order_relaxed)) {
    if (!ThrowAndCatchOnce(6)) Fail("exception not caught at its catch site");
    ops->fetch_add(1, std::memory_order_relaxed);
  }
}

// --- thread creation and exit.

void* ChildMain(void*) {
  pthread_setname_np(pthread_self(), "st-child");
  void* block = std::malloc(1000);
  if (!ThrowAndCatchOnce(3)) Fail("exception in a short thread");
  std::free(block);
  return nullptr;
}

void RunSpawn(std::atomic<uint64_t>* ops) {
  while (!g_stop.load(std::memory_order_relaxed)) {
    pthread_t child;
    const int rc = pthread_create(&child, nullptr, &ChildMain, nullptr);
    if (rc != 0) {
      if (rc != EAGAIN) Fail("pthread_create");
      continue;
    }
    if (pthread_join(child, nullptr) != 0) Fail("pthread_join");
    ops->fetch_add(1, std::memory_order_relaxed);
  }
}

Kind g_kinds[] = {
    {"malloc", &RunMalloc},
    {"dlopen", &RunDlopen},
    {"throw", &RunThrow},
    {"spawn", &RunSpawn},
};

void* WorkerMain(void* raw) {
  Kind* kind = static_cast<Kind*>(raw);
  const std::string name = std::string("st-") + kind->name;
  pthread_setname_np(pthread_self(), name.c_str());
  kind->run(&kind->ops);
  return nullptr;
}

int64_t MonotonicNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1000000000LL + now.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  int threads_per_kind = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--plugin") == 0 && i + 1 < argc) {
      g_plugin_path = argv[++i];
    } else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--threads-per-kind") == 0 && i + 1 < argc) {
      threads_per_kind = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s --plugin PATH [--seconds S] [--threads-per-kind N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!g_plugin_path || seconds <= 0 || threads_per_kind < 1) {
    std::fprintf(stderr, "signal_stress: --plugin is required; --seconds and "
                         "--threads-per-kind must be positive\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("signal_stress: start seconds=%.1f threads_per_kind=%d\n", seconds,
              threads_per_kind);

  std::vector<pthread_t> workers;
  for (Kind& kind : g_kinds) {
    for (int i = 0; i < threads_per_kind; ++i) {
      pthread_t thread;
      if (pthread_create(&thread, nullptr, &WorkerMain, &kind) != 0) {
        std::perror("signal_stress: pthread_create");
        return 3;
      }
      workers.push_back(thread);
    }
  }

  const int64_t deadline_ns = MonotonicNs() + static_cast<int64_t>(seconds * 1e9);
  timespec deadline = {static_cast<time_t>(deadline_ns / 1000000000LL),
                       static_cast<long>(deadline_ns % 1000000000LL)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr) == EINTR) {
  }
  g_stop.store(true);
  for (pthread_t thread : workers) pthread_join(thread, nullptr);

  uint64_t total = 0;
  for (Kind& kind : g_kinds) {
    const uint64_t ops = kind.ops.load();
    total += ops;
    std::printf("signal_stress: kind=%s threads=%d ops=%llu\n", kind.name, threads_per_kind,
                static_cast<unsigned long long>(ops));
    if (ops == 0) Fail("a kind of worker made no progress");
  }
  const uint64_t failures = g_failures.load();
  std::printf("signal_stress: result seconds=%.1f ops=%llu failures=%llu\n", seconds,
              static_cast<unsigned long long>(total), static_cast<unsigned long long>(failures));
  return failures == 0 ? 0 : 1;
}
