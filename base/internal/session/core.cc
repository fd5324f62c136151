// Session life of the base tier: start and stop (the buffer, the sampling signal's handler,
// the sampler thread), fork, tier extensions taking over the running session, the session
// snapshot for capture, the shutdown path and the public session API (profiler.h). The
// session's state is in session_state.h; sampling in sample_capture.cc (signal context),
// thread_sampling.cc and sampler_thread.cc; counters in counter_registry.cc; the thread
// registry in thread_registry.cc. See core.h and docs/session.md.
#include "base/internal/session/core.h"
#include "base/internal/allocations/native_allocations.h"
#include "base/internal/registry/thread_registry.h"
#include "shared/buffer/staging_area.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "base/internal/registry/counter_registry.h"
#include "base/internal/settings/env_settings.h"
#include "base/internal/flight/flight_recorder.h"
#include "base/internal/settings/log.h"
#include "base/internal/sampling/sample_capture.h"
#include "base/internal/sampling/sampler_thread.h"
#include "base/internal/signals/signal_interposers.h"
#include "base/internal/sampling/sample_entries.h"
#include "base/internal/sampling/sample_ring.h"
#include "base/internal/sampling/sampling_source.h"
#include "base/internal/session/session_state.h"
#include "base/internal/sampling/sigpending_budget.h"
#include "base/internal/session/tier_extension.h"
#include "base/labels.h"
#include "base/markers.h"
#include "platform/check.h"
#include "platform/cpu_time.h"
#include "platform/mutex.h"
#include "platform/never_destroyed.h"
#include "platform/raw_syscall.h"
#include "platform/sampling/libunwind_loader.h"
#include "platform/sampling/libunwind_walker.h"
#include "platform/sampling/libunwind_imports.h"
#include "platform/sampling/sampling_signal.h"
#include "platform/sampling/seccomp_probe.h"
#include "platform/sampling/stack_bounds.h"
#include "platform/sampling/thread_sampling_timer.h"
#include "shared/buffer/local_limit_chunk_manager.h"

// The calling thread's profiling stack (labels.h).
__thread strata::ProfilingStack* strata_t_profiling_stack_v2 = nullptr;
// Label ABI 1's symbol (labels.h before the push site, 32-byte records): exported so that a
// program built against that header still loads (its TLS relocation resolves), and always
// null, so its inline macros see an unregistered thread and record no labels.
__thread strata::ProfilingStack* strata_t_profiling_stack = nullptr;

