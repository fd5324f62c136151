// Small accessors of Gecko profile JSON tables (rapidjson values) shared by the profile
// merge and symbolication: a table's column by name, a row's cell, whether a thread has a
// table, whether a value is a profile, and a walk over a profile's processes.
//
// Thread safety: none needed (pure functions of their arguments; the caller owns the values).
#ifndef STRATA_TOOLS_STRATA_PROFILE_JSON_H_
#define STRATA_TOOLS_STRATA_PROFILE_JSON_H_

#include "rapidjson/document.h"

namespace strata {
namespace cli {
namespace profile_json {

using rapidjson::SizeType;
using rapidjson::Value;

// The index of column `name` in `table`'s schema, or -1.
inline int Column(const Value& table, const char* name) {
  if (!table.IsObject() || !table.HasMember("schema") || !table["schema"].IsObject()) return -1;
  const Value& schema = table["schema"];
  if (!schema.HasMember(name) || !schema[name].IsInt()) return -1;
  return schema[name].GetInt();
}

// Row cell or nullptr.
inline Value* Cell(Value& row, int column) {
  if (column < 0 || !row.IsArray() || static_cast<SizeType>(column) >= row.Size()) return nullptr;
  return &row[static_cast<SizeType>(column)];
}

// Whether `thread` has table `name` with a data array.
inline bool IsTable(const Value& thread, const char* name) {
  return thread.HasMember(name) && thread[name].IsObject() && thread[name].HasMember("data") &&
         thread[name]["data"].IsArray();
}

// Whether `v` looks like a profile (an object with meta and threads).
inline bool IsProfile(const Value& v) {
  return v.IsObject() && v.HasMember("meta") && v["meta"].IsObject() && v.HasMember("threads") &&
         v["threads"].IsArray();
}

// Calls fn(process_profile) for the parent and each sub-process (recursively).
template <typename Fn>
void ForEachProcess(Value& profile, const Fn& fn) {
  fn(profile);
  if (profile.HasMember("processes") && profile["processes"].IsArray()) {
    for (Value& child : profile["processes"].GetArray()) {
      if (IsProfile(child)) ForEachProcess(child, fn);
    }
  }
}
template <typename Fn>
void ForEachProcess(const Value& profile, const Fn& fn) {
  fn(profile);
  if (profile.HasMember("processes") && profile["processes"].IsArray()) {
    for (const Value& child : profile["processes"].GetArray()) {
      if (IsProfile(child)) ForEachProcess(child, fn);
    }
  }
}

}  // namespace profile_json
}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_PROFILE_JSON_H_
