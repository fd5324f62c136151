// The C entry points (perfmon_c.h) over the C++ API.
#include "full/perfmon/perfmon_c.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "full/perfmon/perfmon.h"

namespace pm = strata::perfmon;

struct strata_perfmon_group {
  explicit strata_perfmon_group(const char* name, bool per_item)
      : group(name ? name : "",
              per_item ? pm::PerformanceGroup::Kind::kPerItem : pm::PerformanceGroup::Kind::kShared) {}
  pm::PerformanceGroup group;
};

static_assert(sizeof(pm::AutoStopwatch) <= sizeof(strata_perfmon_stopwatch{}.opaque.bytes),
              "strata_perfmon_stopwatch too small");
static_assert(alignof(pm::AutoStopwatch) <= alignof(strata_perfmon_stopwatch), "strata_perfmon_stopwatch under-aligned");

extern "C" {

void strata_perfmon_enable(void) { pm::EnableMonitoring(); }
void strata_perfmon_disable(void) { pm::DisableMonitoring(); }

strata_perfmon_group* strata_perfmon_group_create(const char* name, int per_item) {
  return new strata_perfmon_group(name, per_item != 0);
}
void strata_perfmon_group_destroy(strata_perfmon_group* group) { delete group; }
void strata_perfmon_group_set_active(strata_perfmon_group* group, int active) {
  group->group.SetActive(active != 0);
}
int64_t strata_perfmon_group_cpu_time_ns(const strata_perfmon_group* group) {
  return group->group.Stats().cpu_time.ToNanoseconds();
}
uint64_t strata_perfmon_group_jank_count(const strata_perfmon_group* group, int bucket) {
  if (bucket < 0 || static_cast<size_t>(bucket) >= pm::kJankBuckets) return 0;
  return group->group.Stats().jank[bucket];
}

void strata_perfmon_stopwatch_begin(strata_perfmon_stopwatch* watch,
                                    strata_perfmon_group* const* groups, size_t count) {
  pm::GroupList list;
  for (size_t i = 0; i < count; ++i) {
    if (groups[i] != nullptr) list.Add(&groups[i]->group);
  }
  new (watch->opaque.bytes) pm::AutoStopwatch(list);
}
void strata_perfmon_stopwatch_end(strata_perfmon_stopwatch* watch) {
  std::launder(reinterpret_cast<pm::AutoStopwatch*>(watch->opaque.bytes))->~AutoStopwatch();
}

void strata_perfmon_iteration_done(void) { pm::IterationDone(); }
void strata_perfmon_nested_loop_entered(void) { pm::NestedLoopEntered(); }

char* strata_perfmon_snapshot_json(void) {
  const std::string json = pm::TakeSnapshot().ToJson();
  char* out = static_cast<char*>(std::malloc(json.size() + 1));
  if (out != nullptr) std::memcpy(out, json.c_str(), json.size() + 1);
  return out;
}

}  // extern "C"
