#include "base/internal/session/capture.h"

#include <errno.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "base/categories.h"
#include "base/internal/allocations/native_allocations.h"
#include "base/internal/attach/attach.h"
#include "base/internal/session/core.h"
#include "base/internal/settings/env_settings.h"
#include "base/internal/session/library_history.h"
#include "base/internal/session/tier_extension.h"
#include "base/markers.h"
#include "platform/sampling/held_sampling_signals.h"
#include "shared/json/atomic_file.h"
#include "shared/json/gecko_profile_writer.h"
#include "shared/profile/profile_capture.h"

namespace strata {
namespace base_internal {
namespace {

// The "Text" marker payload's schema (Gecko flavour).
constexpr const char kTextMarkerSchema[] =
    R"({"name":"Text","display":["marker-chart","marker-table"],)"
    R"("chartLabel":"{marker.data.name}","tableLabel":"{marker.name} - {marker.data.name}",)"
    R"("data":[{"key":"name","label":"Details","format":"string","searchable":true}]})";

constexpr const char kForkedChildError[] =
    "profiling is off in a fork()ed child (no session, nothing to save)";

// The program's name: argv[0]'s base name (the kernel's comm is cut at 15 characters).
// profilingLog.foreignSamplingSignals: empty when nothing happened.
std::string DescribeForeignSamplingSignals(const HeldSamplingSignalCounts& counts) {
  std::string out;
  auto add = [&out](uint64_t count, const char* what) {
    if (count == 0) return;
    if (!out.empty()) out += "; ";
    out += std::to_string(count);
    out += what;
  };
  add(counts.handed_to_waiter, " sent by another process reached a thread waiting for it");
  add(counts.held, " held while the program blocked the signal");
  add(counts.delivered, " held ones read by its waits or delivered when it unblocked the signal");
  add(counts.held_now, " still held (pending, as plain)");
  add(counts.dropped, " dropped: more than 64 held at once");
  add(counts.samples_read_by_waits, " of Strata's samples read and dropped by its sigwait-style calls");
  if (counts.signalfds > 0 && (counts.held > 0 || counts.handed_to_waiter > 0)) {
    out += "; the program reads the signal by signalfd, where a held one is not readable "
           "(docs/host-contract.md, Signals)";
  }
  return out;
}

std::string ProgramName() {
  const char* name = program_invocation_short_name;
  return name && name[0] ? name : "program";
}

}  // namespace

bool WriteSessionProfile(JsonWriter& out, std::string* error) {
  // A fork()ed child has no session (and its session lock may be held by a thread that does
  // not exist there): nothing to wait for.
  if (IsOtherProcess()) {
    if (error) *error = kForkedChildError;
    return false;
  }
  SessionLock lock;
  if (!ProfilerIsActive()) {
    if (error) *error = "no profiling session is running";
    return false;
  }
  const SessionSnapshot snapshot = TakeSessionSnapshot();
  profile::CaptureInputs inputs;
  inputs.start_time = snapshot.start_time;
  inputs.process_name = ProgramName();
  inputs.symbolicate = (snapshot.settings.features & kFeatureRawAddresses) == 0;
  inputs.keep_strata_frames = (snapshot.settings.features & kFeatureOwnFrames) != 0;
  inputs.profiler_category = static_cast<uint8_t>(Category::kProfiler);

  ProfileMeta& meta = inputs.meta;
  meta.start_time = snapshot.start_time;
  meta.start_time_epoch_ns = EpochNanoseconds(snapshot.start_time);
  // The interval a sample stands for: the requested one with perf events and wall-clock
  // timers; with CPU-clock timers at least a scheduler tick (each signal stands for
  // 1 + si_overrun intervals), averaged over the session's samples (sampling_source.h).
  meta.interval_ms = snapshot.sampling_source.effective_interval_ms > 0
                         ? snapshot.sampling_source.effective_interval_ms
                         : snapshot.settings.interval_ms;
  meta.product = inputs.process_name;
  meta.presymbolicated = inputs.symbolicate;
  meta.profiling_start_time = snapshot.start_time;
  meta.profiling_end_time = TimeStamp::Now();
  for (const CategoryInfo& c : kCategoryInfos) meta.categories.push_back({c.name, c.color, {}});
  FillSystemInfo(meta);
  meta.marker_schemas.push_back(kTextMarkerSchema);
  for (const MarkerTypeFunctions& type : RegisteredMarkerTypes()) {
    if (type.schema) meta.marker_schemas.push_back(type.schema());
  }

  for (const ThreadInfo& info : snapshot.threads) {
    if (!info.profiled && !info.is_main) continue;
    profile::CaptureThread thread;
    thread.tid = info.tid;
    thread.name = info.is_main ? "GeckoMain" : (info.name.empty() ? "Thread" : info.name.c_str());
    thread.register_time = info.register_time;
    thread.unregister_time = info.unregister_time;
    thread.is_main = info.is_main;
    inputs.threads.push_back(std::move(thread));
  }
  for (const CounterDescription& d : CounterDescriptions()) {
    inputs.counters.push_back({d.name, d.category, d.description});
  }
  inputs.marker_type = [](uint8_t tag) { return MarkerTypeForTag(tag); };
  const TimeStamp session_start = snapshot.start_time;
  inputs.library_history = [session_start] { return LibraryHistorySince(session_start); };
  const TierExtension* extension = AttachedTierExtension();
  inputs.profiling_log = [&](JsonWriter& w) {
    w.StringProperty("profiler", extension ? extension->name : "base");
    w.StringProperty("features", FeatureNames(snapshot.settings.features));
    w.UintProperty("droppedSamples", snapshot.dropped_samples);
    // The sampling signal (docs/sampling.md), samples skipped for want of stack, and why
    // sampling stopped early if it did.
    w.IntProperty("samplingSignal", snapshot.sampling_signal);
    w.UintProperty("samplesSkippedLowStack", snapshot.samples_skipped_low_stack);
    if (snapshot.samples_skipped_low_stack > 0) {
      // Where the handler found too little stack below it (sampling_signal.h, "Stack").
      w.StartObjectProperty("samplesSkippedLowStackWhere");
      w.UintProperty("threadStack", snapshot.samples_skipped_low_stack_where[0]);
      w.UintProperty("mainStack", snapshot.samples_skipped_low_stack_where[1]);
      w.UintProperty("alternateSignalStack", snapshot.samples_skipped_low_stack_where[2]);
      w.UintProperty("unknownStack", snapshot.samples_skipped_low_stack_where[3]);
      w.EndObject();
    }
    if (snapshot.settings.features & kFeatureNativeAllocations) {
      // Sampled allocations and frees not recorded for want of stack on their thread
      // (native_allocations.h, "Stack").
      w.UintProperty("nativeAllocationsSkippedLowStack", NativeAllocationsSkippedForLowStack());
      // Records whose labels the cursor walk placed (the searches could not).
      w.UintProperty("nativeAllocationCursorWalks", NativeAllocationCursorWalks());
    }
    if (snapshot.unwind_lookups_unreadable > 0) {
      // Stack walks ended at an object whose headers or unwind tables the program made
      // unreadable (libunwind_imports.h).
      w.UintProperty("unwindLookupsUnreadable", snapshot.unwind_lookups_unreadable);
    }
    // What sent the sampling signals and why (docs/sampling.md, "Sampling sources").
    w.StringProperty("samplingSource", snapshot.sampling_source.description);
    if (InAttachedSession()) w.StringProperty("attached", kAttachedSessionNote);
    w.DoubleProperty("requestedInterval", snapshot.settings.interval_ms);
    // Kernel-mode CPU (docs/sampling.md, "Kernel CPU"): the perf event signals user mode
    // only; a wrapped call's CPU is charged to its own stack (wait/kernel_cpu_charge.h), an
    // unwrapped system call's is carried by the thread's next user-mode sample.
    w.StringProperty("kernelCpu",
                     "charged to the wrapped call that used it (leaf: the libc function, a "
                     "sample per interval of its CPU) on threads sampled by perf events; a "
                     "system call Strata does not wrap (raw syscall(), inline) is not sampled "
                     "where it happens: its CPU is carried by the thread's next user-mode "
                     "sample (the sampling signal is never sent inside a system call, where "
                     "it would cut waits short); CPU-clock timers sample kernel time on "
                     "the system call's return");
    // The CPU of long sampling handlers (deep walks), not in any sample's CPU delta
    // (docs/sampling.md, "The handler's own cost").
    w.DoubleProperty("longHandlerCpuMs",
                     static_cast<double>(snapshot.handler_cpu_excluded_ns) / 1e6);
    if (snapshot.sampling_source.lost_events > 0) {
      w.UintProperty("lostSamplingEvents", snapshot.sampling_source.lost_events);
    }
    if (!snapshot.sampling_stopped.empty()) {
      w.StringProperty("samplingStopped", snapshot.sampling_stopped);
    }
    // Foreign instances of the sampling signal where the program blocks it, and Strata's own
    // samples the program's waits dequeued (held_sampling_signals.h); only when any.
    const std::string foreign = DescribeForeignSamplingSignals(CountHeldSamplingSignals());
    if (!foreign.empty()) w.StringProperty("foreignSamplingSignals", foreign);
  };
  if (extension && extension->adjust_capture) extension->adjust_capture(inputs);
  return profile::WriteProfile(inputs, SessionBuffer(), out, error);
}

bool SaveSessionProfile(const std::string& path, std::string* error) {
  // Before the temporary file is made: a forked child leaves no file behind.
  if (IsOtherProcess()) {
    if (error) *error = kForkedChildError;
    return false;
  }
  AtomicJsonFile file(path);
  if (!file.ok()) {
    if (error) *error = file.error();
    return false;
  }
  if (!WriteSessionProfile(file.writer(), error)) return false;
  if (!file.Commit()) {
    if (error) *error = file.error();
    return false;
  }
  return true;
}

}  // namespace base_internal
}  // namespace strata
