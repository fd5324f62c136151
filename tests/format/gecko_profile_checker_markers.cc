// The Gecko profile checker's checks of markers, counters and paused ranges
// (gecko_profile_checker_internal.h).
#include "tests/format/gecko_profile_checker_internal.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "shared/json/location.h"
#include "shared/json/shared_libraries.h"

namespace strata {
namespace gecko_profile_checker_internal {

void Checker::CheckMarkers(const Table& markers, const std::string& path, size_t string_count,
                           size_t stack_count, const ProcessContext& ctx) {
  const int col_name = markers.Column("name");
  const int col_phase = markers.Column("phase");
  const int col_start_time = markers.Column("startTime");
  const int col_end_time = markers.Column("endTime");
  const int col_category = markers.Column("category");
  const int col_data = markers.Column("data");
  report_.markers += markers.size();
  std::map<uint64_t, int> open_by_name;  // Per name: open IntervalStart count.
  for (size_t i = 0; i < markers.size(); ++i) {
    std::string row = At(path + ".data", i);
    const Value* name = markers.Get(i, col_name);
    uint64_t name_index = 0;
    bool name_ok = name && AsIndex(*name, &name_index) && name_index < string_count;
    if (!name_ok) {
      Error(row, "marker-name",
            "name must be an index into this thread's stringTable, got " +
                (name ? Show(*name) : std::string("nothing")) +
                (name && name->IsString() ? " (a literal string is accepted silently and "
                                            "shows as an undefined name)"
                                          : ""));
    }
    const Value* phase = markers.Get(i, col_phase);
    const Value* start = markers.Get(i, col_start_time);
    const Value* end = markers.Get(i, col_end_time);
    uint64_t ph = 99;
    if (!phase || !AsIndex(*phase, &ph) || ph > 3) {
      Error(row, "marker-phase",
            "phase must be 0 (instant), 1 (interval), 2 (start) or 3 (end), got " +
                (phase ? Show(*phase) : std::string("nothing")) +
                " (views throw \"Unhandled marker phase type\")");
    } else {
      const bool need_start = ph != 3;
      const bool need_end = ph == 1 || ph == 3;
      if (need_start && (start == nullptr || !start->IsNumber())) {
        Error(row, "marker-times", "phase " + std::to_string(ph) + " needs a numeric startTime");
      }
      if (need_end && (end == nullptr || !end->IsNumber())) {
        Error(row, "marker-times", "phase " + std::to_string(ph) + " needs a numeric endTime");
      }
      if (!need_start && !IsNullish(start)) {
        Warn(row, "marker-times", "an IntervalEnd marker's startTime should be null");
      }
      if (!need_end && !IsNullish(end)) {
        Warn(row, "marker-times", "this phase's endTime should be null");
      }
      if (ph == 1 && start && end && start->IsNumber() && end->IsNumber() &&
          end->GetDouble() < start->GetDouble()) {
        Error(row, "marker-times", "interval ends before it starts");
      }
      for (const Value* t : {start, end}) {
        if (t && t->IsNumber() && std::fabs(t->GetDouble()) > 1e10) {
          Error(row, "time-units",
                "marker time " + Show(*t) + " looks absolute; times are ms relative to "
                "meta.startTime");
        } else if (t && t->IsNumber() && !std::isnan(range_end_) && !std::isnan(ctx.shift) &&
                   (t->GetDouble() + ctx.shift < range_start_ ||
                    t->GetDouble() + ctx.shift > range_end_)) {
          Error(row, "outside-profiling-range",
                "marker time " + Show(*t) + " ms (" + std::to_string(t->GetDouble() + ctx.shift) +
                    " on the top level's timeline) is outside meta.profilingStartTime.." +
                    "profilingEndTime [" + std::to_string(range_start_) + ", " +
                    std::to_string(range_end_) + "]: the front-end cuts it off");
        }
      }
      if (name_ok && ph == 2) ++open_by_name[name_index];
      if (name_ok && ph == 3) {
        int& open = open_by_name[name_index];
        if (open == 0) {
          Warn(row, "marker-unpaired",
               "IntervalEnd without an earlier IntervalStart of the same name (shown as "
               "starting at the thread start)");
        } else {
          --open;
        }
      }
    }
    const Value* category = markers.Get(i, col_category);
    if (IsNullish(category)) {
      Error(row, "marker-category", "category must be an index into meta.categories");
    } else {
      CheckCategoryPair(category, nullptr, row, "marker-category");
    }
    const Value* data = markers.Get(i, col_data);
    if (!IsNullish(data)) CheckMarkerData(*data, row, string_count, stack_count);
  }
  for (const auto& [name, open] : open_by_name) {
    if (open > 0) {
      Warn(path, "marker-unpaired",
           std::to_string(open) + " IntervalStart marker(s) named by string " +
               std::to_string(name) + " never end (shown as running to the thread's end)");
    }
  }
}

void Checker::CheckMarkerData(const Value& data, const std::string& row, size_t string_count,
                              size_t stack_count) {
  if (!data.IsObject()) {
    Error(row, "marker-data", "data must be null or an object");
    return;
  }
  const Value* type = Member(data, "type");
  if (type && type->IsString()) {
    std::string t = Str(*type);
    for (const char* reserved : kReservedMarkerTypes) {
      if (t == reserved) {
        Warn(row, "marker-reserved-type",
             "data.type \"" + t + "\" has special processing in the front-end");
      }
    }
    auto it = marker_schemas_.find(t);
    if (it != marker_schemas_.end()) {
      for (const std::string& key : it->second) {
        const Value* v = Member(data, key.c_str());
        uint64_t index;
        if (v && !v->IsNull() && (!AsIndex(*v, &index) || index >= string_count)) {
          Error(row, "marker-unique-string",
                "data." + key + " has a string-index format in schema \"" + t +
                    "\" but is " + Show(*v) + ", not an index into this thread's "
                    "stringTable");
        }
      }
    }
  }
  if (const Value* stack = Member(data, "stack")) {
    const Value* samples = Member(*stack, "samples");
    const Value* schema = samples ? Member(*samples, "schema") : nullptr;
    const Value* rows = samples ? Member(*samples, "data") : nullptr;
    const Value* column = schema ? Member(*schema, "stack") : nullptr;
    uint64_t position;
    if (!rows || !rows->IsArray() || !column || !AsIndex(*column, &position)) {
      Error(row + ".data.stack", "marker-stack",
            "a marker backtrace must be a thread-like object with a samples {schema, data} "
            "table");
      return;
    }
    for (SizeType k = 0; k < rows->Size(); ++k) {
      const Value& r = (*rows)[k];
      uint64_t s;
      if (!r.IsArray() || position >= r.Size() || !AsIndex(r[position], &s) || s >= stack_count) {
        Error(row + ".data.stack", "marker-stack",
              "the backtrace's stack must index the owning thread's stackTable");
      }
    }
  }
}

void Checker::CheckCounters(const Value& counters, const std::string& path,
                            const ProcessContext& ctx) {
  if (!counters.IsArray()) {
    Error(path, "counters", "must be an array");
    return;
  }
  if (counters.Size() > 0 && !ctx.has_gecko_main) {
    Warn(path, "counter-no-geckomain",
         "counters of a process without a thread named \"GeckoMain\" are dropped silently");
  }
  for (SizeType i = 0; i < counters.Size(); ++i) {
    const Value& c = counters[i];
    std::string cpath = At(path, i);
    for (const char* key : {"name", "category", "description"}) {
      const Value* v = Member(c, key);
      if (!v || !v->IsString()) Error(cpath + "." + key, "counters", "must be a string");
    }
    const Value* samples = Member(c, "samples");
    const Value* schema = samples ? Member(*samples, "schema") : nullptr;
    const Value* data = samples ? Member(*samples, "data") : nullptr;
    if (!schema || !data || !data->IsArray() || !Member(*schema, "time") ||
        !Member(*schema, "count")) {
      Error(cpath + ".samples", "counters", "needs {schema: {time, count[, number]}, data}");
      continue;
    }
    if (data->Size() == 0) Warn(cpath, "counters", "a counter without samples is dropped");
    uint64_t time_column = 0;
    AsIndex(*Member(*schema, "time"), &time_column);
    double previous = -INFINITY;
    for (SizeType k = 0; k < data->Size(); ++k) {
      const Value& r = (*data)[k];
      if (!r.IsArray() || time_column >= r.Size() || !r[time_column].IsNumber()) {
        Error(At(cpath + ".samples.data", k), "counters", "time must be a number");
        continue;
      }
      double t = r[time_column].GetDouble();
      if (t < previous) {
        Error(At(cpath + ".samples.data", k), "counter-order",
              "counter samples must be sorted by time");
      }
      previous = std::max(previous, t);
    }
  }
}

void Checker::CheckPausedRanges(const Value& ranges, const std::string& path) {
  if (!ranges.IsArray()) {
    Error(path, "paused-ranges", "must be an array");
    return;
  }
  for (SizeType i = 0; i < ranges.Size(); ++i) {
    const Value& r = ranges[i];
    for (const char* key : {"startTime", "endTime"}) {
      const Value* v = Member(r, key);
      if (!v || !(v->IsNull() || v->IsNumber())) {
        Error(At(path, i) + "." + key, "paused-ranges", "must be a number or null");
      }
    }
  }
}

}  // namespace gecko_profile_checker_internal
}  // namespace strata
