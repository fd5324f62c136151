// Start-up and exit of libstrata_base.so, and the libc functions it wraps.
//
// At load (ELF constructor), the library reads the STRATA_* environment, registers the main
// thread and, with STRATA_STARTUP=1, starts a session; at exit (an atexit handler registered
// then, so it runs after the program's own exit handlers and static destructors registered
// later), it saves the profile to STRATA_SHUTDOWN and stops. With STRATA_SIGNAL, the control
// signal toggles the session (control_signal.h).
//
// pthread_create is wrapped so that new threads register themselves (feature 'threads'):
// the thread starts in a trampoline that registers it and runs the program's start routine;
// it is unregistered when it ends (a thread-specific-data destructor, which also covers
// pthread_exit and cancellation). pthread_setname_np is wrapped to re-apply the thread
// filters to the new name (whichever thread renames it). dlclose is wrapped to flush
// libunwind's caches once an object is gone. dl_iterate_phdr is wrapped to mark the thread
// as holding the loader's list lock (the sampler then avoids libunwind, libunwind_walker.h). The wrappers call the real functions found with
// dlsym(RTLD_NEXT), so they work whether the library is preloaded or linked.
#include <alloca.h>
#include <dlfcn.h>
#include <linux/futex.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>

#include <cstdlib>
#include <new>
#include <string>

#include "base/internal/allocations/native_allocations.h"
#include "base/internal/process/exec_notes.h"
#include "base/internal/process/exit_save_signals.h"
#include "base/internal/session/capture.h"
#include "base/internal/signals/control_signal.h"
#include "base/internal/session/core.h"
#include "base/internal/settings/env_settings.h"
#include "base/internal/flight/flight_recorder.h"
#include "base/internal/session/library_history.h"
#include "base/internal/settings/log.h"
#include "base/internal/session/shutdown_path.h"
#include "base/internal/registry/thread_registry.h"
#include "base/internal/process/thread_restrictions.h"
#include "base/internal/wait/wait_wrappers.h"
#include "base/profiler.h"
#include "platform/next_definition.h"
#include "platform/page_allocation.h"
#include "platform/raw_syscall.h"
#include "platform/sampling/held_sampling_signals.h"
#include "platform/sampling/libunwind_walker.h"
#include "platform/sampling/sampling_signal.h"
#include "platform/sampling/stack_bounds.h"
#include "platform/time_stamp.h"
#include "platform/tsan_startup.h"

namespace strata {
namespace base_internal {
namespace {

std::atomic<bool> g_auto_register_threads{false};

// Under ThreadSanitizer a trampoline of ours (instrumented) may only run once TSan has set the
// new thread up. That is the case when our pthread_create comes first in the global lookup
// order (libstrata_base.so preloaded before libtsan): the real function we call is TSan's
// interceptor, whose own start routine then calls our trampoline. When TSan's interceptor
// comes first (a program linked with both), it calls ours with its own start routine, which
// our trampoline would run before it: then threads are created untouched and register
// explicitly (ProfilerRegisterThread) or not at all. Only TSan builds are concerned
// (docs/reliability.md, "Sanitizers"); the answer is computed at the first thread creation.
#if defined(__SANITIZE_THREAD__)
bool CanWrapThreadStart() {
  static const bool ours_come_first = [] {
    void* first = dlsym(RTLD_DEFAULT, "pthread_create");
    Dl_info first_info{}, own_info{};
    return first != nullptr && dladdr(first, &first_info) != 0 &&
           dladdr(reinterpret_cast<void*>(&CanWrapThreadStart), &own_info) != 0 &&
           first_info.dli_fbase == own_info.dli_fbase;
  }();
  return ours_come_first;
}
#else
constexpr bool CanWrapThreadStart() { return true; }
#endif

// What pthread_create's wrapper hands its new thread. Made on the program's creating thread
// and freed on the new one: Strata's own pages (page_allocation.h), never the program's
// allocator, which that thread may be holding the lock of (docs/host-contract.md).
struct ThreadStart {
  static void* operator new(size_t bytes, const std::nothrow_t&) noexcept {
    return strata::AllocateSizedPages(bytes);
  }
  static void operator delete(void* memory) noexcept { strata::FreeSizedPages(memory); }

