// The base tier's core state: the session (settings, start time, the one profile buffer),
// the thread registry, and the sampler (signal handler + sampler thread). Implemented in
// core.cc (session life), thread_registry.cc, thread_sampling.cc, sample_capture.cc (signal
// handler), sampler_thread.cc, counter_registry.cc and markers.cc; their shared state is
// session_state.h.
//
// Locks, always taken in this order: session mutex -> registry mutex -> buffer -> chunk
// manager. The signal handler takes none of them.
//
// Thread safety: every function is thread-safe. Async-signal safety: none, except what
// profiler.h says of ProfilerIsActive().
#ifndef STRATA_BASE_INTERNAL_CORE_H_
#define STRATA_BASE_INTERNAL_CORE_H_

#include <pthread.h>

#include <optional>
#include <string>
#include <vector>

#include "base/internal/thread_name.h"
#include "base/profiler.h"
#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/buffer/chunked_buffer.h"

namespace strata {
namespace base_internal {

// What capture needs to know about a thread that was registered during the session.
struct ThreadInfo {
  ThreadId tid;
  // The given name, or the kernel's last known name (below). Strata's own memory, never the
  // program's heap: entries are moved and destroyed on the program's threads (thread_name.h).
  ThreadName name;
  // Named by the program (ProfilerRegisterThread with a name): the name is kept as given.
  // Otherwise it follows the thread's kernel name (pthread_setname_np, read again at capture).
  bool name_given = false;
  TimeStamp register_time;
  std::optional<TimeStamp> unregister_time;
  bool is_main = false;
  bool profiled = false;  // Passed the filters: its samples are in the buffer.
  // Wrote samples or markers into the buffer during the session (set when its samples are
  // drained, and at its end when it has recorded markers).
  bool recorded = false;
  // Ended threads: the buffer's range end when the thread ended. Everything it wrote lies
  // before; once the buffer's range start has passed it, nothing of the thread is left and
  // its entry is reclaimed (thread_registry.h, PruneEndedThreadsLocked).
  BufferIndex buffer_end = 0;
};

// What sent the session's sampling signals (base/internal/sampling_source.h).
struct SamplingSourceReport {
  std::string description;           // "perf task-clock events", "CPU-clock timers: <why>"...
  double effective_interval_ms = 0;  // The interval a sample stands for on average.
  double requested_interval_ms = 0;
  uint64_t lost_events = 0;          // Perf events lost to the program closing their fd.
};

struct SessionSnapshot {
  bool active = false;
  ProfilerSettings settings;
  TimeStamp start_time;
  // Live threads with their current names, then the ended ones whose data may still be in
  // the buffer (the others are reclaimed first).
  std::vector<ThreadInfo> threads;
  uint64_t dropped_samples = 0;     // Samples lost to a full per-thread ring.
  // CPU of long sampling handlers (deep walks), kept out of the samples' CPU deltas
  // (RegisteredThread::handler_cpu_ns), summed over the session's threads.
  int64_t handler_cpu_excluded_ns = 0;
  int sampling_signal = 0;          // The session's sampling signal (0: none installed).
  uint64_t samples_skipped_low_stack = 0;  // sampling_signal.h, SamplesSkippedForLowStack.
  // The same by where the handler ran (indexed by LowStack: thread, main, alternate, unknown).
  uint64_t samples_skipped_low_stack_where[4] = {};
  // Unwind-table lookups refused because the program made them unreadable (walks ended
  // there; libunwind_imports.h, UnwindLookupsRefusedAsUnreadable).
  uint64_t unwind_lookups_unreadable = 0;
  std::string sampling_stopped;     // Why sampling stopped before the end, or empty.
  SamplingSourceReport sampling_source;  // What sent the signals (sampling_source.h).
};

// The profile buffer, for the whole life of the process (in session while a session runs).
ChunkedBuffer& SessionBuffer();

// Session state for capture. Takes the registry lock briefly. Also moves into the buffer
// what registered threads hold back — their staged markers (shared/buffer/staging_area.h) and the
// samples waiting in their rings — so that the buffer holds everything recorded so far.
SessionSnapshot TakeSessionSnapshot();

// Moves every registered thread's staged markers into the session buffer, for code that
// reads the buffer directly (tests, tools) and must see markers just recorded.
void FlushStagedMarkers();
// The same for the one registered thread `tid` (nothing when it is not registered). Takes
// the registry lock: not for the recording fast path.
void FlushStagedMarkersOfThread(ThreadId tid);

// The session lock: holding it keeps a session from starting or stopping (capture holds it).
class SessionLock {
 public:
  SessionLock();
  ~SessionLock();
  SessionLock(const SessionLock&) = delete;
  SessionLock& operator=(const SessionLock&) = delete;
};
// True when the calling thread holds the session lock (its own allocations then must not
// be recorded: native_allocations.h). Async-signal-safe.
bool SessionLockedOnCurrentThread();

// pthread_create as libc has it (not our interposer): what the interposer itself calls.
using PthreadCreateFunction = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
PthreadCreateFunction RealPthreadCreate();

// Creates a thread of the profiler itself (sampler, IPC workers): never registered, never
// sampled. Goes through the first pthread_create in symbol order that is not ours — a
// sanitizer's interceptor when the program has one (ThreadSanitizer must see every thread,
// or it crashes on the first access from it) — else libc's. Returns pthread_create's result.
int CreateProfilerThread(pthread_t* thread, void* (*routine)(void*), void* argument);

// Joins a thread CreateProfilerThread made, through the same layer: the first pthread_join in
// symbol order that is not ours, else ours (its wait wrapper, then libc's). Inside
// libstrata_base.so (-Bsymbolic-functions) a plain pthread_join binds to our wrapper, which
// goes to the next definition after us: where libtsan comes before libstrata, TSan would never
// see the join of a thread it saw start (a "thread leak" report).
int JoinProfilerThread(pthread_t thread);

// True on a thread inside CreateProfilerThread(): our pthread_create interposer, when a
// sanitizer's interceptor calls it, must not register the thread being created.
bool IsCreatingProfilerThread();

// After fork() in the child: the profiler stays off for good in this process (the child has
// no sampler thread, and locks may have been held by threads that do not exist there).
// Also true in a child made without glibc's atfork handlers (_Fork(), clone() without
// CLONE_VM, syscall(SYS_fork)), recognised by a wipe-on-fork page (no system call); the
// first check there turns the profiler off as fork()'s handler does. Thread-safe.
bool IsForkedChild();

// IsForkedChild(), or a process that shares this one's memory without being one of its
// threads (vfork, clone(CLONE_VM) without CLONE_THREAD): getpid() differs from the pid
// recorded at load. One system call. For the paths that act on the process (exit, shutdown,
// save, stop): they do nothing there, and never join or wait for a thread of another process.
bool IsOtherProcess();

// getpid() as a system call (a raw clone() leaves any cached pid stale).
int32_t RawGetPid();

// Whether ProfilerStart() ran in this process (a session from the environment, the control
// signal or the API). Thread-safe.
bool SessionEverStarted();

// The STRATA_SHUTDOWN path (unexpanded), set from the environment at load.
void SetShutdownPath(std::string path);
std::string ShutdownPath();

// The registered counters, indexed by the counter id in kCounterSample entries (null names
// for counters destroyed since).
struct CounterDescription {
  const char* name;
  const char* category;
  const char* description;
};
std::vector<CounterDescription> CounterDescriptions();

// Records a registered thread's new kernel name (pthread_setname_np) and re-applies the
// thread filters to it; a thread the program registered with a name of its own keeps that one.
void OnThreadRenamed(pthread_t thread, const char* name);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_CORE_H_
