// Allocation hooks of libstrata_full.so (memory_counter.h). Everything below the "hooks" line
// runs inside the program's allocation calls: no allocation, no lock, no logging.
#include "full/internal/memory_counter.h"

#include <dlfcn.h>
#include <malloc.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "base/counters.h"

namespace strata {
namespace full {
namespace {

struct NextAllocator {
  void* (*malloc)(size_t);
  void (*free)(void*);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  void* (*reallocarray)(void*, size_t, size_t);
  int (*posix_memalign)(void**, size_t, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void* (*memalign)(size_t, size_t);
  void* (*valloc)(size_t);
  void* (*pvalloc)(size_t);
  size_t (*usable_size)(void*);
};

std::atomic<bool> g_resolved{false};
std::atomic<bool> g_resolving{false};
NextAllocator g_next{};
std::atomic<ProfilerCounter*> g_counter{nullptr};
std::atomic<bool> g_counting{false};

// dlsym may allocate (its error state) while the next allocator is being looked up: those
// few early blocks come from this arena and are never freed.
alignas(64) char g_bootstrap_arena[16 * 1024];
std::atomic<size_t> g_bootstrap_used{0};

bool InBootstrapArena(const void* p) {
  return p >= g_bootstrap_arena && p < g_bootstrap_arena + sizeof(g_bootstrap_arena);
}

void* BootstrapAllocate(size_t bytes, size_t alignment = 16) {
  size_t used = g_bootstrap_used.load();
  for (;;) {
    const size_t start = (used + alignment - 1) & ~(alignment - 1);
    if (start + bytes > sizeof(g_bootstrap_arena)) return nullptr;
    if (g_bootstrap_used.compare_exchange_weak(used, start + bytes)) {
      return g_bootstrap_arena + start;  // Zero-initialised static storage.
    }
  }
}

template <typename F>
F Next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

// Looks up the next allocator once. Returns false while the lookup is in progress (the
// calls made by dlsym itself), so that they are served from the arena.
bool Resolve() {
  if (g_resolved.load(std::memory_order_acquire)) return true;
  if (g_resolving.exchange(true)) return g_resolved.load(std::memory_order_acquire);
  NextAllocator next;
  next.malloc = Next<decltype(next.malloc)>("malloc");
  next.free = Next<decltype(next.free)>("free");
  next.calloc = Next<decltype(next.calloc)>("calloc");
  next.realloc = Next<decltype(next.realloc)>("realloc");
  next.reallocarray = Next<decltype(next.reallocarray)>("reallocarray");
  next.posix_memalign = Next<decltype(next.posix_memalign)>("posix_memalign");
  next.aligned_alloc = Next<decltype(next.aligned_alloc)>("aligned_alloc");
  next.memalign = Next<decltype(next.memalign)>("memalign");
  next.valloc = Next<decltype(next.valloc)>("valloc");
  next.pvalloc = Next<decltype(next.pvalloc)>("pvalloc");
  next.usable_size = Next<decltype(next.usable_size)>("malloc_usable_size");
  g_next = next;
  g_resolved.store(true, std::memory_order_release);
  return true;
}

// Runs at load time, before the program's own threads can race on the lookup.
__attribute__((constructor)) void ResolveAtLoad() { Resolve(); }

inline void Count(void* p, int64_t sign) {
  if (!p || !g_counting.load(std::memory_order_relaxed)) return;
  ProfilerCounter* counter = g_counter.load(std::memory_order_relaxed);
  if (counter && g_next.usable_size) {
    counter->Add(sign * static_cast<int64_t>(g_next.usable_size(p)));
  }
}

std::atomic<bool> g_hooks_effective{false};

}  // namespace

bool MemoryHooksAreEffective() { return g_hooks_effective.load(std::memory_order_relaxed); }

void SampleMemoryFallback() {
  if (!g_counting.load(std::memory_order_relaxed) || MemoryHooksAreEffective()) return;
  ProfilerCounter* counter = g_counter.load(std::memory_order_relaxed);
  if (!counter) return;
  // A sanitizer's allocator (ASan, TSan, ...) replaces glibc's, whose statistics then stay
  // near zero: ask the sanitizer instead (its allocator interface, looked up once).
  using AllocatedBytes = size_t (*)();
  static const AllocatedBytes sanitizer_allocated_bytes = reinterpret_cast<AllocatedBytes>(
      dlsym(RTLD_DEFAULT, "__sanitizer_get_current_allocated_bytes"));
  int64_t in_use;
  if (sanitizer_allocated_bytes != nullptr) {
    in_use = static_cast<int64_t>(sanitizer_allocated_bytes());
  } else {
    const struct mallinfo2 info = mallinfo2();
    in_use = static_cast<int64_t>(info.uordblks + info.hblkhd);
  }
  if (in_use != counter->value()) counter->Set(in_use);
}

void EnableMemoryCounter(bool enabled) {
  if (enabled && !g_counter.load()) {
    // Allocates: here, outside any hook.
    static ProfilerCounter* counter =
        new ProfilerCounter("malloc", "Memory", "Bytes allocated minus bytes freed");
    g_counter.store(counter);
  }
  Resolve();
  // Are our hooks what the program calls? Only if the global scope's malloc is defined in
  // this very library (our own references to `malloc` may resolve elsewhere when dlopen'ed).
  Dl_info global_malloc{}, self{};
  const bool effective =
      dladdr(dlsym(RTLD_DEFAULT, "malloc"), &global_malloc) != 0 &&
      dladdr(reinterpret_cast<void*>(&EnableMemoryCounter), &self) != 0 &&
      global_malloc.dli_fbase == self.dli_fbase;
  g_hooks_effective.store(effective, std::memory_order_relaxed);
  g_counting.store(enabled, std::memory_order_relaxed);
}

}  // namespace full
}  // namespace strata

// ------------------------------------------------------------------------------------------
// Hooks. They interpose on the allocator's symbols and forward to the next definition.
using strata::full::BootstrapAllocate;
using strata::full::Count;
using strata::full::g_next;
using strata::full::InBootstrapArena;
using strata::full::Resolve;

extern "C" {

void* malloc(size_t bytes) {
  if (!Resolve() || !g_next.malloc) return BootstrapAllocate(bytes);
  void* p = g_next.malloc(bytes);
  Count(p, +1);
  return p;
}

void free(void* p) {
  if (!p || InBootstrapArena(p)) return;
  if (!Resolve() || !g_next.free) return;  // Cannot happen after load; leak rather than crash.
  Count(p, -1);
  g_next.free(p);
}

void* calloc(size_t count, size_t size) {
  if (!Resolve() || !g_next.calloc) {
    if (size != 0 && count > SIZE_MAX / size) return nullptr;
    return BootstrapAllocate(count * size);
  }
  void* p = g_next.calloc(count, size);
  Count(p, +1);
  return p;
}

void* realloc(void* old, size_t bytes) {
  if (old && InBootstrapArena(old)) {
    // Moving a bootstrap block out: copy what fits (the arena is tiny and zeroed past use).
    void* p = malloc(bytes);
    if (p) {
      const size_t available =
          static_cast<size_t>(strata::full::g_bootstrap_arena + sizeof(strata::full::g_bootstrap_arena) -
                              static_cast<char*>(old));
      __builtin_memcpy(p, old, bytes < available ? bytes : available);
    }
    return p;
  }
  if (!Resolve() || !g_next.realloc) return BootstrapAllocate(bytes);
  Count(old, -1);
  void* p = g_next.realloc(old, bytes);
  if (p) {
    Count(p, +1);
  } else if (old && bytes != 0) {
    Count(old, +1);  // Failed: the old block is still there.
  }
  return p;
}

void* reallocarray(void* old, size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(old, count * size);
}

int posix_memalign(void** out, size_t alignment, size_t bytes) {
  if (!Resolve() || !g_next.posix_memalign) {
    void* p = BootstrapAllocate(bytes, alignment < 16 ? 16 : alignment);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
  }
  const int rc = g_next.posix_memalign(out, alignment, bytes);
  if (rc == 0) Count(*out, +1);
  return rc;
}

void* aligned_alloc(size_t alignment, size_t bytes) {
  if (!Resolve() || !g_next.aligned_alloc) return BootstrapAllocate(bytes, alignment < 16 ? 16 : alignment);
  void* p = g_next.aligned_alloc(alignment, bytes);
  Count(p, +1);
  return p;
}

void* memalign(size_t alignment, size_t bytes) {
  if (!Resolve() || !g_next.memalign) return BootstrapAllocate(bytes, alignment < 16 ? 16 : alignment);
  void* p = g_next.memalign(alignment, bytes);
  Count(p, +1);
  return p;
}

void* valloc(size_t bytes) {
  if (!Resolve() || !g_next.valloc) return BootstrapAllocate(bytes, 4096);
  void* p = g_next.valloc(bytes);
  Count(p, +1);
  return p;
}

void* pvalloc(size_t bytes) {
  if (!Resolve() || !g_next.pvalloc) return BootstrapAllocate(bytes, 4096);
  void* p = g_next.pvalloc(bytes);
  Count(p, +1);
  return p;
}

}  // extern "C"