  void* (*routine)(void*);
  void* argument;
  InheritedRestrictions restrictions;  // The creator's, as the kernel passes them on.
  // The creator's view of the sampling signal in its mask (held_sampling_signals.h): the
  // kernel passes the mask on, so the program's view is passed on too.
  bool blocks_sampling_signal;
  // The sampling signal when the creator blocked it for real around pthread_create only (the
  // new thread unblocks it once its view is set: StartThreadSamplingSignalView), else 0.
  int blocked_for_start;
  // The stack the program gave in its attributes (pthread_attr_setstack), else empty: it may
  // lie inside a larger mapping (the heap), which is all /proc/self/maps shows.
  strata::StackBounds given_stack;
};

// Frees the thread's slot among the threads that take a process-directed sampling signal
// (held_sampling_signals.h) when its routine returns, calls pthread_exit or is cancelled.
struct SamplingSignalThreadRelease {
  ~SamplingSignalThreadRelease() { ForgetSamplingSignalThread(); }
};

void* ThreadTrampoline(void* raw) {
  const ThreadStart start = *static_cast<ThreadStart*>(raw);
  // First: until then the sampling signal is blocked for real on this thread (see
  // pthread_create below), and its view is not known.
  StartThreadSamplingSignalView(start.blocks_sampling_signal, start.blocked_for_start);
  const SamplingSignalThreadRelease release;
  delete static_cast<ThreadStart*>(raw);
  ApplyInheritedRestrictions(start.restrictions);  // Before anything reads a clock.
  RegisterNewThread(start.given_stack);  // Unregistered by the thread-exit key's destructor.
  return start.routine(start.argument);
}

// The exit save and threads that call exit() meanwhile (issue 33). glibc 2.36 lets several
// threads run exit() at once: the second one skips the handler the first is running (ours,
// saving the profile) and ends the process under it, losing the profile. So a thread that
// calls exit() while another thread's exit is under way waits (exit() wrapper below) until
// the save is done: while the other thread still runs the program's exit handlers, at most
// kExitStartWaitNs (it may be waiting for this thread); during the save itself at most
// kExitSaveWaitNs. A futex, no lock, no allocation.
std::atomic<bool> g_exit_save_failed{false};  // ProfilerShutdown's save failed.
// Initialize(): STRATA_STARTUP=1 or STRATA_SIGNAL was set (a session may run without an API
// call; a STRATA_SIGNAL refused as invalid has said so). With neither, STRATA_SHUTDOWN alone
// saves nothing unless the program starts a session, and OnExit says so.
std::atomic<bool> g_session_from_environment{false};
std::atomic<int32_t> g_exiting_tid{0};   // The first thread in exit() (our wrapper), or 0.
std::atomic<int32_t> g_exit_saving{0};   // 1 while OnExit runs.
std::atomic<uint32_t> g_exit_save_done{0};  // Futex word: 1 once OnExit returned.
constexpr int64_t kExitStartWaitNs = 2'000'000'000;
constexpr int64_t kExitSaveWaitNs = 120'000'000'000;

int32_t RawGetTid() { return static_cast<int32_t>(RawSyscall(SYS_gettid)); }

// libc's exit, _exit, _Exit and exec functions, resolved by the library's constructor
// (ResolveProcessEndFunctions), so that the wrappers, which may run in a signal handler or a
// vfork()ed child, call no dlsym and take no lock (a function-local static's guard would).
enum ProcessEndFunction { kExit, k_Exit, k_ExitC99, kExecve, kExecv, kExecvp, kExecvpe,
                          kFexecve, kProcessEndFunctionCount };
constexpr char kProcessEndFunctionNames[kProcessEndFunctionCount][8] = {  // No relocations.
    "exit", "_exit", "_Exit", "execve", "execv", "execvp", "execvpe", "fexecve"};
std::atomic<void*> g_process_end_functions[kProcessEndFunctionCount];

void ResolveProcessEndFunctions() {
  for (int i = 0; i < kProcessEndFunctionCount; ++i) {
    g_process_end_functions[i].store(NextDefinition(kProcessEndFunctionNames[i]),
                                     std::memory_order_release);
  }
}

template <typename Function>
Function RealProcessEndFunction(ProcessEndFunction which) {
  void* function = g_process_end_functions[which].load(std::memory_order_acquire);
  if (!function) {  // Called before the constructor ran (another library's constructor).
    function = NextDefinition(kProcessEndFunctionNames[which]);
    g_process_end_functions[which].store(function, std::memory_order_release);
  }
  return reinterpret_cast<Function>(function);
}

int64_t MonotonicNs() {
  timespec ts{};
  ReadClock(CLOCK_MONOTONIC, &ts);  // Honours a thread's PR_SET_TSC (time_stamp.h).
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

void WaitForAnotherThreadsExitSave() {
  // Under seccomp even gettid could kill the program (thread_restrictions.h).
  if (CurrentThreadMustNotCallStrata()) return;
  const int32_t self = RawGetTid();
  int32_t expected = 0;
  if (g_exiting_tid.compare_exchange_strong(expected, self) || expected == self) return;
  if (IsOtherProcess()) return;  // A child's exit: the parent's save is not its business.
  const int64_t start = MonotonicNs();
  while (g_exit_save_done.load(std::memory_order_acquire) == 0) {
    const int64_t waited = MonotonicNs() - start;
    const int64_t bound = g_exit_saving.load(std::memory_order_acquire) ? kExitSaveWaitNs
                                                                        : kExitStartWaitNs;
    if (waited >= bound) return;
    timespec step{0, 50'000'000};
    RawSyscall(SYS_futex, reinterpret_cast<long>(&g_exit_save_done), FUTEX_WAIT_PRIVATE, 0,
               reinterpret_cast<long>(&step));
  }
}

// _exit or _Exit on a thread while another thread's exit save is under way (issue 33: a
// process ended by another thread during the save lost its profile): waits for the save, at
// most kExitSaveWaitNs, so that the profile is kept; the process then ends with this call's
// status. Not while the exiting thread still runs the program's exit handlers (_exit means
// at once), nor on the saving thread itself (a handler of its own calling _exit), nor in
// another process (a vfork()ed child). A futex, no lock, no allocation (async-signal-safe:
// _exit is called from signal handlers).
void WaitForAnExitSaveUnderWay() {
  if (g_exit_saving.load(std::memory_order_acquire) == 0 ||
      g_exit_save_done.load(std::memory_order_acquire) != 0) {
    return;
  }
  if (CurrentThreadMustNotCallStrata() || IsOtherProcess()) return;
  if (g_exiting_tid.load(std::memory_order_acquire) == RawGetTid()) return;
  const int64_t start = MonotonicNs();
  while (g_exit_save_done.load(std::memory_order_acquire) == 0) {
    const int64_t left = kExitSaveWaitNs - (MonotonicNs() - start);
    if (left <= 0) return;
    timespec step{0, 50'000'000};
    RawSyscall(SYS_futex, reinterpret_cast<long>(&g_exit_save_done), FUTEX_WAIT_PRIVATE, 0,
               reinterpret_cast<long>(&step));
  }
}

void OnExit() {
  // A child (of fork(), or made without atfork handlers: _Fork, clone, syscall(SYS_fork), or
  // sharing our memory: vfork, clone(CLONE_VM)) does not save its parent's session, nor stop
  // it (its sampler thread is the parent's), nor remove its files.
  // Under seccomp the save's system calls (getpid's first) could kill the program
  // (thread_restrictions.h).
  if (CurrentThreadMustNotCallStrata()) return;
  if (IsOtherProcess()) return;
  // main() returning reaches exit() inside libc, not through the wrapper: the saving thread is
  // the exiting one for the threads that call exit() from now on.
  int32_t no_thread = 0;
  g_exiting_tid.compare_exchange_strong(no_thread, RawGetTid());
  g_exit_saving.store(1, std::memory_order_release);
  if (!SessionEverStarted() && !g_session_from_environment.load(std::memory_order_relaxed)) {
    // STRATA_SHUTDOWN without STRATA_STARTUP, and no session ever ran (gperftools' CPUPROFILE
    // alone starts its profiler; ours does not): say why no file appears, once, at the moment
    // it does not. A program that ran sessions itself is not told.
    const std::string path = ShutdownPath();
    if (!path.empty()) {
      LogError("STRATA_SHUTDOWN=%s: no profile saved: profiling never ran in this process (set STRATA_STARTUP=1 "
               "to start it when the library loads, or STRATA_SIGNAL to start it with a signal; docs/env-vars.md)",
               path.c_str());
    }
  }
  // A terminating signal sent while the save runs would find the process gone without
  // Strata: noted, and the process ends with the program's own status (exit_save_signals.h).
  const bool saving = ProfilerIsActive() && !ShutdownPath().empty();
  if (saving) DeferTerminatingSignalsDuringExitSave();
  ProfilerShutdown();
  // The process ends without a crash: its flight recorder files go (saved, or nothing to
  // save), unless the exit save failed (a full disk...): the file is then all that is left
  // of the session, kept for `strata recover`.
  if (!g_exit_save_failed.load(std::memory_order_acquire)) {
    RemoveFlightRecorderFilesAtProcessEnd();
  } else {
    LogError("the profile was not saved: this process's flight recorder files (if any) are "
             "kept for strata recover");
  }
  if (saving) {
    RestoreTerminatingSignalsAfterExitSave();
    if (const int deferred = TerminatingSignalsDeferredDuringExitSave()) {
      LogInfo("%d terminating signal(s) arrived during the exit save: the process ends with "
              "its own exit status, as it would have without Strata", deferred);
    }
  }
  g_exit_save_done.store(1, std::memory_order_release);
  RawSyscall(SYS_futex, reinterpret_cast<long>(&g_exit_save_done), FUTEX_WAKE_PRIVATE, INT32_MAX);
}

// _exit, _Exit and the exec wrappers: the image ends without a crash, so this process's flight
// recorder files go (async-signal-safe: these may be called from a signal handler or a
// vfork()ed child, which IsOtherProcess() tells apart by its pid).
void OnImageEnd() {
  if (CurrentThreadMustNotCallStrata() || IsOtherProcess()) return;
  RemoveFlightRecorderFilesAtProcessEnd();
}

void Initialize() {
  const EnvironmentSettings env = ReadEnvironment(
      [](const char* name) { return getenv(name); },
      [](const std::string& message) { LogError("%s", message.c_str()); });
  SetLoggingEnabled(env.logging);
  if (env.help) {
    const std::string help = EnvironmentHelpText();
    (void)!write(STDOUT_FILENO, help.data(), help.size());
    _exit(0);
  }
  ProfilerInit();
  ResolveWaitFunctions();
  ResolveProcessEndFunctions();
  ResolveProgramStartFunctions();
  if (!env.record_notes_directory.empty()) {
    SetExecNotesDirectory(env.record_notes_directory.c_str());
  }
  // A process started by another profiled process with the same path saves to its own file.
  const std::string shutdown_path =
      ShutdownPathForThisProcess(env.shutdown_path, reinterpret_cast<const void*>(&Initialize));
  if (shutdown_path != env.shutdown_path) {
    LogInfo("STRATA_SHUTDOWN=%s is also the path of a profiled ancestor: saving to %s",
            env.shutdown_path.c_str(), shutdown_path.c_str());
  }
  SetShutdownPath(shutdown_path);
  SetNativeAllocationInterval(env.native_allocation_interval);
  g_auto_register_threads.store((env.settings.features & kFeatureThreads) != 0);
  if (!env.flight_recorder_directory.empty()) {
    ConfigureFlightRecorder(env.flight_recorder_directory.c_str());
  }
  atexit(&OnExit);
  // Before the session: the sampling signal is then never chosen equal to the control one.
  StartControlSignal(env.control_signal, env.settings, shutdown_path);
  // A STRATA_SIGNAL that was refused said so itself: no second message at exit.
  g_session_from_environment.store(env.startup || env.control_signal != 0 || getenv("STRATA_SIGNAL") != nullptr,
                                   std::memory_order_relaxed);
  if (env.startup) ProfilerStart(env.settings);
}

__attribute__((constructor)) void StrataBaseConstructor() { Initialize(); }

}  // namespace
}  // namespace base_internal

void ProfilerShutdown() {
  using namespace base_internal;
  if (IsOtherProcess()) return;
  const std::string path = ShutdownPath();
  if (!path.empty() && ProfilerIsActive()) {
    // The session ends here: the save's own work (and a multi-process capture's gathering)
    // is Strata's, not the program's, and is not sampled into the profile it writes.
    ProfilerPause();
    const std::string expanded = ExpandShutdownPath(path, getpid());
    std::string error;
    if (SaveSessionProfile(expanded, &error)) {
      LogInfo("profile saved to %s", expanded.c_str());
      RemoveFlightRecorderFile();  // Saved: nothing to recover.
    } else {
      g_exit_save_failed.store(true, std::memory_order_release);
      LogError("could not save the profile to STRATA_SHUTDOWN=%s: %s", expanded.c_str(),
               error.c_str());
    }
  }
  ProfilerStop();
}

bool ProfilerSaveProfile(const std::string& path, std::string* error) {
  return base_internal::SaveSessionProfile(path, error);
}

std::string ProfilerGetProfile() {
  ChunkedJsonWriter writer;
  std::string error;
  if (!base_internal::WriteSessionProfile(writer, &error)) return std::string();
  return writer.TakeString();
}

}  // namespace strata

// The wrapped libc functions. Exported with C linkage and default visibility so that they
// interpose on libc's.
extern "C" {

int pthread_create(pthread_t* thread, const pthread_attr_t* attributes,
                   void* (*routine)(void*), void* argument) {
  using namespace strata::base_internal;
  const PthreadCreateFunction real = RealPthreadCreate();
  if (!g_auto_register_threads.load(std::memory_order_relaxed) || IsForkedChild() ||
      IsCreatingProfilerThread() || !CanWrapThreadStart() ||
      CurrentThreadMustNotCallStrata()) {  // The new thread inherits the seccomp filter.
    return real(thread, attributes, routine, argument);
  }
  ThreadStart* start = new (std::nothrow) ThreadStart{routine, argument, CurrentThreadRestrictions(),
                                                         strata::ProgramBlocksSamplingSignal(), 0, {}};
  if (!start) return real(thread, attributes, routine, argument);
  void* given_stack = nullptr;  // pthread_attr_getstack reads two fields: no lock, no allocation.
  size_t given_size = 0;
  if (attributes && pthread_attr_getstack(attributes, &given_stack, &given_size) == 0 &&
      given_stack != nullptr) {
    start->given_stack.low = reinterpret_cast<uintptr_t>(given_stack);
    start->given_stack.high = start->given_stack.low + given_size;
  }
  // The sampling signal S blocked for real on the creator while the thread is made: the new
  // thread inherits that mask, and glibc restores it before our trampoline runs. Unblocked
  // there, a foreign S could reach the new thread's handler before its view (which may say
  // "blocked") is set, and go to the program's SIG_DFL action: the sigwait pattern killed by
  // SIGRTMAX (issue 33). An S for the creator meanwhile stays pending until the unblock below.
  // Left as it was where S is blocked for real already (a Strata thread, a wait of ours).
  const int sampling = strata::InstalledSamplingSignal();
  const uint64_t one = sampling > 0 ? uint64_t{1} << (sampling - 1) : 0;
  uint64_t before = 0;
  const bool blocked_here =
      one != 0 &&
      strata::RawSyscall(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&one),
                         reinterpret_cast<long>(&before), static_cast<long>(sizeof(one))) == 0 &&
      (before & one) == 0;
  if (blocked_here) start->blocked_for_start = sampling;
  const int rc = real(thread, attributes, &ThreadTrampoline, start);  // `start` is the thread's.
  if (blocked_here) {
    strata::RawSyscall(SYS_rt_sigprocmask, SIG_UNBLOCK, reinterpret_cast<long>(&one), 0,
                       static_cast<long>(sizeof(one)));
  }
  if (rc != 0) delete start;
  return rc;
}

int pthread_setname_np(pthread_t thread, const char* name) {
  using Function = int (*)(pthread_t, const char*);
  static Function real = reinterpret_cast<Function>(strata::NextDefinition("pthread_setname_np"));
  if (!real) return ENOSYS;
  const int rc = real(thread, name);
  if (rc == 0) strata::base_internal::OnThreadRenamed(thread, name);
  return rc;
}

// After an object is unloaded, libunwind's caches may describe code that is gone (and the
// address range may be reused): flush them. The library history (library_history.h) notes
// the objects loaded before and those gone after, with the times.
int dlclose(void* handle) {
  using Function = int (*)(void*);
  static Function real = reinterpret_cast<Function>(strata::NextDefinition("dlclose"));
  if (!real) return -1;
  strata::base_internal::NoteLibrariesMayChange();  // What was loaded since the last look.
  const int rc = real(handle);
  // A fork()ed child walks no stack (and a parent's thread may have held libunwind's locks).
  if (rc == 0 && !strata::base_internal::IsForkedChild()) {
    strata::FlushLibunwindCaches();
    strata::base_internal::NoteLibrariesMayChange();  // What went.
  }
  return rc;
}

#if STRATA_TSAN_BUILD
// This library's own ELF header (the linker's hidden symbol for the object being linked).
extern "C" const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

namespace {

// True when `address` lies in an executable segment of libstrata_base.so itself.
__attribute__((no_sanitize("address", "undefined", "thread"))) bool InThisLibrarysCode(
    const void* address) {
  const uintptr_t bias = reinterpret_cast<uintptr_t>(&__ehdr_start);
  const auto* headers =
      reinterpret_cast<const ElfW(Phdr)*>(bias + __ehdr_start.e_phoff);
  const uintptr_t at = reinterpret_cast<uintptr_t>(address);
  for (int i = 0; i < __ehdr_start.e_phnum; ++i) {
    const ElfW(Phdr)& header = headers[i];
    if (header.p_type != PT_LOAD || (header.p_flags & PF_X) == 0) continue;
    if (at >= bias + header.p_vaddr && at < bias + header.p_vaddr + header.p_memsz) return true;
  }
  return false;
}

using DlIteratePhdrFunction = int (*)(int (*)(struct dl_phdr_info*, size_t, void*), void*);

// glibc's own dl_iterate_phdr, by libc's handle (already loaded: RTLD_NOLOAD loads nothing).
__attribute__((no_sanitize("address", "undefined", "thread"))) DlIteratePhdrFunction
LibcDlIteratePhdr() {
  static DlIteratePhdrFunction libc_function = nullptr;
  DlIteratePhdrFunction found = __atomic_load_n(&libc_function, __ATOMIC_ACQUIRE);
  if (found != nullptr) return found;
  void* const libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void* const symbol = libc != nullptr ? dlsym(libc, "dl_iterate_phdr") : nullptr;
  if (symbol == nullptr) return nullptr;
  found = reinterpret_cast<DlIteratePhdrFunction>(symbol);
  __atomic_store_n(&libc_function, found, __ATOMIC_RELEASE);
  return found;
}

}  // namespace
#endif

// libunwind's lookups during a sampling walk are served without the loader's lock, and a
// thread inside the real dl_iterate_phdr (which holds that lock while it runs the callback)
// is marked so that its samples walk frame pointers (libunwind_walker.h). Calls from objects
// loaded with dlmopen into another namespace see the base namespace through this wrapper.
// Not instrumented: sanitizer runtimes call dl_iterate_phdr while they initialise, before
// their shadow memory exists (a sanitizer build of this library crashed there).
__attribute__((no_sanitize("address", "undefined", "thread"))) int dl_iterate_phdr(
    int (*callback)(struct dl_phdr_info*, size_t, void*), void* data) {
  // libtsan's start-up (its dl_iterate_phdr interceptor calls this one): no walk yet, and the
  // instrumented calls below cannot run (platform/tsan_startup.h).
  const bool before_tsan_start = StrataBeforeTsanStart();
  int served_result = 0;
  if (!before_tsan_start &&
      strata::ServeDlIteratePhdrDuringWalk(callback, data, &served_result)) {
    return served_result;
  }
  using Function = int (*)(int (*)(struct dl_phdr_info*, size_t, void*), void*);
  // No guarded static and no std::atomic member call (both instrumented, and TSan crashes in
  // them before it is initialised): a plain pointer with atomic builtins.
  static Function real_function = nullptr;
  Function real = __atomic_load_n(&real_function, __ATOMIC_ACQUIRE);
  if (!real) {
    real = reinterpret_cast<Function>(strata::NextDefinition("dl_iterate_phdr"));
    __atomic_store_n(&real_function, real, __ATOMIC_RELEASE);
  }
  if (!real) return 0;
  if (before_tsan_start) return real(callback, data);
#if STRATA_TSAN_BUILD
  // Strata's own calls (the library list of the flight recorder and of the save, libunwind's
  // lookups, the loader counts) go to glibc's definition, as they do in a program linked with
  // TSan (where this library's next definition is libc's). In a preloaded program the next
  // one is TSan's interceptor, which strlen()s every object's name: the dynamic loader's is the
  // executable's PT_INTERP string, in its first page, and a program that made that page
  // unreadable (signals_memory_test's unreadable_elf, recorded) was killed there, in TSan's
  // internal_strlen on the sampler thread. Strata's callbacks read names with checked reads.
  if (InThisLibrarysCode(__builtin_return_address(0))) {
    const DlIteratePhdrFunction libc_function = LibcDlIteratePhdr();
    if (libc_function != nullptr) real = libc_function;
  }
#endif
  strata::ScopedDlIteratePhdrCall in_loader_list;
  return real(callback, data);
}

// exit(): waits for another thread's exit save (WaitForAnotherThreadsExitSave), then libc's.
[[noreturn]] void exit(int status) noexcept {
  using namespace strata::base_internal;
  const auto real = RealProcessEndFunction<void (*)(int)>(kExit);
  WaitForAnotherThreadsExitSave();
  if (real) real(status);
  strata::RawSyscall(SYS_exit_group, status);
  __builtin_unreachable();
}

// _exit() and _Exit(): no exit handler runs; this process's flight recorder files go. Called
// while another thread's exit save is under way, they wait for it first (bounded).
[[noreturn]] void _exit(int status) {
  using namespace strata::base_internal;
  const auto real = RealProcessEndFunction<void (*)(int)>(k_Exit);
  WaitForAnExitSaveUnderWay();
  OnImageEnd();
  if (real) real(status);
  strata::RawSyscall(SYS_exit_group, status);
  __builtin_unreachable();
}

[[noreturn]] void _Exit(int status) noexcept {
  using namespace strata::base_internal;
  const auto real = RealProcessEndFunction<void (*)(int)>(k_ExitC99);
  WaitForAnExitSaveUnderWay();
  OnImageEnd();
  if (real) real(status);
  strata::RawSyscall(SYS_exit_group, status);
  __builtin_unreachable();
}

// The exec family: the image is replaced, its flight recorder files go first (a failed exec
// leaves the session running without a file to recover from). glibc's own exec functions call
// its internal execve, so each is wrapped.
// Under `strata record` each notes the program it starts (exec_notes.h).
#define STRATA_EXEC_WRAPPER(name, which, signature, arguments, noted_path, noted_environment) \
  int name signature {                                                                 \
    using namespace strata::base_internal;                                             \
    const auto real = RealProcessEndFunction<int(*) signature>(which);                 \
    NoteProgramStart(static_cast<pid_t>(strata::RawSyscall(SYS_getpid)), noted_path,   \
                     noted_environment);                                               \
    OnImageEnd();                                                                      \
    if (!real) {                                                                       \
      errno = ENOSYS;                                                                  \
      return -1;                                                                       \
    }                                                                                  \
    return real arguments;                                                             \
  }
STRATA_EXEC_WRAPPER(execve, kExecve, (const char* path, char* const argv[], char* const envp[]),
                    (path, argv, envp), path, envp)
STRATA_EXEC_WRAPPER(execv, kExecv, (const char* path, char* const argv[]), (path, argv), path,
                    nullptr)
STRATA_EXEC_WRAPPER(execvp, kExecvp, (const char* file, char* const argv[]), (file, argv), file,
                    nullptr)
STRATA_EXEC_WRAPPER(execvpe, kExecvpe, (const char* file, char* const argv[], char* const envp[]),
                    (file, argv, envp), file, envp)
STRATA_EXEC_WRAPPER(fexecve, kFexecve, (int fd, char* const argv[], char* const envp[]),
                    (fd, argv, envp), nullptr, envp)
#undef STRATA_EXEC_WRAPPER

// execl, execlp, execle: their arguments gathered on the stack (alloca, as glibc does: no
// allocation), then the vector forms above.
#define STRATA_GATHER_EXECL_ARGUMENTS(first)                       \
  size_t argc = 1;                                                 \
  {                                                                \
    va_list count;                                                 \
    va_start(count, first);                                        \
    for (const char* a = first; a != nullptr; ++argc) a = va_arg(count, const char*); \
    va_end(count);                                                 \
  }                                                                \
  char** argv = static_cast<char**>(alloca(argc * sizeof(char*))); \
  va_list list;                                                    \
  va_start(list, first);                                           \
  argv[0] = const_cast<char*>(first);                              \
  for (size_t i = 1; i < argc; ++i) argv[i] = va_arg(list, char*);

int execl(const char* path, const char* arg, ...) {
  STRATA_GATHER_EXECL_ARGUMENTS(arg)
  va_end(list);
  return execv(path, argv);
}

int execlp(const char* file, const char* arg, ...) {
  STRATA_GATHER_EXECL_ARGUMENTS(arg)
  va_end(list);
  return execvp(file, argv);
}

int execle(const char* path, const char* arg, ...) {
  STRATA_GATHER_EXECL_ARGUMENTS(arg)
  char* const* envp = va_arg(list, char* const*);
  va_end(list);
  return execve(path, argv, envp);
}
#undef STRATA_GATHER_EXECL_ARGUMENTS

}  // extern "C"
