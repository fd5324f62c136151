// libstrata_alloc.so: the allocation hooks of native allocation profiling (docs/memory.md).
// Preload it with libstrata_base.so (LD_PRELOAD=libstrata_base.so:libstrata_alloc.so), or
// link it (//base:strata_alloc); `strata record --features nativeallocations` preloads it.
//
// It defines malloc, calloc, realloc, reallocarray, free, posix_memalign, aligned_alloc,
// memalign, valloc, pvalloc and every global operator new and delete (plain, array,
// nothrow, sized, aligned). Each forwards to the next definition in the loader's order
// (glibc's, a preloaded tcmalloc or jemalloc, a program's own), resolved with
// dlsym(RTLD_NEXT) in the library's constructor, before the program's code runs; while that
// lookup runs (dlsym allocates), allocations are served from a small static arena.
//
// Why a library of its own: a program profiled without the feature does not load it, and pays
// nothing; and libstrata_base.so must stay small (docs/benchmarks.md, size budget).
//
// Cost when no session with the feature runs: a jump to the next definition (a tail call)
// and one relaxed load (g_native_allocation_interval). With it: a thread-local countdown of
// bytes (no lock, no atomic read-modify-write, no system call) for an allocation that is not
// sampled, decided before the forwarded call from the size alone; a free adds one relaxed load
// of the live set's filter. Every other path is out of line. When libstdc++'s operator new and
// delete come next, the hooks' plain, array and nothrow forms call the next malloc and free
// themselves, as libstdc++'s would (g_new_is_malloc): one hook per call, not three. A sampled allocation (bytes-weighted
// Poisson sampling: each byte is sampled with probability 1/R) is recorded by
// RecordNativeAllocation (libstrata_base.so) with the estimate s / (1 - exp(-s/R)) and its
// address goes into the live set; the free of a sampled address is recorded with minus it.
//
// Host contract: the hooks run on the program's threads, inside its allocation calls. They
// call nothing the program can interpose or lock besides the forwarded function itself: no
// libm (the logarithm and exponential are computed here), the set's memory is raw mmap'd
// pages. A thread-local guard keeps the recording path from recording what it would itself
// allocate, and an operator new that calls malloc (libstdc++'s) from being counted twice.
//
// Thread safety: thread-safe. Async-signal safety: as the forwarded allocator (none).
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "base/internal/allocations/live_allocation_set.h"
#include "base/internal/allocations/native_allocations.h"

#define STRATA_HOOK extern "C" __attribute__((visibility("default")))

