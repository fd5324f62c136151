// The always-on performance monitor: per-group CPU cost of monitored code, jank histograms,
// alerts. After Firefox's Performance Monitoring API (docs/perfmon.md), for any C++ program.
//
//   strata::perfmon::EnableMonitoring();                       // once (calibrates the TSC)
//   static strata::perfmon::PerformanceGroup g_layout("layout");
//   ...
//   while (running) {                                          // the event loop
//     Event e = queue.Take();
//     {
//       strata::perfmon::AutoStopwatch watch({&g_layout, e.plugin_group()});
//       e.Run();                                                // rdtsc around it
//     }
//     strata::perfmon::IterationDone();                       // commit, histogram, alerts
//   }
//   strata::perfmon::Snapshot s = strata::perfmon::TakeSnapshot();  // any thread
//
// Groups. A PerformanceGroup stands for anything the program cares about (a thread, a module,
// a plug-in, a request type, a script). Code runs inside one or more groups at once: either
// the caller names them (AutoStopwatch(GroupList)) or a group provider decides
// (SetGroupProvider + AutoStopwatch(context) / ResolveGroups(context)), as the embedding
// does for compartments in the seed. Shared groups are active by default, per-item groups
// (kPerItem) inactive; an inactive group is never acquired and costs nothing.
//
// Measurement. Entering a stopwatch acquires its active, not-yet-acquired groups and reads the
// cycle counter (rdtsc); leaving reads it again and adds the elapsed cycles to each acquired
// group (nested stopwatches: an inner one only acquires the groups the outer ones do not
// hold, so nothing is counted twice). IterationDone() ends one event-loop iteration: it reads
// the thread's CPU clock once, renormalises the iteration's cycles to CPU time (below), and
// commits each group's cost: total CPU time, total cycles, iterations, and the jank
// histogram: how many iterations cost more than 1, 2, 4, ... 512 ms (cumulative, as in the
// seed: a 3 ms iteration counts in ">1 ms" and ">2 ms"). NestedLoopEntered() cancels every
// measure in progress on the thread (the outer loop's cost is dropped, not double-counted).
//
// Renormalisation (the seed: "renormalizing the result with the actual CPU clocks once per
// event"): cycles are converted to nanoseconds with the process TSC calibration, then
// scaled to the thread CPU time of their window, read with the thread CPU clock at window
// boundaries (SetRenormalisation; by default every event of 250 µs or more is a window of
// its own). Cycles give the split between the groups of a window; the CPU clock the total
// (a group blocked or descheduled inside monitored code is not charged for the wall time).
//
// Alerts (AddAlert): a callback when a group's cost in one iteration reaches a threshold,
// once per offending iteration and group. With a profiling session active, an alert also
// records a "Jank" marker spanning the iteration, and can save the profile to a file
// (ProfilerSaveProfile): the monitor as a capture trigger.
//
// Thread safety.
//  - Recording (AutoStopwatch, IterationDone, NestedLoopEntered) works on per-thread state;
//    a group RECORDS ON ONE THREAD (its "recent" cost and acquired flag are plain fields of
//    the group touched only by that thread). Use one group per thread for a component that
//    runs on several threads (same name is fine; snapshots list both).
//  - Committed statistics are relaxed atomics: TakeSnapshot(), PerformanceGroup::Stats() and
//    SetActive() are safe from any thread at any time.
//  - Group construction/destruction, SetGroupProvider, AddAlert/RemoveAlert, Enable/Disable
//    are thread-safe (a mutex). A group must outlive every stopwatch that uses it and be
//    destroyed on its recording thread outside a stopwatch, after IterationDone().
//  - Alert callbacks run on the thread that called IterationDone(), without any monitor lock
//    held (they may add or remove alerts).
//  - Nothing here is async-signal-safe.
//
// JavaScript: full/script/spidermonkey/script_groups.h gives a SpiderMonkey embedding's
// stopwatches a group per global and per script file. C: perfmon_c.h. The code lives in
// libstrata_full.so (link @strata//:full, or pkg-config strata-full: docs/install.md).
#ifndef STRATA_FULL_PERFMON_PERFMON_H_
#define STRATA_FULL_PERFMON_PERFMON_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"

