// The performance monitor (perfmon.h; docs/perfmon.md).
#include "full/perfmon/perfmon.h"

#include <algorithm>
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
std::atomic<bool> g_per_event{false};
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

Registry& GetRegistry() {
  static Registry* registry = new Registry;  // Never destroyed: groups may be static.
  return *registry;
}

std::atomic<size_t> g_alert_count{0};

// Per-thread recording state. Trivially constructible and destructible: no TLS guard, no
// exit-time destructor, cheap to reach from the stopwatch.
struct ThreadState {
  AutoStopwatch* top;               // Innermost measuring stopwatch.
  PerformanceGroup* recent_head;    // Groups that ran this iteration.
  uint64_t outermost_cycles;        // M: outermost monitored ticks in the window.
  int64_t cpu_at_last_commit_ns;    // Thread CPU clock when the window started.
  int64_t iteration_start_ns;       // TimeStamp of the previous IterationDone.
  uint64_t iteration;               // IterationDone calls so far.
  bool baseline_valid;              // cpu_at_last_commit_ns / iteration_start_ns are set.
};
thread_local ThreadState t_state;

void TakeBaseline(ThreadState& ts) {
  ts.cpu_at_last_commit_ns = CurrentThreadCpuTime().ToNanoseconds();
  ts.iteration_start_ns = TimeStamp::Now().ToNanoseconds();
  ts.baseline_valid = true;
}

}  // namespace

struct ThreadStateAccess {
  // Releases the groups of every measuring stopwatch of the thread; they will add nothing.
  static void CancelAll(ThreadState& ts) {
    for (AutoStopwatch* sw = ts.top; sw != nullptr;) {
      for (uint32_t i = 0; i < sw->count_; ++i) sw->acquired_[i]->acquired_ = false;
      sw->count_ = 0;
      AutoStopwatch* prev = sw->prev_;
      sw->prev_ = nullptr;
      sw = prev;
    }
    ts.top = nullptr;
  }
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

void EnableMonitoring() {
  ProcessTscCalibration();  // ~20 ms the first time; never on the commit path afterwards.
  g_enabled.store(true, std::memory_order_relaxed);
}
void DisableMonitoring() { g_enabled.store(false, std::memory_order_relaxed); }
bool IsMonitoringEnabled() { return g_enabled.load(std::memory_order_relaxed); }

void SetRenormalisation(Renormalisation mode) {
  g_per_event.store(mode == Renormalisation::kPerEvent, std::memory_order_relaxed);
}

namespace {
void CloseWindow(ThreadState& ts, const TscCalibration& calibration);

// kPerEvent: the window is the outermost stopwatch. Cycles of earlier events are already
// folded (their windows were closed), and CPU used between events does not enter it.
void OpenEventWindow(ThreadState& ts) {
  ts.cpu_at_last_commit_ns = CurrentThreadCpuTime().ToNanoseconds();
  ts.outermost_cycles = 0;
}
void CloseEventWindow(ThreadState& ts) { CloseWindow(ts, ProcessTscCalibration()); }
}  // namespace

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
  prev_ = ts.top;
  ts.top = this;
  if (prev_ == nullptr && g_per_event.load(std::memory_order_relaxed)) {
    per_event_ = true;
    OpenEventWindow(ts);
  }
  start_ = ReadTscTicks();
}

void AutoStopwatch::Exit() {
  const uint64_t elapsed = ReadTscTicks() - start_;
  ThreadState& ts = t_state;
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
  ts.top = prev_;
  if (prev_ == nullptr) {
    ts.outermost_cycles += elapsed;
    if (per_event_) CloseEventWindow(ts);
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


// Ends the renormalisation window: converts each recent group's window cycles to CPU time
// with the scale min(1, C / M) and adds them to its iteration cost; starts a new window.
// One thread-CPU clock read.
void CloseWindow(ThreadState& ts, const TscCalibration& calibration) {
  const int64_t cpu_now = CurrentThreadCpuTime().ToNanoseconds();
  const int64_t cpu_ns = cpu_now - ts.cpu_at_last_commit_ns;
  ts.cpu_at_last_commit_ns = cpu_now;
  const int64_t monitored_ns =
      calibration.ToDuration(static_cast<int64_t>(ts.outermost_cycles)).ToNanoseconds();
  ts.outermost_cycles = 0;
  const double scale = (monitored_ns > cpu_ns && monitored_ns > 0)
                           ? static_cast<double>(std::max<int64_t>(cpu_ns, 0)) /
                                 static_cast<double>(monitored_ns)
                           : 1.0;
  for (PerformanceGroup* g = ts.recent_head; g != nullptr; g = GroupAccess::NextRecent(*g)) {
    uint64_t& window = GroupAccess::WindowCycles(*g);
    const int64_t wall_ns = calibration.ToDuration(static_cast<int64_t>(window)).ToNanoseconds();
    GroupAccess::RecentNs(*g) += static_cast<int64_t>(static_cast<double>(wall_ns) * scale);
    GroupAccess::RecentCycles(*g) += window;
    window = 0;
  }
}

}  // namespace

void NestedLoopEntered() {
  ThreadState& ts = t_state;
  ThreadStateAccess::CancelAll(ts);
  // The cancelled measures' CPU time must not enter the next window's scale: close the
  // window here (what completed before keeps its renormalised cost).
  if (ts.baseline_valid) CloseWindow(ts, ProcessTscCalibration());
}

void IterationDone() {
  ThreadState& ts = t_state;
  ThreadStateAccess::CancelAll(ts);  // The seed: release all groups.
  ++ts.iteration;
  if (!ts.baseline_valid || ts.recent_head == nullptr) {
    // Nothing ran: move the window (one CPU-clock read, as when something ran).
    TakeBaseline(ts);
    ts.outermost_cycles = 0;
    return;
  }
  CloseWindow(ts, ProcessTscCalibration());
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
