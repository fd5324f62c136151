// The performance monitor (perfmon.h; docs/perfmon.md).
#include "full/perfmon/perfmon.h"

#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <utility>

#include "base/counters.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "platform/cpu_time.h"
#include "platform/tsc_clock.h"
#include "shared/json/json_writer.h"

namespace strata {
namespace perfmon {

// --- Process state -------------------------------------------------------------------------

namespace {

std::atomic<bool> g_enabled{false};
// Renormalisation window in counter ticks: a window closes (one thread-CPU clock read) at
// an outermost stopwatch boundary once it is at least this long. 0: every outermost
// stopwatch (kPerEvent); max: only IterationDone (kPerIteration).
std::atomic<uint64_t> g_window_ticks{0};
// An unmonitored gap this long closes the window at the next outermost entry: a tenth of the
// window (0 in kPerEvent, max in kPerIteration).
std::atomic<uint64_t> g_gap_ticks{0};
std::atomic<Renormalisation> g_mode{Renormalisation::kAdaptive};
std::atomic<int64_t> g_adaptive_window_ns{kDefaultAdaptiveWindowNs};
std::atomic<uint64_t> g_next_group_id{1};

struct Alert {
  AlertId id;
  const PerformanceGroup* group;  // Null: every group.
  TimeDuration threshold;
  AlertCallback callback;
  AlertOptions options;
  // Mutable save state, shared by the copies in successive alert lists.
  struct SaveState {
    std::mutex mutex;
    TimeStamp last_save;
    uint64_t saves = 0;
  };
  std::shared_ptr<SaveState> save_state;
};
using AlertList = std::vector<Alert>;

struct Registry {
  std::mutex mutex;
  std::vector<PerformanceGroup*> groups;           // Creation order.
  GroupProvider provider;                          // Copied out under the lock.
  std::shared_ptr<const AlertList> alerts;         // Copy-on-write.
  AlertId next_alert_id = 1;
};

// The monitor keeps working in a fork()ed child (it is not a profiling session): the
// registry's lock, held only for short bookkeeping that runs no program code, is taken
// around fork() so that the child never inherits it locked by a thread it does not have.
void LockRegistryForFork();
void UnlockRegistryAfterFork();

Registry& GetRegistry() {
  static Registry* registry = [] {
    Registry* r = new Registry;  // Never destroyed: groups may be static.
    pthread_atfork(&LockRegistryForFork, &UnlockRegistryAfterFork, &UnlockRegistryAfterFork);
    return r;
  }();
  return *registry;
}

void LockRegistryForFork() { GetRegistry().mutex.lock(); }
void UnlockRegistryAfterFork() { GetRegistry().mutex.unlock(); }

std::atomic<size_t> g_alert_count{0};

// Per-thread recording state. Trivially constructible and destructible: no TLS guard, no
// exit-time destructor, cheap to reach from the stopwatch.
//
// The renormalisation window runs from the last thread-CPU-clock read (window_start_*) to
// the next one; see CloseWindow().
struct ThreadState {
  AutoStopwatch* top;               // Innermost measuring stopwatch.
  PerformanceGroup* recent_head;    // Groups that ran this iteration.
  uint64_t outermost_cycles;        // M: outermost monitored ticks in the window.
  uint64_t window_start_ticks;      // Counter when the window started.
  int64_t window_start_cpu_ns;      // Thread CPU clock when the window started.
  int64_t iteration_start_ns;       // TimeStamp of the previous IterationDone.
  uint64_t iteration;               // IterationDone calls so far.
  uint64_t cycle_counter_reads;     // Diagnostics (CurrentThreadRecordingStats).
  uint64_t cpu_clock_reads;
  uint64_t windows;
  bool baseline_valid;              // window_start_* / iteration_start_ns are set.
  bool window_stale;                // Close the window at the next outermost entry.
};
// initial-exec: no __tls_get_addr call on the hot path, also in libstrata_full.so when it is
// dlopen'ed (as the base tier's thread-locals; glibc's static TLS reserve holds it).
__attribute__((tls_model("initial-exec"))) thread_local ThreadState t_state;

void TakeBaseline(ThreadState& ts) {
  ts.window_start_cpu_ns = CurrentThreadCpuTime().ToNanoseconds();
  ts.window_start_ticks = ReadTscTicks();
  ts.outermost_cycles = 0;
  ++ts.cpu_clock_reads;
  ++ts.cycle_counter_reads;
  ts.iteration_start_ns = TimeStamp::Now().ToNanoseconds();
  ts.baseline_valid = true;
  ts.window_stale = false;
}

}  // namespace

struct ThreadStateAccess {
  // Releases the groups of every measuring stopwatch of the thread; they will add nothing
  // (also not what earlier windows renormalised for them: it is pending in the stopwatch).
  static void CancelAll(ThreadState& ts) {
    for (AutoStopwatch* sw = ts.top; sw != nullptr;) {
      for (uint32_t i = 0; i < sw->count_; ++i) sw->acquired_[i]->acquired_ = false;
      sw->count_ = 0;
      sw->pending_cycles_ = 0;
      sw->pending_ns_ = 0;
      AutoStopwatch* prev = sw->prev_;
      sw->prev_ = nullptr;
      sw = prev;
    }
    ts.top = nullptr;
  }

