// The program of the native allocation tests (tests/native_allocations/): four threads
// allocate from named functions, each with its own mix of sizes and allocation functions,
// and the program prints the truth it knows — the bytes each function asked for, and, in
// leak mode, the bytes it never freed — as lines "truth FUNCTION allocated=N retained=M".
//
//   alloc_accuracy_program [--total-mib N] [--leak-mib M]
//
// AllocateSmall: 8-256 B with operator new[]; AllocateMedium: 256 B-16 KiB with calloc;
// AllocateLarge: 16 KiB-1 MiB with malloc and realloc; AllocateMixed: 8 B-1 MiB (log-uniform)
// with posix_memalign and aligned operator new. Everything they allocate is freed at once.
// LeakSome (--leak-mib): 64 KiB-1 MiB blocks with malloc, never freed, M MiB in all.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <cstdint>
#include <new>

namespace {

uint64_t g_total_bytes = 1ull << 30;  // Over the four functions and threads.
uint64_t g_leak_bytes = 0;
constexpr int kThreads = 4;

struct Random {
  uint64_t state;
  uint64_t Next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
  // In [low, high].
  uint64_t Between(uint64_t low, uint64_t high) { return low + Next() % (high - low + 1); }
  // Log-uniform in [low, high].
  uint64_t LogBetween(uint64_t low, uint64_t high) {
    const double u = static_cast<double>(Next() >> 11) * 0x1.0p-53;
    double value = static_cast<double>(low);
    const double ratio = static_cast<double>(high) / static_cast<double>(low);
    // value = low * ratio^u, with a cheap power: repeated square roots are not needed here.
    double power = 1;
    double base = ratio;
    double e = u;
    for (int bit = 0; bit < 30; ++bit) {  // Binary expansion of the exponent.
      base = __builtin_sqrt(base);
      e *= 2;
      if (e >= 1) {
        power *= base;
        e -= 1;
      }
    }
    value *= power;
    uint64_t result = static_cast<uint64_t>(value);
    return result < low ? low : (result > high ? high : result);
  }
};

std::atomic<uint64_t> g_allocated[5];
std::atomic<uint64_t> g_retained[5];
const char* const kNames[5] = {"AllocateSmall", "AllocateMedium", "AllocateLarge",
                               "AllocateMixed", "LeakSome"};

inline void Touch(void* p, size_t n) {
  static_cast<volatile char*>(p)[0] = 1;
  static_cast<volatile char*>(p)[n - 1] = 2;
}

__attribute__((noinline)) uint64_t AllocateSmall(Random& random, uint64_t budget) {
  uint64_t done = 0;
  while (done < budget) {
    const size_t n = random.Between(8, 256);
    char* p = new char[n];
    Touch(p, n);
    delete[] p;
    done += n;
  }
  asm volatile("" ::: "memory");
  return done;
}

__attribute__((noinline)) uint64_t AllocateMedium(Random& random, uint64_t budget) {
  uint64_t done = 0;
  while (done < budget) {
    const size_t n = random.Between(256, 16 * 1024);
    void* p = calloc(1, n);
    if (p == nullptr) abort();
    Touch(p, n);
    free(p);
    done += n;
  }
  asm volatile("" ::: "memory");
  return done;
}

__attribute__((noinline)) uint64_t AllocateLarge(Random& random, uint64_t budget) {
  uint64_t done = 0;
  while (done < budget) {
    const size_t n = random.Between(16 * 1024, 512 * 1024);
    void* p = malloc(n);
    if (p == nullptr) abort();
    Touch(p, n);
    done += n;
    // realloc counts as the free of the old block and the allocation of the new one.
    const size_t grown = n * 2;
    void* q = realloc(p, grown);
    if (q == nullptr) abort();
    Touch(q, grown);
    free(q);
    done += grown;
  }
  asm volatile("" ::: "memory");
  return done;
}

__attribute__((noinline)) uint64_t AllocateMixed(Random& random, uint64_t budget) {
  uint64_t done = 0;
  bool aligned_new = false;
  while (done < budget) {
    const size_t n = random.LogBetween(8, 1024 * 1024);
    if (aligned_new) {
      void* p = ::operator new(n, std::align_val_t(64));
      Touch(p, n);
      ::operator delete(p, std::align_val_t(64));
    } else {
      void* p = nullptr;
      if (posix_memalign(&p, 32, n) != 0) abort();
      Touch(p, n);
      free(p);
    }
    aligned_new = !aligned_new;
    done += n;
  }
  asm volatile("" ::: "memory");
  return done;
}

__attribute__((noinline)) uint64_t LeakSome(Random& random, uint64_t budget) {
  uint64_t done = 0;
  while (done < budget) {
    size_t n = random.Between(64 * 1024, 1024 * 1024);
    if (n > budget - done) n = budget - done;
    void* p = malloc(n);
    if (p == nullptr) abort();
    Touch(p, n);
    done += n;  // Never freed.
  }
  asm volatile("" ::: "memory");
  return done;
}

void* Worker(void* argument) {
  const int index = static_cast<int>(reinterpret_cast<intptr_t>(argument));
  Random random{0x9E3779B97F4A7C15ull * (index + 1)};
  const uint64_t share = g_total_bytes / 4 / kThreads;  // Per function, per thread.
  // In slices, so that the four functions interleave in time.
  constexpr int kSlices = 16;
  for (int slice = 0; slice < kSlices; ++slice) {
    g_allocated[0] += AllocateSmall(random, share / kSlices);
    g_allocated[1] += AllocateMedium(random, share / kSlices);
    g_allocated[2] += AllocateLarge(random, share / kSlices);
    g_allocated[3] += AllocateMixed(random, share / kSlices);
    if (g_leak_bytes != 0) {
      const uint64_t leaked = LeakSome(random, g_leak_bytes / kThreads / kSlices);
      g_allocated[4] += leaked;
      g_retained[4] += leaked;
    }
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--total-mib") == 0) {
      g_total_bytes = strtoull(argv[i + 1], nullptr, 10) << 20;
    } else if (strcmp(argv[i], "--leak-mib") == 0) {
      g_leak_bytes = strtoull(argv[i + 1], nullptr, 10) << 20;
    } else {
      fprintf(stderr, "usage: %s [--total-mib N] [--leak-mib M]\n", argv[0]);
      return 2;
    }
  }
  pthread_t threads[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    if (pthread_create(&threads[i], nullptr, Worker, reinterpret_cast<void*>(intptr_t{i})) != 0) {
      return 1;
    }
  }
  for (pthread_t thread : threads) pthread_join(thread, nullptr);
  for (int i = 0; i < 5; ++i) {
    if (i == 4 && g_leak_bytes == 0) break;
    printf("truth %s allocated=%llu retained=%llu\n", kNames[i],
           static_cast<unsigned long long>(g_allocated[i].load()),
           static_cast<unsigned long long>(g_retained[i].load()));
  }
  return 0;
}
