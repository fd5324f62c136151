// ThreadSanitizer start-up (docs/reliability.md, "Sanitizers"). libtsan initialises in its own
// constructor and, while it does, calls functions that libstrata_base.so interposes (sigaction
// for its deadly-signal handlers; dl_iterate_phdr, through its interceptor, for its module
// list). Instrumented code cannot run then: an instrumented function's entry
// (__tsan_func_entry) faults before the runtime's thread state exists. Such an interposer is
// uninstrumented at its entry (no_sanitize_thread; no std::atomic member call and no guarded
// static there, both instrumented) and, while StrataBeforeTsanStart(), goes straight to libc's
// own definition. libtsan is a dependency of every TSan-built object, so its constructor runs
// before ours: the flag is set by libstrata's first constructor (next_definition.cc). No
// session exists before it, so such calls would have been forwarded unchanged anyway.
//
// Other builds: StrataBeforeTsanStart() is the constant false; nothing is compiled.
// Thread safety: the flag is written once, before the program's main; read with atomics.
// Async-signal-safe.
#ifndef STRATA_PLATFORM_TSAN_STARTUP_H_
#define STRATA_PLATFORM_TSAN_STARTUP_H_

#if defined(__SANITIZE_THREAD__)
#define STRATA_TSAN_BUILD 1
namespace strata {
extern bool g_tsan_started;  // Only through __atomic builtins (uninstrumented in callers).
}  // namespace strata
#define StrataBeforeTsanStart() (!__atomic_load_n(&::strata::g_tsan_started, __ATOMIC_ACQUIRE))
#else
#define STRATA_TSAN_BUILD 0
#define StrataBeforeTsanStart() false
#endif

#endif  // STRATA_PLATFORM_TSAN_STARTUP_H_
