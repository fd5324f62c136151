// The full tier's attachment to the base tier's session machinery (tier_extension.h).
#include <ucontext.h>

#include <atomic>
#include <mutex>

#include "base/internal/session/core.h"
#include "base/internal/settings/log.h"
#include "base/internal/session/tier_extension.h"
#include "base/markers.h"
#include "full/full.h"
#include "full/internal/ipc.h"
#include "full/script/script_stack.h"
#include "full/internal/memory_counter.h"
#include "full/internal/unregistered_threads.h"
#include "platform/mutex.h"

namespace strata {
namespace full {
namespace {

using base_internal::TierExtension;

// Signal context: on the sampled thread, no lock, no allocation. A thread with a script
// engine attached takes its sample through full/script (script frames, native walk around
// JIT code); any other, base's capture of native frames and labels.
void FullOnSamplingSignal(void* thread_context, ucontext_t* context, int overruns) {
  if (script::internal::TakeScriptSample(thread_context, context, overruns)) return;
  script::internal::TakeOrdinarySample(thread_context, context, overruns);
}
// End of signal context.

std::atomic<bool> g_spy_unregistered{false};
std::atomic<int64_t> g_spy_interval_ns{100'000'000};
TimeStamp g_last_spy;  // Sampler thread only.

void FullOnSamplingLoop(TimeStamp loop_start) {
  SampleMemoryFallback();
  script::internal::PollScriptEngines();
  if (!g_spy_unregistered.load(std::memory_order_relaxed)) return;
  if (!g_last_spy.IsNull() &&
      (loop_start - g_last_spy).ToNanoseconds() < g_spy_interval_ns.load(std::memory_order_relaxed)) {
    return;
  }
  g_last_spy = loop_start;
  SpyOnUnregisteredThreads(loop_start);
}

const TierExtension kFullExtension = [] {
  TierExtension e;
  e.name = "full";
  e.signal_callback = &FullOnSamplingSignal;
  e.on_sampling_loop = &FullOnSamplingLoop;
  e.record_overhead = true;
  e.adjust_capture = &IpcAdjustCapture;  // [ipc] children's profiles (docs/ipc.md)
  return e;
}();

// Never destroyed: at exit (or in a forked child's exit) it may still be held.
Mutex& FullMutex() {
  static Mutex* const mutex = new Mutex("strata full tier");
  return *mutex;
}
// Written under FullMutex(); read without it by ScriptProfilingWanted().
std::atomic<bool> g_in_charge{false};

}  // namespace

// A fork()ed child has no profiler (docs/session.md, "fork"): the calls below return at once
// there, without the full tier's lock, which a thread that does not exist in the child may
// have held at the fork.

StartReport StartFull(const ProfilerSettings& session, const FullSettings& settings) {
  StartReport report;
  if (base_internal::IsForkedChild()) return report;
  AutoLock lock(FullMutex());
  EnableMemoryCounter(settings.memory_counter);
  script::internal::NoteSessionStart();
  g_spy_unregistered.store(settings.unregistered_threads, std::memory_order_relaxed);
  g_spy_interval_ns.store(static_cast<int64_t>(settings.unregistered_threads_interval_ms * 1e6),
                          std::memory_order_relaxed);
  if (g_in_charge) {
    // A repeated call: the full tier already runs this session (or starts the next one); there
    // is nothing to take over, and base's extension point already holds full's hooks.
    report.already_in_charge = true;
    const bool follows_parent = IpcOnStartFull();  // [ipc] Still following, or try again.
    if (!follows_parent && !ProfilerIsActive()) ProfilerStart(session);
    return report;
  }
  const base_internal::TakeoverReport takeover = base_internal::AttachTierExtension(&kFullExtension);
  g_in_charge = true;
  // [ipc] A program spawned by a profiled parent joins and follows the parent's session.
  const bool follows_parent = IpcOnStartFull();
  if (takeover.session_was_running) {
    report.took_over_base_session = true;
    report.sampler_handover_ms = takeover.sampler_handover.ToMilliseconds();
    report.buffer_blocks_before = takeover.buffer_blocks_before;
    return report;
  }
  if (!follows_parent && !ProfilerIsActive()) ProfilerStart(session);
  return report;
}

void StopFull() {
  if (base_internal::IsForkedChild()) return;
  AutoLock lock(FullMutex());
  ProfilerStop();
  script::internal::NotifySessionEnd();
}

void ShutdownFull() {
  if (base_internal::IsForkedChild()) return;
  AutoLock lock(FullMutex());
  if (!g_in_charge) return;
  IpcOnShutdownFull();  // [ipc] exit profile to the parent; stop listening
  base_internal::DetachTierExtension(&kFullExtension);
  EnableMemoryCounter(false);
  g_spy_unregistered.store(false, std::memory_order_relaxed);
  g_in_charge = false;
  script::internal::NotifySessionEnd();
}

bool FullIsInCharge() {
  if (base_internal::IsForkedChild()) return false;
  AutoLock lock(FullMutex());
  return g_in_charge;
}

bool StartIpcParentInCharge(const IpcSettings& settings, std::string* error) {
  // Under the full tier's lock: ShutdownFull (which stops listening) cannot run between the
  // check and the start, so no parent ever listens without the full tier in charge.
  AutoLock lock(FullMutex());
  if (!g_in_charge) {
    if (error) {
      *error = "the full tier is not in charge (call StartFull() first): without it the "
               "children would follow the session but never be gathered into its profile";
    }
    return false;
  }
  return StartIpcParentImpl(settings, error);
}

namespace script {

bool ScriptProfilingWanted() {
  return g_in_charge.load(std::memory_order_relaxed) && ProfilerIsActive();
}

}  // namespace script
}  // namespace full
}  // namespace strata

extern "C" int strata_full_start(void) {
  if (strata::base_internal::IsForkedChild()) return -1;
  const strata::full::StartReport report = strata::full::StartFull();
  if (report.already_in_charge) return 2;
  return report.took_over_base_session ? 0 : 1;
}

extern "C" void strata_full_shutdown(void) { strata::full::ShutdownFull(); }

extern "C" void strata_full_add_text_marker(const char* name, const char* text) {
  if (!strata::ProfilerIsActive() || !name) return;
  strata::AddTextMarker(strata::ProfilerString::Dynamic(name), strata::Category::kOther,
                        strata::MarkerOptions(), text ? text : "");
}
