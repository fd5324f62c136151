// Capture of one sample in the sampling-signal handler (sample_capture.h, tier_extension.h).
// Everything in this file runs in signal context on the sampled thread: no lock, no
// allocation, no errno left changed. See docs/sampling.md.
#include "base/internal/sampling/sample_capture.h"

#include <dlfcn.h>
#include <signal.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "base/internal/registry/thread_registry.h"
#include "base/internal/session/tier_extension.h"
#include "base/labels.h"
#include "platform/checked_read.h"
#include "platform/cpu_time.h"
#include "platform/sampling/frame_pointer_walker.h"
#include "platform/sampling/libunwind_loader.h"
#include "platform/sampling/libunwind_walker.h"
#include "platform/time_stamp.h"

namespace strata {
namespace base_internal {

namespace {

// ---------------------------------------------------------------------------------------
// Signal context. Everything between here and "End of signal context" (the end of this
// file: OnSamplingSignal and the tier's entry points) runs in a signal handler on the sampled
// thread: no lock, no allocation, no errno left changed (the dispatcher in platform/sampling
// saves it).

void CopyBounded(char* destination, const char* source, size_t capacity) {
  size_t i = 0;
  for (; i + 1 < capacity && source[i] != '\0'; ++i) destination[i] = source[i];
  destination[i] = '\0';
}

bool InLoadedObject(uintptr_t pc);

// True when the interrupted context is in a system call: the kernel left the pc on the
// `syscall` instruction (0f 05) to restart it, or just after it with -EINTR in rax. A thread
// preempted while running its own code is not. Reads code bytes of loaded objects only
// (never JIT code or unmapped memory), and only with CheckedRead (issue 33): the page below
// or above the pc may be one the program made unreadable (mprotect of its own code), and on
// a CPU with protection keys code can be execute-only (pkey_mprotect(PROT_EXEC), or
// mprotect(PROT_EXEC) alone, which Linux maps to an execute-only key there) and the handler
// runs with the kernel's default PKRU, which denies data reads of such pages:
// process_vm_readv copies them as a debugger would, or fails, never faults. Two bytes at
// the pc, then (if needed) the two before it: each read is one system call (~1 us), in
// precise mode only. Async-signal-safe.
bool InterruptedInSystemCall(const ucontext_t& context) {
  const uintptr_t pc = static_cast<uintptr_t>(context.uc_mcontext.gregs[REG_RIP]);
  if (pc < 2 || !InLoadedObject(pc) || !InLoadedObject(pc - 2)) return false;
  uint8_t code[2];
  if (!CheckedRead(reinterpret_cast<const void*>(pc), code, 2)) return false;
  if (code[0] == 0x0f && code[1] == 0x05) return true;
  if (context.uc_mcontext.gregs[REG_RAX] != -EINTR) return false;
  return CheckedRead(reinterpret_cast<const void*>(pc - 2), code, 2) && code[0] == 0x0f &&
         code[1] == 0x05;
}

// The handler's own cost (docs/sampling.md, "The handler's own cost"). The sampling source
// counts the thread's CPU, the handler's included: a walk of a deep stack (a 1 000-frame
// recursion: ~0.3 ms with libunwind) eats the next period, so deep code drew extra samples
// and the next sample carried the walk's CPU. The compensation, on the thread's CPU clock:
//  - a handler that ran long (wall time over kLongHandlerNs, so short ones cost no extra
//    clock read) measures its CPU at its end (RegisteredThread::handler_cpu_ns, reported as
//    profilingLog.longHandlerCpuMs); CPU deltas stay on the thread's own CPU clock, handlers
//    included, so that a thread's CPU in the profile is what the program's clock says;
//  - a signal is taken only when the program (not the handler) used at least half an
//    interval since the latest sample, net of the intervals already recorded (a credit that
//    diffuses the remainder): the samples stay one per interval of the program's own CPU.
//    Only for CPU-driven sources and single-interval signals (precise mode's wall-clock
//    timers and a timer signal that stood for several expirations are always taken).
// Returns whether this signal is sampled. Notes the handler's entry either way.
constexpr int64_t kLongHandlerNs = 10000;

bool TakeSignalNetOfHandlerCost(RegisteredThread* thread, uint32_t features, int64_t entry_cpu_ns,
                                int overruns) {
  const int64_t previous_exit_ns = thread->handler_exit_cpu_ns;
  thread->handler_entry_cpu_ns = entry_cpu_ns;
  thread->handler_exit_cpu_ns = entry_cpu_ns;  // Until a long handler measures its end.
  const int64_t interval_ns = g_sampling_interval_ns.load(std::memory_order_relaxed);
  if (entry_cpu_ns < 0 || previous_exit_ns < 0 || entry_cpu_ns < previous_exit_ns ||
      interval_ns <= 0 || (features & kFeaturePrecise) || overruns > 0) {
    thread->sample_credit_ns = 0;
    return true;
  }
  const int64_t credit = thread->sample_credit_ns + (entry_cpu_ns - previous_exit_ns);
  if (credit < interval_ns / 2) {
    thread->sample_credit_ns = credit;
    return false;
  }
  thread->sample_credit_ns = std::min(credit - interval_ns, interval_ns / 2);
  return true;
}

// At the end of a taken sample: a long handler's CPU goes to handler_cpu_ns.
// Also the handler's end time (handler_exit_time_ns), for a wait the sample interrupted.
void NoteHandlerEnd(RegisteredThread* thread) {
  const int64_t now_ns = TimeStamp::Now().ToNanoseconds();
  thread->handler_exit_time_ns = now_ns;
  if (thread->handler_entry_cpu_ns < 0) return;
  if (now_ns - thread->handler_entry_time_ns < kLongHandlerNs) return;
  const int64_t exit_cpu_ns = CurrentThreadCpuTime().ToNanoseconds();
  const int64_t spent_ns = exit_cpu_ns - thread->handler_entry_cpu_ns;
  if (spent_ns <= 0) return;
  thread->handler_exit_cpu_ns = exit_cpu_ns;
  // Single writer (this thread's handler): a load and a store, no read-modify-write needed.
  thread->handler_cpu_ns.store(thread->handler_cpu_ns.load(std::memory_order_relaxed) + spent_ns,
                               std::memory_order_relaxed);
}

// `plan` non-null: no native walk, the plan is filled instead (BeginSampleWithoutNativeWalk).
SampleSlot* BeginSampleImpl(void* context, ucontext_t* signal_context, int overruns,
                            NativeWalkPlan* plan = nullptr) {
  RegisteredThread* thread = static_cast<RegisteredThread*>(context);
  if (!thread->sampling.load(std::memory_order_relaxed) || ProfilerIsPaused()) return nullptr;
  const uint32_t features = g_sampling_features.load(std::memory_order_relaxed);
  const int64_t entry_cpu_ns =
      (features & kFeatureCpu) ? CurrentThreadCpuTime().ToNanoseconds() : -1;
  if (!TakeSignalNetOfHandlerCost(thread, features, entry_cpu_ns, overruns)) return nullptr;
  // The thread's scratch slot, null when its ring has no room left (sample_ring.h).
  SampleSlot* slot = thread->ring.BeginWrite();
  if (!slot) {
    thread->dropped_samples.fetch_add(1, std::memory_order_relaxed);
    thread->handler_entry_cpu_ns = -1;
    return nullptr;
  }
  thread->capturing.store(true, std::memory_order_relaxed);
  // TimeStamp::Now(), the clock of markers and of the program's own TimeStamp::Now() calls
  // (one clock: a sample lies between the Now() calls around it). ~50 ns more than the
  // calibrated TSC in the handler, p50 (docs/sampling.md). Never rdtsc on a thread that
  // forbade it (time_stamp.h, thread_restrictions.h).
  slot->time_ns = TimeStamp::Now().ToNanoseconds();
  thread->handler_entry_time_ns = slot->time_ns;
  // On the thread's CPU clock, as the program reads it (handlers included): the profile's CPU of
  // a thread sums to its CPU clock.
  slot->cpu_ns = entry_cpu_ns;
  slot->overruns = overruns;
  slot->in_system_call =
      (features & kFeaturePrecise) != 0 && InterruptedInSystemCall(*signal_context);
  slot->charged_system_call = false;  // Those are written by wrapped calls (kernel_cpu_charge.h).
  slot->missed_wait = false;          // As are those (wait/own_samples.h).
  slot->script_frame_count = 0;
  slot->script_text_bytes = 0;
  // LibunwindWalkMayDeadlock: this thread may hold the loader's list lock (libunwind_walker.h).
  // Not ready: the sampler has not loaded libunwind yet (its first loop), or could not.
  const bool frame_pointers = (features & kFeatureFramePointers) ||
                              !g_libunwind_ready.load(std::memory_order_acquire) ||
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
                                     SampleSlot::kMaxNativeFrames, &thread->walk_scratch));
  } else {
    const FrameRegisters registers = FrameRegistersFromSignalContext(*signal_context);
    slot->natives[0] = {registers.pc, registers.sp};
    slot->native_count = 1;
  }
  // Labels: the stack belongs to this very thread, which we interrupted; the fence pairs
  // with the one in ProfilingStack::Push.
  CopyLabelsIntoSlot(thread->profiling_stack, slot);
  return slot;
}