  // The outermost running stopwatch's ticks in the window ending at `end_ticks` (0 when none
  // runs): monitored time of the window not yet in ts.outermost_cycles.
  static uint64_t RunningOutermostTicks(const ThreadState& ts, uint64_t end_ticks) {
    const AutoStopwatch* sw = ts.top;
    if (sw == nullptr) return 0;
    while (sw->prev_ != nullptr) sw = sw->prev_;
    return end_ticks - sw->start_;
  }

  // A window closes while stopwatches run: each keeps its part of the window, renormalised
  // with the window's scale, as pending cost (added to its groups when it exits, dropped if
  // it is cancelled), and measures on from `next_start_ticks`.
  static void SplitRunning(ThreadState& ts, uint64_t end_ticks, uint64_t next_start_ticks,
                           const TscCalibration& calibration, double scale);
};

// --- Groups --------------------------------------------------------------------------------

struct PerformanceGroup::Counters {
  explicit Counters(const std::string& group) {
    cpu_name = group + " CPU \xC2\xB5s";
    for (size_t k = 0; k < kJankBuckets; ++k) {
      jank_names[k] = group + " >" + std::to_string(JankThresholdMs(k)) + "ms";
    }
    cpu = std::make_unique<ProfilerCounter>(cpu_name.c_str(), "perfmon",
                                            "CPU time of the group (perfmon)");
    for (size_t k = 0; k < kJankBuckets; ++k) {
      jank[k] = std::make_unique<ProfilerCounter>(
          jank_names[k].c_str(), "perfmon", "Iterations whose cost exceeded the threshold");
    }
  }
  // Names first: the counters (destroyed first) point into them.
  std::string cpu_name;
  std::array<std::string, kJankBuckets> jank_names;
  std::unique_ptr<ProfilerCounter> cpu;
  std::array<std::unique_ptr<ProfilerCounter>, kJankBuckets> jank;
};

PerformanceGroup::PerformanceGroup(std::string name, Kind kind)
    : name_(std::move(name)),
      id_(g_next_group_id.fetch_add(1, std::memory_order_relaxed)),
      kind_(kind),
      active_(kind == Kind::kShared) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  registry.groups.push_back(this);
}

PerformanceGroup::~PerformanceGroup() {
  {
    Registry& registry = GetRegistry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    registry.groups.erase(std::find(registry.groups.begin(), registry.groups.end(), this));
  }
  // Still in the thread's recent list (destroyed before IterationDone): unlink it.
  if (recent_) {
    ThreadState& ts = t_state;
    for (PerformanceGroup** link = &ts.recent_head; *link; link = &(*link)->next_recent_) {
      if (*link == this) {
        *link = next_recent_;
        break;
      }
    }
  }
  delete counters_.load(std::memory_order_acquire);
}

GroupStats PerformanceGroup::Stats() const {
  GroupStats s;
  s.id = id_;
  s.name = name_;
  s.per_item = kind_ == Kind::kPerItem;
  s.active = IsActive();
  s.cpu_time = TimeDuration::FromNanoseconds(total_cpu_ns_.load(std::memory_order_relaxed));
  s.cycles = total_cycles_.load(std::memory_order_relaxed);
  s.iterations = iterations_.load(std::memory_order_relaxed);
  for (size_t k = 0; k < kJankBuckets; ++k) s.jank[k] = jank_[k].load(std::memory_order_relaxed);
  return s;
}

void PerformanceGroup::EnableProfileCounters() {
  if (counters_.load(std::memory_order_acquire) != nullptr) return;
  auto* fresh = new Counters(name_);
  Counters* expected = nullptr;
  if (!counters_.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
    delete fresh;
    return;
  }
  // Catch up with what was committed before.
  fresh->cpu->Set(total_cpu_ns_.load(std::memory_order_relaxed) / 1000);
  for (size_t k = 0; k < kJankBuckets; ++k) {
    fresh->jank[k]->Set(static_cast<int64_t>(jank_[k].load(std::memory_order_relaxed)));
  }
}

// Commit-side access to a group's private fields.
struct GroupAccess {
  // Adds one iteration's cost; returns nothing.
  static void Commit(PerformanceGroup& g, uint64_t cycles, int64_t cost_ns) {
    g.total_cycles_.fetch_add(cycles, std::memory_order_relaxed);
    g.total_cpu_ns_.fetch_add(cost_ns, std::memory_order_relaxed);
    g.iterations_.fetch_add(1, std::memory_order_relaxed);
    PerformanceGroup::Counters* counters = g.counters_.load(std::memory_order_acquire);
    if (counters) counters->cpu->Add(cost_ns / 1000);
    for (size_t k = 0; k < kJankBuckets; ++k) {
      if (cost_ns <= JankThresholdMs(k) * 1000000) break;
      g.jank_[k].fetch_add(1, std::memory_order_relaxed);
      if (counters) counters->jank[k]->Add(1);
    }
  }
  static PerformanceGroup*& NextRecent(PerformanceGroup& g) { return g.next_recent_; }
  static uint64_t& RecentCycles(PerformanceGroup& g) { return g.recent_cycles_; }
  static uint64_t& WindowCycles(PerformanceGroup& g) { return g.window_cycles_; }
  static int64_t& RecentNs(PerformanceGroup& g) { return g.recent_ns_; }
  static bool& Recent(PerformanceGroup& g) { return g.recent_; }
};

// --- Provider, enabling --------------------------------------------------------------------

void SetGroupProvider(GroupProvider provider) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  registry.provider = std::move(provider);
}

