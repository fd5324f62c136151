// The Gecko profile checker's checks of processes, libraries and threads: frames, stacks and
// samples (gecko_profile_checker_internal.h).
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

void Checker::CheckProcess(const Value& process, const std::string& prefix, bool top) {
  ++report_.processes;
  ProcessContext ctx;
  ctx.path = prefix;
  const Value* meta = Member(process, "meta");
  std::string mpath = prefix + "meta";
  if (!top) {
    if (!meta || !meta->IsObject()) {
      Error(mpath, "meta", "missing or not an object");
      return;
    }
  }
  const Value* version = Member(*meta, "version");
  if (top) {
    if (!version || !version->IsInt() || version->GetInt() != kVersion) {
      Error(mpath + ".version", "version",
            "must be the integer 36, got " + (version ? Show(*version) : std::string("nothing")) +
                " (missing or newer: rejected; older: upgraded step by step, which we never "
                "rely on)");
    }
  } else if (version && (!version->IsInt() || version->GetInt() != kVersion)) {
    Error(mpath + ".version", "version", "must be 36 when present");
  }
  const Value* start = Member(*meta, "startTime");
  if (start && start->IsNumber()) {
    if (top) top_start_time_ = start->GetDouble();
    ctx.shift = start->GetDouble() - top_start_time_;  // NaN until the top level's is known.
  }
  if (!start || !start->IsNumber()) {
    Error(mpath + ".startTime", "start-time",
          "missing or not a number (epoch milliseconds of the process start)");
  } else if (start->GetDouble() < 1e12 || start->GetDouble() > 1e13) {
    Warn(mpath + ".startTime", "time-units",
         "is " + Show(*start) + "; expected milliseconds since the Unix epoch (~1.7e12)");
  }
  if (top) {
    const Value* interval = Member(*meta, "interval");
    if (!interval || !interval->IsNumber() || interval->GetDouble() <= 0) {
      Error(mpath + ".interval", "interval",
            "missing or not a positive number of milliseconds (loading crashes)");
    } else {
      interval_ = interval->GetDouble();
    }
    if (const Value* p = Member(*meta, "presymbolicated"); p && p->IsBool()) {
      presymbolicated_ = p->GetBool();
    }
    const Value* ps = Member(*meta, "profilingStartTime");
    const Value* pe = Member(*meta, "profilingEndTime");
    if ((ps != nullptr) != (pe != nullptr) || (ps && !ps->IsNumber()) ||
        (pe && !pe->IsNumber())) {
      Error(mpath, "profiling-range",
            "profilingStartTime and profilingEndTime must both be numbers, or both absent");
    } else if (ps && pe) {
      range_start_ = ps->GetDouble();
      range_end_ = pe->GetDouble();
    }
  }
  if (const Value* shutdown = Member(*meta, "shutdownTime");
      shutdown && !shutdown->IsNull() && !shutdown->IsNumber()) {
    Error(mpath + ".shutdownTime", "meta", "must be a number or null");
  }
  CheckMarkerSchemas(*meta, mpath);
  ctx.presymbolicated = presymbolicated_;
  ctx.interval = interval_;

  if (const Value* sources = Member(process, "sources")) {
    const Value* data = Member(*sources, "data");
    if (data && data->IsArray()) {
      ctx.has_sources = true;
      ctx.sources_length = data->Size();
    } else {
      Error(prefix + "sources", "sources", "must be {schema, data}");
    }
  }

  const Value* libs = Member(process, "libs");
  if (!libs || !libs->IsArray()) {
    Error(prefix + "libs", "libs", "missing or not an array (import crashes); write []");
  } else {
    CheckLibs(*libs, prefix + "libs", ctx);
  }

  const Value* threads = Member(process, "threads");
  if (!threads || !threads->IsArray()) {
    Error(prefix + "threads", "threads", "missing or not an array");
  } else {
    for (SizeType i = 0; i < threads->Size(); ++i) {
      const Value& t = (*threads)[i];
      if (const Value* name = Member(t, "name"); name && Str(*name) == "GeckoMain") {
        ctx.has_gecko_main = true;
      }
    }
    for (SizeType i = 0; i < threads->Size(); ++i) {
      CheckThread((*threads)[i], At(prefix + "threads", i), ctx);
    }
  }

  if (const Value* counters = Member(process, "counters")) {
    CheckCounters(*counters, prefix + "counters", ctx);
  }
  if (const Value* paused = Member(process, "pausedRanges")) {
    CheckPausedRanges(*paused, prefix + "pausedRanges");
  }
}

