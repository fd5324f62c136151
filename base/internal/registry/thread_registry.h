// The base tier's thread registry: every thread registered with the profiler (the main
// thread, threads made with pthread_create under feature 'threads', explicit
// ProfilerRegisterThread calls), its sampling state, ring, staged markers and label stack,
// and what capture needs to know of the threads registered during the session (ThreadInfo).
//
// Locks: the registry mutex (core.h gives the order: session -> registry -> buffer). The
// signal handler takes none: it reaches its own RegisteredThread through the sampling
// thread context (platform/sampling).
//
// Thread safety: as stated per function. Async-signal safety: none.
#ifndef STRATA_BASE_INTERNAL_THREAD_REGISTRY_H_
#define STRATA_BASE_INTERNAL_THREAD_REGISTRY_H_

#include <pthread.h>

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "base/internal/session/core.h"
#include "base/internal/sampling/sample_entries.h"
#include "base/internal/sampling/sample_ring.h"
#include "base/internal/sampling/sampling_source.h"
#include "base/internal/session/session_state.h"
#include "base/internal/wait/own_walk_cache.h"
#include "base/internal/wait/wait_state.h"
#include "base/labels.h"
#include "base/profiler.h"
#include "platform/cpu_time.h"
#include "platform/mutex.h"
#include "platform/page_allocation.h"
#include "platform/process_thread_ids.h"
#include "platform/sampling/libunwind_walker.h"
#include "platform/sampling/stack_bounds.h"
#include "platform/sampling/thread_sampling_timer.h"
#include "platform/time_stamp.h"
#include "shared/buffer/staging_area.h"

namespace strata {
namespace base_internal {

// Made by the thread's own registration, on a program's thread (a new thread, before the
// program's start routine runs): its memory is Strata's own pages (AllocateSizedPages), never
// the program's allocator (docs/host-contract.md). `new (std::nothrow)` gives null when the
// kernel refuses; `delete` unmaps.
struct RegisteredThread {
  static void* operator new(size_t bytes, const std::nothrow_t&) noexcept {
    static_assert(alignof(RegisteredThread) <= 16, "AllocateSizedPages aligns to 16 bytes");
    return AllocateSizedPages(bytes);
  }
  static void operator delete(void* memory) noexcept { FreeSizedPages(memory); }

  ThreadId tid;
  pthread_t pthread;
  ThreadCpuClock cpu_clock;
  StackBounds bounds;
  bool is_main = false;
  size_t info_index = 0;  // Into Registry::infos.

  ProfilingStack profiling_stack;
  SampleRing ring;
  ThreadSamplingTimer timer;
  // The thread's sampling source: a perf event, or `timer` (sampling_source.h).
  ThreadSamplingSource source;
  // Read by the thread's own signal handler: sample or not.
  std::atomic<bool> sampling{false};
  // True while the thread's signal handler is filling a slot (the walk may wait for the
  // loader's lock): the sampler then must not take the thread for idle.
  std::atomic<bool> capturing{false};
  std::atomic<uint64_t> dropped_samples{0};
  // libunwind's cursor and a context copy, used only by the thread's own signal handler (every
  // signal blocked there: never twice at once), so that they take no handler stack (~2 KiB;
  // docs/sampling.md, "Stack").
  LibunwindWalkScratch walk_scratch;
  // The handler's own cost (sample_capture.cc, docs/sampling.md "The handler's own cost"):
  // written only by the thread's own signal handler (every signal blocked there).
  // The thread's CPU clock when the previous handler ended (its entry when it was short), or
  // -1; the CPU clock at the current handler's entry and its wall time then.
  int64_t handler_exit_cpu_ns = -1;
  int64_t handler_entry_cpu_ns = -1;
  int64_t handler_entry_time_ns = 0;
  // The wall time at the end of the latest sample the handler took (0: none yet). Read by the
  // thread itself as it leaves a wrapped call (ScopedWait::End): a sample its handler took
  // inside the call bounds the call's wait.
  int64_t handler_exit_time_ns = 0;
  // The program's CPU since the latest recorded sample, less the intervals recorded: a
  // signal is skipped while it is under half an interval (a long walk ate the period).
  int64_t sample_credit_ns = 0;
  // The CPU the thread spent in long handlers (walks; profilingLog.longHandlerCpuMs). CPU
  // deltas still include it (they follow the thread's CPU clock). Written by the handler
  // (single writer), read by the sampler.
  std::atomic<int64_t> handler_cpu_ns{0};
  // A later tier's per-thread data (tier_extension.h), e.g. a script engine's context.
  std::atomic<void*> tier_data{nullptr};
  // The thread's marker staging (marker_staging.h), created by the thread at its first
  // marker; read by the sampler and capture under the registry mutex. Owned.
  std::atomic<StagingArea*> marker_staging{nullptr};