GroupList ResolveGroups(const void* context) {
  GroupProvider provider;
  {
    Registry& registry = GetRegistry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    provider = registry.provider;
  }
  GroupList groups;
  if (provider) provider(context, groups);
  return groups;
}

namespace {
uint64_t WindowTicksFor(Renormalisation mode, int64_t adaptive_window_ns) {
  switch (mode) {
    case Renormalisation::kPerEvent:
      return 0;
    case Renormalisation::kPerIteration:
      return UINT64_MAX;
    case Renormalisation::kAdaptive:
      break;
  }
  return static_cast<uint64_t>(static_cast<double>(adaptive_window_ns) *
                               ProcessTscCalibration().TicksPerNanosecond());
}
void UpdateWindowTicks() {
  const uint64_t window = WindowTicksFor(g_mode.load(std::memory_order_relaxed),
                                         g_adaptive_window_ns.load(std::memory_order_relaxed));
  g_window_ticks.store(window, std::memory_order_relaxed);
  g_gap_ticks.store(window == UINT64_MAX ? UINT64_MAX : window / 10, std::memory_order_relaxed);
}
}  // namespace

void EnableMonitoring() {
  ProcessTscCalibration();  // ~20 ms the first time; never on the commit path afterwards.
  UpdateWindowTicks();
  g_enabled.store(true, std::memory_order_relaxed);
}
void DisableMonitoring() { g_enabled.store(false, std::memory_order_relaxed); }
bool IsMonitoringEnabled() { return g_enabled.load(std::memory_order_relaxed); }