void Checker::CheckLibs(const Value& libs, const std::string& path, ProcessContext& ctx) {
  uint64_t previous_start = 0, previous_end = 0;
  for (SizeType i = 0; i < libs.Size(); ++i) {
    const Value& lib = libs[i];
    std::string lpath = At(path, i);
    const Value* lib_name = lib.IsObject() ? Member(lib, "name") : nullptr;
    ctx.own_libs.push_back(lib_name && lib_name->IsString() && IsStrataLibrary(Str(*lib_name)));
    if (!lib.IsObject()) {
      Error(lpath, "lib-fields", "must be an object");
      continue;
    }
    uint64_t values[3] = {};
    bool valid = true;
    const char* names[3] = {"start", "end", "offset"};
    for (int k = 0; k < 3; ++k) {
      const Value* v = Member(lib, names[k]);
      if (!v || !AsIndex(*v, &values[k])) {
        Error(lpath + "." + names[k], "lib-address",
              "must be a non-negative integer, got " + (v ? Show(*v) : std::string("nothing")) +
                  " (the importer's BigInt conversion throws)");
        valid = false;
      }
    }
    for (const char* key : {"name", "path", "debugName", "debugPath", "breakpadId", "arch"}) {
      const Value* v = Member(lib, key);
      if (!v || !v->IsString()) Warn(lpath + "." + key, "lib-fields", "should be a string");
    }
    if (const Value* id = Member(lib, "breakpadId"); id && id->IsString()) {
      std::string s = Str(*id);
      bool hex = s.size() == 33 && std::all_of(s.begin(), s.end(), [](char c) {
                   return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
                 });
      if (!hex) {
        Warn(lpath + ".breakpadId", "lib-breakpad-id",
             "is " + Show(*id) + "; a symbol server needs 33 upper-case hex digits "
             "(GUID + age)");
      }
    }
    if (!valid) continue;
    if (values[0] >= values[1]) {
      Error(lpath, "lib-address", "start must be below end");
      continue;
    }
    if (values[2] > values[0]) {
      Warn(lpath, "lib-address", "offset is larger than start (negative load base)");
    }
    if (i > 0 && !ctx.libs.empty() && (values[0] < previous_start || values[0] < previous_end)) {
      Error(lpath, "libs-order",
            "libs must be sorted by start and must not overlap (the front-end binary-searches "
            "them and silently attributes addresses to the wrong library)");
    }
    previous_start = values[0];
    previous_end = std::max(previous_end, values[1]);
    ctx.libs.emplace_back(values[0], values[1]);
  }
}

bool Checker::GetTable(const Value& thread, const char* key, const std::string& tpath,
                       std::initializer_list<const char*> required, Table* table) {
  std::string path = tpath + "." + key;
  const Value* t = Member(thread, key);
  if (!t || !t->IsObject()) {
    Error(path, "table", "missing or not a {schema, data} object (import crashes)");
    return false;
  }
  const Value* schema = Member(*t, "schema");
  const Value* data = Member(*t, "data");
  if (!schema || !schema->IsObject() || !data || !data->IsArray()) {
    Error(path, "table", "needs \"schema\" (object) and \"data\" (array)");
    return false;
  }
  std::set<uint64_t> positions;
  for (auto it = schema->MemberBegin(); it != schema->MemberEnd(); ++it) {
    uint64_t position;
    if (!AsIndex(it->value, &position) || position > 1000) {
      Error(path + ".schema." + Str(it->name), "table-schema",
            "column positions must be small non-negative integers (\"fieldIndex must be a "
            "number\")");
      continue;
    }
    if (!positions.insert(position).second) {
      Error(path + ".schema." + Str(it->name), "table-schema",
            "two columns share position " + std::to_string(position));
    }
    table->columns[Str(it->name)] = static_cast<unsigned>(position);
  }
  bool complete = true;
  for (const char* column : required) {
    if (!table->Has(column)) {
      Error(path + ".schema", "table-schema",
            std::string("has no \"") + column +
                "\" column (every column must be named even if all values are null; the "
                "importer crashes reading it)");
      complete = false;
    }
  }
  table->data = data;
  for (SizeType i = 0; i < data->Size(); ++i) {
    if (!(*data)[i].IsArray()) {
      Error(At(path + ".data", i), "table", "rows must be arrays");
      complete = false;
    }
  }
  return complete;
}