namespace strata {
namespace base_internal {
namespace {

using MallocFunction = void* (*)(size_t);
using CallocFunction = void* (*)(size_t, size_t);
using ReallocFunction = void* (*)(void*, size_t);
using FreeFunction = void (*)(void*);
using PosixMemalignFunction = int (*)(void**, size_t, size_t);
using AlignedFunction = void* (*)(size_t, size_t);
using NewFunction = void* (*)(size_t);
using NewNothrowFunction = void* (*)(size_t, const std::nothrow_t&);
using NewAlignedFunction = void* (*)(size_t, std::align_val_t);
using NewAlignedNothrowFunction = void* (*)(size_t, std::align_val_t, const std::nothrow_t&);
using DeleteFunction = void (*)(void*);
using DeleteSizedFunction = void (*)(void*, size_t);
using DeleteNothrowFunction = void (*)(void*, const std::nothrow_t&);
using DeleteAlignedFunction = void (*)(void*, std::align_val_t);
using DeleteSizedAlignedFunction = void (*)(void*, size_t, std::align_val_t);
using DeleteAlignedNothrowFunction = void (*)(void*, std::align_val_t, const std::nothrow_t&);

// The next definitions (null: not in the process, e.g. operator new in a C program).
struct NextFunctions {
  MallocFunction malloc;
  CallocFunction calloc;
  ReallocFunction realloc;
  FreeFunction free;
  PosixMemalignFunction posix_memalign;
  AlignedFunction aligned_alloc;
  AlignedFunction memalign;
  MallocFunction valloc;
  MallocFunction pvalloc;
  NewFunction new_single, new_array;
  NewNothrowFunction new_single_nothrow, new_array_nothrow;
  NewAlignedFunction new_single_aligned, new_array_aligned;
  NewAlignedNothrowFunction new_single_aligned_nothrow, new_array_aligned_nothrow;
  DeleteFunction delete_single, delete_array;
  DeleteSizedFunction delete_single_sized, delete_array_sized;
  DeleteNothrowFunction delete_single_nothrow, delete_array_nothrow;
  DeleteAlignedFunction delete_single_aligned, delete_array_aligned;
  DeleteSizedAlignedFunction delete_single_sized_aligned, delete_array_sized_aligned;
  DeleteAlignedNothrowFunction delete_single_aligned_nothrow, delete_array_aligned_nothrow;
};
NextFunctions g_next;
// True when the plain, array and nothrow operator new and the unaligned operator deletes that
// come next are libstdc++.so's, and the process's first (global) operator new(size_t) and
// operator delete(void*) are this library's: libstdc++'s then only call malloc (through the
// global operator new: these hooks) and free, so the hooks call the next malloc and free
// themselves, one hook per call instead of three (new[] -> operator new -> malloc). Set once,
// with the next definitions.
bool g_new_is_malloc = false;
std::atomic<int> g_resolve_state{0};  // 0: not yet, 1: resolving, 2: resolved.
// --- Bootstrap arena: what dlsym itself allocates while the next definitions are looked up.
alignas(64) char g_arena[64 * 1024];
std::atomic<size_t> g_arena_used{0};

bool InArena(const void* p) {
  return p >= static_cast<const void*>(g_arena) &&
         p < static_cast<const void*>(g_arena + sizeof(g_arena));
}
void* ArenaAllocate(size_t bytes, size_t alignment = 16) {
  if (alignment < 16) alignment = 16;
  size_t used = g_arena_used.load(std::memory_order_relaxed);
  for (;;) {
    const size_t start = (used + alignment - 1) & ~(alignment - 1);
    if (start + bytes > sizeof(g_arena) || start + bytes < start) return nullptr;
    if (g_arena_used.compare_exchange_weak(used, start + bytes, std::memory_order_relaxed)) {
      return g_arena + start;  // Zero-filled (static storage, never reused): calloc is fine.
    }
  }
}

template <typename F>
void Resolve(F& function, const char* name) {
  function = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

// True when `function` is defined in libstdc++.so (its file name says so).
bool InLibstdcxx(const void* function) {
  Dl_info info;
  if (function == nullptr || dladdr(function, &info) == 0 || info.dli_fname == nullptr) return false;
  const char* name = info.dli_fname;
  for (const char* c = name; *c != '\0'; ++c) {
    if (*c == '/') name = c + 1;
  }
  return strncmp(name, "libstdc++.so", 12) == 0;
}

// True when the process's first definition of `name` is in this library.
bool IsOwnFunction(const char* name) {
  Dl_info own;
  Dl_info first;
  const void* function = dlsym(RTLD_DEFAULT, name);
  return function != nullptr && dladdr(static_cast<const void*>(&g_next), &own) != 0 &&
         dladdr(function, &first) != 0 && own.dli_fbase == first.dli_fbase;
}

// g_new_is_malloc's test (see there), after the lookup of the next definitions.
bool NextNewIsLibstdcxxMalloc() {
  const NextFunctions& n = g_next;
  const void* next_forms[] = {
      reinterpret_cast<const void*>(n.new_single),
      reinterpret_cast<const void*>(n.new_array),
      reinterpret_cast<const void*>(n.new_single_nothrow),
      reinterpret_cast<const void*>(n.new_array_nothrow),
      reinterpret_cast<const void*>(n.delete_single),
      reinterpret_cast<const void*>(n.delete_array),
      reinterpret_cast<const void*>(n.delete_single_sized),
      reinterpret_cast<const void*>(n.delete_array_sized),
      reinterpret_cast<const void*>(n.delete_single_nothrow),
      reinterpret_cast<const void*>(n.delete_array_nothrow),
  };
  for (const void* function : next_forms) {
    if (!InLibstdcxx(function)) return false;
  }
  // libstdc++'s array and nothrow forms call the global operator new(size_t) and
  // operator delete(void*): a program that replaces those (in a library loaded after this
  // one) keeps them.
  return n.malloc != nullptr && n.free != nullptr && IsOwnFunction("_Znwm") &&
         IsOwnFunction("_ZdlPv");
}

// Looks the next definitions up, once. False while the lookup is under way (on this or
// another thread): the caller serves the request from the arena.
__attribute__((noinline)) bool ResolveNextDefinitions() {
  if (g_resolve_state.load(std::memory_order_acquire) == 2) return true;
  int expected = 0;
  if (!g_resolve_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    return false;  // Under way (dlsym allocating, or another thread): the arena.
  }
  NextFunctions& n = g_next;
  Resolve(n.malloc, "malloc");
  Resolve(n.calloc, "calloc");
  Resolve(n.realloc, "realloc");
  Resolve(n.free, "free");
  Resolve(n.posix_memalign, "posix_memalign");
  Resolve(n.aligned_alloc, "aligned_alloc");
  Resolve(n.memalign, "memalign");
  Resolve(n.valloc, "valloc");
  Resolve(n.pvalloc, "pvalloc");
  Resolve(n.new_single, "_Znwm");
  Resolve(n.new_array, "_Znam");
  Resolve(n.new_single_nothrow, "_ZnwmRKSt9nothrow_t");
  Resolve(n.new_array_nothrow, "_ZnamRKSt9nothrow_t");
  Resolve(n.new_single_aligned, "_ZnwmSt11align_val_t");
  Resolve(n.new_array_aligned, "_ZnamSt11align_val_t");
  Resolve(n.new_single_aligned_nothrow, "_ZnwmSt11align_val_tRKSt9nothrow_t");
  Resolve(n.new_array_aligned_nothrow, "_ZnamSt11align_val_tRKSt9nothrow_t");
  Resolve(n.delete_single, "_ZdlPv");
  Resolve(n.delete_array, "_ZdaPv");
  Resolve(n.delete_single_sized, "_ZdlPvm");
  Resolve(n.delete_array_sized, "_ZdaPvm");
  Resolve(n.delete_single_nothrow, "_ZdlPvRKSt9nothrow_t");
  Resolve(n.delete_array_nothrow, "_ZdaPvRKSt9nothrow_t");
  Resolve(n.delete_single_aligned, "_ZdlPvSt11align_val_t");
  Resolve(n.delete_array_aligned, "_ZdaPvSt11align_val_t");
  Resolve(n.delete_single_sized_aligned, "_ZdlPvmSt11align_val_t");
  Resolve(n.delete_array_sized_aligned, "_ZdaPvmSt11align_val_t");
  Resolve(n.delete_single_aligned_nothrow, "_ZdlPvSt11align_val_tRKSt9nothrow_t");
  Resolve(n.delete_array_aligned_nothrow, "_ZdaPvSt11align_val_tRKSt9nothrow_t");
  g_new_is_malloc = NextNewIsLibstdcxxMalloc();
  g_resolve_state.store(2, std::memory_order_release);
  return true;
}

__attribute__((always_inline)) inline bool EnsureResolved() {
  return __builtin_expect(g_resolve_state.load(std::memory_order_acquire) == 2, 1) ||
         ResolveNextDefinitions();
}

__attribute__((constructor(101))) void ResolveAtLoad() { (void)EnsureResolved(); }

// --- Sampling.

struct ThreadSampling {
  int64_t bytes_until_sample;  // The countdown; drawn at the thread's first allocation.
  uint64_t random_state;
  bool started;
  bool in_hook;  // Re-entrancy guard (see the file comment).
};
__thread ThreadSampling t_sampling __attribute__((tls_model("initial-exec")));

LiveAllocationSet g_live_set;
std::atomic<int> g_live_set_state{0};  // 0: not mapped, 1: mapping, 2: mapped, 3: failed.

std::atomic<uint64_t> g_seed_counter{0};

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// ln(x) for x > 0 (finite), without libm: x = m * 2^e with m in [1, 2), and
// ln(m) = 2 atanh((m - 1) / (m + 1)) by its series (|s| <= 1/3: 1e-9 relative at 9 terms).
double NaturalLog(double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof(bits));
  const int exponent = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
  double m;
  memcpy(&m, &bits, sizeof(m));
  const double s = (m - 1) / (m + 1);
  const double s2 = s * s;
  double term = s;
  double sum = 0;
  for (int k = 1; k <= 19; k += 2) {
    sum += term / k;
    term *= s2;
  }
  return 2 * sum + exponent * 0.69314718055994530942;
}

// 1 - exp(-x) for x >= 0, without libm and without cancellation for small x.
double OneMinusExpNegative(double x) {
  if (x > 40) return 1;
  if (x < 0.5) {  // The alternating series x - x^2/2 + x^3/6 - ...: 1e-15 at 18 terms.
    double term = x;
    double sum = 0;
    for (int k = 1; k <= 18; ++k) {
      sum += term;
      term *= -x / (k + 1);
    }
    return sum;
  }
  // exp(-x) = 2^-k * exp(-r), r = x - k ln 2 in [0, ln 2).
  const int k = static_cast<int>(x / 0.69314718055994530942);
  const double r = x - k * 0.69314718055994530942;
  double term = 1;
  double e = 0;
  for (int i = 1; i <= 20; ++i) {
    e += term;
    term *= -r / i;
  }
  for (int i = 0; i < k; ++i) e *= 0.5;
  return 1 - e;
}

// A countdown drawn from the exponential distribution of mean `interval` bytes.
int64_t DrawCountdown(ThreadSampling& t, uint64_t interval) {
  // Uniform in (0, 1]: never 0, whose logarithm is infinite.
  const double u = (static_cast<double>(SplitMix64(t.random_state) >> 11) + 1) * 0x1.0p-53;
  const double bytes = -NaturalLog(u) * static_cast<double>(interval);
  return bytes >= 9.0e18 ? INT64_MAX : static_cast<int64_t>(bytes) + 1;
}

LiveAllocationSet* LiveSet() {
  int state = g_live_set_state.load(std::memory_order_acquire);
  if (__builtin_expect(state == 2, 1)) return &g_live_set;
  if (state == 0 && g_live_set_state.compare_exchange_strong(state, 1, std::memory_order_acq_rel)) {
    const bool mapped = g_live_set.Init();
    g_live_set_state.store(mapped ? 2 : 3, std::memory_order_release);
    return mapped ? &g_live_set : nullptr;
  }
  return nullptr;  // Being mapped by another thread (that allocation goes untracked), or failed.
}

// The return address of the calling function (not inlined) and the stack slot that holds it:
// where the placement of labels in the recorded stack starts (allocation_stack.h). Naming
// the frame address makes the function keep a frame pointer.
#define STRATA_ALLOCATION_STACK_ANCHOR()                                         \
  StackAnchor {                                                                  \
    reinterpret_cast<uintptr_t>(__builtin_return_address(0)),                    \
        reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) + sizeof(void*) \
  }

// The countdown ran out for an allocation of `size` bytes at `pointer`.
__attribute__((noinline)) void SampleAllocation(ThreadSampling& t, void* pointer, size_t size,
                                                 uint64_t interval) {
  if (!t.started) {
    // A thread's first allocation: seed, draw, and count this one against the countdown.
    uint64_t seed = reinterpret_cast<uintptr_t>(&t) ^
                    (g_seed_counter.fetch_add(1, std::memory_order_relaxed) << 32);
    t.random_state = SplitMix64(seed);
    t.started = true;
    t.bytes_until_sample = DrawCountdown(t, interval) - static_cast<int64_t>(size);
    if (t.bytes_until_sample > 0) return;
  }
  t.bytes_until_sample = DrawCountdown(t, interval);
  if (pointer == nullptr || size == 0) return;
  // The unbiased estimate: this allocation held at least one sampled byte with probability
  // 1 - exp(-size/R).
  const double probability = OneMinusExpNegative(static_cast<double>(size) / interval);
  const double estimate = static_cast<double>(size) / probability;
  const int64_t bytes = estimate >= 9.0e18 ? INT64_MAX : static_cast<int64_t>(estimate + 0.5);
  t.in_hook = true;
  const uint64_t address = reinterpret_cast<uintptr_t>(pointer);
  LiveAllocationSet* set = LiveSet();
  if (set != nullptr) set->Prefetch(address);  // Its lines come in during the stack walk.
  if (RecordNativeAllocation(bytes, address, STRATA_ALLOCATION_STACK_ANCHOR())) {
    if (set != nullptr && !set->Insert(address, bytes)) {
      NoteNativeAllocationSetFull(set->capacity());
    }
  }
  t.in_hook = false;
}

// After every allocation: the countdown, and the sampled path when it runs out.
__attribute__((always_inline)) inline void AfterAllocation(void* pointer, size_t size) {
  const uint64_t interval = g_native_allocation_interval.load(std::memory_order_relaxed);
  if (__builtin_expect(interval == 0, 1)) return;
  ThreadSampling& t = t_sampling;
  if (t.in_hook) return;
  t.bytes_until_sample -= static_cast<int64_t>(size);
  if (__builtin_expect(t.bytes_until_sample > 0, 1)) return;
  SampleAllocation(t, pointer, size, interval);
}

// Before an allocation of `size` bytes: counts it, and true when it is to be sampled (then
// call SampleAllocation() with its address, after the allocation). False (the common case)
// lets the hook tail-call the next allocator.
__attribute__((always_inline)) inline bool CountAllocation(size_t size, uint64_t* interval) {
  *interval = g_native_allocation_interval.load(std::memory_order_relaxed);
  if (__builtin_expect(*interval == 0, 1)) return false;
  ThreadSampling& t = t_sampling;
  if (t.in_hook) return false;
  t.bytes_until_sample -= static_cast<int64_t>(size);
  return __builtin_expect(t.bytes_until_sample <= 0, 0);
}

__attribute__((noinline)) void RecordFree(ThreadSampling& t, LiveAllocationSet* set,
                                          void* pointer) {
  int64_t estimate = 0;
  if (!set->Remove(reinterpret_cast<uintptr_t>(pointer), &estimate)) return;
  t.in_hook = true;
  (void)RecordNativeAllocation(-estimate, reinterpret_cast<uintptr_t>(pointer),
                               STRATA_ALLOCATION_STACK_ANCHOR());
  t.in_hook = false;
}

// False when `pointer` is certainly no live sampled allocation (the feature off, or the live
// set's filter says so): its free records nothing.
__attribute__((always_inline)) inline bool MayBeSampled(void* pointer) {
  if (__builtin_expect(g_native_allocation_interval.load(std::memory_order_relaxed) == 0, 1)) {
    return false;
  }
  if (pointer == nullptr) return false;
  if (g_live_set_state.load(std::memory_order_acquire) != 2) return false;
  return g_live_set.MightContain(reinterpret_cast<uintptr_t>(pointer));
}

// Before every free (the address may be reused as soon as the memory is freed).
__attribute__((always_inline)) inline void BeforeFree(void* pointer) {
  if (__builtin_expect(!MayBeSampled(pointer), 1)) return;
  ThreadSampling& t = t_sampling;
  if (t.in_hook) return;
  RecordFree(t, &g_live_set, pointer);
}

}  // namespace
}  // namespace base_internal
}  // namespace strata