void SetRenormalisation(Renormalisation mode, TimeDuration adaptive_window) {
  g_mode.store(mode, std::memory_order_relaxed);
  g_adaptive_window_ns.store(std::max<int64_t>(adaptive_window.ToNanoseconds(), 0),
                             std::memory_order_relaxed);
  UpdateWindowTicks();
}

ThreadRecordingStats CurrentThreadRecordingStats() {
  const ThreadState& ts = t_state;
  ThreadRecordingStats stats;
  stats.cycle_counter_reads = ts.cycle_counter_reads;
  stats.cpu_clock_reads = ts.cpu_clock_reads;
  stats.windows = ts.windows;
  stats.iterations = ts.iteration;
  return stats;
}

namespace {

// Ends the renormalisation window at counter value `end_ticks` (read just before): reads
// the thread CPU clock, turns each recent group's window ticks into CPU time, adds it to the
// group's iteration cost, starts a new window. Returns the counter value at which the new
// window starts (read after the CPU clock, so that a preemption at the syscall's return
// falls in neither window).
//
// With C the thread CPU time of the window, W its length and M its outermost monitored
// time (ticks -> ns with the process calibration), U = W - M is the unmonitored part. The
// monitored CPU time is estimated as C - U, clamped to [0, M]: exact when the unmonitored
// part ran undisturbed, whatever descheduling hit the monitored part. The unmonitored part
// is kept short: a window closes at the first outermost exit past the window length, and
// at an outermost entry after an unmonitored gap of a tenth of it (see Enter), so
// descheduling inside the gaps costs at most that much. Each group gets its ticks x
// (estimate / M): ticks decide the split between the groups of one window, the CPU clock
// the total.
uint64_t CloseWindow(ThreadState& ts, uint64_t end_ticks) {
  const TscCalibration& calibration = ProcessTscCalibration();
  const int64_t cpu_now = CurrentThreadCpuTime().ToNanoseconds();
  const uint64_t next_start_ticks = ReadTscTicks();
  ++ts.cpu_clock_reads;
  ++ts.cycle_counter_reads;
  ++ts.windows;
  const int64_t cpu_ns = cpu_now - ts.window_start_cpu_ns;
  const uint64_t window_ticks = end_ticks - ts.window_start_ticks;
  const uint64_t monitored_ticks =
      ts.outermost_cycles + ThreadStateAccess::RunningOutermostTicks(ts, end_ticks);
  const uint64_t unmonitored_ticks =
      window_ticks > monitored_ticks ? window_ticks - monitored_ticks : 0;
  const int64_t monitored_ns =
      calibration.ToDuration(static_cast<int64_t>(monitored_ticks)).ToNanoseconds();
  const int64_t unmonitored_ns =
      calibration.ToDuration(static_cast<int64_t>(unmonitored_ticks)).ToNanoseconds();
  const int64_t estimate_ns = std::clamp<int64_t>(cpu_ns - unmonitored_ns, 0, monitored_ns);
  const double scale = monitored_ns > 0 ? static_cast<double>(estimate_ns) /
                                              static_cast<double>(monitored_ns)
                                        : 1.0;
  for (PerformanceGroup* g = ts.recent_head; g != nullptr; g = GroupAccess::NextRecent(*g)) {
    uint64_t& window = GroupAccess::WindowCycles(*g);
    if (window == 0) continue;
    const int64_t wall_ns = calibration.ToDuration(static_cast<int64_t>(window)).ToNanoseconds();
    GroupAccess::RecentNs(*g) += std::llround(static_cast<double>(wall_ns) * scale);
    GroupAccess::RecentCycles(*g) += window;
    window = 0;
  }
  if (ts.top != nullptr) {
    ThreadStateAccess::SplitRunning(ts, end_ticks, next_start_ticks, calibration, scale);
  }
  ts.window_start_cpu_ns = cpu_now;
  ts.window_start_ticks = next_start_ticks;
  ts.outermost_cycles = 0;
  ts.window_stale = false;
  return next_start_ticks;
}

}  // namespace