  // Liveness (issue 33): a robust mutex the thread locks when it registers and unlocks when
  // it unregisters. A thread that ends without unregistering -- a raw SYS_exit, which runs
  // no pthread cleanup and no thread-specific-data destructor -- still holds it, and the
  // kernel marks its futex word FUTEX_OWNER_DIED as the thread dies (robust futex list),
  // whatever its tid becomes later. Read by the sampler loop and the registration sweep
  // (ReclaimDeadThreadsLocked): a memory load per thread, no system call.
  pthread_mutex_t alive_mutex;
  bool alive_mutex_held = false;
  // Registered by another thread (RegisterOtherThread, attach): no alive mutex, no
  // thread-exit key; its death is found by the kernel's answer to a null signal (tgkill 0).
  bool adopted = false;

  // Sampler-thread state, under the registry mutex.
  // CPU accounting (docs/sampling.md, "CPU accounting"): the thread's CPU clock at its latest
  // sample or copy, less the CPU it used while the session was paused; every sample and copy
  // carries the CPU used since, so their sum is the thread's CPU over the unpaused session.
  // -1: unknown (the clock could not be read).
  int64_t last_sample_cpu_ns = -1;
  bool has_sample = false;
  // What the thread's latest sample in the buffer is (the stack a copy repeats): a CPU
  // sample, a wrapped wait's stack, an unknown wait's (EntryKind::kUnknownWait), or a
  // wrapped call's charged kernel CPU (wait/kernel_cpu_charge.h). After a wait or a charged
  // call, a blocked thread's copies are unknown waits, and CPU a copy carries goes to the
  // call's caller frames: never more time of that call (it was charged up to its end).
  enum class LastSample : uint8_t { kCpu, kWait, kUnknownWait, kChargedCall };
  LastSample last_sample = LastSample::kCpu;
  // The CPU clock at the previous sampler loop: a copy is written only when it has not moved.
  std::optional<TimeDuration> last_seen_cpu;
  // The CPU clock when ProfilerPause took effect, while paused (ProfilerResume takes out
  // what the thread used in between).
  std::optional<TimeDuration> paused_at_cpu;
  // Precise mode: a blocked thread's wall-clock timer is parked (disarmed), so that it is not
  // woken every interval (an interrupt, a wake-up, a walk: ~18 us of CPU each here); the
  // sampler records copies of its last sample instead (kSameSample, as for CPU-clock timers)
  // and re-arms the timer at the first loop after it has run. Sampler thread only.
  bool timer_parked = false;
  bool last_sample_in_system_call = false;  // Of the latest sample drained.
  // Of the latest signal sample drained: the wait (its odd sequence) whose wrapped call the
  // sample was taken inside (its walk passes through the wrapper's caller at the wait's
  // caller pc and sp), else 0; and its time. Sampler thread only (wait_sampling.cc:
  // SampleWaitLocked tells a thread still inside its wrapped call from one that left it).
  uint64_t signal_sample_wait_sequence = 0;
  int64_t signal_sample_ns = 0;
  // Wait stacks: the blocking call the thread is in, if any (wait_state.h).
  WaitState wait;
  // The thread's own recent walks at the end of wrapped calls (own_walk_cache.h): its own
  // wrappers only, with every signal blocked.
  OwnWalkCache own_walk_cache;
  // The latest sample written, whose first frames the next one may share (sample_entries.h).
  PreviousSampleStack previous_stack;

};

// The registry's lists grow on a new thread's registration, on the program's thread: their
// memory is Strata's own pages (page_allocation.h), never the program's allocator.
template <typename T>
using RegistryList = std::vector<T, PageAllocator<T>>;

struct Registry {
  Mutex mutex{"strata thread registry"};
  RegistryList<RegisteredThread*> live;
  RegistryList<ThreadInfo> infos;
  // The running session's sampling configuration (copied at start).
  bool sampling = false;
  ProfilerSettings settings;
  uint64_t dropped_samples = 0;  // From threads that ended.
  int64_t handler_cpu_excluded_ns = 0;  // From threads that ended (their handler_cpu_ns).
  // Why sampling stopped before the session's end (for the profile), or empty.
  std::string sampling_stopped;
  size_t ended_since_prune = 0;  // Threads that ended since the last PruneEndedThreadsLocked.
  // Registrations since the last ReclaimDeadThreadsLocked out of the sampler loop.
  size_t registered_since_sweep = 0;
  // Live threads right after that sweep: the next one comes after as many registrations (at
  // least kMinPruneBatch), not after as many as `live` holds then, which counts the dead
  // ones not swept yet and so grew as fast as the registrations (out of session, threads
  // that all ended by a raw SYS_exit were swept once, then never: 12 KiB each kept).
  size_t live_after_sweep = 0;
  uint64_t reclaimed_dead_threads = 0;  // Threads found dead (raw SYS_exit), for tests/logs.
};

// The registry (a leaked singleton: threads may still run, and unregister, during exit).
Registry& GetRegistry();

// The calling thread's registration, or null. Read it with CurrentRegisteredThread().
extern __thread RegisteredThread* t_registered_thread __attribute__((tls_model("initial-exec")));

// t_registered_thread, loaded with acquire: a thread adopted by attach (RegisterOtherThread)
// has it stored by another thread, which wrote the registration first (a plain load on
// x86-64; TSan reported the adopted thread's reads of its registration without it).
// Async-signal-safe.
inline RegisteredThread* CurrentRegisteredThread() {
  return __atomic_load_n(&t_registered_thread, __ATOMIC_ACQUIRE);
}

// The calling thread's name (pthread_getname_np), "" when unknown.
std::string CurrentThreadName();
// The same into `name` (the kernel's name: at most 15 characters), "" when unknown. No
// allocation (a new thread's registration).
void CurrentThreadNameInto(char (&name)[16]);
// Thread `tid`'s name from /proc/self/task/<tid>/comm, "" when unknown.
std::string ThreadNameFromProc(ThreadId tid);
// Whether a thread named `name` passes the session's thread filters.
// Case-insensitive; allocates nothing.
bool NameMatchesFilters(std::string_view name, bool is_main,
                        const std::vector<std::string>& filters);

// Registers the calling thread and starts sampling it when a session runs. On a thread
// registered before, it only names it: a non-null `name` replaces the name (and the filters
// are applied to it again); null leaves the registration as it is.
// `given_stack`: the stack the program gave pthread_create (pthread_attr_setstack), which may
// lie inside a larger mapping; empty otherwise.
RegisteredThread* RegisterCurrentThreadImpl(const char* name,
                                            const StackBounds& given_stack = StackBounds());
// A new thread's registration, by pthread_create's start trampoline (preload.cc) before the
// program's start routine: RegisterCurrentThreadImpl(nullptr, given_stack). Allocates nothing
// from the program (docs/host-contract.md, "A new thread's registration").
void RegisterNewThread(const StackBounds& given_stack);
// Attach (issue 36): registers thread `tid` of this process, which existed before the library
// was loaded and so never registered itself, from another thread (Strata's attach worker).
// `thread_pointer` is its %fs base (its pthread_t), read by the injector with ptrace. Its
// thread-local registration, sampling context and stack bounds are written in its static TLS
// (sampling_signal.h, SetSamplingStateOfOtherThread); its sampling starts when a session runs.
// Returns false, changing nothing, when `tid` is registered already, is the caller, or its
// thread pointer does not point at itself (header.self: not a glibc thread, or gone). An
// adopted thread that ends is reclaimed as a dead one (ReclaimDeadThreadsLocked). The thread
// must stay alive during the call (the caller gathered it just before; a thread that ends in
// that window may have its TLS memory reused or unmapped). Not async-signal-safe.
bool RegisterOtherThread(ThreadId tid, uintptr_t thread_pointer);
// Attach: reads the name of adopted thread `tid` again from /proc. A thread adopted in the
// moment between its creation and its own pthread_setname_np (strata offers threads it sees in
// /proc/PID/task: on a busy machine a new thread may wait tens of ms for its first run) was
// registered with its creator's name, and a thread that has ended by the save keeps the name
// it had when last read. Nothing when `tid` is not a live adopted thread or its name cannot be
// read (gone). Not async-signal-safe (opens a file).
void RefreshAdoptedThreadName(ThreadId tid);

// Unregisters and deletes `thread`, the calling thread's registration: what it recorded goes
// into the buffer first.
void UnregisterThread(RegisteredThread* thread);

// Reclaims the entries (Registry::infos) of ended threads that have nothing left in the
// buffer: all of them out of session; in session, those that recorded nothing and those whose
// data the buffer has since dropped (its range start has passed their ThreadInfo::
// buffer_end). Live threads' info_index are updated. Registry mutex held; O(infos).
//
// Memory bound: an ended thread's entry outlives it only while the buffer may still hold
// its data, so the registry holds at most the live threads, the ended threads with an entry
// in the buffer, those that were alive when the buffer's oldest retained entry was written,
// and the kMinPruneBatch (or live-count) most recent ones not yet pruned.
void PruneEndedThreadsLocked(Registry& registry);
inline constexpr size_t kMinPruneBatch = 256;

// Reclaims the registrations of threads that ended without unregistering (a raw SYS_exit:
// no pthread cleanup, no thread-specific-data destructor): their timer or perf event (and
// its descriptor and pending-signal budget) is released, their samples and staged markers
// go into the buffer, their entry is marked ended and the RegisteredThread deleted, as
// UnregisterThread does for a thread that ends normally. A thread is dead when the kernel
// marked its robust alive_mutex FUTEX_OWNER_DIED (immune to tid reuse). Registry mutex held;
// O(live threads) memory loads. Called by every sampler loop, by every capture, and by a
// registration once per max(kMinPruneBatch, live threads) registrations (out of session:
// no sampler). Returns how many were reclaimed.
size_t ReclaimDeadThreadsLocked(Registry& registry);

// Moves `thread`'s staged markers into the session buffer. Registry mutex held (the thread
// cannot be deleted meanwhile).
void FlushMarkersLocked(RegisteredThread* thread);

// The sampler's side of one thread (thread_sampling.cc), registry mutex held.
void StartSamplingLocked(Registry& registry, RegisteredThread* thread);
void StopSamplingLocked(RegisteredThread* thread);
// Whether `thread`'s wrapped calls charge their CPU to their own stack (its source is a perf
// event: WaitState::charges_kernel_cpu, wait/kernel_cpu_charge.h).
void NoteKernelCpuChargingLocked(RegisteredThread* thread);
// Writes the samples waiting in `thread`'s ring (and, when it has taken none since the last
// call, a copy of its previous one if it did not run). See thread_sampling.cc. The sampler's
// loop (`loop`) leaves the ring of a thread leaving a wrapped wait for a later loop; a last
// drain (the thread's end, sampling stopped) takes it as it is.
void DrainLocked(RegisteredThread* thread, TimeStamp now, int* max_expirations = nullptr,
                 bool loop = false);
// Writes the samples waiting in `thread`'s ring only (no copy); whether there were any.
// `took_signal_samples`, when given: whether any of them was taken by the thread's sampling
// handler (not written by a wrapped call at its end: kernel CPU, or a wait the sampler did
// not walk). For DrainLocked and for a session snapshot (core.cc, TakeSessionSnapshot).
STRATA_BASE_HIDDEN bool DrainRingLocked(RegisteredThread* thread,
                                        int* max_expirations = nullptr,
                                        bool* took_signal_samples = nullptr);
// Writes a copy of `thread`'s previous sample at `now` carrying the CPU it used since that
// sample (`cpu`: its CPU clock now), e.g. when it ends. Needs a previous sample (has_sample).
void PutCopyOfLastSampleLocked(RegisteredThread* thread, TimeDuration cpu, TimeStamp now);
// Writes an unknown wait (EntryKind::kUnknownWait) for `thread` at `now` carrying
// `cpu_delta`: off CPU outside any wrapped call after its latest sample (a wait's leaf is
// dropped from that sample's stack). Registry mutex held.
void PutUnknownWaitLocked(RegisteredThread* thread, TimeStamp now, int64_t cpu_delta);
// ProfilerPause/ProfilerResume's accounting, registry mutex held: at a pause every sampled
// thread's CPU clock is noted; at resume what each used meanwhile is taken out of its next
// sample's CPU delta (paused CPU is not profiled).
void NotePauseLocked(Registry& registry);
void NoteResumeLocked(Registry& registry);
// Wait stacks (wait_sampling.cc), registry mutex held, sampler side. Writes the samples of
// the wrapped wait `thread` is in, one per interval of its wall time (the first one walks its
// stack once, the others are copies); returns whether the thread is in such a wait (then it
// gets no copy of its previous CPU sample). `ran`: the thread's ring had samples this loop.
// FinishEndedWaitLocked writes the samples still
// due for a wait that ended since the previous loop; call it before draining the ring.
bool SampleWaitLocked(RegisteredThread* thread, TimeStamp now, bool ran);
void FinishEndedWaitLocked(RegisteredThread* thread);
// Forgets the wait being sampled (a new session's first loop starts afresh): when sampling
// of the thread starts.
void ResetWaitSamplingLocked(RegisteredThread* thread);
// Loads and warms libunwind outside signal context, then lets handlers walk with it
// (g_libunwind_ready); the sampler thread calls it at its first loop (core.cc).
void WarmUpLibunwindForSampling();
// Warms libunwind on the calling thread when the sampler has loaded it; never loads it
// (a new thread's registration; core.cc).
void WarmUpLoadedLibunwindOnThisThread();

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_THREAD_REGISTRY_H_