using strata::base_internal::AfterAllocation;
using strata::base_internal::CountAllocation;
using strata::base_internal::g_resolve_state;
using strata::base_internal::MayBeSampled;
using strata::base_internal::g_new_is_malloc;
using strata::base_internal::SampleAllocation;
using strata::base_internal::ArenaAllocate;
using strata::base_internal::BeforeFree;
using strata::base_internal::EnsureResolved;
using strata::base_internal::g_native_allocation_interval;
using strata::base_internal::g_next;
using strata::base_internal::InArena;
using strata::base_internal::t_sampling;
using strata::base_internal::ThreadSampling;

// --- The C allocation functions.

namespace {

// The hooks' paths other than the common one, out of line: the common one (resolved, not
// sampled) then needs no saved registers and ends in a tail call to the next allocator.
__attribute__((noinline)) void* MallocSampled(size_t size, uint64_t interval) {
  void* pointer = g_next.malloc(size);
  SampleAllocation(t_sampling, pointer, size, interval);
  return pointer;
}
__attribute__((noinline)) void* MallocUnresolved(size_t size) {
  if (!EnsureResolved()) return ArenaAllocate(size);
  return malloc(size);
}
__attribute__((noinline)) void FreeChecked(void* pointer) {
  BeforeFree(pointer);
  g_next.free(pointer);
}
__attribute__((noinline)) void FreeUnresolved(void* pointer) {
  if (InArena(pointer)) return;  // Never given back.
  if (!EnsureResolved()) return;
  FreeChecked(pointer);
}

}  // namespace

