// The pieces of the Gecko profile checker (gecko_profile_checker.h) that its files share:
// the JSON helpers, the table and process context types, and the Checker, whose checks are
// split by what they read: gecko_profile_checker.cc (the run, meta), _threads.cc (processes,
// libraries, threads, frames, stacks, samples), _markers.cc (markers, counters, paused ranges).
// Internal to //tests/format:gecko_profile_checker.
//
// Thread safety: a Checker is used by one thread; the helpers are pure functions.
#ifndef STRATA_TESTS_FORMAT_GECKO_PROFILE_CHECKER_INTERNAL_H_
#define STRATA_TESTS_FORMAT_GECKO_PROFILE_CHECKER_INTERNAL_H_

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rapidjson/document.h"
#include "tests/format/gecko_profile_checker.h"

namespace strata {
namespace gecko_profile_checker_internal {

using rapidjson::SizeType;
using rapidjson::Value;

inline constexpr int kVersion = 36;
inline constexpr const char* kColors[] = {"transparent", "purple",   "green", "orange",  "yellow",
                                          "lightblue",   "blue",     "brown", "magenta", "red",
                                          "lightred",    "darkgrey", "grey"};
// Marker field formats whose values are indexes into the thread's string table.
inline constexpr const char* kStringIndexFormats[] = {"unique-string", "flow-id",
                                                      "terminating-flow-id"};
inline constexpr const char* kReservedMarkerTypes[] = {
    "JS allocation", "Native allocation",   "GCSlice", "GCMajor", "IPC",
    "Network",       "CompositorScreenshot"};

std::string Str(const Value& v);
// What JSON.stringify would show, shortened.
std::string Show(const Value& v);
// A non-negative integral number, as JavaScript would use it for an index.
bool AsIndex(const Value& v, uint64_t* out);
const Value* Member(const Value& object, const char* key);
std::string At(const std::string& path, size_t index);
// The "URL" part of a JS-classified location: "f (url:1:2)[3]" -> url, "url:1" -> url.
std::string_view JsUrl(std::string_view s);
bool EndsWith(std::string_view s, std::string_view suffix);
bool LooksLikeScriptUrl(std::string_view url);

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

inline bool IsNullish(const Value* v) { return v == nullptr || v->IsNull(); }

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

  void Run(std::string_view json);

 private:
  void Add(bool error, const std::string& path, const char* code, const std::string& text);
  void Error(const std::string& path, const char* code, const std::string& text);
  void Warn(const std::string& path, const char* code, const std::string& text);

  // ---- meta -------------------------------------------------------------------------------

  void CheckCategories(const Value& meta, const std::string& path);

  void CheckSampleUnits(const Value& units);

  void CheckMarkerSchemas(const Value& meta, const std::string& path);

  // ---- processes --------------------------------------------------------------------------

  void CheckProcess(const Value& process, const std::string& prefix, bool top);

  void CheckLibs(const Value& libs, const std::string& path, ProcessContext& ctx);

  // ---- tables -----------------------------------------------------------------------------

  bool GetTable(const Value& thread, const char* key, const std::string& tpath,
                std::initializer_list<const char*> required, Table* table);

  // ---- threads ----------------------------------------------------------------------------

  void CheckThread(const Value& thread, const std::string& tpath, ProcessContext& ctx);

  template <typename StringAt>
  void CheckFrames(const Table& frames, const std::string& path, size_t string_count,
                   const StringAt& string_at, const ProcessContext& ctx);

  void CheckLocationString(const std::string& location, const std::string& row,
                           const ProcessContext& ctx);

  void CheckCategoryPair(const Value* category, const Value* subcategory, const std::string& row,
                         const char* code);

  void CheckStacks(const Table& stacks, const std::string& path, size_t frame_count);

  void CheckSamples(const Table& samples, const std::string& path, size_t stack_count,
                    double register_time, double unregister_time, const ProcessContext& ctx);

  void CheckMarkers(const Table& markers, const std::string& path, size_t string_count,
                    size_t stack_count, const ProcessContext& ctx);

  void CheckMarkerData(const Value& data, const std::string& row, size_t string_count,
                       size_t stack_count);

  void CheckCounters(const Value& counters, const std::string& path, const ProcessContext& ctx);

  void CheckPausedRanges(const Value& ranges, const std::string& path);

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

}  // namespace gecko_profile_checker_internal
}  // namespace strata

#endif  // STRATA_TESTS_FORMAT_GECKO_PROFILE_CHECKER_INTERNAL_H_