void ThreadStateAccess::SplitRunning(ThreadState& ts, uint64_t end_ticks,
                                     uint64_t next_start_ticks,
                                     const TscCalibration& calibration, double scale) {
  for (AutoStopwatch* sw = ts.top; sw != nullptr; sw = sw->prev_) {
    const uint64_t part = end_ticks - sw->start_;
    const int64_t wall_ns = calibration.ToDuration(static_cast<int64_t>(part)).ToNanoseconds();
    sw->pending_cycles_ += part;
    sw->pending_ns_ += std::llround(static_cast<double>(wall_ns) * scale);
    sw->start_ = next_start_ticks;
  }
}

// --- Stopwatch -----------------------------------------------------------------------------

void AutoStopwatch::Enter(const GroupList& groups) {
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  uint32_t n = 0;
  for (PerformanceGroup* g : groups) {
    if (g->acquired_ || !g->IsActive()) continue;
    g->acquired_ = true;
    acquired_[n++] = g;
  }
  if (n == 0) return;
  count_ = n;
  ThreadState& ts = t_state;
  if (__builtin_expect(!ts.baseline_valid, 0)) TakeBaseline(ts);
  uint64_t now = ReadTscTicks();
  ++ts.cycle_counter_reads;
  // A window boundary: close the window when it is long enough, or when this is an
  // outermost entry after an unmonitored gap of a tenth of that (the gap, its CPU time or
  // descheduling in it, stays out of this event's window). Before linking: this stopwatch
  // starts in the new window.
  const uint64_t age = now - ts.window_start_ticks;
  if (__builtin_expect(
          ts.window_stale || age >= g_window_ticks.load(std::memory_order_relaxed) ||
              (ts.top == nullptr &&
               age - ts.outermost_cycles >= g_gap_ticks.load(std::memory_order_relaxed)),
          0)) {
    now = CloseWindow(ts, now);
  }
  prev_ = ts.top;
  ts.top = this;
  start_ = now;
}

void AutoStopwatch::Exit() {
  const uint64_t now = ReadTscTicks();
  const uint64_t elapsed = now - start_;
  ThreadState& ts = t_state;
  ++ts.cycle_counter_reads;
  for (uint32_t i = 0; i < count_; ++i) {
    PerformanceGroup* g = acquired_[i];
    g->window_cycles_ += elapsed;
    g->acquired_ = false;
    if (!g->recent_) {
      g->recent_ = true;
      g->next_recent_ = ts.recent_head;
      ts.recent_head = g;
    }
  }
  if (__builtin_expect(pending_cycles_ != 0, 0)) {
    // Parts measured in earlier windows, already renormalised.
    for (uint32_t i = 0; i < count_; ++i) {
      acquired_[i]->recent_cycles_ += pending_cycles_;
      acquired_[i]->recent_ns_ += pending_ns_;
    }
  }
  ts.top = prev_;
  if (prev_ == nullptr) ts.outermost_cycles += elapsed;
  if (now - ts.window_start_ticks >= g_window_ticks.load(std::memory_order_relaxed)) {
    CloseWindow(ts, now);
  }
}

// --- Commit and alerts ---------------------------------------------------------------------

