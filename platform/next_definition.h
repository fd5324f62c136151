// The definition of a libc function that Strata interposes (base's wrappers): the next one
// after the calling library in the loader's search order (dlsym(RTLD_NEXT)), or, when libc
// comes before it — libstrata_base.so loaded as another library's dependency (a program
// linked with libstrata_full.so only) — libc's own (dlsym on the already loaded libc.so.6).
// Never our own wrapper: `&::function` would bind to it inside libstrata_base.so.
//
// Thread safety: thread-safe (the loader's). Not async-signal-safe (dlsym): resolve at load,
// in the library's constructor, as every interposer here does.
#ifndef STRATA_PLATFORM_NEXT_DEFINITION_H_
#define STRATA_PLATFORM_NEXT_DEFINITION_H_

namespace strata {

// `version`: a symbol version to prefer (dlvsym) over an unversioned lookup that lands in the
// same object, or null; an unversioned definition in an object before it (an interposer such
// as ThreadSanitizer's runtime) is returned instead. Null when there is no definition.
void* NextDefinition(const char* name, const char* version = nullptr);

}  // namespace strata

#endif  // STRATA_PLATFORM_NEXT_DEFINITION_H_