STRATA_HOOK void* malloc(size_t size) {
  if (__builtin_expect(g_resolve_state.load(std::memory_order_acquire) != 2, 0)) {
    return MallocUnresolved(size);
  }
  uint64_t interval;
  if (__builtin_expect(!CountAllocation(size, &interval), 1)) return g_next.malloc(size);
  return MallocSampled(size, interval);
}

STRATA_HOOK void* calloc(size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    if (!EnsureResolved()) return nullptr;
    return g_next.calloc(count, size);  // Its own overflow error.
  }
  if (__builtin_expect(!EnsureResolved(), 0)) return ArenaAllocate(bytes);
  void* pointer = g_next.calloc(count, size);
  AfterAllocation(pointer, bytes);
  return pointer;
}

STRATA_HOOK void free(void* pointer) {
  if (__builtin_expect(InArena(pointer) || g_resolve_state.load(std::memory_order_acquire) != 2, 0)) {
    FreeUnresolved(pointer);
    return;
  }
  if (__builtin_expect(MayBeSampled(pointer), 0)) {
    FreeChecked(pointer);
    return;
  }
  g_next.free(pointer);
}

STRATA_HOOK void* realloc(void* pointer, size_t size) {
  if (__builtin_expect(InArena(pointer), 0)) {
    void* moved = malloc(size);
    if (moved != nullptr) {
      const size_t left = static_cast<size_t>(strata::base_internal::g_arena +
                                              sizeof(strata::base_internal::g_arena) -
                                              static_cast<char*>(pointer));
      memcpy(moved, pointer, size < left ? size : left);
    }
    return moved;
  }
  if (__builtin_expect(!EnsureResolved(), 0)) return pointer == nullptr ? ArenaAllocate(size) : nullptr;
  // A realloc is the free of the old block and the allocation of the new one (as Firefox's
  // hooks count it). The old block's free is recorded first: its address may come back.
  BeforeFree(pointer);
  void* moved = g_next.realloc(pointer, size);
  if (moved != nullptr && size != 0) AfterAllocation(moved, size);
  return moved;
}

