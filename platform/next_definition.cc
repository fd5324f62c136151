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

namespace {

// `name` looked up from `handle`. With a `version`, the versioned definition (dlvsym), unless
// the unversioned lookup lands in another object: an interposer between this library and
// libc (ThreadSanitizer's runtime, another preloaded library) defines the function without a
// version, and dlvsym skips such a definition for libc's. The call must go through it, as the
// program's own call does: TSan's pthread_cond_wait interceptor bypassed, TSan never saw the
// wait release the mutex and reported the next thread's lock as a "double lock" (sleeper_test).
// The versioned lookup is kept when both land in the same object (libc: an unversioned lookup
// may return its old compatibility version).
// Uninstrumented by ASan too: ASan's own start-up calls dl_iterate_phdr, which base
// interposes, before ASan's shadow memory exists (the locals' redzones faulted:
// control_signal_test under asan_ubsan, status 139 at start).
__attribute__((no_sanitize("thread"), no_sanitize("address"))) void* DefinitionFrom(
    void* handle, const char* name, const char* version) {
  void* const any = dlsym(handle, name);
  if (!version) return any;
  void* const versioned = dlvsym(handle, name, version);
  if (!versioned || !any || any == versioned) return versioned ? versioned : any;
  Dl_info any_object, versioned_object;
  if (dladdr(any, &any_object) && dladdr(versioned, &versioned_object) &&
      any_object.dli_fbase != versioned_object.dli_fbase) {
    return any;
  }
  return versioned;
}

}  // namespace

// Uninstrumented: the interposers call it before ThreadSanitizer has started (tsan_startup.h);
// it makes only loader calls.
__attribute__((no_sanitize("thread"), no_sanitize("address"))) void* NextDefinition(
    const char* name, const char* version) {
  void* found = DefinitionFrom(RTLD_NEXT, name, version);
  if (found) return found;
  // libc precedes this library in the search order: its definition by its handle (already
  // loaded: RTLD_NOLOAD loads nothing). The handle is kept, not dlclose()d: libc is never
  // unloaded, and dlclose is one of the functions base wraps.
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (!libc) return nullptr;
  return DefinitionFrom(libc, name, version);
}

}  // namespace strata