void Checker::CheckThread(const Value& thread, const std::string& tpath, ProcessContext& ctx) {
  ++report_.threads;
  if (!thread.IsObject()) {
    Error(tpath, "thread", "must be an object");
    return;
  }
  const Value* name = Member(thread, "name");
  if (!name || !name->IsString()) Error(tpath + ".name", "thread", "must be a string");
  const Value* process_type = Member(thread, "processType");
  if (!process_type || !process_type->IsString()) {
    Error(tpath + ".processType", "thread", "must be a string (\"default\" for the parent)");
  }
  if (const Value* pn = Member(thread, "processName"); pn && !pn->IsString()) {
    Error(tpath + ".processName", "thread", "must be a string");
  }
  for (const char* key : {"pid", "tid"}) {
    const Value* v = Member(thread, key);
    if (!v || !v->IsNumber()) {
      Error(tpath + "." + key, "thread-ids",
            std::string("must be a number, got ") + (v ? Show(*v) : std::string("nothing")) +
                " (a missing id shows as \"undefined\")");
    }
  }
  const Value* reg = Member(thread, "registerTime");
  if (!reg || !reg->IsNumber()) {
    Error(tpath + ".registerTime", "thread-times",
          "must be a number (ms relative to meta.startTime); views fail with \"assert "
          "failed\"");
  }
  const Value* unreg = Member(thread, "unregisterTime");
  if (!unreg || !(unreg->IsNull() || unreg->IsNumber())) {
    Error(tpath + ".unregisterTime", "thread-times",
          "must be present, a number or null (an absent key fails with \"assert failed\")");
  }
  double register_time = reg && reg->IsNumber() ? reg->GetDouble() : -INFINITY;
  double unregister_time = unreg && unreg->IsNumber() ? unreg->GetDouble() : INFINITY;

  const Value* strings = Member(thread, "stringTable");
  size_t string_count = 0;
  std::vector<const Value*> string_values;
  if (!strings || !strings->IsArray()) {
    Error(tpath + ".stringTable", "string-table",
          "missing or not an array (per-thread string table; import crashes)");
  } else {
    string_count = strings->Size();
    for (SizeType i = 0; i < strings->Size(); ++i) {
      string_values.push_back(&(*strings)[i]);
      if (!(*strings)[i].IsString()) {
        Error(At(tpath + ".stringTable", i), "string-table", "must be a string");
      }
    }
  }
  const auto string_at = [&](uint64_t index) -> std::string {
    return index < string_values.size() ? Str(*string_values[index]) : std::string();
  };

  Table frames, stacks, samples, markers;
  bool frames_ok = GetTable(thread, "frameTable", tpath,
                            {"location", "relevantForJS", "innerWindowID", "line", "column",
                             "category", "subcategory"},
                            &frames);
  bool stacks_ok = GetTable(thread, "stackTable", tpath, {"prefix", "frame"}, &stacks);
  bool samples_ok = GetTable(thread, "samples", tpath, {"stack", "time"}, &samples);
  if (samples_ok && !samples.Has("eventDelay") && !samples.Has("responsiveness")) {
    Error(tpath + ".samples.schema", "table-schema",
          "needs an \"eventDelay\" column even if every value is null (import throws "
          "\"expected an eventDelay or responsiveness array\")");
  }
  bool markers_ok = GetTable(thread, "markers", tpath,
                             {"name", "startTime", "endTime", "phase", "category", "data"},
                             &markers);

  if (frames_ok) CheckFrames(frames, tpath + ".frameTable", string_count, string_at, ctx);
  if (stacks_ok) CheckStacks(stacks, tpath + ".stackTable", frames.size());
  if (samples_ok) {
    CheckSamples(samples, tpath + ".samples", stacks.size(), register_time, unregister_time,
                 ctx);
  }
  if (markers_ok) {
    CheckMarkers(markers, tpath + ".markers", string_count, stacks.size(), ctx);
  }
}

