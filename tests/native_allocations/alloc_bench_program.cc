// The allocation-heavy benchmark of native allocation profiling (tools/bench.sh,
// docs/benchmarks.md): two threads each make N allocations of mixed sizes (90 % of 16-256 B
// with operator new, 9 % of 256 B-4 KiB with malloc, 1 % of 4-64 KiB with malloc), keeping a
// window of 256 live blocks each, and print the process's CPU time and allocations per
// CPU-second:
//   alloc_bench_program [ALLOCATIONS_PER_THREAD]   (default 20000000)
//   alloc_bench_program --micro PAIRS              (see MicroLoop)
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cstdint>
#include <string>

namespace {

uint64_t g_per_thread = 20000000;

__attribute__((noinline)) void* AllocateOne(uint64_t& state, bool* with_new) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  const uint32_t kind = static_cast<uint32_t>(state % 100);
  const uint32_t r = static_cast<uint32_t>(state >> 32);
  if (kind < 90) {
    *with_new = true;
    return new char[16 + r % 241];
  }
  *with_new = false;
  if (kind < 99) return malloc(256 + r % 3841);
  return malloc(4096 + r % 61441);
}

void* Worker(void* argument) {
  uint64_t state = 0x9E3779B97F4A7C15ull * (reinterpret_cast<uintptr_t>(argument) + 1);
  constexpr int kWindow = 256;
  void* blocks[kWindow] = {};
  bool with_new[kWindow] = {};
  for (uint64_t i = 0; i < g_per_thread; ++i) {
    const int slot = static_cast<int>(i % kWindow);
    if (blocks[slot] != nullptr) {
      if (with_new[slot]) {
        delete[] static_cast<char*>(blocks[slot]);
      } else {
        free(blocks[slot]);
      }
    }
    blocks[slot] = AllocateOne(state, &with_new[slot]);
    static_cast<volatile char*>(blocks[slot])[0] = 1;
  }
  for (int slot = 0; slot < kWindow; ++slot) {
    if (with_new[slot]) {
      delete[] static_cast<char*>(blocks[slot]);
    } else {
      free(blocks[slot]);
    }
  }
  return nullptr;
}

double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

}  // namespace

// --micro N: one thread, N pairs of malloc(64) and free; prints the nanoseconds of CPU per
// pair (the hooks' unsampled path against plain malloc).
__attribute__((noinline)) void MicroLoop(uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    void* p = malloc(64);
    asm volatile("" : : "r"(p) : "memory");
    free(p);
  }
}

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--micro") {
    const uint64_t n = strtoull(argv[2], nullptr, 10);
    MicroLoop(n / 10);  // Warm-up.
    timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    MicroLoop(n);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    const double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
    printf("ns_per_malloc_free_pair=%.2f\n", ns);
    return 0;
  }
  if (argc > 1) g_per_thread = strtoull(argv[1], nullptr, 10);
  const double start = CpuSeconds();
  pthread_t threads[2];
  for (int i = 0; i < 2; ++i) pthread_create(&threads[i], nullptr, Worker, reinterpret_cast<void*>(intptr_t{i}));
  for (pthread_t thread : threads) pthread_join(thread, nullptr);
  const double cpu = CpuSeconds() - start;
  printf("cpu_seconds=%.3f allocations_per_cpu_second=%.0f\n", cpu, 2.0 * g_per_thread / cpu);
  return 0;
}
