#include "tools/strata/profile_merge.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "shared/json/gecko_profile_writer.h"
#include "tools/strata/profile_json.h"

namespace strata {
namespace cli {
namespace {

using rapidjson::SizeType;
using rapidjson::Value;
using Allocator = rapidjson::Document::AllocatorType;
using namespace profile_json;  // NOLINT: the table accessors.

double StartTimeOf(const Value& profile) {
  const Value& meta = profile["meta"];
  return meta.HasMember("startTime") && meta["startTime"].IsNumber() ? meta["startTime"].GetDouble() : 0;
}

// Moves `profile`'s sub-processes (recursively) out of it into `out`, after it.
void Flatten(Value&& profile, std::vector<Value>* out) {
  Value subprocesses(rapidjson::kArrayType);
  if (profile.HasMember("processes") && profile["processes"].IsArray()) {
    subprocesses = std::move(profile["processes"]);  // Leaves an empty array behind.
    profile["processes"].SetArray();
  }
  out->push_back(std::move(profile));
  for (Value& child : subprocesses.GetArray()) {
    if (IsProfile(child)) Flatten(std::move(child), out);
  }
}

// Rewrites category indexes of `profile`'s frames and markers through `map`.
void RemapCategories(Value& profile, const std::vector<int>& map) {
  auto remap = [&](Value* cell) {
    if (cell == nullptr || !cell->IsInt()) return;
    const int c = cell->GetInt();
    if (c >= 0 && static_cast<size_t>(c) < map.size()) cell->SetInt(map[static_cast<size_t>(c)]);
  };
  for (Value& thread : profile["threads"].GetArray()) {
    if (!thread.IsObject()) continue;
    if (IsTable(thread, "frameTable")) {
      const int column = Column(thread["frameTable"], "category");
      for (Value& row : thread["frameTable"]["data"].GetArray()) remap(Cell(row, column));
    }
    if (IsTable(thread, "markers")) {
      const int column = Column(thread["markers"], "category");
      for (Value& row : thread["markers"]["data"].GetArray()) remap(Cell(row, column));
    }
  }
}

std::string CategoryName(const Value& category) {
  return category.IsObject() && category.HasMember("name") && category["name"].IsString()
             ? category["name"].GetString()
             : std::string();
}

}  // namespace

void MergeProfiles(rapidjson::Document* parent, std::vector<rapidjson::Document>* children) {
  Allocator& allocator = parent->GetAllocator();
  Value& parent_meta = (*parent)["meta"];

  // Every sub-process, flattened: the parent's own, then each child with its own.
  std::vector<Value> processes;
  {
    std::vector<Value> flat;
    Value root_subprocesses(rapidjson::kArrayType);
    if (parent->HasMember("processes") && (*parent)["processes"].IsArray()) {
      root_subprocesses = std::move((*parent)["processes"]);
    }
    for (Value& child : root_subprocesses.GetArray()) {
      if (IsProfile(child)) Flatten(std::move(child), &processes);
    }
    for (rapidjson::Document& child : *children) {
      if (!IsProfile(child)) continue;
      if (&child.GetAllocator() == &allocator) {
        Flatten(std::move(static_cast<Value&>(child)), &processes);
      } else {
        Flatten(Value(child, allocator), &processes);
      }
    }
  }
  std::stable_sort(processes.begin(), processes.end(),
                   [](const Value& a, const Value& b) { return StartTimeOf(a) < StartTimeOf(b); });

  // Children: the front-end's child process type ("default" is its main process) and a
  // processName that tells apart children running the same program.
  for (Value& process : processes) {
    if (!process.HasMember("threads") || !process["threads"].IsArray()) continue;
    for (Value& thread : process["threads"].GetArray()) {
      if (!thread.IsObject()) continue;
      if (thread.HasMember("processType") && thread["processType"].IsString() &&
          std::string(thread["processType"].GetString()) == "default") {
        thread["processType"].SetString("tab", allocator);
      }
      int64_t pid = -1;
      if (thread.HasMember("pid") && thread["pid"].IsInt64()) pid = thread["pid"].GetInt64();
      if (thread.HasMember("pid") && thread["pid"].IsString()) pid = std::atoll(thread["pid"].GetString());
      if (pid >= 0 && thread.HasMember("processName") && thread["processName"].IsString()) {
        const std::string name = ChildProcessName(thread["processName"].GetString(), pid);
        thread["processName"].SetString(name.c_str(), static_cast<rapidjson::SizeType>(name.size()), allocator);
      }
    }
  }

  // Categories, unified by name into the parent's list.
  if (!parent_meta.HasMember("categories") || !parent_meta["categories"].IsArray()) {
    parent_meta.RemoveMember("categories");
    parent_meta.AddMember("categories", Value(rapidjson::kArrayType), allocator);
  }
  Value& categories = parent_meta["categories"];
  auto index_of = [&](const std::string& name) -> int {
    for (SizeType i = 0; i < categories.Size(); ++i) {
      if (CategoryName(categories[i]) == name) return static_cast<int>(i);
    }
    return -1;
  };
  for (Value& process : processes) {
    Value& meta = process["meta"];
    if (!meta.HasMember("categories") || !meta["categories"].IsArray()) continue;
    std::vector<int> map;
    bool identity = true;
    for (const Value& category : meta["categories"].GetArray()) {
      int index = index_of(CategoryName(category));
      if (index < 0) {
        index = static_cast<int>(categories.Size());
        categories.PushBack(Value(category, allocator), allocator);
      }
      identity = identity && index == static_cast<int>(map.size());
      map.push_back(index);
    }
    if (!identity) RemapCategories(process, map);
  }
  for (Value& process : processes) {
    Value& meta = process["meta"];
    meta.RemoveMember("categories");
    meta.AddMember("categories", Value(categories, allocator), allocator);
  }

  // Marker schemas united by name.
  if (!parent_meta.HasMember("markerSchema") || !parent_meta["markerSchema"].IsArray()) {
    parent_meta.RemoveMember("markerSchema");
    parent_meta.AddMember("markerSchema", Value(rapidjson::kArrayType), allocator);
  }
  Value& schemas = parent_meta["markerSchema"];
  std::set<std::string> schema_names;
  for (const Value& schema : schemas.GetArray()) schema_names.insert(CategoryName(schema));
  for (Value& process : processes) {
    Value& meta = process["meta"];
    if (!meta.HasMember("markerSchema") || !meta["markerSchema"].IsArray()) {
      meta.RemoveMember("markerSchema");
      meta.AddMember("markerSchema", Value(rapidjson::kArrayType), allocator);
    }
    for (const Value& schema : meta["markerSchema"].GetArray()) {
      if (schema_names.insert(CategoryName(schema)).second) schemas.PushBack(Value(schema, allocator), allocator);
    }
  }

  // The parent's profiling range covers every process.
  const double parent_start = StartTimeOf(*parent);
  const bool has_range = parent_meta.HasMember("profilingStartTime") && parent_meta["profilingStartTime"].IsNumber() &&
                         parent_meta.HasMember("profilingEndTime") && parent_meta["profilingEndTime"].IsNumber();
  if (has_range) {
    double start = parent_meta["profilingStartTime"].GetDouble();
    double end = parent_meta["profilingEndTime"].GetDouble();
    for (const Value& process : processes) {
      const Value& meta = process["meta"];
      const double shift = StartTimeOf(process) - parent_start;
      if (meta.HasMember("profilingStartTime") && meta["profilingStartTime"].IsNumber()) {
        start = std::min(start, meta["profilingStartTime"].GetDouble() + shift);
      } else {
        start = std::min(start, shift);
      }
      if (meta.HasMember("profilingEndTime") && meta["profilingEndTime"].IsNumber()) {
        end = std::max(end, meta["profilingEndTime"].GetDouble() + shift);
      }
    }
    // Whole microseconds: no binary-floating-point tails from the shifts.
    parent_meta["profilingStartTime"].SetDouble(std::floor(start * 1000) / 1000);
    parent_meta["profilingEndTime"].SetDouble(std::ceil(end * 1000) / 1000);
  }

  // Profiling logs (keyed by pid) gathered into the parent's.
  for (Value& process : processes) {
    if (!process.HasMember("profilingLog") || !process["profilingLog"].IsObject()) continue;
    if (!parent->HasMember("profilingLog") || !(*parent)["profilingLog"].IsObject()) {
      parent->RemoveMember("profilingLog");
      parent->AddMember("profilingLog", Value(rapidjson::kObjectType), allocator);
    }
    Value& log = (*parent)["profilingLog"];
    for (auto& entry : process["profilingLog"].GetObject()) {
      if (!log.HasMember(entry.name)) log.AddMember(Value(entry.name, allocator), Value(entry.value, allocator), allocator);
    }
  }

  Value list(rapidjson::kArrayType);
  list.Reserve(static_cast<SizeType>(processes.size()), allocator);
  for (Value& process : processes) list.PushBack(std::move(process), allocator);
  if (parent->HasMember("processes")) {
    (*parent)["processes"] = std::move(list);
  } else {
    parent->AddMember("processes", std::move(list), allocator);
  }
}

size_t CountThreads(const rapidjson::Value& profile) {
  size_t n = profile["threads"].Size();
  if (profile.HasMember("processes") && profile["processes"].IsArray()) {
    for (const rapidjson::Value& p : profile["processes"].GetArray()) n += CountThreads(p);
  }
  return n;
}

size_t CountSamples(const rapidjson::Value& profile) {
  size_t n = 0;
  for (const rapidjson::Value& t : profile["threads"].GetArray()) {
    if (t.HasMember("samples") && t["samples"].HasMember("data")) n += t["samples"]["data"].Size();
  }
  if (profile.HasMember("processes") && profile["processes"].IsArray()) {
    for (const rapidjson::Value& p : profile["processes"].GetArray()) n += CountSamples(p);
  }
  return n;
}

}  // namespace cli
}  // namespace strata