template <typename StringAt>
void Checker::CheckFrames(const Table& frames, const std::string& path, size_t string_count,
                          const StringAt& string_at, const ProcessContext& ctx) {
  const int col_location = frames.Column("location");
  const int col_category = frames.Column("category");
  const int col_subcategory = frames.Column("subcategory");
  const int col_relevant_for_js = frames.Column("relevantForJS");
  const int col_inner_window_id = frames.Column("innerWindowID");
  const int col_implementation = frames.Column("implementation");
  const int col_lib = frames.Column("lib");
  report_.frames += frames.size();
  for (size_t i = 0; i < frames.size(); ++i) {
    std::string row = At(path + ".data", i);
    const Value* location = frames.Get(i, col_location);
    uint64_t index;
    if (location == nullptr || !AsIndex(*location, &index) || index >= string_count) {
      Error(row, "frame-location",
            "location must be an index into this thread's stringTable, got " +
                (location ? Show(*location) : std::string("nothing")) +
                " (\"Expected an item to exist\")");
    } else {
      CheckLocationString(string_at(index), row, ctx);
    }
    if (const Value* lib = frames.Get(i, col_lib); !IsNullish(lib)) {
      uint64_t lib_index;
      if (AsIndex(*lib, &lib_index) && lib_index < ctx.own_libs.size() &&
          ctx.own_libs[lib_index]) {
        Error(row, "strata-frame",
              "a frame of Strata's own code (" +
                  (location && AsIndex(*location, &index) && index < string_count
                       ? string_at(index)
                       : std::string("?")) +
                  "): the profiler's frames are elided from every stack (docs/symbols.md)");
      }
    }
    const Value* category = frames.Get(i, col_category);
    const Value* subcategory = frames.Get(i, col_subcategory);
    CheckCategoryPair(category, subcategory, row, "frame-category");
    if (const Value* r = frames.Get(i, col_relevant_for_js); r && !r->IsBool() && !r->IsNull()) {
      Error(row, "frame-columns", "relevantForJS must be a boolean");
    }
    for (const char* key : {"line", "column"}) {
      const Value* v = frames.Get(i, frames.Column(key));
      uint64_t n;
      if (!IsNullish(v) && !AsIndex(*v, &n)) {
        Error(row, "frame-columns", std::string(key) + " must be null or a non-negative integer");
      }
    }
    if (const Value* w = frames.Get(i, col_inner_window_id); !IsNullish(w) && !w->IsNumber()) {
      Error(row, "frame-columns", "innerWindowID must be a number or null");
    }
    if (const Value* impl = frames.Get(i, col_implementation); !IsNullish(impl)) {
      uint64_t n;
      if (!AsIndex(*impl, &n) || n >= string_count) {
        Error(row, "frame-columns", "implementation must be null or a string index");
      }
    }
  }
}