namespace strata {

class JsonWriter;
class ProfilerCounter;

namespace perfmon {

// Jank histogram: bucket k counts the iterations whose cost exceeded 2^k ms (k = 0..9).
inline constexpr size_t kJankBuckets = 10;
inline constexpr int64_t JankThresholdMs(size_t bucket) { return int64_t{1} << bucket; }

// The most groups one stopwatch (or GroupList) holds.
inline constexpr size_t kMaxGroupsPerStopwatch = 8;

// Committed statistics of one group.
struct GroupStats {
  uint64_t id = 0;  // Unique in the process, never reused.
  std::string name;
  bool per_item = false;
  bool active = false;
  TimeDuration cpu_time;    // Renormalised CPU time.
  uint64_t cycles = 0;      // Raw counter ticks (before renormalisation).
  uint64_t iterations = 0;  // Iterations in which the group ran.
  std::array<uint64_t, kJankBuckets> jank{};  // jank[k]: iterations costing > 2^k ms.
};

class PerformanceGroup {
 public:
  enum class Kind : uint8_t {
    kShared,   // A thread, module, plug-in...: active by default.
    kPerItem,  // One item among many (one script, one request): inactive by default.
  };

  explicit PerformanceGroup(std::string name, Kind kind = Kind::kShared);
  ~PerformanceGroup();
  PerformanceGroup(const PerformanceGroup&) = delete;
  PerformanceGroup& operator=(const PerformanceGroup&) = delete;

  const std::string& name() const { return name_; }
  uint64_t id() const { return id_; }
  Kind kind() const { return kind_; }

  // Active groups are measured; inactive ones are skipped by stopwatches. Any thread; takes
  // effect at the next stopwatch entry.
  bool IsActive() const { return active_.load(std::memory_order_relaxed); }
  void SetActive(bool active) { active_.store(active, std::memory_order_relaxed); }

  // Committed statistics. Any thread.
  GroupStats Stats() const;

  // Publishes the jank histogram and the CPU time as profile counters (one track each:
  // "<name> CPU µs", "<name> >1ms", ... "<name> >512ms"), sampled by every profiling
  // session while the group lives. Idempotent. Not on the recording hot path.
  void EnableProfileCounters();

 private:
  friend class AutoStopwatch;
  friend struct GroupAccess;
  friend struct ThreadStateAccess;

  const std::string name_;
  const uint64_t id_;
  const Kind kind_;
  std::atomic<bool> active_;

  // Recording thread only.
  bool acquired_ = false;
  bool recent_ = false;  // In the thread's recent list.
  PerformanceGroup* next_recent_ = nullptr;
  uint64_t window_cycles_ = 0;  // Since the renormalisation window started.
  uint64_t recent_cycles_ = 0;  // Earlier windows of this iteration.
  int64_t recent_ns_ = 0;       // Their renormalised cost.

  // Committed; relaxed atomics (read by snapshots on any thread).
  std::atomic<int64_t> total_cpu_ns_{0};
  std::atomic<uint64_t> total_cycles_{0};
  std::atomic<uint64_t> iterations_{0};
  std::array<std::atomic<uint64_t>, kJankBuckets> jank_{};

