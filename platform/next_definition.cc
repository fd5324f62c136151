#include "platform/next_definition.h"

#include <dlfcn.h>

namespace strata {

void* NextDefinition(const char* name, const char* version) {
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
