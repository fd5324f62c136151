// libunwind, loaded privately: dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL) once, and a
// small read-only table of the functions the walkers use, resolved with dlsym().
//
// Why not link -lunwind: libunwind.so.8 also exports the C++ exception ABI
// (_Unwind_RaiseException, _Unwind_Resume, ...). A DT_NEEDED entry puts it in the process's
// global symbol scope, and when it comes before libgcc_s there, the program's libstdc++ binds
// its exception unwinding to libunwind instead of libgcc_s. Seen with LD_DEBUG=bindings: for a
// C program preloaded with a libstrata_base.so that needed libunwind, and in every test binary
// that linked the walker. A profiler must never change what the profiled program does, so
// libunwind is opened RTLD_LOCAL: only the handle sees its symbols, the global scope does not
// change. (Not RTLD_DEEPBIND: libunwind's own references -- malloc and the like -- must keep
// binding as the program's do.) Debian's libunwind.a is not PIC, so it cannot be linked into
// a shared library instead. If the program has libunwind.so.8 loaded already, dlopen() returns
// that same object; its scope is whatever the program chose, and its imports are redirected
// as well (libunwind_imports.h says what that changes for the program: nothing it can see).
//
// The names looked up are the real exported ones behind libunwind.h's macros (checked with
// nm -D on libunwind 1.6.2): _ULx86_64_init_local, _ULx86_64_init_local2, _ULx86_64_step,
// _ULx86_64_get_reg, _Ux86_64_getcontext, _Ux86_64_flush_cache, _ULx86_64_local_addr_space
// (a variable) and unw_backtrace (no prefix). libunwind.h is included for the types only; no
// libunwind symbol is referenced at link time.
//
// Right after dlopen(), before any libunwind function runs, libunwind's imports that could
// touch a descriptor (its memory-validation pipe, and files it opens) are redirected to
// Strata's own functions (libunwind_imports.h): libunwind never reads, writes, closes or
// keeps a descriptor the program may own. If that redirection fails, libunwind counts as
// unavailable.
//
// When libunwind cannot be loaded (libunwind8 not installed, a build without one of the
// names above, imports that could not be redirected, or a program that made the names or
// program headers of its loaded objects unreadable, which the dynamic loader would fault on): LoadLibunwind() returns nullptr, once and for all in this process, and logs
// nothing. The walkers in libunwind_walker.h then report the interrupted pc only, and
// CaptureCurrentStack() reports no frame; callers that want more fall back to frame pointers
// (frame_pointer_walker.h), e.g. when WarmUpLibunwind() returns false.
//
// Thread safety: thread-safe. LoadLibunwind() may be called from any number of threads; one
// of them loads, the others wait for it. The table it returns is never written again and
// never freed (libunwind is never unloaded), so it may be read from any thread.
// Async-signal safety: LoadLibunwind() is NOT async-signal-safe (dlopen; it may wait for
// another thread): call it at registration or ProfilerStart, never in a signal handler.
// LoadedLibunwind() and LibunwindAvailable() are async-signal-safe (one atomic load), and so
// is calling through the table, as far as the called libunwind function itself is (see
// libunwind_walker.h for the rules of each walk).
#ifndef STRATA_PLATFORM_SAMPLING_LIBUNWIND_LOADER_H_
#define STRATA_PLATFORM_SAMPLING_LIBUNWIND_LOADER_H_

#include <libunwind.h>

namespace strata {

// The libunwind functions the walkers use. decltype keeps the signatures those of the header.
struct LibunwindFunctions {
  decltype(&unw_init_local) init_local = nullptr;
  decltype(&unw_init_local2) init_local2 = nullptr;
  decltype(&unw_step) step = nullptr;
  decltype(&unw_get_reg) get_reg = nullptr;
  decltype(&unw_tdep_getcontext) getcontext = nullptr;  // unw_getcontext
  decltype(&unw_flush_cache) flush_cache = nullptr;
  decltype(&unw_backtrace) backtrace = nullptr;
  // The address of libunwind's unw_local_addr_space variable (read it when needed).
  unw_addr_space_t* local_addr_space = nullptr;
};

// The soname opened by LoadLibunwind(); the runtime package is libunwind8.
inline constexpr char kLibunwindSoname[] = "libunwind.so.8";

// Loads libunwind privately and resolves the table, on the first call in the process; later
// calls return the same result at the cost of a guard check. nullptr: libunwind is
// unavailable in this process (the attempt is not repeated). Not async-signal-safe.
const LibunwindFunctions* LoadLibunwind();

// Whether LoadLibunwind() did not load it because the program had made a loaded object's
// name or program headers unreadable (the dynamic loader would fault on them).
// Async-signal-safe (a relaxed load).
bool LibunwindRefusedForUnreadableObjects();

// The table if LoadLibunwind() has completed successfully, else nullptr. Never loads.
// Async-signal-safe.
const LibunwindFunctions* LoadedLibunwind();

// LoadedLibunwind() != nullptr. Async-signal-safe.
inline bool LibunwindAvailable() { return LoadedLibunwind() != nullptr; }

namespace libunwind_loader_internal {

// One attempt to open `soname` with RTLD_NOW | RTLD_LOCAL, redirect its imports
// (libunwind_imports.h) and resolve every entry of `*table`. On failure returns false, leaves `*table` untouched, closes what it opened and
// consumes the dlerror() message (so the program's next dlerror() does not see ours).
// LoadLibunwind() uses it with kLibunwindSoname; tests use it with a missing name.
// Not async-signal-safe.
bool OpenPrivately(const char* soname, LibunwindFunctions* table);

}  // namespace libunwind_loader_internal
}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_LIBUNWIND_LOADER_H_
