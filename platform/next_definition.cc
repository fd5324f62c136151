#include "platform/next_definition.h"

#include <dlfcn.h>

#include "platform/tsan_startup.h"

namespace strata {

#if STRATA_TSAN_BUILD
bool g_tsan_started = false;

namespace {
// Priority 101, the first allowed to programs: before this library's other constructors.
__attribute__((constructor(101))) void NoteTsanStarted() {
  __atomic_store_n(&g_tsan_started, true, __ATOMIC_RELEASE);
}
}  // namespace
#endif

// Uninstrumented: the interposers call it before ThreadSanitizer has started (tsan_startup.h);
// it makes only loader calls.
__attribute__((no_sanitize("thread"))) void* NextDefinition(const char* name, const char* version) {
  void* found = version ? dlvsym(RTLD_NEXT, name, version) : nullptr;
  if (!found) found = dlsym(RTLD_NEXT, name);
  if (found) return found;
  // libc precedes this library in the search order: its definition by its handle (already
  // loaded: RTLD_NOLOAD loads nothing). The handle is kept, not dlclose()d: libc is never
  // unloaded, and dlclose is one of the functions base wraps.
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (!libc) return nullptr;
  found = version ? dlvsym(libc, name, version) : nullptr;
  if (!found) found = dlsym(libc, name);
  return found;
}

}  // namespace strata