STRATA_HOOK void* reallocarray(void* pointer, size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(pointer, bytes);
}

STRATA_HOOK int posix_memalign(void** out, size_t alignment, size_t size) {
  if (__builtin_expect(!EnsureResolved(), 0)) {
    *out = ArenaAllocate(size, alignment);
    return *out ? 0 : ENOMEM;
  }
  const int error = g_next.posix_memalign(out, alignment, size);
  if (error == 0) AfterAllocation(*out, size);
  return error;
}

STRATA_HOOK void* aligned_alloc(size_t alignment, size_t size) {
  if (__builtin_expect(!EnsureResolved(), 0)) return ArenaAllocate(size, alignment);
  void* pointer = g_next.aligned_alloc(alignment, size);
  AfterAllocation(pointer, size);
  return pointer;
}

STRATA_HOOK void* memalign(size_t alignment, size_t size) {
  if (__builtin_expect(!EnsureResolved(), 0)) return ArenaAllocate(size, alignment);
  void* pointer = g_next.memalign(alignment, size);
  AfterAllocation(pointer, size);
  return pointer;
}

STRATA_HOOK void* valloc(size_t size) {
  if (__builtin_expect(!EnsureResolved(), 0)) return ArenaAllocate(size, 4096);
  void* pointer = g_next.valloc(size);
  AfterAllocation(pointer, size);
  return pointer;
}