void Checker::CheckLocationString(const std::string& location, const std::string& row,
                                  const ProcessContext& ctx) {
  switch (ClassifyLocation(location)) {
    case LocationKind::kAddress: {
      std::string hex = location.substr(2);
      bool valid = !hex.empty() && hex.size() <= 16 &&
                   std::all_of(hex.begin(), hex.end(), [](char c) { return isxdigit(c); });
      if (!valid) {
        Warn(row, "address-location",
             "\"" + location + "\" starts with 0x, so the front-end takes it for an address, "
             "but it is not one (no library, not symbolicated)");
        return;
      }
      uint64_t address = std::stoull(hex, nullptr, 16);
      bool in_lib = std::any_of(ctx.libs.begin(), ctx.libs.end(), [&](const auto& r) {
        return r.first <= address && address < r.second;
      });
      if (!in_lib) {
        Warn(row, "address-no-lib",
             location + " is outside every library of " +
                 (ctx.path.empty() ? std::string("the process") : ctx.path) +
                 ": it can never be symbolicated");
      }
      if (ctx.presymbolicated) {
        Warn(row, "address-presymbolicated",
             location + " is an address but meta.presymbolicated is true: it will stay an "
             "address");
      }
      return;
    }
    case LocationKind::kJs: {
      if (JsLocationHasSourceIndex(location)) {
        size_t open = location.rfind('[');
        uint64_t source = std::stoull(location.substr(open + 1));
        if (!ctx.has_sources) {
          Error(row, "sources",
                "\"" + location + "\" has a [source index] suffix but the process has no "
                "\"sources\" table (import crashes)");
        } else if (source >= ctx.sources_length) {
          Warn(row, "sources", "source index out of range in \"" + location + "\"");
        }
      }
      if (options_.allow_js_looking_locations) return;
      std::string_view url = JsUrl(location);
      if (!LooksLikeScriptUrl(url)) {
        Error(row, "js-looking-location",
              "\"" + location + "\" is read by the front-end as a JavaScript function in "
              "script \"" + std::string(url) +
                  "\" (a name ending in :digits or (file:line)); native names need "
                  "\"name (in lib)\", labels must not end that way");
      }
      return;
    }
    case LocationKind::kNative:
    case LocationKind::kLabel:
      return;
  }
}

void Checker::CheckCategoryPair(const Value* category, const Value* subcategory,
                                const std::string& row, const char* code) {
  if (IsNullish(category)) {
    if (!IsNullish(subcategory)) {
      Warn(row, code, "a subcategory without a category is ignored");
    }
    return;
  }
  uint64_t c;
  if (!AsIndex(*category, &c) || c >= subcategory_counts_.size()) {
    Error(row, code,
          "category " + Show(*category) + " is not an index into meta.categories (" +
              std::to_string(subcategory_counts_.size()) +
              " entries); the front-end accepts it silently and shows garbage");
    return;
  }
  if (IsNullish(subcategory)) return;
  uint64_t s;
  if (!AsIndex(*subcategory, &s) || s >= subcategory_counts_[c]) {
    Error(row, code,
          "subcategory " + Show(*subcategory) + " is out of range for category " +
              std::to_string(c) + " (" + std::to_string(subcategory_counts_[c]) +
              " subcategories)");
  }
}

void Checker::CheckStacks(const Table& stacks, const std::string& path, size_t frame_count) {
  const int col_prefix = stacks.Column("prefix");
  const int col_frame = stacks.Column("frame");
  for (size_t i = 0; i < stacks.size(); ++i) {
    const Value* prefix = stacks.Get(i, col_prefix);
    const Value* frame = stacks.Get(i, col_frame);
    uint64_t p, f;
    if (!IsNullish(prefix)) {
      if (!AsIndex(*prefix, &p)) {
        Error(At(path + ".data", i), "stack-prefix", "prefix must be null or an index");
      } else if (p >= i) {
        Error(At(path + ".data", i), "stack-prefix-order",
              "prefix " + std::to_string(p) + " is not smaller than the stack's own index " +
                  std::to_string(i) +
                  " (parents must come first; the front-end's call tree never finishes)");
      }
    }
    if (frame == nullptr || !AsIndex(*frame, &f) || f >= frame_count) {
      Error(At(path + ".data", i), "stack-frame",
            "frame " + (frame ? Show(*frame) : std::string("null")) +
                " is not an index into the frameTable (" + std::to_string(frame_count) +
                " frames); accepted silently, shows nonsense");
    }
  }
}