  struct Counters;
  std::atomic<Counters*> counters_{nullptr};  // Owned; set once.
};

// Up to kMaxGroupsPerStopwatch groups (extra ones are dropped), no allocation.
class GroupList {
 public:
  GroupList() = default;
  GroupList(std::initializer_list<PerformanceGroup*> groups) {
    for (PerformanceGroup* g : groups) Add(g);
  }
  // Ignores null and, past capacity, drops (returns false).
  bool Add(PerformanceGroup* group) {
    if (!group) return true;
    if (size_ == kMaxGroupsPerStopwatch) return false;
    groups_[size_++] = group;
    return true;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  PerformanceGroup* operator[](size_t i) const { return groups_[i]; }
  PerformanceGroup* const* begin() const { return groups_.data(); }
  PerformanceGroup* const* end() const { return groups_.data() + size_; }

 private:
  std::array<PerformanceGroup*, kMaxGroupsPerStopwatch> groups_{};
  size_t size_ = 0;
};

// Decides the groups of a piece of code identified by an opaque `context` (a module, a
// request, a JS global...). Called by ResolveGroups / AutoStopwatch(context) on the calling
// thread; cache the GroupList where the context lives when entering often.
using GroupProvider = std::function<void(const void* context, GroupList& groups)>;
void SetGroupProvider(GroupProvider provider);  // Empty: no groups.
GroupList ResolveGroups(const void* context);

// Monitoring is off until enabled. EnableMonitoring() calibrates the TSC the first time
// (~20 ms). Any thread.
void EnableMonitoring();
void DisableMonitoring();
bool IsMonitoringEnabled();

// Renormalisation granularity: how often the thread CPU clock is read (a syscall, ~1.3 µs
// on this VM) to turn the ticks of a window into CPU time (docs/perfmon.md).
//  - kAdaptive (default): a window closes at the first stopwatch entry or exit (any
//    nesting depth) at least `adaptive_window` (default 250 µs) after the window started,
//    and at an outermost entry after an unmonitored gap of a tenth of that (25 µs). Every
//    stretch of 250 µs or more between two stopwatch boundaries is then renormalised on its
//    own (exact attribution under descheduling); shorter ones share a window. A stopwatch
//    that closes no window reads only the cycle counter; reads happen at most once per
//    250 µs of continuous monitored work (< 1 %) plus once per event after a 25 µs pause.
//  - kPerEvent: every stopwatch boundary closes a window (two clock reads per stopwatch).
//  - kPerIteration: one read per IterationDone(), the cheapest: the scale is shared by the
//    whole iteration, so descheduling that hits one group more than another moves cost
//    between them.
// Any thread; takes effect at the next window boundary of each thread.
enum class Renormalisation : uint8_t { kAdaptive, kPerEvent, kPerIteration };
inline constexpr int64_t kDefaultAdaptiveWindowNs = 250000;
void SetRenormalisation(
    Renormalisation mode,
    TimeDuration adaptive_window = TimeDuration::FromNanoseconds(kDefaultAdaptiveWindowNs));

// What recording cost the calling thread so far (diagnostics; tests count reads).
struct ThreadRecordingStats {
  uint64_t cycle_counter_reads = 0;  // rdtsc.
  uint64_t cpu_clock_reads = 0;      // CLOCK_THREAD_CPUTIME_ID (syscall).
  uint64_t windows = 0;              // Renormalisation windows closed.
  uint64_t iterations = 0;           // IterationDone() calls.
};
ThreadRecordingStats CurrentThreadRecordingStats();

// RAII: measures the scope for the given groups (see the top of this file). Cost: a few
// dozen cycles (docs/benchmarks.md "Performance monitor"); with monitoring off or only
// inactive groups, a few loads.
class AutoStopwatch {
 public:
  explicit AutoStopwatch(const GroupList& groups) { Enter(groups); }
  AutoStopwatch(std::initializer_list<PerformanceGroup*> groups) { Enter(GroupList(groups)); }
  // Groups from the group provider.
  explicit AutoStopwatch(const void* context) { Enter(ResolveGroups(context)); }
  ~AutoStopwatch() {
    if (count_ != 0) Exit();
  }
  AutoStopwatch(const AutoStopwatch&) = delete;
  AutoStopwatch& operator=(const AutoStopwatch&) = delete;