namespace {

std::string ExpandSavePath(const std::string& pattern, uint64_t n) {
  std::string out = pattern;
  const size_t at = out.find("{n}");
  if (at != std::string::npos) out.replace(at, 3, std::to_string(n));
  return out;
}

void FireAlerts(const AlertList& alerts, PerformanceGroup& group, TimeDuration cost,
                const ThreadState& ts, TimeStamp start, TimeStamp end) {
  for (const Alert& alert : alerts) {
    if (alert.group != nullptr && alert.group != &group) continue;
    if (cost < alert.threshold) continue;
    AlertInfo info;
    info.group = &group;
    info.group_name = group.name();
    info.cost = cost;
    info.threshold = alert.threshold;
    info.iteration = ts.iteration;
    info.thread = CurrentThreadId();
    info.iteration_start = start;
    info.iteration_end = end;
    if (ProfilerIsActive()) {
      if (alert.options.jank_marker) {
        AddMarker(ProfilerString::Literal("Jank"), Category::kOther,
                  MarkerOptions::Interval(start, end), JankMarker{}, group.name(),
                  cost.ToNanoseconds(), alert.threshold.ToNanoseconds(), ts.iteration);
        info.jank_marker_recorded = true;
      }
      if (!alert.options.save_profile_path.empty()) {
        Alert::SaveState& save = *alert.save_state;
        std::lock_guard<std::mutex> lock(save.mutex);
        if (save.saves == 0 || end - save.last_save >= alert.options.min_save_interval) {
          const std::string path = ExpandSavePath(alert.options.save_profile_path, save.saves);
          if (ProfilerSaveProfile(path)) {
            save.last_save = end;
            ++save.saves;
            info.saved_profile_path = path;
          }
        }
      }
    }
    if (alert.callback) alert.callback(info);
  }
}


}  // namespace

void NestedLoopEntered() {
  ThreadState& ts = t_state;
  ThreadStateAccess::CancelAll(ts);
  // The cancelled measures' CPU time must not enter the next window: close the window here
  // (what completed before keeps its renormalised cost; the cancelled part is unmonitored).
  if (ts.baseline_valid) CloseWindow(ts, ReadTscTicks());
}

void IterationDone() {
  ThreadState& ts = t_state;
  ThreadStateAccess::CancelAll(ts);  // The seed: release all groups.
  ++ts.iteration;
  if (!ts.baseline_valid) {
    TakeBaseline(ts);
    return;
  }
  if (ts.recent_head == nullptr) {
    // Nothing ran (so nothing is in the window: every measured stopwatch puts its groups
    // on the recent list): no clock read; the next outermost stopwatch starts a new window.
    ts.window_stale = true;
    ts.iteration_start_ns = TimeStamp::Now().ToNanoseconds();
    return;
  }
  CloseWindow(ts, ReadTscTicks());
  const TimeStamp end = TimeStamp::Now();
  const TimeStamp start = TimeStamp::FromNanoseconds(ts.iteration_start_ns);
  ts.iteration_start_ns = end.ToNanoseconds();

  std::shared_ptr<const AlertList> alerts;
  if (g_alert_count.load(std::memory_order_relaxed) != 0) {
    Registry& registry = GetRegistry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    alerts = registry.alerts;
  }

  PerformanceGroup* g = ts.recent_head;
  ts.recent_head = nullptr;
  while (g != nullptr) {
    PerformanceGroup* next = GroupAccess::NextRecent(*g);
    GroupAccess::NextRecent(*g) = nullptr;
    GroupAccess::Recent(*g) = false;
    const uint64_t cycles = GroupAccess::RecentCycles(*g);
    const int64_t cost_ns = GroupAccess::RecentNs(*g);
    GroupAccess::RecentCycles(*g) = 0;
    GroupAccess::RecentNs(*g) = 0;
    GroupAccess::Commit(*g, cycles, cost_ns);
    if (alerts) {
      FireAlerts(*alerts, *g, TimeDuration::FromNanoseconds(cost_ns), ts, start, end);
    }
    g = next;
  }
}

AlertId AddAlert(const PerformanceGroup* group, TimeDuration threshold, AlertCallback callback,
                 AlertOptions options) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto list = registry.alerts ? std::make_shared<AlertList>(*registry.alerts)
                              : std::make_shared<AlertList>();
  const AlertId id = registry.next_alert_id++;
  list->push_back(Alert{id, group, threshold, std::move(callback), std::move(options),
                        std::make_shared<Alert::SaveState>()});
  g_alert_count.store(list->size(), std::memory_order_relaxed);
  registry.alerts = std::move(list);
  return id;
}