STRATA_HOOK void* pvalloc(size_t size) {
  if (__builtin_expect(!EnsureResolved(), 0)) return ArenaAllocate(size, 4096);
  void* pointer = g_next.pvalloc(size);
  AfterAllocation(pointer, size);
  return pointer;
}

// --- Global operator new and delete. Each forwards to the next definition (libstdc++'s, a
// preloaded allocator's, or the program's when it replaces only some forms), and counts the
// allocation itself. Without a C++ runtime (a C program that does call them, through a
// library) they fall back to the C functions.

namespace {

template <typename F, typename... Args>
__attribute__((always_inline)) inline void* ForwardNew(F next, size_t size, Args... args) {
  if (__builtin_expect(!EnsureResolved(), 0)) return ArenaAllocate(size ? size : 1);
  if (__builtin_expect(next == nullptr, 0)) {
    void* pointer = g_next.malloc(size ? size : 1);
    if (pointer == nullptr) abort();  // No C++ runtime to throw std::bad_alloc with.
    AfterAllocation(pointer, size);
    return pointer;
  }
  if (__builtin_expect(g_native_allocation_interval.load(std::memory_order_relaxed) == 0, 1)) {
    return next(size, args...);
  }
  // Guarded: the malloc or aligned_alloc that the next operator new may call (libstdc++'s,
  // or jemalloc's aligned forms, through the loader: our hooks) is not counted again. When
  // it throws (std::bad_alloc), the guard stays set until this thread's next operator new
  // returns: the malloc family on this thread is not sampled meanwhile.
  ThreadSampling& t = t_sampling;
  const bool outer = !t.in_hook;
  t.in_hook = true;
  void* pointer = next(size, args...);
  if (outer) {
    t.in_hook = false;
    AfterAllocation(pointer, size);
  }
  return pointer;
}

// Plain, array and nothrow operator new when libstdc++'s come next (g_new_is_malloc): what
// they would do, malloc(size ? size : 1), here, counted once. When malloc fails, the next
// operator new runs (its new_handler loop, std::bad_alloc or nullptr), counted as above.
template <typename F, typename... Args>
__attribute__((noinline)) void* NewSlowPath(F next, size_t size, Args... args) {
  if (!EnsureResolved()) return ArenaAllocate(size ? size : 1);
  if (!g_new_is_malloc) return ForwardNew(next, size, args...);
  void* pointer = g_next.malloc(size ? size : 1);
  if (pointer == nullptr) return ForwardNew(next, size, args...);
  AfterAllocation(pointer, size);
  return pointer;
}
// malloc failed for an operator new already counted: the next operator new's own failure
// path (its new_handler loop, then std::bad_alloc or nullptr), its malloc calls not counted.
// When it throws, the guard stays set as in ForwardNew.
template <typename F, typename... Args>
__attribute__((noinline)) void* NewAfterFailedMalloc(F next, size_t size, Args... args) {
  ThreadSampling& t = t_sampling;
  const bool outer = !t.in_hook;
  t.in_hook = true;
  void* pointer = next(size, args...);
  if (outer) t.in_hook = false;
  return pointer;
}
template <typename F, typename... Args>
__attribute__((noinline)) void* NewSampled(F next, size_t size, uint64_t interval, Args... args) {
  void* pointer = g_next.malloc(size ? size : 1);
  if (pointer == nullptr) pointer = NewAfterFailedMalloc(next, size, args...);
  SampleAllocation(t_sampling, pointer, size, interval);
  return pointer;
}

template <typename F, typename... Args>
__attribute__((always_inline)) inline void* NewThroughMalloc(F next, size_t size, Args... args) {
  if (__builtin_expect(g_resolve_state.load(std::memory_order_acquire) != 2 || !g_new_is_malloc, 0)) {
    return NewSlowPath(next, size, args...);
  }
  uint64_t interval;
  if (__builtin_expect(CountAllocation(size, &interval), 0)) {
    return NewSampled(next, size, interval, args...);
  }
  void* pointer = g_next.malloc(size ? size : 1);
  if (__builtin_expect(pointer == nullptr, 0)) return NewAfterFailedMalloc(next, size, args...);
  return pointer;
}

template <typename F, typename... Args>
__attribute__((always_inline)) inline void ForwardDelete(F next, void* pointer, Args... args) {
  if (__builtin_expect(InArena(pointer), 0)) return;
  if (__builtin_expect(!EnsureResolved(), 0)) return;
  if (__builtin_expect(next == nullptr, 0)) {
    BeforeFree(pointer);
    g_next.free(pointer);
    return;
  }
  if (__builtin_expect(g_native_allocation_interval.load(std::memory_order_relaxed) == 0, 1)) {
    next(pointer, args...);
    return;
  }
  BeforeFree(pointer);
  // Guarded as above: the free inside is not checked again.
  ThreadSampling& t = t_sampling;
  const bool outer = !t.in_hook;
  t.in_hook = true;
  next(pointer, args...);
  if (outer) t.in_hook = false;
}

// The unaligned operator deletes when libstdc++'s come next (g_new_is_malloc): free, as
// theirs (through the global operator delete(void*): this library's).
template <typename F, typename... Args>
__attribute__((noinline)) void DeleteSlowPath(F next, void* pointer, Args... args) {
  ForwardDelete(next, pointer, args...);
}

template <typename F, typename... Args>
__attribute__((always_inline)) inline void DeleteThroughFree(F next, void* pointer, Args... args) {
  if (__builtin_expect(g_resolve_state.load(std::memory_order_acquire) != 2 || !g_new_is_malloc ||
                           InArena(pointer),
                       0)) {
    DeleteSlowPath(next, pointer, args...);
    return;
  }
  if (__builtin_expect(MayBeSampled(pointer), 0)) {
    FreeChecked(pointer);
    return;
  }
  g_next.free(pointer);
}

}  // namespace

