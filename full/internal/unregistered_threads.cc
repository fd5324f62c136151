#include "full/internal/unregistered_threads.h"

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "base/internal/session/core.h"
#include "base/markers.h"
#include "platform/cpu_time.h"
#include "platform/process_thread_ids.h"

namespace strata {
namespace full {
namespace {

struct UnregisteredThreadMarker {
  static constexpr const char* MarkerTypeName() { return "UnregisteredThread"; }
  static void StreamJSONMarkerData(JsonWriter& w, int64_t tid, const std::string& name,
                                   double cpu_ms) {
    w.IntProperty("tid", tid);
    w.StringProperty("threadName", name);
    w.DoubleProperty("cpuTime", cpu_ms);
  }
  static std::string MarkerTypeSchemaJson() {
    return R"({"name":"UnregisteredThread","display":["marker-chart","marker-table"],)"
           R"("chartLabel":"{marker.data.threadName}","tooltipLabel":"{marker.data.threadName})"
           R"( used {marker.data.cpuTime}ms of CPU","tableLabel":"{marker.data.threadName})"
           R"( ({marker.data.tid}): {marker.data.cpuTime}ms CPU","data":[)"
           R"({"key":"tid","label":"Thread id","format":"tid"},)"
           R"({"key":"threadName","label":"Thread","format":"string","searchable":true},)"
           R"({"key":"cpuTime","label":"CPU time","format":"milliseconds"}]})";
  }
};

struct Seen {
  TimeDuration cpu;
  TimeStamp time;
};

// Sampler thread only.
std::unordered_map<int32_t, Seen>& SeenThreads() {
  static auto* seen = new std::unordered_map<int32_t, Seen>;
  return *seen;
}

std::string ThreadName(int32_t tid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
  FILE* f = fopen(path, "re");
  if (!f) return std::string();
  char name[64] = {};
  const size_t n = fread(name, 1, sizeof(name) - 1, f);
  fclose(f);
  std::string s(name, n);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

void SpyOnUnregisteredThreads(TimeStamp now) {
  std::unordered_set<int32_t> registered;
  for (const base_internal::ThreadInfo& info : base_internal::TakeSessionSnapshot().threads) {
    if (!info.unregister_time) registered.insert(info.tid.ToNumber());
  }
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) return;
  std::unordered_map<int32_t, Seen>& seen = SeenThreads();
  std::unordered_set<int32_t> alive;
  while (const dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    const int32_t tid = static_cast<int32_t>(std::strtol(entry->d_name, nullptr, 10));
    if (registered.count(tid)) continue;
    const std::optional<TimeDuration> cpu =
        ThreadCpuClock::ForThreadId(ThreadId::FromNumber(tid)).Read();
    if (!cpu) continue;
    alive.insert(tid);
    auto it = seen.find(tid);
    if (it == seen.end()) {
      seen.emplace(tid, Seen{*cpu, now});
      continue;
    }
    const TimeDuration used = *cpu - it->second.cpu;
    if (used.ToNanoseconds() > 0) {
      AddMarker(ProfilerString::Literal("Unregistered thread"), Category::kProfiler,
                MarkerOptions::Interval(it->second.time, now).OnThread(MainThreadId()),
                UnregisteredThreadMarker{}, int64_t{tid}, ThreadName(tid), used.ToMilliseconds());
    }
    it->second = Seen{*cpu, now};
  }
  closedir(tasks);
  for (auto it = seen.begin(); it != seen.end();) {
    it = alive.count(it->first) ? std::next(it) : seen.erase(it);
  }
}

void ResetUnregisteredThreadSpy() { SeenThreads().clear(); }

}  // namespace full
}  // namespace strata