void RemoveAlert(AlertId id) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  if (!registry.alerts) return;
  auto list = std::make_shared<AlertList>(*registry.alerts);
  list->erase(std::remove_if(list->begin(), list->end(),
                             [id](const Alert& a) { return a.id == id; }),
              list->end());
  g_alert_count.store(list->size(), std::memory_order_relaxed);
  registry.alerts = std::move(list);
}

// --- Jank marker ---------------------------------------------------------------------------

void JankMarker::StreamJSONMarkerData(JsonWriter& w, const std::string& group, int64_t cost_ns,
                                      int64_t threshold_ns, uint64_t iteration) {
  w.StringProperty("group", group);
  w.TimeMsProperty("cost", cost_ns);
  w.TimeMsProperty("threshold", threshold_ns);
  w.UintProperty("iteration", iteration);
}

std::string JankMarker::MarkerTypeSchemaJson() {
  return R"({"name":"Jank","display":["marker-chart","marker-table","timeline-overview"],)"
         R"("tooltipLabel":"Jank: {marker.data.group}",)"
         R"("tableLabel":"{marker.data.group} cost {marker.data.cost}",)"
         R"("data":[{"key":"group","label":"Group","format":"string"},)"
         R"({"key":"cost","label":"CPU cost","format":"milliseconds"},)"
         R"({"key":"threshold","label":"Threshold","format":"milliseconds"},)"
         R"({"key":"iteration","label":"Iteration","format":"integer"}]})";
}

// --- Snapshots -----------------------------------------------------------------------------

Snapshot TakeSnapshot() {
  Snapshot snapshot;
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  snapshot.taken = TimeStamp::Now();
  snapshot.groups.reserve(registry.groups.size());
  for (const PerformanceGroup* g : registry.groups) snapshot.groups.push_back(g->Stats());
  return snapshot;
}

const GroupStats* Snapshot::Find(uint64_t id) const {
  for (const GroupStats& g : groups) {
    if (g.id == id) return &g;
  }
  return nullptr;
}

const GroupStats* Snapshot::FindByName(const std::string& name) const {
  for (const GroupStats& g : groups) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

Snapshot Subtract(const Snapshot& newer, const Snapshot& older) {
  Snapshot out;
  out.taken = newer.taken;
  out.groups.reserve(newer.groups.size());
  for (const GroupStats& n : newer.groups) {
    GroupStats d = n;
    if (const GroupStats* o = older.Find(n.id)) {
      d.cpu_time = n.cpu_time - o->cpu_time;
      d.cycles = n.cycles - o->cycles;
      d.iterations = n.iterations - o->iterations;
      for (size_t k = 0; k < kJankBuckets; ++k) d.jank[k] = n.jank[k] - o->jank[k];
    }
    out.groups.push_back(std::move(d));
  }
  return out;
}

void Snapshot::WriteJson(JsonWriter& w) const {
  w.StartObject();
  w.TimeMsProperty("time", taken.ToNanoseconds());
  w.StartArrayProperty("jankThresholdsMs");
  for (size_t k = 0; k < kJankBuckets; ++k) w.Int(JankThresholdMs(k));
  w.EndArray();
  w.StartArrayProperty("groups");
  for (const GroupStats& g : groups) {
    w.StartObject();
    w.UintProperty("id", g.id);
    w.StringProperty("name", g.name);
    w.BoolProperty("perItem", g.per_item);
    w.BoolProperty("active", g.active);
    w.TimeMsProperty("cpuTimeMs", g.cpu_time);
    w.UintProperty("cycles", g.cycles);
    w.UintProperty("iterations", g.iterations);
    w.StartArrayProperty("jank");
    for (uint64_t n : g.jank) w.Uint(n);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

std::string Snapshot::ToJson() const {
  ChunkedJsonOutput output;
  {
    JsonWriter w(&output);
    WriteJson(w);
  }
  return output.ToString();
}

}  // namespace perfmon
}  // namespace strata