#define STRATA_NEW_HOOK __attribute__((visibility("default")))

STRATA_NEW_HOOK void* operator new(size_t size) { return NewThroughMalloc(g_next.new_single, size); }
STRATA_NEW_HOOK void* operator new[](size_t size) { return NewThroughMalloc(g_next.new_array, size); }
STRATA_NEW_HOOK void* operator new(size_t size, const std::nothrow_t& tag) noexcept {
  return NewThroughMalloc(g_next.new_single_nothrow, size, tag);
}
STRATA_NEW_HOOK void* operator new[](size_t size, const std::nothrow_t& tag) noexcept {
  return NewThroughMalloc(g_next.new_array_nothrow, size, tag);
}
STRATA_NEW_HOOK void* operator new(size_t size, std::align_val_t alignment) {
  return ForwardNew(g_next.new_single_aligned, size, alignment);
}
STRATA_NEW_HOOK void* operator new[](size_t size, std::align_val_t alignment) {
  return ForwardNew(g_next.new_array_aligned, size, alignment);
}
STRATA_NEW_HOOK void* operator new(size_t size, std::align_val_t alignment,
                                   const std::nothrow_t& tag) noexcept {
  return ForwardNew(g_next.new_single_aligned_nothrow, size, alignment,
                           tag);
}
STRATA_NEW_HOOK void* operator new[](size_t size, std::align_val_t alignment,
                                     const std::nothrow_t& tag) noexcept {
  return ForwardNew(g_next.new_array_aligned_nothrow, size, alignment,
                           tag);
}