void Checker::CheckSamples(const Table& samples, const std::string& path, size_t stack_count,
                           double register_time, double unregister_time,
                           const ProcessContext& ctx) {
  const int col_stack = samples.Column("stack");
  const int col_time = samples.Column("time");
  const int col_thread_cpu_delta = samples.Column("threadCPUDelta");
  const int col_event_delay = samples.Column("eventDelay");
  const int col_responsiveness = samples.Column("responsiveness");
  report_.samples += samples.size();
  double previous = -INFINITY;
  std::vector<double> gaps;
  bool any_cpu_delta = false;
  for (size_t i = 0; i < samples.size(); ++i) {
    std::string row_path;
    const auto row = [&]() -> const std::string& {
      if (row_path.empty()) row_path = At(path + ".data", i);
      return row_path;
    };
    const Value* stack = samples.Get(i, col_stack);
    uint64_t s;
    if (!IsNullish(stack) && (!AsIndex(*stack, &s) || s >= stack_count)) {
      Error(row(), "sample-stack",
            "stack " + Show(*stack) + " is not null or an index into the stackTable (" +
                std::to_string(stack_count) + " stacks)");
    }
    const Value* time = samples.Get(i, col_time);
    if (time == nullptr || !time->IsNumber()) {
      Error(row(), "sample-time",
            "time must be a number (ms relative to meta.startTime), got " +
                (time ? Show(*time) : std::string("nothing")) +
                (time && time->IsString() ? " (strings are coerced silently)" : ""));
      continue;
    }
    double t = time->GetDouble();
    if (std::fabs(t) > 1e10) {
      Error(row(), "time-units",
            "time " + Show(*time) + " looks absolute; sample times are ms relative to "
            "meta.startTime");
    }
    if (t < previous) {
      Error(row(), "sample-order",
            "time " + Show(*time) + " is earlier than the previous sample's; samples must be "
            "sorted (the front-end binary-searches them, and does not check)");
    } else if (previous > -INFINITY && t > previous) {
      gaps.push_back(t - previous);
    }
    previous = std::max(previous, t);
    // The front-end's timeline is [profilingStartTime, profilingEndTime) when given: a
    // sample outside it (a sub-process's last samples after the parent's end, typically) is
    // dropped without a word.
    if (!std::isnan(range_end_) && !std::isnan(ctx.shift) &&
        (t + ctx.shift < range_start_ || t + ctx.shift >= range_end_)) {
      Error(row(), "outside-profiling-range",
            "sample at " + Show(*time) + " ms (" + std::to_string(t + ctx.shift) +
                " on the top level's timeline) is outside meta.profilingStartTime.." +
                "profilingEndTime [" + std::to_string(range_start_) + ", " +
                std::to_string(range_end_) + "): the front-end drops it silently");
    }
    const double slack = std::max(ctx.interval, 1.0);
    if (t < register_time - slack || t > unregister_time + slack) {
      Warn(row(), "sample-lifetime",
           "sample at " + Show(*time) + " ms is outside the thread's registerTime.." +
               "unregisterTime");
    }
    for (int column : {col_event_delay, col_responsiveness}) {
      const char* key = column == col_event_delay ? "eventDelay" : "responsiveness";
      const Value* v = samples.Get(i, column);
      if (!IsNullish(v) && !v->IsNumber()) {
        Error(row(), "sample-columns", std::string(key) + " must be a number or null");
      }
    }
    if (const Value* cpu = samples.Get(i, col_thread_cpu_delta); !IsNullish(cpu)) {
      any_cpu_delta = true;
      if (!cpu->IsNumber() || cpu->GetDouble() < 0) {
        Error(row(), "sample-columns",
              "threadCPUDelta must be a non-negative number or null, got " + Show(*cpu));
      }
    }
  }
  if (any_cpu_delta && !sample_units_present_) {
    Warn(path, "sample-units",
         "threadCPUDelta values without meta.sampleUnits: the front-end cannot know their "
         "unit");
  }
  if (gaps.size() >= 9 && ctx.interval > 0) {
    std::nth_element(gaps.begin(), gaps.begin() + gaps.size() / 2, gaps.end());
    double median = gaps[gaps.size() / 2];
    if (median > 100 * ctx.interval || median < ctx.interval / 100) {
      Warn(path, "time-units",
           "the median gap between samples is " + std::to_string(median) +
               " ms for a meta.interval of " + std::to_string(ctx.interval) +
               " ms: wrong time unit, or wrong interval?");
    }
  }
}

}  // namespace gecko_profile_checker_internal
}  // namespace strata
