// Session life, thread registry and sampler of the base tier. See core.h and
// docs/session.md.
#include "base/internal/core.h"
#include "base/internal/thread_registry.h"
#include "shared/buffer/staging_area.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
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

#include "base/counters.h"
#include "base/internal/env_settings.h"
#include "base/internal/log.h"
#include "base/internal/signal_interposers.h"
#include "base/internal/sample_entries.h"
#include "base/internal/sample_ring.h"
#include "base/internal/sampling_source.h"
#include "base/internal/sigpending_budget.h"
#include "base/internal/tier_extension.h"
#include "base/labels.h"
#include "base/markers.h"
#include "platform/check.h"
#include "platform/cpu_time.h"
#include "platform/mutex.h"
#include "platform/sampling/frame_pointer_walker.h"
#include "platform/sampling/libunwind_loader.h"
#include "platform/sampling/libunwind_walker.h"
#include "platform/sampling/sampling_signal.h"
#include "platform/sampling/stack_bounds.h"
#include "platform/sampling/thread_sampling_timer.h"
#include "platform/tsc_clock.h"
#include "shared/buffer/local_limit_chunk_manager.h"

// The calling thread's profiling stack (labels.h).
__thread strata::ProfilingStack* strata_t_profiling_stack = nullptr;

namespace strata {
namespace base_internal {

std::atomic<uint32_t> g_profiler_state{0};

namespace {

struct Session {
  Mutex mutex{"strata session"};
  ChunkedBuffer buffer{ThreadSafety::kThreadSafe};
  TimeStamp start_time;
  std::string shutdown_path;
  pthread_t sampler_thread{};
  bool sampler_running = false;
  // Held by the sampler thread for each loop iteration, the only place where a tier
  // extension's loop hooks run: taking it once after g_extension changed is the safe point
  // after which no iteration uses the previous extension (DetachTierExtension). Lock order:
  // session mutex -> this -> registry mutex.
  Mutex sampler_loop_mutex{"strata sampler loop"};
  // The buffer's manager while a session runs (owned by the buffer), for a controller.
  ControlledChunkManager* controlled_manager = nullptr;
};

// Leaked: threads may still run (and unregister) during exit, after static destructors.
Session& GetSession() {
  static Session* session = new Session;
  return *session;
}

std::atomic<bool> g_forked_child{false};
// The attached tier extension (tier_extension.h). Changed under the session mutex while the
// sampler thread keeps running; the sampler reads it once per loop iteration (see
// Session::sampler_loop_mutex).
std::atomic<const TierExtension*> g_extension{nullptr};
std::atomic<bool> g_sampler_stop{false};
// libunwind could not be loaded: walk frame pointers instead.
std::atomic<bool> g_libunwind_missing{false};
// The running session's features, for the signal handler.
std::atomic<uint32_t> g_sampling_features{0};

// ---------------------------------------------------------------------------------------
// Signal context. Everything between here and the end of OnSamplingSignal runs in a signal
// handler on the sampled thread: no lock, no allocation, no errno left changed (the
// dispatcher in platform/sampling saves it).

void CopyBounded(char* destination, const char* source, size_t capacity) {
  size_t i = 0;
  for (; i + 1 < capacity && source[i] != '\0'; ++i) destination[i] = source[i];
  destination[i] = '\0';
}

bool InLoadedObject(uintptr_t pc);

// True when the interrupted context is in a system call: the kernel left the pc on the
// `syscall` instruction (0f 05) to restart it, or just after it with -EINTR in rax. A thread
// preempted while running its own code is not. Reads code bytes of loaded objects only
// (never JIT code or unmapped memory). Async-signal-safe.
bool InterruptedInSystemCall(const ucontext_t& context) {
  const uintptr_t pc = static_cast<uintptr_t>(context.uc_mcontext.gregs[REG_RIP]);
  if (pc < 2 || !InLoadedObject(pc) || !InLoadedObject(pc - 2)) return false;
  const uint8_t* code = reinterpret_cast<const uint8_t*>(pc);
  if (code[0] == 0x0f && code[1] == 0x05) return true;
  return code[-2] == 0x0f && code[-1] == 0x05 && context.uc_mcontext.gregs[REG_RAX] == -EINTR;
}

// `plan` non-null: no native walk, the plan is filled instead (BeginSampleWithoutNativeWalk).
SampleSlot* BeginSampleImpl(void* context, ucontext_t* signal_context, int overruns,
                            NativeWalkPlan* plan = nullptr) {
  RegisteredThread* thread = static_cast<RegisteredThread*>(context);
  if (!thread->sampling.load(std::memory_order_relaxed) || ProfilerIsPaused()) return nullptr;
  SampleSlot* slot = thread->ring.TryBeginWrite();
  if (!slot) {
    thread->dropped_samples.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  thread->capturing.store(true, std::memory_order_relaxed);
  const uint32_t features = g_sampling_features.load(std::memory_order_relaxed);
  // TimeStamp::Now(), the clock of markers and of the program's own TimeStamp::Now() calls
  // (one clock: a sample lies between the Now() calls around it). ~50 ns more than the
  // calibrated TSC in the handler, p50 (docs/sampling.md). Never rdtsc on a thread that
  // forbade it (time_stamp.h, thread_restrictions.h).
  slot->time_ns = TimeStamp::Now().ToNanoseconds();
  slot->cpu_ns = (features & kFeatureCpu) ? CurrentThreadCpuTime().ToNanoseconds() : -1;
  slot->overruns = overruns;
  slot->in_system_call =
      (features & kFeaturePrecise) != 0 && InterruptedInSystemCall(*signal_context);
  slot->script_frame_count = 0;
  slot->script_text_bytes = 0;
  // LibunwindWalkMayDeadlock: this thread may hold the loader's list lock (libunwind_walker.h).
  const bool frame_pointers = (features & kFeatureFramePointers) ||
                              g_libunwind_missing.load(std::memory_order_relaxed) ||
                              LibunwindWalkMayDeadlock();
  if (plan) {
    plan->walk = (features & kFeatureStackWalk) != 0;
    plan->frame_pointers = frame_pointers;
    plan->stack_low = thread->bounds.low;
    plan->stack_high = thread->bounds.high;
  }
  if ((features & kFeatureStackWalk) && !plan) {
    slot->native_count = static_cast<uint32_t>(
        frame_pointers
            ? WalkFramePointers(*signal_context, thread->bounds, slot->natives,
                                SampleSlot::kMaxNativeFrames)
            : WalkStackWithLibunwind(signal_context, thread->bounds, slot->natives,
                                     SampleSlot::kMaxNativeFrames));
  } else {
    const FrameRegisters registers = FrameRegistersFromSignalContext(*signal_context);
    slot->natives[0] = {registers.pc, registers.sp};
    slot->native_count = 1;
  }
  // Labels: the stack belongs to this very thread, which we interrupted; the fence pairs
  // with the one in ProfilingStack::Push.
  const ProfilingStack& stack = thread->profiling_stack;
  uint32_t depth = stack.Depth();
  std::atomic_signal_fence(std::memory_order_acquire);
  depth = std::min({depth, ProfilingStack::kCapacity, SampleSlot::kMaxLabels});
  for (uint32_t i = 0; i < depth; ++i) {
    const LabelFrame& frame = stack.frame(i);
    SampleSlot::Label& label = slot->labels[i];
    label.label = frame.label;
    label.stack_address = reinterpret_cast<uintptr_t>(frame.stack_address);
    label.category = frame.category;
    label.has_dynamic = frame.dynamic_string != nullptr;
    if (label.has_dynamic) CopyBounded(label.dynamic, frame.dynamic_string, sizeof(label.dynamic));
  }
  slot->label_count = depth;
  return slot;
}

// True when `pc` lies in a loaded ELF object (not in JIT code or other anonymous memory).
// _dl_find_object is glibc's lock-free lookup for unwinders (glibc >= 2.35): no lock, no
// allocation once the dynamic loader is initialised.
bool InLoadedObject(uintptr_t pc) {
  dl_find_object found;
  return _dl_find_object(reinterpret_cast<void*>(pc), &found) == 0;
}

size_t WalkNativeSegmentImpl(RegisteredThread* thread, ucontext_t* signal_context,
                             const FrameRegisters* start, NativeFrame* frames, size_t capacity,
                             FrameRegisters* stopped) {
  *stopped = FrameRegisters();
  if (capacity == 0) return 0;
  const FrameRegisters registers =
      start ? *start : FrameRegistersFromSignalContext(*signal_context);
  if (!InLoadedObject(registers.pc)) {
    *stopped = registers;
    return 0;
  }
  const uint32_t features = g_sampling_features.load(std::memory_order_relaxed);
  const LibunwindFunctions* unwind = LoadedLibunwind();
  const bool frame_pointers = (features & kFeatureFramePointers) ||
                              g_libunwind_missing.load(std::memory_order_relaxed) || !unwind ||
                              LibunwindWalkMayDeadlock();
  if (!(features & kFeatureStackWalk)) {
    frames[0] = {registers.pc, registers.sp};
    return 1;
  }
  if (frame_pointers) {
    const size_t count = WalkFramePointers(registers, thread->bounds, frames, capacity);
    for (size_t i = 1; i < count; ++i) {
      if (!InLoadedObject(frames[i].pc - 1)) {
        stopped->pc = frames[i].pc;
        stopped->sp = frames[i].sp;
        return i;
      }
    }
    return count;
  }
  frames[0] = {registers.pc, registers.sp};
  if (!thread->bounds.Contains(registers.sp)) return 1;
  // libunwind reads the registers from a ucontext: the signal context, or a copy of it with
  // pc/sp/fp replaced (the other callee-saved registers only matter to unusual CFA rules).
  ucontext_t resumed;
  ucontext_t* walk_context = signal_context;
  if (start) {
    resumed = *signal_context;
    resumed.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(registers.pc);
    resumed.uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(registers.sp);
    resumed.uc_mcontext.gregs[REG_RBP] = static_cast<greg_t>(registers.fp);
    walk_context = &resumed;
  }
  unw_cursor_t cursor;
  // Lookups during the walk must not take the loader's lock (libunwind_walker.h).
  SetLibunwindLookupPc(registers.pc);
  if (unwind->init_local2(&cursor, walk_context, UNW_INIT_SIGNAL_FRAME) != 0) {
    SetLibunwindLookupPc(0);
    return 1;
  }
  size_t count = 1;
  uintptr_t previous_sp = registers.sp;
  while (count < capacity) {
    SetLibunwindLookupPc(count == 1 ? registers.pc : frames[count - 1].pc - 1);
    if (unwind->step(&cursor) <= 0) break;
    unw_word_t pc = 0;
    unw_word_t sp = 0;
    if (unwind->get_reg(&cursor, UNW_REG_IP, &pc) != 0 ||
        unwind->get_reg(&cursor, UNW_REG_SP, &sp) != 0) {
      break;
    }
    if (pc == 0 || sp <= previous_sp || sp >= thread->bounds.high) break;
    if (!InLoadedObject(pc - 1)) {
      unw_word_t fp = 0;
      if (unwind->get_reg(&cursor, UNW_X86_64_RBP, &fp) != 0) fp = 0;
      stopped->pc = static_cast<uintptr_t>(pc);
      stopped->sp = static_cast<uintptr_t>(sp);
      stopped->fp = static_cast<uintptr_t>(fp);
      break;
    }
    frames[count].pc = static_cast<uintptr_t>(pc);
    frames[count].sp = static_cast<uintptr_t>(sp);
    ++count;
    previous_sp = sp;
  }
  SetLibunwindLookupPc(0);
  return count;
}

void CommitSampleImpl(void* context) {
  RegisteredThread* thread = static_cast<RegisteredThread*>(context);
  thread->ring.CommitWrite();
  thread->capturing.store(false, std::memory_order_release);
}

// Base's own sampling callback (retired while a tier extension provides one).
void OnSamplingSignal(void* context, ucontext_t* signal_context, int overruns) {
  if (BeginSampleImpl(context, signal_context, overruns)) CommitSampleImpl(context);
}
// End of signal context.

}  // namespace

// ---------------------------------------------------------------------------------------
// Sampling of one thread: start, stop, drain. Registry mutex held (thread_registry.h).

void StartSamplingLocked(Registry& registry, RegisteredThread* thread) {
  if (thread->sampling.load(std::memory_order_relaxed)) return;
  const ProfilerSettings& settings = registry.settings;
  ThreadInfo& info = registry.infos[thread->info_index];
  if (!NameMatchesFilters(info.name, thread->is_main, settings.thread_filters)) return;
  const int signal_number = InstalledSamplingSignal();
  if (signal_number == 0) return;  // No handler: a signal would kill the program.
  // Once per thread, before its first signal; allocates (never in signal context). The
  // thread is alive: it is in the registry, whose mutex is held.
  if (thread->bounds.IsEmpty()) thread->bounds = StackBounds::OfThread(thread->pthread);
  // A perf task-clock event, else a timer (sampling_source.h); logged when neither.
  if (!StartThreadSamplingSourceLocked(thread, info.name, settings, signal_number)) return;
  info.profiled = true;
  thread->has_sample = false;
  // The first sample carries the CPU used since sampling started, not since the thread did.
  const std::optional<TimeDuration> cpu = thread->cpu_clock.Read();
  thread->last_sample_cpu_ns = cpu ? cpu->ToNanoseconds() : -1;
  thread->last_seen_cpu = cpu;
  thread->paused_at_cpu.reset();
  if (ProfilerIsPaused()) thread->paused_at_cpu = cpu;
  thread->timer_parked = false;
  thread->sampling.store(true, std::memory_order_relaxed);
}

void StopSamplingLocked(RegisteredThread* thread) {
  thread->sampling.store(false, std::memory_order_relaxed);
  // No signal is generated after this returns (queued ones are still recognised).
  StopThreadSamplingSourceLocked(thread);
  thread->timer_parked = false;
}

// Writes the samples waiting in `thread`'s ring. Returns whether there were any. Raises
// `*max_expirations`, if given, to the most timer expirations one of them stood for
// (1 + overruns).
namespace {
bool DrainRingLocked(RegisteredThread* thread, int* max_expirations = nullptr) {
  ChunkedBuffer& buffer = GetSession().buffer;
  bool drained = false;
  while (const SampleSlot* slot = thread->ring.TryBeginRead()) {
    int64_t cpu_delta = -1;
    thread->last_sample_in_system_call = slot->in_system_call;
    if (slot->cpu_ns >= 0) {
      // Never negative: a sample taken just before a pause's or a copy's clock reading.
      if (thread->last_sample_cpu_ns >= 0) {
        cpu_delta = std::max<int64_t>(0, slot->cpu_ns - thread->last_sample_cpu_ns);
      }
      thread->last_sample_cpu_ns = std::max(thread->last_sample_cpu_ns, slot->cpu_ns);
    }
    buffer.PutObjects(EntryKind::kSample, thread->tid, TimeStamp::FromNanoseconds(slot->time_ns),
                      cpu_delta, slot->overruns, MergedStack{slot});
    if (max_expirations) *max_expirations = std::max(*max_expirations, slot->overruns + 1);
    NoteSampleExpirationsLocked(slot->overruns + 1);  // For meta.interval (sampling_source.h).
    thread->ring.EndRead();
    drained = true;
  }
  if (drained) GetRegistry().infos[thread->info_index].recorded = true;
  return drained;
}

}  // namespace

void PutCopyOfLastSampleLocked(RegisteredThread* thread, TimeDuration cpu, TimeStamp now) {
  int64_t cpu_delta = 0;
  if (thread->last_sample_cpu_ns >= 0) {
    cpu_delta = std::max<int64_t>(0, cpu.ToNanoseconds() - thread->last_sample_cpu_ns);
    thread->last_sample_cpu_ns += cpu_delta;
  }
  GetSession().buffer.PutObjects(EntryKind::kSameSample, thread->tid, now, cpu_delta);
}

void NotePauseLocked(Registry& registry) {
  for (RegisteredThread* thread : registry.live) {
    if (thread->sampling.load(std::memory_order_relaxed)) {
      thread->paused_at_cpu = thread->cpu_clock.Read();
    }
  }
}

void NoteResumeLocked(Registry& registry) {
  for (RegisteredThread* thread : registry.live) {
    if (!thread->sampling.load(std::memory_order_relaxed)) continue;
    // The samples taken before the pause, with the CPU deltas they had then.
    if (DrainRingLocked(thread)) thread->has_sample = true;
    const std::optional<TimeDuration> cpu = thread->cpu_clock.Read();
    if (cpu && thread->paused_at_cpu && thread->last_sample_cpu_ns >= 0) {
      thread->last_sample_cpu_ns += (*cpu - *thread->paused_at_cpu).ToNanoseconds();
    }
    thread->paused_at_cpu.reset();
    thread->last_seen_cpu = cpu;
  }
}

void DrainLocked(RegisteredThread* thread, TimeStamp now, int* max_expirations) {
  const ProfilerSettings& settings = GetRegistry().settings;
  const bool precise = (settings.features & kFeaturePrecise) != 0;
  if (DrainRingLocked(thread, max_expirations)) {
    thread->has_sample = true;
    const std::optional<TimeDuration> cpu = thread->cpu_clock.Read();
    // Precise mode: a thread interrupted in a system call that used less than an eighth of
    // an interval of CPU (at least 50 us: our own handler's share) since the previous loop
    // is blocked: park its timer. A thread waiting for a CPU is not parked: it was
    // interrupted in its own code, and needs its samples as soon as it runs.
    if (precise && !thread->timer_parked && thread->last_sample_in_system_call && cpu &&
        thread->last_seen_cpu) {
      const int64_t blocked_below_ns =
          std::max<int64_t>(TimeDuration::FromMilliseconds(settings.interval_ms).ToNanoseconds() / 8,
                            50000);
      if ((*cpu - *thread->last_seen_cpu).ToNanoseconds() < blocked_below_ns &&
          thread->timer.Disarm() == 0) {
        thread->timer_parked = true;
      }
    }
    thread->last_seen_cpu = cpu;
    NoteThreadSampledLocked(thread, cpu);  // Lost-event detection (sampling_source.h).
    return;
  }
  // A perf event whose descriptor the program closed sends nothing more: reopened here.
  CheckThreadSamplingSourceLocked(thread, GetRegistry().infos[thread->info_index].name,
                                  settings, now);
  if (!thread->has_sample || ProfilerIsPaused()) return;
  // A sample being taken right now (its walk may be waiting for a lock, using no CPU): the
  // thread is not idle, and its sample will come.
  if (thread->capturing.load(std::memory_order_acquire)) return;
  // No signal since the last loop: if the thread has not run at all since the previous loop
  // (blocked, or runnable but waiting for a CPU), record a copy of its previous sample
  // without disturbing it. A thread whose clock moved gets no copy: its signal will come. A
  // parked thread that ran again is sampled at the real rate from now on.
  // The CPU the thread used between its previous sample and stopping (the residual) stays
  // with its next sample when it is less than an interval: a perf event keeps counting
  // across the wait, so that sample comes one interval of CPU after the previous one, and a
  // copy carries 0 (copies are then told from samples by their CPU delta). When the
  // residual is an interval or more, the source missed signals (CPU-clock timers are
  // tick-bound and, under load, sometimes silent for 20 ms of a thread's CPU; kernel-mode
  // time, which perf events do not count): the copy carries it, so that no later sample
  // claims more CPU than the wall time since its predecessor (docs/sampling.md).
  const std::optional<TimeDuration> cpu = thread->cpu_clock.Read();
  if (cpu && thread->last_seen_cpu && *cpu == *thread->last_seen_cpu) {
    const int64_t interval_ns =
        TimeDuration::FromMilliseconds(settings.interval_ms).ToNanoseconds();
    if (thread->last_sample_cpu_ns >= 0 &&
        cpu->ToNanoseconds() - thread->last_sample_cpu_ns >= interval_ns) {
      PutCopyOfLastSampleLocked(thread, *cpu, now);
    } else {
      GetSession().buffer.PutObjects(EntryKind::kSameSample, thread->tid, now, int64_t{0});
    }
  } else if (thread->timer_parked &&
             thread->timer.Arm(TimeDuration::FromMilliseconds(settings.interval_ms)) == 0) {
    thread->timer_parked = false;
  }
  thread->last_seen_cpu = cpu;
}

namespace {

// ---------------------------------------------------------------------------------------
// Counters.

struct CounterRegistry {
  Mutex mutex{"strata counters"};
  std::vector<ProfilerCounter*> counters;  // Index = counter id; null once destroyed.
  std::vector<std::pair<int64_t, uint64_t>> last;  // Last sampled (value, operations).
};
CounterRegistry& GetCounters() {
  static CounterRegistry* counters = new CounterRegistry;
  return *counters;
}

void SampleCounters(TimeStamp now) {
  CounterRegistry& counters = GetCounters();
  AutoLock lock(counters.mutex);
  for (size_t i = 0; i < counters.counters.size(); ++i) {
    ProfilerCounter* counter = counters.counters[i];
    if (!counter) continue;
    const std::pair<int64_t, uint64_t> current(counter->value(), counter->operations());
    if (current == counters.last[i]) continue;
    counters.last[i] = current;
    GetSession().buffer.PutObjects(EntryKind::kCounterSample, static_cast<uint32_t>(i), now,
                                   current.first, current.second);
  }
}

// ---------------------------------------------------------------------------------------
// The sampler thread.

// One loop of the sampler thread. Returns the most timer expirations a drained sample stood
// for (1 + si_overrun; 0 when no sample was drained).
int SamplingLoopIteration() {
  // The extension read here is used until the end of the iteration, and only under this lock.
  AutoLock loop_lock(GetSession().sampler_loop_mutex);
  const TimeStamp start = TimeStamp::Now();
  int max_expirations = 0;
  const TierExtension* extension = g_extension.load(std::memory_order_acquire);
  Registry& registry = GetRegistry();
  TimeStamp locked;
  {
    AutoLock lock(registry.mutex);
    locked = TimeStamp::Now();
    for (RegisteredThread* thread : registry.live) {
      if (thread->sampling.load(std::memory_order_relaxed)) {
        DrainLocked(thread, locked, &max_expirations);
      }
      FlushMarkersLocked(thread);
    }
  }
  const TimeStamp threads_done = TimeStamp::Now();
  SampleCounters(threads_done);
  const TimeStamp counters_done = TimeStamp::Now();
  if (extension && extension->on_sampling_loop) extension->on_sampling_loop(start);
  const TimeStamp extension_done = TimeStamp::Now();
  ChunkedBuffer& buffer = GetSession().buffer;
  buffer.PrepareNextChunk();
  if (extension && extension->record_overhead) {
    buffer.PutObjects(EntryKind::kProfilerOverhead, start, locked - start, threads_done - locked,
                      counters_done - threads_done, extension_done - counters_done);
  }
  return max_expirations;
}

// The kernel disposition of the sampling signal is no longer our handler: the program replaced
// it with a raw rt_sigaction system call (the interposers see every libc call). A sample
// would now reach the program's disposition (by default: terminate), so every timer is
// destroyed, and the profile says why its samples end. Sampler thread.
void StopSamplingAfterHandlerLost() {
  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  if (!registry.sampling) return;
  registry.sampling = false;
  const TimeStamp now = TimeStamp::Now();
  for (RegisteredThread* thread : registry.live) {
    if (!thread->sampling.load(std::memory_order_relaxed)) continue;
    StopSamplingLocked(thread);
    DrainLocked(thread, now);
  }
  char reason[160];
  snprintf(reason, sizeof(reason),
           "the program replaced the handler of the sampling signal %d with a raw system call; "
           "sampling stopped",
           InstalledSamplingSignal());
  registry.sampling_stopped = reason;
  LogError("%s", reason);
}

struct SamplerThreadParams {
  TimeDuration interval;
  bool cpu_time_timers;  // Default mode (not precise): the threads' CPU-clock timers.
};

// The longest sampler loop with CPU-clock timers, in requested intervals.
constexpr int kMaxLoopIntervals = 8;

void* SamplerThreadMain(void* arg) {
  pthread_setname_np(pthread_self(), "StrataSampler");
  // The sampler never takes samples of itself, and must not receive the sampling signal.
  BlockSamplingSignalOnCurrentThread();
  const SamplerThreadParams params = *static_cast<SamplerThreadParams*>(arg);
  delete static_cast<SamplerThreadParams*>(arg);
  // A thread inherits its creator's scheduling policy. In a program whose threads run at a
  // real-time priority (SCHED_FIFO, SCHED_RR), the sampler would queue behind a busy thread
  // of equal priority that never yields, and the kernel does not always move a waiting
  // real-time thread to an idle CPU: seen as the sampler not running for a whole 588 ms
  // phase (runnable on the busy thread's CPU, the other CPU idle) in the takeover benchmark
  // at SCHED_FIFO, in ~1 run of 20-80. So it takes one priority level above its creator's
  // when allowed (it then preempts the program's real-time threads for its loop's few tens
  // of microseconds, as the sampling signal does), and keeps the inherited one otherwise.
  int policy = SCHED_OTHER;
  sched_param priority{};
  if (pthread_getschedparam(pthread_self(), &policy, &priority) == 0 &&
      (policy == SCHED_FIFO || policy == SCHED_RR) &&
      priority.sched_priority < sched_get_priority_max(policy)) {
    ++priority.sched_priority;
    (void)pthread_setschedparam(pthread_self(), policy, &priority);
  }
  // The TSC calibration for the handler's and markers' time stamps (once per process) is
  // measured across the first loops, from two anchors kTscCalibrationWindow apart, not by
  // sleeping through the window before the first loop: the rings hold 4 samples, and in
  // precise mode at 1 ms every thread's ring overflowed meanwhile (16 samples per thread
  // dropped at each session start). Until then time stamps come from the clock.
  std::optional<TscAnchor> calibration_start;
  if (!kTscIsHardwareCounter) {
    (void)ProcessTscCalibration();  // Exact at once.
  } else if (!ProcessTscCalibrationIfReady()) {
    calibration_start = TscAnchor::Capture();
  }
  // The loop's period, in requested intervals. With CPU-clock timers (default mode) the
  // kernel delivers a thread's signal at most once per scheduler tick, however short the
  // interval, and each signal says how many intervals it stands for (1 + si_overrun: 4 for
  // 1 ms at HZ=250). Waking more often than samples can arrive drains nothing and costs the
  // program samples: with two busy workers and two competing spinners on 2 CPUs, a loop
  // every 1 ms left the workers 164-314 samples per CPU-second (median ~220; gperftools
  // 230-250 in the same runs), a loop every 4 ms 231-268 (docs/benchmarks.md, "Default
  // mode: the sampler's wake-ups"). So the loop follows the most expirations one signal has
  // stood for in this session, capped (a thread gets at most one signal per tick, and its
  // ring holds 4). Precise mode's wall-clock timers fire every interval: its loop keeps
  // that period.
  int64_t loop_intervals = 1;
  TimeStamp next = TimeStamp::Now();
  while (!g_sampler_stop.load(std::memory_order_acquire)) {
    next = next + TimeDuration::FromNanoseconds(params.interval.ToNanoseconds() * loop_intervals);
    const TimeStamp now = TimeStamp::Now();
    if (next < now) next = now;  // Late (the machine is busy): do not try to catch up.
    const int64_t ns = next.ToNanoseconds();
    timespec deadline{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr) == EINTR) {
    }
    if (g_sampler_stop.load(std::memory_order_acquire)) break;
    const int expirations = SamplingLoopIteration();
    if (!SamplingHandlerInstalled() && InstalledSamplingSignal() != 0) {
      StopSamplingAfterHandlerLost();  // Idempotent.
    }
    if (params.cpu_time_timers && expirations > loop_intervals) {
      loop_intervals = std::min(expirations, kMaxLoopIntervals);
    }
    if (calibration_start) {
      const TscAnchor anchor = TscAnchor::Capture();
      if (anchor.time - calibration_start->time >= kTscCalibrationWindow) {
        const TscCalibration calibration = TscCalibration::FromAnchors(*calibration_start, anchor);
        if (calibration.IsValid()) {
          (void)OfferProcessTscCalibration(calibration);
          calibration_start.reset();
        } else {
          calibration_start = anchor;  // The clocks disagreed: measure again from here.
        }
      }
      if (ProcessTscCalibrationIfReady()) calibration_start.reset();  // Another thread's.
    }
  }
  return nullptr;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// libunwind warm-up, fork.

// libunwind is loaded (privately) and warmed outside signal context: its first use loads
// the library and allocates, never in the handler. Without it, samples walk frame pointers.
void WarmUpLibunwindForSampling() {
  if (!WarmUpLibunwind() && !g_libunwind_missing.exchange(true)) {
    LogError("libunwind.so.8 could not be loaded: native stacks use frame pointers only");
  }
}

namespace {

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
  }
  g_sampling_features.store(0, std::memory_order_relaxed);
  if (t_registered_thread) t_registered_thread->sampling.store(false, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------
// Session start and stop. Session mutex held.

void StartSamplerThreadLocked(Session& session, const ProfilerSettings& settings) {
  g_sampler_stop.store(false, std::memory_order_release);
  auto* params = new SamplerThreadParams{
      TimeDuration::FromMilliseconds(settings.interval_ms),
      (settings.features & kFeaturePrecise) == 0};
  const int rc = CreateProfilerThread(&session.sampler_thread, &SamplerThreadMain, params);
  session.sampler_running = rc == 0;
  if (rc != 0) {
    delete params;
    LogError("cannot start the sampler thread: %s", strerror(rc));
  }
}

void StopSamplerThreadLocked(Session& session) {
  if (!session.sampler_running) return;
  g_sampler_stop.store(true, std::memory_order_release);
  pthread_join(session.sampler_thread, nullptr);
  session.sampler_running = false;
}

size_t ChunkBytesFor(size_t limit) {
  return std::clamp<size_t>(limit / 64, 64 * 1024, 1024 * 1024);
}

void StartLocked(Session& session, const ProfilerSettings& settings) {
  WarmUpLibunwindForSampling();  // Before any thread can be sampled.
  const size_t limit = static_cast<size_t>(settings.buffer_megabytes) << 20;
  auto manager = std::make_unique<LocalLimitChunkManager>(
      limit, static_cast<BufferChunk::Length>(ChunkBytesFor(limit)));
  session.controlled_manager = manager.get();
  session.buffer.SetChunkManager(std::move(manager));
  session.start_time = TimeStamp::Now();
  g_sampling_features.store(settings.features, std::memory_order_relaxed);

  const TierExtension* extension = g_extension.load(std::memory_order_acquire);
  // A real-time signal nobody uses, or the one asked for (STRATA_SIGNAL); docs/sampling.md.
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
    LogInfo("sampling with signal %d (gdb: handle SIG%d nostop noprint pass)", signal_number,
            signal_number);
  }
  Registry& registry = GetRegistry();
  {
    AutoLock lock(registry.mutex);
    registry.settings = settings;
    registry.sampling = true;
    registry.dropped_samples = 0;
    registry.sampling_stopped.clear();
    ResetSamplingSourcesLocked(settings);
    // Threads that ended before this session are of no interest to it.
    std::vector<ThreadInfo> live_infos;
    for (RegisteredThread* thread : registry.live) {
      live_infos.push_back(registry.infos[thread->info_index]);
      live_infos.back().register_time = session.start_time;
      live_infos.back().profiled = false;
      live_infos.back().recorded = false;
      thread->info_index = live_infos.size() - 1;
    }
    registry.infos = std::move(live_infos);
    for (RegisteredThread* thread : registry.live) StartSamplingLocked(registry, thread);
  }
  g_profiler_state.store(kStateActive, std::memory_order_relaxed);

  StartSamplerThreadLocked(session, settings);
  LogInfo("profiler started: interval %.3f ms, buffer %u MiB, features %s", settings.interval_ms,
          settings.buffer_megabytes, FeatureNames(settings.features).c_str());
}

void StopLocked(Session& session) {
  if (!ProfilerIsActive()) return;
  g_profiler_state.store(0, std::memory_order_relaxed);
  StopSamplerThreadLocked(session);
  Registry& registry = GetRegistry();
  std::vector<ThreadId> threads_on_events;
  {
    AutoLock lock(registry.mutex);
    registry.sampling = false;
    threads_on_events = ThreadsOnEventsLocked(registry.live);
    for (RegisteredThread* thread : registry.live) {
      StopSamplingLocked(thread);
      while (thread->ring.TryBeginRead()) thread->ring.EndRead();  // Discard.
      if (StagingArea* staging = thread->marker_staging.load(std::memory_order_acquire)) {
        staging->Discard();
      }
    }
  }
  g_sampling_features.store(0, std::memory_order_relaxed);
  // A signal a closed event queued for a thread that has not run since must reach our
  // handler, not the program's disposition (by default: terminate).
  WaitForQueuedEventSignals(threads_on_events, InstalledSamplingSignal());
  (void)UninstallSamplingSignalHandler();
  session.controlled_manager = nullptr;
  session.buffer.ResetChunkManager();
  LogInfo("profiler stopped");
}

}  // namespace

ChunkedBuffer& SessionBuffer() { return GetSession().buffer; }

namespace {

// A marker's times from its options, reading the clock only where one is missing:
// TimeStamp::Now(), the clock of samples and of the caller's own Now() calls, so a marker
// recorded after a Now() call is never earlier than it, nor one recorded before it later.
__attribute__((always_inline)) inline void ResolveMarkerTimes(const MarkerTiming& timing,
                                                              TimeStamp* start, TimeStamp* end) {
  auto now = [] { return TimeStamp::Now(); };  // Never rdtsc where it is forbidden.
  switch (timing.phase) {
    case MarkerPhase::kInstant:
    case MarkerPhase::kIntervalStart:
      *start = timing.start.IsNull() ? now() : timing.start;
      break;
    case MarkerPhase::kInterval:
      *start = timing.start.IsNull() ? now() : timing.start;
      *end = timing.end.IsNull() ? (timing.start.IsNull() ? *start : now()) : timing.end;
      break;
    case MarkerPhase::kIntervalEnd:
      *end = timing.end.IsNull() ? now() : timing.end;
      break;
  }
}

// The calling thread's staging, created at its first marker; null when the thread is not
// registered (or in a forked child, where nothing is recorded into staging).
__attribute__((always_inline)) inline StagingArea* CurrentThreadStagingArea(
    RegisteredThread* thread) {
  if (!thread || g_forked_child.load(std::memory_order_relaxed)) return nullptr;
  StagingArea* staging = thread->marker_staging.load(std::memory_order_relaxed);
  if (__builtin_expect(staging == nullptr, 0)) {
    staging = new StagingArea;
    thread->marker_staging.store(staging, std::memory_order_release);
  }
  return staging;
}

}  // namespace

StagingArea* BeginMarker(const ProfilerString& name, Category category,
                           const MarkerOptions& options, uint8_t payload_tag,
                           MarkerHeaderRef* header) {
  // The recording thread's staging, unless the marker goes on another thread's track or
  // this thread is not registered.
  RegisteredThread* const thread = t_registered_thread;
  StagingArea* staging = nullptr;
  if (options.thread().IsSpecified() && !(thread && options.thread() == thread->tid)) {
    header->thread = options.thread();
    // Written directly: the target thread's staged markers go first, so that its own
    // markers recorded before this one (an IntervalStart this marker ends, say) stay before
    // it in the buffer, where the front-end pairs them in order.
    FlushStagedMarkersOfThread(options.thread());
  } else if ((staging = CurrentThreadStagingArea(thread)) != nullptr) {
    header->thread = thread->tid;
  } else {
    header->thread = CurrentThreadId();
  }
  header->phase = options.timing().phase;
  ResolveMarkerTimes(options.timing(), &header->start, &header->end);
  header->name = &name;
  header->category = static_cast<uint8_t>(category);
  header->payload_tag = payload_tag;
  return staging;
}

uint8_t* BeginStagedMarker(LiteralName name, Category category, const MarkerOptions& options,
                           uint8_t payload_tag, size_t payload_bytes, StagingArea** staging_out) {
  RegisteredThread* const thread = t_registered_thread;
  if (__builtin_expect(options.thread().IsSpecified() || options.capture_stack() ||
                           name.length > profile::kMaxCommonMarkerNameLength,
                       0)) {
    return nullptr;
  }
  StagingArea* const staging = CurrentThreadStagingArea(thread);
  if (__builtin_expect(staging == nullptr, 0)) return nullptr;
  const size_t entry_bytes = 1 + profile::kCommonMarkerHeaderBytes + payload_bytes;
  uint8_t* p = staging->TryReserveEntry(entry_bytes);
  if (__builtin_expect(p == nullptr, 0)) {
    // Full (or too large): the batch goes first, so this thread's order is kept.
    staging->FlushAndRewind(GetSession().buffer);
    p = staging->TryReserveEntry(entry_bytes);
    if (p == nullptr) return nullptr;  // Too large to stage: the general path writes it.
  }
  const MarkerTiming& timing = options.timing();
  TimeStamp start;
  TimeStamp end;
  ResolveMarkerTimes(timing, &start, &end);
  *p++ = static_cast<uint8_t>(EntryKind::kMarker);
  p = profile::WriteCommonMarkerHeader(p, thread->tid, timing.phase, start, end, name.chars,
                                       name.length, static_cast<uint8_t>(category), payload_tag);
  *staging_out = staging;
  return p;
}

void FlushAndRewindMarkerStaging(StagingArea* staging) {
  staging->FlushAndRewind(GetSession().buffer);
}

SampleSlot* BeginSample(void* thread_context, ucontext_t* context, int overruns) {
  return BeginSampleImpl(thread_context, context, overruns);
}
void CommitSample(void* thread_context) { CommitSampleImpl(thread_context); }
size_t WalkNativeSegment(void* thread_context, ucontext_t* context, const FrameRegisters* start,
                         NativeFrame* frames, size_t capacity, FrameRegisters* stopped) {
  return WalkNativeSegmentImpl(static_cast<RegisteredThread*>(thread_context), context, start,
                               frames, capacity, stopped);
}
SampleSlot* BeginSampleWithoutNativeWalk(void* thread_context, ucontext_t* context,
                                         int overruns, NativeWalkPlan* plan) {
  NativeWalkPlan ignored;
  return BeginSampleImpl(thread_context, context, overruns, plan ? plan : &ignored);
}

TakeoverReport AttachTierExtension(const TierExtension* extension) {
  TakeoverReport report;
  if (IsForkedChild() || !extension) return report;
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
  snapshot.sampling_signal = InstalledSamplingSignal();
  snapshot.samples_skipped_low_stack = SamplesSkippedForLowStack();
  snapshot.sampling_stopped = registry.sampling_stopped;
  snapshot.sampling_source = SamplingSourceReportLocked(registry.settings);
  PruneEndedThreadsLocked(registry);  // Only threads whose data may be in the buffer.
  for (RegisteredThread* thread : registry.live) {
    ThreadInfo& info = registry.infos[thread->info_index];
    const std::string name = ThreadNameFromProc(thread->tid);
    if (!name.empty()) info.name = name;
    snapshot.dropped_samples += thread->dropped_samples.load(std::memory_order_relaxed);
    // Everything recorded so far goes into the buffer.
    if (thread->sampling.load(std::memory_order_relaxed) && DrainRingLocked(thread)) {
      thread->has_sample = true;
      thread->last_seen_cpu = thread->cpu_clock.Read();
    }
    FlushMarkersLocked(thread);
  }
  snapshot.threads = registry.infos;
  return snapshot;
}

bool IsForkedChild() { return g_forked_child.load(std::memory_order_relaxed); }

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

namespace {
// A fork()ed child neither registers nor unregisters counters: nothing samples them there,
// and the counter list's lock may be held by the parent's sampler thread, which the child
// does not have.
int RegisterCounter(ProfilerCounter* counter) {
  if (IsForkedChild()) return -1;
  CounterRegistry& counters = GetCounters();
  AutoLock lock(counters.mutex);
  counters.counters.push_back(counter);
  counters.last.emplace_back(0, 0);
  return static_cast<int>(counters.counters.size() - 1);
}

void UnregisterCounter(ProfilerCounter* counter) {
  if (IsForkedChild()) return;
  CounterRegistry& counters = GetCounters();
  AutoLock lock(counters.mutex);
  for (ProfilerCounter*& c : counters.counters) {
    if (c == counter) c = nullptr;
  }
}

}  // namespace

std::vector<CounterDescription> CounterDescriptions() {
  if (IsForkedChild()) return {};
  CounterRegistry& counters = GetCounters();
  AutoLock lock(counters.mutex);
  std::vector<CounterDescription> out;
  for (ProfilerCounter* c : counters.counters) {
    out.push_back(c ? CounterDescription{c->name(), c->category(), c->description()}
                    : CounterDescription{nullptr, nullptr, nullptr});
  }
  return out;
}

}  // namespace base_internal

// ---------------------------------------------------------------------------------------
// Public API (profiler.h, counters.h).

using namespace base_internal;

ProfilerCounter::ProfilerCounter(const char* name, const char* category, const char* description)
    : name_(name), category_(category), description_(description) {
  RegisterCounter(this);
}
ProfilerCounter::~ProfilerCounter() { UnregisterCounter(this); }

void ProfilerInit() {
  static std::once_flag once;
  std::call_once(once, []() {
    InitMainThreadId();
    pthread_atfork(nullptr, nullptr, &OnForkChild);
    RegisterCurrentThreadImpl(nullptr);
  });
}

void ProfilerStart(const ProfilerSettings& settings) {
  if (IsForkedChild()) return;
  ProfilerInit();
  Session& session = GetSession();
  AutoLock lock(session.mutex);
  StopLocked(session);
  StartLocked(session, settings);
}

void ProfilerStop() {
  if (IsForkedChild()) return;
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
  g_profiler_state.fetch_and(~kStatePaused, std::memory_order_relaxed);
}

ProfilerSettings ProfilerCurrentSettings() {
  if (IsForkedChild()) return ProfilerSettings();  // No session there.
  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  return registry.settings;
}


}  // namespace strata