STRATA_NEW_HOOK void operator delete(void* pointer) noexcept {
  DeleteThroughFree(g_next.delete_single, pointer);
}
STRATA_NEW_HOOK void operator delete[](void* pointer) noexcept {
  DeleteThroughFree(g_next.delete_array, pointer);
}
STRATA_NEW_HOOK void operator delete(void* pointer, size_t size) noexcept {
  DeleteThroughFree(g_next.delete_single_sized, pointer, size);
}
STRATA_NEW_HOOK void operator delete[](void* pointer, size_t size) noexcept {
  DeleteThroughFree(g_next.delete_array_sized, pointer, size);
}
STRATA_NEW_HOOK void operator delete(void* pointer, const std::nothrow_t& tag) noexcept {
  DeleteThroughFree(g_next.delete_single_nothrow, pointer, tag);
}
STRATA_NEW_HOOK void operator delete[](void* pointer, const std::nothrow_t& tag) noexcept {
  DeleteThroughFree(g_next.delete_array_nothrow, pointer, tag);
}
STRATA_NEW_HOOK void operator delete(void* pointer, std::align_val_t alignment) noexcept {
  ForwardDelete(g_next.delete_single_aligned, pointer, alignment);
}
STRATA_NEW_HOOK void operator delete[](void* pointer, std::align_val_t alignment) noexcept {
  ForwardDelete(g_next.delete_array_aligned, pointer, alignment);
}
STRATA_NEW_HOOK void operator delete(void* pointer, size_t size,
                                     std::align_val_t alignment) noexcept {
  ForwardDelete(g_next.delete_single_sized_aligned, pointer, size, alignment);
}
STRATA_NEW_HOOK void operator delete[](void* pointer, size_t size,
                                       std::align_val_t alignment) noexcept {
  ForwardDelete(g_next.delete_array_sized_aligned, pointer, size, alignment);
}
STRATA_NEW_HOOK void operator delete(void* pointer, std::align_val_t alignment,
                                     const std::nothrow_t& tag) noexcept {
  ForwardDelete(g_next.delete_single_aligned_nothrow, pointer, alignment, tag);
}
STRATA_NEW_HOOK void operator delete[](void* pointer, std::align_val_t alignment,
                                       const std::nothrow_t& tag) noexcept {
  ForwardDelete(g_next.delete_array_aligned_nothrow, pointer, alignment, tag);
}
