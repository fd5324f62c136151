// A program whose global operator new and delete are its own, guarded by its own std::mutex
// (a memory-tracking allocator, the pattern of docs/host-contract.md), for the native
// allocation tests: four threads allocate through it from AllocateThroughLockedNew (8 B-4 KiB,
// N MiB in all) while the lock is held around malloc. With the hooks preloaded, the malloc
// inside is sampled while the program holds its mutex: the hook must never call back into
// this operator new (the program counts nested entries and prints them) nor deadlock.
// Prints "truth AllocateThroughLockedNew allocated=N retained=0" and "nested_entries=K".
//   locked_new_program [MIB]   (default 512)
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>

namespace {
std::mutex g_allocator_mutex;
std::atomic<uint64_t> g_nested{0};
thread_local bool t_inside = false;
uint64_t g_total = 512ull << 20;
std::atomic<uint64_t> g_allocated{0};

void* LockedAllocate(size_t n) {
  if (t_inside) g_nested.fetch_add(1);
  std::lock_guard<std::mutex> lock(g_allocator_mutex);
  t_inside = true;
  void* p = malloc(n ? n : 1);
  t_inside = false;
  if (p == nullptr) abort();
  return p;
}
void LockedFree(void* p) {
  if (p == nullptr) return;
  if (t_inside) g_nested.fetch_add(1);
  std::lock_guard<std::mutex> lock(g_allocator_mutex);
  t_inside = true;
  free(p);
  t_inside = false;
}

__attribute__((noinline)) uint64_t AllocateThroughLockedNew(uint64_t& state, uint64_t budget) {
  uint64_t done = 0;
  while (done < budget) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const size_t n = 8 + state % 4089;
    char* p = new char[n];
    static_cast<volatile char*>(p)[0] = 1;
    delete[] p;
    done += n;
  }
  asm volatile("" ::: "memory");
  return done;
}

void* Worker(void* argument) {
  uint64_t state = 0x2545F4914F6CDD1Dull * (reinterpret_cast<uintptr_t>(argument) + 1);
  g_allocated += AllocateThroughLockedNew(state, g_total / 4);
  return nullptr;
}
}  // namespace

void* operator new(size_t n) { return LockedAllocate(n); }
void* operator new[](size_t n) { return LockedAllocate(n); }
void operator delete(void* p) noexcept { LockedFree(p); }
void operator delete[](void* p) noexcept { LockedFree(p); }
void operator delete(void* p, size_t) noexcept { LockedFree(p); }
void operator delete[](void* p, size_t) noexcept { LockedFree(p); }

int main(int argc, char** argv) {
  if (argc > 1) g_total = strtoull(argv[1], nullptr, 10) << 20;
  pthread_t threads[4];
  for (int i = 0; i < 4; ++i) pthread_create(&threads[i], nullptr, Worker, reinterpret_cast<void*>(intptr_t{i}));
  for (pthread_t thread : threads) pthread_join(thread, nullptr);
  printf("truth AllocateThroughLockedNew allocated=%llu retained=0\n",
         static_cast<unsigned long long>(g_allocated.load()));
  printf("nested_entries=%llu\n", static_cast<unsigned long long>(g_nested.load()));
  return 0;
}
