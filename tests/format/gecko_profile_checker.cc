#include "tests/format/gecko_profile_checker.h"

#include "shared/json/shared_libraries.h"

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

bool CheckReport::HasError(std::string_view code) const {
  for (const CheckMessage& m : errors) {
    if (m.code == code) return true;
  }
  return false;
}

bool CheckReport::HasWarning(std::string_view code) const {
  for (const CheckMessage& m : warnings) {
    if (m.code == code) return true;
  }
  return false;
}

std::string CheckReport::ToString() const {
  std::string out;
  for (const CheckMessage& m : errors) out += "error: " + m.text + "\n";
  for (const CheckMessage& m : warnings) out += "warning: " + m.text + "\n";
  return out;
}

namespace {

using rapidjson::SizeType;
using rapidjson::Value;

constexpr int kVersion = 36;
constexpr const char* kColors[] = {"transparent", "purple",  "green",   "orange", "yellow",
                                   "lightblue",   "blue",    "brown",   "magenta", "red",
                                   "lightred",    "darkgrey", "grey"};
// Marker field formats whose values are indexes into the thread's string table.
constexpr const char* kStringIndexFormats[] = {"unique-string", "flow-id",
                                               "terminating-flow-id"};
constexpr const char* kReservedMarkerTypes[] = {"JS allocation", "Native allocation", "GCSlice",
                                                "GCMajor",       "IPC",               "Network",
                                                "CompositorScreenshot"};

std::string Str(const Value& v) {
  return v.IsString() ? std::string(v.GetString(), v.GetStringLength()) : "";
}

// What JSON.stringify would show, shortened.
std::string Show(const Value& v) {
  if (v.IsNull()) return "null";
  if (v.IsBool()) return v.GetBool() ? "true" : "false";
  if (v.IsString()) {
    std::string s = Str(v);
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return "\"" + s + "\"";
  }
  if (v.IsInt64()) return std::to_string(v.GetInt64());
  if (v.IsUint64()) return std::to_string(v.GetUint64());
  if (v.IsNumber()) {
    char buffer[40];
    snprintf(buffer, sizeof(buffer), "%.17g", v.GetDouble());
    return buffer;
  }
  if (v.IsArray()) return "an array";
  return "an object";
}

// A non-negative integral number, as JavaScript would use it for an index.
bool AsIndex(const Value& v, uint64_t* out) {
  if (v.IsUint64()) {
    *out = v.GetUint64();
    return true;
  }
  if (v.IsDouble()) {
    double d = v.GetDouble();
    if (d >= 0 && d == std::floor(d) && d < 1.8e19) {
      *out = static_cast<uint64_t>(d);
      return true;
    }
  }
  return false;
}

const Value* Member(const Value& object, const char* key) {
  if (!object.IsObject()) return nullptr;
  auto it = object.FindMember(key);
  return it == object.MemberEnd() ? nullptr : &it->value;
}

std::string At(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

// The "URL" part of a JS-classified location: "f (url:1:2)[3]" -> url, "url:1" -> url.
std::string_view JsUrl(std::string_view s) {
  if (!s.empty() && s.back() == ']') {
    size_t open = s.rfind('[');
    if (open != std::string_view::npos) s = s.substr(0, open);
  }
  bool in_parens = !s.empty() && s.back() == ')';
  if (in_parens) s.remove_suffix(1);
  for (int i = 0; i < 2; ++i) {  // ":line" and ":column".
    size_t end = s.size();
    while (end > 0 && s[end - 1] >= '0' && s[end - 1] <= '9') --end;
    if (end == s.size() || end == 0 || s[end - 1] != ':' || end == 1) break;
    s = s.substr(0, end - 1);
  }
  if (in_parens) {
    size_t open = s.rfind(" (");
    if (open != std::string_view::npos) s = s.substr(open + 2);
  }
  return s;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool LooksLikeScriptUrl(std::string_view url) {
  if (url.find("://") != std::string_view::npos) return true;
  for (std::string_view scheme : {"resource:", "chrome:", "moz-extension:", "blob:", "data:",
                                  "file:", "self-hosted", "about:"}) {
    if (url.substr(0, scheme.size()) == scheme) return true;
  }
  for (std::string_view ext : {".js", ".mjs", ".cjs", ".jsm", ".jsx", ".ts", ".tsx", ".wasm",
                               ".html", ".htm", ".xhtml"}) {
    if (EndsWith(url, ext)) return true;
  }
  return false;
}

// A {schema, data} table with its column positions.
struct Table {
  const Value* data = nullptr;
  std::unordered_map<std::string, unsigned> columns;

  size_t size() const { return data ? data->Size() : 0; }
  bool Has(const char* column) const { return columns.count(column) != 0; }
  // The column's position, or -1 when the schema has no such column.
  int Column(const char* column) const {
    auto it = columns.find(column);
    return it == columns.end() ? -1 : static_cast<int>(it->second);
  }
  // The cell, or nullptr when the column is absent or the row too short (read as null).
  const Value* Get(size_t row, int column) const {
    if (column < 0) return nullptr;
    const Value& r = (*data)[static_cast<SizeType>(row)];
    if (!r.IsArray() || static_cast<SizeType>(column) >= r.Size()) return nullptr;
    return &r[static_cast<SizeType>(column)];
  }
};

bool IsNullish(const Value* v) { return v == nullptr || v->IsNull(); }

struct ProcessContext {
  std::string path;  // "" for the top level, "processes[2]." for a sub-process.
  std::vector<std::pair<uint64_t, uint64_t>> libs;  // [start, end), as given.
  std::vector<bool> own_libs;  // Per libs[] entry: one of Strata's own libraries.
  bool presymbolicated = false;
  bool has_sources = false;
  size_t sources_length = 0;
  bool has_gecko_main = false;
  double interval = 0;
  // This process's meta.startTime minus the top level's (ms): its times + shift are on the
  // top level's timeline, where meta.profilingStartTime/EndTime apply. NaN when unknown.
  double shift = NAN;
};

class Checker {
 public:
  Checker(const CheckOptions& options, CheckReport& report) : options_(options), report_(report) {}

  void Run(std::string_view json) {
    if (json.size() >= 2 && static_cast<unsigned char>(json[0]) == 0x1f &&
        static_cast<unsigned char>(json[1]) == 0x8b) {
      Error("", "not-json", "the file is gzip-compressed; decompress it first");
      return;
    }
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseFullPrecisionFlag>(
        json.data(), json.size());
    if (doc.HasParseError()) {
      Error("", "not-json",
            std::string("not valid JSON (NaN/Infinity tokens and invalid UTF-8 included) at "
                        "byte ") +
                std::to_string(doc.GetErrorOffset()) + ": " +
                rapidjson::GetParseError_En(doc.GetParseError()));
      return;
    }
    const Value* root = &doc;
    if (const Value* wrapped = Member(doc, "profile"); wrapped && !Member(doc, "meta")) {
      Warn("", "wrapped", "profile wrapped as {\"profile\": ...}; the importer unwraps it");
      root = wrapped;
    }
    if (!root->IsObject()) {
      Error("", "top-level", "the profile must be a JSON object");
      return;
    }
    const Value* meta = Member(*root, "meta");
    if (!meta || !meta->IsObject()) {
      Error("meta", "meta", "missing or not an object (the importer rejects the file)");
      return;
    }
    if (Member(*meta, "preprocessedProfileVersion")) {
      Error("meta.preprocessedProfileVersion", "processed-format",
            "this is the front-end's processed format, not the Gecko format we write");
      return;
    }
    CheckCategories(*meta, "meta");
    if (const Value* units = Member(*meta, "sampleUnits")) CheckSampleUnits(*units);
    CheckProcess(*root, "", /*top=*/true);

    const Value* processes = Member(*root, "processes");
    if (!processes || !processes->IsArray()) {
      Error("processes", "processes",
            "missing or not an array at the top level (import fails: \"processes is not "
            "iterable\"); write []");
    } else {
      for (SizeType i = 0; i < processes->Size(); ++i) {
        const Value& p = (*processes)[i];
        std::string path = At("processes", i);
        if (!p.IsObject()) {
          Error(path, "processes", "a sub-process profile must be an object");
          continue;
        }
        CheckProcess(p, path + ".", /*top=*/false);
        if (const Value* nested = Member(p, "processes"); nested && nested->IsArray() &&
                                                           nested->Size() > 0) {
          Warn(path + ".processes", "nested-processes",
               "only one level of sub-processes is read; these are ignored");
        }
      }
    }
    // Pairs of "…per code" summaries.
    for (auto& [code, count] : counts_) {
      if (count.first > options_.max_messages_per_code) {
        std::string text = "... and " +
                           std::to_string(count.first - options_.max_messages_per_code) +
                           " more [" + code + "]";
        (count.second ? report_.errors : report_.warnings).push_back({code, text});
      }
    }
  }

 private:
  void Add(bool error, const std::string& path, const char* code, const std::string& text) {
    auto& count = counts_[code];
    count.second = count.second || error;
    if (++count.first > options_.max_messages_per_code) return;
    std::string full = (path.empty() ? "" : path + ": ") + text + " [" + code + "]";
    (error ? report_.errors : report_.warnings).push_back({code, full});
  }
  void Error(const std::string& path, const char* code, const std::string& text) {
    Add(true, path, code, text);
  }
  void Warn(const std::string& path, const char* code, const std::string& text) {
    Add(false, path, code, text);
  }

  // ---- meta -------------------------------------------------------------------------------

  void CheckCategories(const Value& meta, const std::string& path) {
    const Value* categories = Member(meta, "categories");
    if (!categories || !categories->IsArray() || categories->Size() == 0) {
      Error(path + ".categories", "categories",
            "missing or empty; frames and markers have no valid category (write at least one "
            "grey \"Other\" category)");
      return;
    }
    bool has_grey = false;
    for (SizeType i = 0; i < categories->Size(); ++i) {
      const Value& c = (*categories)[i];
      std::string cpath = At(path + ".categories", i);
      const Value* name = Member(c, "name");
      const Value* color = Member(c, "color");
      const Value* subs = Member(c, "subcategories");
      if (!name || !name->IsString()) Error(cpath + ".name", "categories", "must be a string");
      if (!color || !color->IsString() ||
          std::find_if(std::begin(kColors), std::end(kColors), [&](const char* k) {
            return Str(*color) == k;
          }) == std::end(kColors)) {
        Error(cpath + ".color", "category-color",
              "must be one of the front-end's palette names, got " +
                  (color ? Show(*color) : "nothing"));
      } else if (Str(*color) == "grey") {
        has_grey = true;
      }
      size_t count = 0;
      if (!subs || !subs->IsArray() || subs->Size() == 0) {
        Error(cpath + ".subcategories", "categories",
              "must be a non-empty array of strings (index 0 is the category itself)");
      } else {
        for (SizeType k = 0; k < subs->Size(); ++k) {
          if (!(*subs)[k].IsString()) {
            Error(At(cpath + ".subcategories", k), "categories", "must be a string");
          }
        }
        count = subs->Size();
      }
      subcategory_counts_.push_back(count);
    }
    if (!has_grey) {
      Error(path + ".categories", "category-grey",
            "no category has color \"grey\"; the front-end uses the first grey one as the "
            "default category and silently gets it wrong without one");
    }
  }

  void CheckSampleUnits(const Value& units) {
    sample_units_present_ = true;
    if (!units.IsObject()) {
      Error("meta.sampleUnits", "sample-units", "must be an object");
      return;
    }
    const Value* cpu = Member(units, "threadCPUDelta");
    std::string unit = cpu && cpu->IsString() ? Str(*cpu) : "";
    if (unit != "ns" && unit != "\xC2\xB5s" && unit != "variable CPU cycles") {
      Error("meta.sampleUnits.threadCPUDelta", "sample-units",
            "must be \"ns\", \"\xC2\xB5s\" (U+00B5) or \"variable CPU cycles\", got " +
                (cpu ? Show(*cpu) : std::string("nothing")) +
                " (loading throws \"Unhandled threadCPUDelta unit\")");
    }
    const Value* time = Member(units, "time");
    if (time && (!time->IsString() || (Str(*time) != "ms" && Str(*time) != "bytes"))) {
      Error("meta.sampleUnits.time", "sample-units", "must be \"ms\" or \"bytes\"");
    }
    const Value* delay = Member(units, "eventDelay");
    if (delay && (!delay->IsString() || Str(*delay) != "ms")) {
      Error("meta.sampleUnits.eventDelay", "sample-units", "must be \"ms\"");
    }
  }

  void CheckMarkerSchemas(const Value& meta, const std::string& path) {
    const Value* schemas = Member(meta, "markerSchema");
    if (!schemas || !schemas->IsArray()) {
      Error(path + ".markerSchema", "marker-schema",
            "missing or not an array (required in every process's meta; may be [])");
      return;
    }
    for (SizeType i = 0; i < schemas->Size(); ++i) {
      const Value& s = (*schemas)[i];
      std::string spath = At(path + ".markerSchema", i);
      const Value* name = Member(s, "name");
      if (!name || !name->IsString()) {
        Error(spath + ".name", "marker-schema", "must be a string");
        continue;
      }
      const Value* data = Member(s, "data");
      if (!data) {
        Error(spath, "marker-schema",
              Member(s, "fields")
                  ? "uses \"fields\" (the processed format's name); the Gecko format needs "
                    "\"data\" (import crashes: \"data2 is not iterable\")"
                  : "has no \"data\" array (import crashes)");
        continue;
      }
      if (!data->IsArray()) {
        Error(spath + ".data", "marker-schema", "must be an array");
        continue;
      }
      if (const Value* display = Member(s, "display"); display && !display->IsArray()) {
        Error(spath + ".display", "marker-schema", "must be an array");
      }
      auto [it, inserted] = marker_schemas_.emplace(Str(*name), std::vector<std::string>());
      if (!inserted) continue;  // Merged by name, first one wins.
      for (SizeType k = 0; k < data->Size(); ++k) {
        const Value& field = (*data)[k];
        const Value* key = Member(field, "key");
        const Value* format = Member(field, "format");
        if (!key) continue;  // Static {label, value} entry.
        if (!key->IsString()) {
          Error(At(spath + ".data", k) + ".key", "marker-schema", "must be a string");
          continue;
        }
        if (!format) {
          Error(At(spath + ".data", k), "marker-schema", "a dynamic field needs a \"format\"");
          continue;
        }
        if (format->IsString()) {
          for (const char* f : kStringIndexFormats) {
            if (Str(*format) == f) it->second.push_back(Str(*key));
          }
        }
      }
    }
  }

  // ---- processes --------------------------------------------------------------------------

  void CheckProcess(const Value& process, const std::string& prefix, bool top) {
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

  void CheckLibs(const Value& libs, const std::string& path, ProcessContext& ctx) {
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

  // ---- tables -----------------------------------------------------------------------------

  bool GetTable(const Value& thread, const char* key, const std::string& tpath,
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

  // ---- threads ----------------------------------------------------------------------------

  void CheckThread(const Value& thread, const std::string& tpath, ProcessContext& ctx) {
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
  void CheckFrames(const Table& frames, const std::string& path, size_t string_count,
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

  void CheckLocationString(const std::string& location, const std::string& row,
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

  void CheckCategoryPair(const Value* category, const Value* subcategory, const std::string& row,
                         const char* code) {
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

  void CheckStacks(const Table& stacks, const std::string& path, size_t frame_count) {
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

  void CheckSamples(const Table& samples, const std::string& path, size_t stack_count,
                    double register_time, double unregister_time, const ProcessContext& ctx) {
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

  void CheckMarkers(const Table& markers, const std::string& path, size_t string_count,
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

  void CheckMarkerData(const Value& data, const std::string& row, size_t string_count,
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

  void CheckCounters(const Value& counters, const std::string& path, const ProcessContext& ctx) {
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

  void CheckPausedRanges(const Value& ranges, const std::string& path) {
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

  const CheckOptions& options_;
  CheckReport& report_;
  std::vector<size_t> subcategory_counts_;  // Per top-level category.
  std::unordered_map<std::string, std::vector<std::string>> marker_schemas_;
  bool sample_units_present_ = false;
  bool presymbolicated_ = false;
  double interval_ = 0;
  // The top level's meta.startTime and meta.profilingStartTime/EndTime (NaN: absent).
  double top_start_time_ = NAN;
  double range_start_ = NAN;
  double range_end_ = NAN;
  std::map<std::string, std::pair<size_t, bool>> counts_;  // Code -> (count, is error).
};

}  // namespace

CheckReport CheckGeckoProfile(std::string_view json, const CheckOptions& options) {
  CheckReport report;
  Checker(options, report).Run(json);
  return report;
}

}  // namespace strata