namespace strata {
namespace base_internal {

std::atomic<uint32_t> g_profiler_state{0};

// Declared, with what each is for, in session_state.h.
Session& GetSession() {
  static NeverDestroyed<Session> session;
  return session.get();
}

std::atomic<bool> g_forked_child{false};
std::atomic<const TierExtension*> g_extension{nullptr};
std::atomic<int> g_sampler_stop{0};
std::atomic<bool> g_libunwind_ready{false};
std::atomic<bool> g_ring_populate_allowed{false};
std::atomic<uint32_t> g_sampling_features{0};
std::atomic<int64_t> g_sampling_interval_ns{0};
std::atomic<int64_t> g_wait_samples_since_ns{0};

// ---------------------------------------------------------------------------------------
// libunwind warm-up, fork.

// libunwind is loaded (privately) and warmed outside signal context: its first use loads
// the library and allocates, never in the handler. Without it, samples walk frame pointers.
void WarmUpLibunwindForSampling() {
  static std::atomic<bool> missing_logged{false};
  if (WarmUpLibunwind()) {
    g_libunwind_ready.store(true, std::memory_order_release);
  } else if (!missing_logged.exchange(true)) {
    LogError("libunwind.so.8 could not be loaded: native stacks use frame pointers only");
  }
}

void WarmUpLoadedLibunwindOnThisThread() {
  if (g_libunwind_ready.load(std::memory_order_acquire)) (void)WarmUpLibunwind();
}

namespace {

// ---------------------------------------------------------------------------------------
// Process identity (issue 33): a child made without glibc's atfork handlers (_Fork(),
// clone() without CLONE_THREAD, syscall(SYS_fork)) runs no OnForkChild, yet it has the
// parent's state in memory: an active session, a sampler thread that does not exist there,
// locks that threads which do not exist there may hold. It is recognised by its pid:
// - the pid recorded when the library initialised (g_recorded_pid), against getpid() as a
//   system call (glibc caches no pid any more, and a raw clone would not update a cache);
// - for free on every cold path, a page mapped with MADV_WIPEONFORK that holds that pid: in
//   any child that does not share our memory the kernel hands it over zeroed, so a zero
//   means "a new process", with no system call.
// A child that shares our memory (vfork, clone(CLONE_VM) without CLONE_THREAD) sees the
// page as it is: it is recognised by getpid() alone, on the paths that act on the process
// (exit, shutdown, save, stop), and must never write our state (it is the parent's).
struct alignas(4096) ProcessIdentityPage {
  std::atomic<int32_t> pid;
};
std::atomic<ProcessIdentityPage*> g_identity_page{nullptr};
std::atomic<int32_t> g_recorded_pid{0};

void OnForkChild();

void RecordProcessIdentity() {
  const int32_t pid = RawGetPid();
  g_recorded_pid.store(pid, std::memory_order_relaxed);
  void* memory =
      mmap(nullptr, sizeof(ProcessIdentityPage), PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return;
  if (madvise(memory, sizeof(ProcessIdentityPage), MADV_WIPEONFORK) != 0) {
    // Before Linux 4.14: getpid() on each check instead.
    munmap(memory, sizeof(ProcessIdentityPage));
    return;
  }
  auto* page = static_cast<ProcessIdentityPage*>(memory);
  page->pid.store(pid, std::memory_order_relaxed);
  g_identity_page.store(page, std::memory_order_release);
}

void OnForkChild() {
  // Only the forking thread exists here, and locks may be held by threads that do not.
  g_forked_child.store(true);
  g_profiler_state.store(0, std::memory_order_relaxed);
  // The child's copies of the parent's perf event descriptors (lock-free table). Signals
  // pending in the parent are not inherited: the forking thread forgets its event numbers.
  CloseSamplingSourcesInForkedChild();
  if (t_registered_thread) {
    t_registered_thread->source.descriptors.current.store(-1, std::memory_order_relaxed);
    t_registered_thread->source.descriptors.retired.store(-1, std::memory_order_relaxed);
    // Perf mappings are not inherited (VM_DONTCOPY): the page is gone here.
    t_registered_thread->wait.cpu_page.store(nullptr, std::memory_order_relaxed);
  }
  g_sampling_features.store(0, std::memory_order_relaxed);
  g_sampling_interval_ns.store(0, std::memory_order_relaxed);
  StopNativeAllocations();
  if (t_registered_thread) t_registered_thread->sampling.store(false, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------
// Session start and stop. Session mutex held.

size_t ChunkBytesFor(size_t limit) {
  return std::clamp<size_t>(limit / 64, 64 * 1024, 1024 * 1024);
}

void StartLocked(Session& session, const ProfilerSettings& settings) {
  // libunwind (and liblzma, ~0.2 ms of loading and relocation) is loaded here, at the start,
  // before any sample: loaded later by the sampler thread (at its first loop, to spare short
  // processes that cost), the samples before it walked frame pointers, and through code without
  // them (libm's __sin_fma, libc) those stacks lost their frames and roots (the loaded
  // fresh-clone CI run: label_inline_test and js_jit_test, 1 sample each). The load first
  // checks that the loader can read the loaded objects (libunwind_loader.cc).
  WarmUpLibunwindForSampling();
  // The /proc/self/maps descriptor new threads' registrations read their stack bounds with,
  // opened here rather than on a program thread (above the program's soft descriptor limit,
  // by a helper process a seccomp filter could kill: none then).
  const bool unfiltered = CurrentSeccompMode() == SeccompMode::kNone;
  StackBounds::OpenSharedMapsDescriptor(unfiltered);
  g_ring_populate_allowed.store(unfiltered, std::memory_order_relaxed);
  const size_t limit = static_cast<size_t>(settings.buffer_megabytes) << 20;
  auto manager = std::make_unique<LocalLimitChunkManager>(
      limit, static_cast<BufferChunk::Length>(ChunkBytesFor(limit)));
  session.start_time = TimeStamp::Now();
  session.controlled_manager = manager.get();
  session.buffer.SetChunkManager(std::move(manager));
  g_sampling_interval_ns.store(
      TimeDuration::FromMilliseconds(settings.interval_ms).ToNanoseconds(),
      std::memory_order_relaxed);
  g_wait_samples_since_ns.store(session.start_time.ToNanoseconds(), std::memory_order_relaxed);
  g_sampling_features.store(settings.features, std::memory_order_relaxed);

  const TierExtension* extension = g_extension.load(std::memory_order_acquire);
  // A real-time signal nobody uses, or the one asked for (STRATA_SAMPLING_SIGNAL); docs/sampling.md.
  PrepareSignalInterposers();
  int signal_number = settings.sampling_signal;
  if (signal_number == 0) signal_number = InstalledSamplingSignal();
  if (signal_number == 0) signal_number = ChooseSamplingSignal();
  const int error =
      signal_number == 0
          ? EAGAIN
          : InstallSamplingSignalHandler(signal_number, extension && extension->signal_callback
                                                            ? extension->signal_callback
                                                            : &OnSamplingSignal);
  if (signal_number == 0) {
    LogError("no free real-time signal to sample with (every one has a handler or is blocked); "
             "markers only");
  } else if (error != 0 && error != EBUSY) {
    LogError("cannot install the sampling signal handler for signal %d: %s; markers only",
             signal_number, strerror(error));
  } else {
    // The program's handlers on alternate stacks, installed before this session, run with
    // the sampling signal blocked (signal_interposers.h).
    MaskSamplingSignalInAlternateStackHandlers(InstalledSamplingSignal());
    LogInfo("sampling with signal %d (gdb: handle SIG%d nostop noprint pass)", signal_number,
            signal_number);
  }
  Registry& registry = GetRegistry();
  {
    AutoLock lock(registry.mutex);
    registry.settings = settings;
    registry.sampling = true;
    registry.dropped_samples = 0;
    registry.handler_cpu_excluded_ns = 0;
    registry.sampling_stopped.clear();
    ResetSamplingSourcesLocked(settings);
    // Threads that ended before this session are of no interest to it.
    RegistryList<ThreadInfo> live_infos;
    for (RegisteredThread* thread : registry.live) {
      live_infos.push_back(registry.infos[thread->info_index]);
      live_infos.back().register_time = session.start_time;
      live_infos.back().profiled = false;
      live_infos.back().recorded = false;
      thread->info_index = live_infos.size() - 1;
    }
    registry.infos = std::move(live_infos);
    for (RegisteredThread* thread : registry.live) {
      // A handler of the previous session that passed its check before the stop may have
      // committed its sample after the stop emptied the ring (no handler runs any more: the
      // stop waited for them): never drain that one into this session.
      thread->ring.DiscardAll();
      StartSamplingLocked(registry, thread);
    }
  }
  // STRATA_FLIGHT_RECORDER: the chunks live in a file that outlives a crash. Made once the
  // threads' sampling sources are armed, so that the first samples do not wait for it (their
  // handlers write into the threads' rings; nothing takes a chunk of the buffer before the
  // state below is active and the sampler thread runs): creating and mapping the file costs
  // a write fault on a new file (2-19 ms on ext4 here, its journal) and, in a process whose
  // descriptor table is still small, the table's growth (an RCU grace period;
  // docs/benchmarks.md, "First attach").
  auto* chunk_manager = static_cast<LocalLimitChunkManager*>(session.controlled_manager);
  if (ChunkStorage* storage = StartFlightRecorderLocked(limit, chunk_manager->ChunkMinBufferBytes(),
                                                        session.start_time, settings)) {
    chunk_manager->SetChunkStorage(storage);
  }
  g_profiler_state.store(kStateActive, std::memory_order_relaxed);
  StartNativeAllocations(settings.features);  // The hooks of libstrata_alloc.so record now.

  ForgetCounterSamples();  // Before the sampler thread's first loop.
  StartSamplerThreadLocked(session, settings);
  LogInfo("profiler started: interval %.3f ms, buffer %u MiB, features %s", settings.interval_ms,
          settings.buffer_megabytes, FeatureNames(settings.features).c_str());
}

void StopLocked(Session& session) {
  if (!ProfilerIsActive()) return;
  StopNativeAllocations();
  g_profiler_state.store(0, std::memory_order_relaxed);
  StopSamplerThreadLocked(session);
  Registry& registry = GetRegistry();
  {
    // The last sampler period's samples and markers go into the buffer before the flight
    // recorder's file is sealed, so a cleanly ended file has the whole session (they were
    // discarded below: 0-2 of 299 Step markers missing, found by record_child_test). The
    // samples still due for a wait that ended go first, as in the sampler's loop and
    // TakeSessionSnapshot (else they were lost: the ring is discarded below).
    AutoLock lock(registry.mutex);
    for (RegisteredThread* thread : registry.live) {
      if (thread->sampling.load(std::memory_order_relaxed)) {
        FinishEndedWaitLocked(thread);
        (void)DrainRingLocked(thread);
      }
      FlushMarkersLocked(thread);
    }
  }
  StopFlightRecorderLocked();  // A clean end: the file keeps the session's data.
  std::vector<ThreadId> threads_on_events;
  {
    AutoLock lock(registry.mutex);
    registry.sampling = false;
    threads_on_events = ThreadsOnEventsLocked(registry.live.data(), registry.live.size());
    for (RegisteredThread* thread : registry.live) {
      StopSamplingLocked(thread);
      thread->ring.DiscardAll();
      if (StagingArea* staging = thread->marker_staging.load(std::memory_order_acquire)) {
        staging->Discard();
      }
    }
  }
  g_sampling_features.store(0, std::memory_order_relaxed);
  g_sampling_interval_ns.store(0, std::memory_order_relaxed);
  // A signal a closed event queued for a thread that has not run since must reach our
  // handler, not the program's disposition (by default: terminate).
  WaitForQueuedEventSignals(threads_on_events, InstalledSamplingSignal());
  (void)UninstallSamplingSignalHandler();
  // Left in place when the uninstall gave up (the handler still installed).
  if (InstalledSamplingSignal() == 0) UnmaskSamplingSignalInAlternateStackHandlers();
  session.controlled_manager = nullptr;
  session.buffer.ResetChunkManager();
  LogInfo("profiler stopped");
}

}  // namespace

ChunkedBuffer& SessionBuffer() {
  // A child made without atfork handlers has a copy of the parent's buffer, or with the
  // flight recorder the parent's own shared file: its markers go nowhere (an out-of-session
  // buffer, where writes fail at once).
  if (__builtin_expect(IsForkedChild(), 0)) {
    static NeverDestroyed<ChunkedBuffer> detached(ThreadSafety::kThreadSafe);
    return detached.get();
  }
  return GetSession().buffer;
}

TakeoverReport AttachTierExtension(const TierExtension* extension) {
  TakeoverReport report;
  if (IsForkedChild() || !extension) return report;
  WarmUpLibunwindForSampling();  // As StartLocked does for a tier (above), before its samples.
  Session& session = GetSession();
  AutoLock lock(session.mutex);
  report.buffer_blocks_before = session.buffer.GetState().pushed_block_count;
  if (!ProfilerIsActive()) {
    g_extension.store(extension, std::memory_order_release);
    return report;
  }
  // Take over the running session in place, waiting for no other thread: the sampler thread
  // keeps running and runs the extension's hooks from its next loop iteration on; the signal
  // callback is switched with one atomic exchange (a handler already running base's callback
  // finishes its sample with it: base's code never goes away). Timers and rings are untouched,
  // so no sample is missed or delayed by the hand-over.
  const TimeStamp handover_start = TimeStamp::Now();
  const TierExtension* previous = g_extension.exchange(extension, std::memory_order_acq_rel);
  if (previous && previous != extension) {
    // Another extension's code may go away once replaced: wait for its last uses.
    (void)ReplaceSamplingCallback(extension->signal_callback ? extension->signal_callback
                                                             : &OnSamplingSignal);
    AutoLock safe_point(session.sampler_loop_mutex);
  } else if (extension->signal_callback) {
    (void)ExchangeSamplingCallback(extension->signal_callback);
  }
  report.session_was_running = true;
  report.sampler_handover = TimeStamp::Now() - handover_start;
  LogInfo("tier '%s' took over the running session in %.3f ms", extension->name,
          report.sampler_handover.ToMilliseconds());
  return report;
}

void DetachTierExtension(const TierExtension* extension) {
  if (IsForkedChild()) return;
  Session& session = GetSession();
  AutoLock lock(session.mutex);
  if (g_extension.load(std::memory_order_acquire) != extension) return;
  if (!ProfilerIsActive()) {
    g_extension.store(nullptr, std::memory_order_release);
    return;
  }
  // The sampler thread and the timers keep running. Base's callback comes back at once; the
  // wait is for the extension's last uses only (samples go on meanwhile): a handler still
  // running its callback, and the sampler's current loop iteration.
  g_extension.store(nullptr, std::memory_order_release);
  (void)ReplaceSamplingCallback(&OnSamplingSignal);  // Waits until the old one is not running.
  AutoLock safe_point(session.sampler_loop_mutex);
}

ControlledChunkManager* SessionControlledChunkManager() {
  Session& session = GetSession();
  STRATA_DCHECK(session.mutex.IsLockedOnCurrentThread(), "SessionLock not held");
  return session.controlled_manager;
}

bool TryDestroySessionChunksAtOrBefore(TimeStamp done) {
  Session& session = GetSession();
  if (!session.mutex.TryLock()) return false;
  if (session.controlled_manager) session.controlled_manager->DestroyChunksAtOrBefore(done);
  session.mutex.Unlock();
  return true;
}

const TierExtension* AttachedTierExtension() { return g_extension.load(std::memory_order_acquire); }

SessionLock::SessionLock() { GetSession().mutex.Lock(); }
SessionLock::~SessionLock() { GetSession().mutex.Unlock(); }
bool SessionLockedOnCurrentThread() { return GetSession().mutex.IsLockedOnCurrentThread(); }

SessionSnapshot TakeSessionSnapshot() {
  SessionSnapshot snapshot;
  if (IsForkedChild()) return snapshot;
  Session& session = GetSession();
  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  snapshot.active = ProfilerIsActive();
  snapshot.settings = registry.settings;
  snapshot.start_time = session.start_time;
  snapshot.dropped_samples = registry.dropped_samples;
  snapshot.handler_cpu_excluded_ns = registry.handler_cpu_excluded_ns;
  snapshot.sampling_signal = InstalledSamplingSignal();
  snapshot.samples_skipped_low_stack = SamplesSkippedForLowStack();
  snapshot.unwind_lookups_unreadable = UnwindLookupsRefusedAsUnreadable();
  static_assert(static_cast<int>(LowStack::kCount) ==
                    sizeof(snapshot.samples_skipped_low_stack_where) / sizeof(uint64_t),
                "one count per reason");
  for (int reason = 0; reason < static_cast<int>(LowStack::kCount); ++reason) {
    snapshot.samples_skipped_low_stack_where[reason] =
        SamplesSkippedForLowStack(static_cast<LowStack>(reason));
  }
  snapshot.sampling_stopped = registry.sampling_stopped;
  snapshot.sampling_source = SamplingSourceReportLocked(registry.settings);
  ReclaimDeadThreadsLocked(registry);  // Threads that ended with a raw SYS_exit.
  PruneEndedThreadsLocked(registry);  // Only threads whose data may be in the buffer.
  for (RegisteredThread* thread : registry.live) {
    ThreadInfo& info = registry.infos[thread->info_index];
    if (!info.name_given) {
      const std::string name = ThreadNameFromProc(thread->tid);
      if (!name.empty()) info.name = name;
    }
    snapshot.dropped_samples += thread->dropped_samples.load(std::memory_order_relaxed);
    snapshot.handler_cpu_excluded_ns += thread->handler_cpu_ns.load(std::memory_order_relaxed);
    // Everything recorded so far goes into the buffer: the samples still due for a wait
    // that ended first (as DrainLocked does), else the sampler's next loop writes them, as
    // copies of whatever the ring held, after the ring's later samples.
    if (thread->sampling.load(std::memory_order_relaxed)) {
      FinishEndedWaitLocked(thread);
      if (DrainRingLocked(thread)) {
        thread->has_sample = true;
        thread->last_seen_cpu = thread->cpu_clock.Read();
      }
    }
    FlushMarkersLocked(thread);
  }
  snapshot.threads.assign(registry.infos.begin(), registry.infos.end());
  return snapshot;
}

int32_t RawGetPid() { return static_cast<int32_t>(RawSyscall(SYS_getpid)); }

bool IsForkedChild() {
  if (g_forked_child.load(std::memory_order_relaxed)) return true;
  const int32_t recorded = g_recorded_pid.load(std::memory_order_relaxed);
  if (recorded == 0) return false;  // Before the library's initialisation.
  ProcessIdentityPage* page = g_identity_page.load(std::memory_order_acquire);
  if (page != nullptr) {
    if (page->pid.load(std::memory_order_relaxed) != 0) return false;
    // Zeroed by the kernel: a child (our memory is its own copy) that no atfork handler told.
    // It becomes what a fork()ed child is: profiler off for good (docs/session.md, "fork").
    OnForkChild();
    return true;
  }
  // No wipe-on-fork page: each check asks the kernel. Nothing is written (the memory may be
  // shared with the parent).
  return RawGetPid() != recorded;
}

bool IsOtherProcess() {
  if (IsForkedChild()) return true;
  const int32_t recorded = g_recorded_pid.load(std::memory_order_relaxed);
  return recorded != 0 && RawGetPid() != recorded;
}

void SetShutdownPath(std::string path) {
  if (IsForkedChild()) return;
  AutoLock lock(GetSession().mutex);
  GetSession().shutdown_path = std::move(path);
}

std::string ShutdownPath() {
  if (IsForkedChild()) return std::string();
  AutoLock lock(GetSession().mutex);
  return GetSession().shutdown_path;
}

}  // namespace base_internal

// ---------------------------------------------------------------------------------------
// Public API (profiler.h; counters.h's ProfilerCounter is in counter_registry.cc).

using namespace base_internal;

void ProfilerInit() {
  static std::once_flag once;
  std::call_once(once, []() {
    // The main thread is the process's initial thread. The library's constructor runs on it
    // when preloaded or linked; loaded later with dlopen (attach: on a borrowed thread) it may
    // run on any thread, which is then not the main one (MainThreadId's default: tid == pid).
    if (CurrentThreadId().ToNumber() == RawGetPid()) InitMainThreadId();
    RecordProcessIdentity();
    pthread_atfork(nullptr, nullptr, &OnForkChild);
    RegisterCurrentThreadImpl(nullptr);
  });
}

namespace base_internal {
namespace {
std::atomic<bool> g_session_ever_started{false};
}  // namespace

bool SessionEverStarted() { return g_session_ever_started.load(std::memory_order_relaxed); }
}  // namespace base_internal

void ProfilerStart(const ProfilerSettings& settings) {
  if (IsOtherProcess()) return;
  base_internal::g_session_ever_started.store(true, std::memory_order_relaxed);
  ProfilerInit();
  Session& session = GetSession();
  AutoLock lock(session.mutex);
  StopLocked(session);
  StartLocked(session, ValidSessionSettings(settings, "ProfilerStart"));
}

void ProfilerStop() {
  if (IsOtherProcess()) return;
  Session& session = GetSession();
  AutoLock lock(session.mutex);
  StopLocked(session);
}

void ProfilerPause() {
  if (!ProfilerIsActive() || IsForkedChild()) return;
  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  if (ProfilerIsPaused()) return;
  // The flag first: a sample taken before it has a CPU time at most the one noted after it.
  g_profiler_state.fetch_or(kStatePaused, std::memory_order_relaxed);
  NotePauseLocked(registry);
}

void ProfilerResume() {
  if (IsForkedChild()) return;
  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  if (!ProfilerIsPaused()) return;
  // The clocks first: a sample taken after the flag has a CPU time at least the one noted.
  NoteResumeLocked(registry);
  g_wait_samples_since_ns.store(TimeStamp::Now().ToNanoseconds(), std::memory_order_relaxed);
  g_profiler_state.fetch_and(~kStatePaused, std::memory_order_relaxed);
}

ProfilerSettings ProfilerCurrentSettings() {
  if (IsForkedChild()) return ProfilerSettings();  // No session there.
  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  // The registry keeps a stopped session's settings: not the running session's.
  if (!ProfilerIsActive()) return ProfilerSettings();
  return registry.settings;
}


}  // namespace strata