 private:
  friend struct ThreadStateAccess;
  void Enter(const GroupList& groups);
  void Exit();

  AutoStopwatch* prev_ = nullptr;  // Enclosing measuring stopwatch on this thread.
  uint64_t start_ = 0;             // Counter at entry, or at the last window boundary.
  // Parts of earlier renormalisation windows (a window closed while this one ran).
  uint64_t pending_cycles_ = 0;
  int64_t pending_ns_ = 0;
  uint32_t count_ = 0;  // Acquired groups; 0: not measuring (or cancelled).
  std::array<PerformanceGroup*, kMaxGroupsPerStopwatch> acquired_;
};

// The calling thread entered a nested event loop: cancels every measure in progress on it.
void NestedLoopEntered();
// The calling thread finished an event-loop iteration: commits the recent costs (and
// cancels any stopwatch still running on the thread, as the seed releases all groups).
void IterationDone();

// --- Snapshots -----------------------------------------------------------------------------

struct Snapshot {
  TimeStamp taken;
  std::vector<GroupStats> groups;  // In creation order.

  // The group with this id, or null.
  const GroupStats* Find(uint64_t id) const;
  // The first group with this name, or null.
  const GroupStats* FindByName(const std::string& name) const;

  // {"time":ms,"jankThresholdsMs":[1,...,512],"groups":[{"id","name","perItem","active",
  //  "cpuTimeMs","cycles","iterations","jank":[...]}]}
  void WriteJson(JsonWriter& writer) const;
  std::string ToJson() const;
};

// All live groups. Any thread; takes the group-list lock, reads atomics.
Snapshot TakeSnapshot();
// newer - older, group by group (matched by id): what happened in between. Groups only in
// `newer` are kept whole; groups gone from `newer` are dropped. "active" is newer's.
Snapshot Subtract(const Snapshot& newer, const Snapshot& older);

// --- Alerts --------------------------------------------------------------------------------

struct AlertInfo {
  const PerformanceGroup* group;  // Valid during the callback.
  std::string group_name;
  TimeDuration cost;       // The group's CPU cost in this iteration.
  TimeDuration threshold;
  uint64_t iteration = 0;  // The thread's iteration counter (IterationDone calls so far).
  ThreadId thread;
  TimeStamp iteration_start;
  TimeStamp iteration_end;
  bool jank_marker_recorded = false;
  std::string saved_profile_path;  // Non-empty when this alert saved the profile.
};
using AlertCallback = std::function<void(const AlertInfo&)>;

struct AlertOptions {
  // Record a "Jank" marker when a profiling session is active.
  bool jank_marker = true;
  // When non-empty and a session is active, save the profile there (through a temporary
  // file and a rename). "{n}" in the path is replaced by the alert's save count (0, 1...).
  std::string save_profile_path;
  // At most one successful save per this interval per alert (saving costs tens of ms). A
  // failed save does not count: the next janky iteration tries again.
  TimeDuration min_save_interval = TimeDuration::FromSeconds(10);
};

using AlertId = uint64_t;
// `group` null: every group. The callback may be empty (marker / capture only).
AlertId AddAlert(const PerformanceGroup* group, TimeDuration threshold, AlertCallback callback,
                 AlertOptions options = AlertOptions());
void RemoveAlert(AlertId id);

// The jank marker's payload type (base/markers.h typed marker): group, cost, threshold,
// iteration; an interval over the janky iteration, on the thread that ran it.
struct JankMarker {
  static constexpr const char* MarkerTypeName() { return "Jank"; }
  static void StreamJSONMarkerData(JsonWriter& w, const std::string& group, int64_t cost_ns,
                                   int64_t threshold_ns, uint64_t iteration);
  static std::string MarkerTypeSchemaJson();
};

}  // namespace perfmon
}  // namespace strata

#endif  // STRATA_FULL_PERFMON_PERFMON_H_