// True when `pc` lies in a loaded ELF object (not in JIT code or other anonymous memory).
// _dl_find_object is glibc's lock-free lookup for unwinders (glibc >= 2.35): no lock, no
// allocation once the dynamic loader is initialised.
bool InLoadedObject(uintptr_t pc) {
  dl_find_object found;
  return _dl_find_object(reinterpret_cast<void*>(pc), &found) == 0;
}

// *reads_logged (when given): false when the frames came from frame pointers, read directly
// (not through libunwind's accessor, so not in a WalkReadLog).
size_t WalkNativeSegmentImpl(RegisteredThread* thread, ucontext_t* signal_context,
                             const FrameRegisters* start, NativeFrame* frames, size_t capacity,
                             FrameRegisters* stopped, uint32_t features,
                             bool* reads_logged = nullptr, bool* ended = nullptr) {
  *stopped = FrameRegisters();
  if (ended) *ended = false;
  if (reads_logged) *reads_logged = true;
  if (capacity == 0) return 0;
  const FrameRegisters registers =
      start ? *start : FrameRegistersFromSignalContext(*signal_context);
  if (!InLoadedObject(registers.pc)) {
    *stopped = registers;
    return 0;
  }
  const LibunwindFunctions* unwind = LoadedLibunwind();
  const bool frame_pointers = (features & kFeatureFramePointers) ||
                              !g_libunwind_ready.load(std::memory_order_acquire) || !unwind ||
                              LibunwindWalkMayDeadlock();
  if (!(features & kFeatureStackWalk)) {
    frames[0] = {registers.pc, registers.sp};
    return 1;
  }
  if (frame_pointers) {
    if (reads_logged) *reads_logged = false;
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
  // Both in the thread's scratch, not on the handler's stack (thread_registry.h).
  ucontext_t& resumed = thread->walk_scratch.resumed;
  ucontext_t* walk_context = signal_context;
  if (start) {
    resumed = *signal_context;
    resumed.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(registers.pc);
    resumed.uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(registers.sp);
    resumed.uc_mcontext.gregs[REG_RBP] = static_cast<greg_t>(registers.fp);
    walk_context = &resumed;
  }
  unw_cursor_t& cursor = thread->walk_scratch.cursor;
  // Lookups during the walk must not take the loader's lock (libunwind_walker.h); libunwind's
  // reads outside this stack are checked (libunwind_imports.h).
  SetLibunwindWalkStackBounds(thread->bounds.low, thread->bounds.high);
  SetLibunwindWalkContext(walk_context);
  SetLibunwindLookupPc(registers.pc);
  if (unwind->init_local2(&cursor, walk_context, UNW_INIT_SIGNAL_FRAME) != 0) {
    SetLibunwindLookupPc(0);
    SetLibunwindWalkContext(nullptr);
    return 1;
  }
  size_t count = 1;
  uintptr_t previous_sp = registers.sp;
  while (count < capacity) {
    SetLibunwindLookupPc(count == 1 ? registers.pc : frames[count - 1].pc - 1);
    const int step = unwind->step(&cursor);
    if (step <= 0) {
      if (ended) *ended = step == 0;
      break;
    }
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
  SetLibunwindWalkContext(nullptr);
  return count;
}

void CommitSampleImpl(void* context) {
  RegisteredThread* thread = static_cast<RegisteredThread*>(context);
  // The record does not fit in the free part of the ring: dropped, as when full at the start.
  if (!thread->ring.CommitWrite()) thread->dropped_samples.fetch_add(1, std::memory_order_relaxed);
  NoteHandlerEnd(thread);
  thread->capturing.store(false, std::memory_order_release);
}

}  // namespace

void CopyLabelsIntoSlot(const ProfilingStack& labels, SampleSlot* slot) {
  uint32_t depth = labels.Depth();
  // Pairs with the fence in ProfilingStack::Push: the frames below `depth` are complete.
  std::atomic_signal_fence(std::memory_order_acquire);
  depth = std::min({depth, ProfilingStack::kCapacity, SampleSlot::kMaxLabels});
  for (uint32_t i = 0; i < depth; ++i) {
    const LabelFrame& frame = labels.frame(i);
    SampleSlot::Label& label = slot->labels[i];
    label.label = frame.label;
    label.stack_address = reinterpret_cast<uintptr_t>(frame.stack_address);
    label.push_site = reinterpret_cast<uintptr_t>(frame.push_site);
    label.category = frame.category;
    label.has_dynamic = frame.dynamic_string != nullptr;
    if (label.has_dynamic) CopyBounded(label.dynamic, frame.dynamic_string, sizeof(label.dynamic));
  }
  slot->label_count = depth;
}

// Base's own sampling callback (retired while a tier extension provides one).
void OnSamplingSignal(void* context, ucontext_t* signal_context, int overruns) {
  if (BeginSampleImpl(context, signal_context, overruns)) CommitSampleImpl(context);
}

// The tier's entry points (tier_extension.h), in signal context too.
SampleSlot* BeginSample(void* thread_context, ucontext_t* context, int overruns) {
  return BeginSampleImpl(thread_context, context, overruns);
}
void CommitSample(void* thread_context) { CommitSampleImpl(thread_context); }
size_t WalkNativeSegment(void* thread_context, ucontext_t* context, const FrameRegisters* start,
                         NativeFrame* frames, size_t capacity, FrameRegisters* stopped,
                         bool* ended) {
  return WalkNativeSegmentImpl(static_cast<RegisteredThread*>(thread_context), context, start,
                               frames, capacity, stopped,
                               g_sampling_features.load(std::memory_order_relaxed),
                               /*reads_logged=*/nullptr, ended);
}
size_t WalkCallerStack(RegisteredThread* thread, ucontext_t* context, NativeFrame* frames,
                       size_t capacity, uint32_t features, bool* reads_logged) {
  FrameRegisters stopped;
  return WalkNativeSegmentImpl(thread, context, nullptr, frames, capacity, &stopped, features,
                               reads_logged);
}
SampleSlot* BeginSampleWithoutNativeWalk(void* thread_context, ucontext_t* context,
                                         int overruns, NativeWalkPlan* plan) {
  NativeWalkPlan ignored;
  return BeginSampleImpl(thread_context, context, overruns, plan ? plan : &ignored);
}
// End of signal context.

}  // namespace base_internal
}  // namespace strata
