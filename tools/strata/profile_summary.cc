#include "tools/strata/profile_summary.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rapidjson/document.h"

namespace strata {
namespace tools {
namespace {

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  return buffer;
}

int Column(const rapidjson::Value& table, const char* name) {
  if (!table.HasMember("schema") || !table["schema"].HasMember(name)) return -1;
  return table["schema"][name].GetInt();
}

struct FunctionStats {
  size_t self = 0;
  size_t total = 0;
};

struct MarkerStats {
  size_t count = 0;
  double total_ms = 0;
  double max_ms = 0;
  size_t with_duration = 0;
};

std::string Shorten(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width - 3) + "...";
}

}  // namespace

std::string SummarizeProfile(const std::string& json, size_t top_functions, std::string* error) {
  rapidjson::Document profile;
  profile.Parse(json.c_str(), json.size());
  if (profile.HasParseError() || !profile.IsObject() || !profile.HasMember("threads") ||
      !profile.HasMember("meta")) {
    if (error) *error = "not a Gecko profile (JSON object with meta and threads expected)";
    return std::string();
  }
  std::string out;
  const rapidjson::Value& meta = profile["meta"];
  // threadCPUDelta's unit: "ns", "µs" or "variable CPU cycles" (meta.sampleUnits).
  double cpu_unit_to_ms = 1e-3;
  if (meta.HasMember("sampleUnits") && meta["sampleUnits"].HasMember("threadCPUDelta")) {
    const std::string unit = meta["sampleUnits"]["threadCPUDelta"].GetString();
    cpu_unit_to_ms = unit == "ns" ? 1e-6 : unit == "µs" ? 1e-3 : 0;
  }
  double end_ms = 0;
  std::map<std::string, FunctionStats> functions;
  std::map<std::string, MarkerStats> markers;
  size_t total_samples = 0;
  std::string thread_lines;

  for (const auto& thread : profile["threads"].GetArray()) {
    const rapidjson::Value& strings = thread["stringTable"];
    const rapidjson::Value& frames = thread["frameTable"];
    const rapidjson::Value& stacks = thread["stackTable"];
    const rapidjson::Value& samples = thread["samples"];
    const int location = Column(frames, "location");
    const int prefix = Column(stacks, "prefix");
    const int frame = Column(stacks, "frame");
    const int stack_column = Column(samples, "stack");
    const int time_column = Column(samples, "time");
    const int cpu_column = Column(samples, "threadCPUDelta");
    size_t count = 0;
    double cpu_ms = 0;
    for (const auto& sample : samples["data"].GetArray()) {
      ++count;
      if (time_column >= 0 && sample[time_column].IsNumber()) {
        end_ms = std::max(end_ms, sample[time_column].GetDouble());
      }
      if (cpu_column >= 0 && cpu_column < static_cast<int>(sample.Size()) &&
          sample[cpu_column].IsNumber()) {
        cpu_ms += sample[cpu_column].GetDouble() * cpu_unit_to_ms;
      }
      if (stack_column < 0 || !sample[stack_column].IsInt()) continue;
      std::set<std::string> seen;
      int s = sample[stack_column].GetInt();
      bool leaf = true;
      while (s >= 0) {
        const auto& row = stacks["data"][s];
        const std::string name = strings[frames["data"][row[frame].GetInt()][location].GetInt()].GetString();
        if (leaf) functions[name].self++;
        leaf = false;
        if (seen.insert(name).second) functions[name].total++;
        s = row[prefix].IsNull() ? -1 : row[prefix].GetInt();
      }
    }
    total_samples += count;
    const std::string name = thread.HasMember("name") ? thread["name"].GetString() : "?";
    const int64_t tid = thread.HasMember("tid") && thread["tid"].IsNumber() ? thread["tid"].GetInt64() : 0;
    thread_lines += Format("  %-24s %8lld %9zu %12.1f\n", Shorten(name, 24).c_str(),
                           static_cast<long long>(tid), count, cpu_ms);

    const rapidjson::Value& marker_table = thread["markers"];
    const int name_column = Column(marker_table, "name");
    const int start_column = Column(marker_table, "startTime");
    const int end_column = Column(marker_table, "endTime");
    for (const auto& m : marker_table["data"].GetArray()) {
      MarkerStats& stats = markers[strings[m[name_column].GetInt()].GetString()];
      ++stats.count;
      if (m[start_column].IsNumber() && m[end_column].IsNumber()) {
        const double d = m[end_column].GetDouble() - m[start_column].GetDouble();
        stats.total_ms += d;
        stats.max_ms = std::max(stats.max_ms, d);
        ++stats.with_duration;
      }
      if (m[end_column].IsNumber()) end_ms = std::max(end_ms, m[end_column].GetDouble());
    }
  }

  const std::string product = meta.HasMember("product") ? meta["product"].GetString() : "";
  const double interval = meta.HasMember("interval") ? meta["interval"].GetDouble() : 0;
  const size_t processes = 1 + (profile.HasMember("processes") ? profile["processes"].Size() : 0);
  out += Format("Profile of %s: %.0f ms, %zu process(es), %zu thread(s), %zu samples, interval %.2f ms\n\n",
                product.c_str(), end_ms, processes, static_cast<size_t>(profile["threads"].Size()), total_samples, interval);
  out += Format("  %-24s %8s %9s %12s\n", "thread", "tid", "samples", "CPU ms");
  out += thread_lines;

  std::vector<std::pair<std::string, FunctionStats>> sorted(functions.begin(), functions.end());
  auto print_top = [&](const char* title, auto key) {
    std::sort(sorted.begin(), sorted.end(), [&](const auto& a, const auto& b) {
      return key(a.second) != key(b.second) ? key(a.second) > key(b.second) : a.first < b.first;
    });
    out += Format("\nTop functions by %s samples:\n  %7s %7s  %s\n", title, "self", "total", "function");
    for (size_t i = 0; i < sorted.size() && i < top_functions; ++i) {
      if (key(sorted[i].second) == 0) break;
      out += Format("  %6.1f%% %6.1f%%  %s\n", 100.0 * sorted[i].second.self / std::max<size_t>(1, total_samples),
                    100.0 * sorted[i].second.total / std::max<size_t>(1, total_samples),
                    Shorten(sorted[i].first, 100).c_str());
    }
  };
  print_top("self", [](const FunctionStats& f) { return f.self; });
  print_top("total", [](const FunctionStats& f) { return f.total; });

  out += Format("\nMarkers:\n  %-32s %7s %12s %10s\n", "name", "count", "total ms", "max ms");
  for (const auto& [name, stats] : markers) {
    if (stats.with_duration > 0) {
      out += Format("  %-32s %7zu %12.2f %10.2f\n", Shorten(name, 32).c_str(), stats.count,
                    stats.total_ms, stats.max_ms);
    } else {
      out += Format("  %-32s %7zu %12s %10s\n", Shorten(name, 32).c_str(), stats.count, "-", "-");
    }
  }
  return out;
}

}  // namespace tools
}  // namespace strata
