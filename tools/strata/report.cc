#include "tools/strata/report.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "tools/strata/function_stats.h"
#include "tools/strata/profile_io.h"
#include "tools/strata/progress.h"
#include "tools/strata/report_template.h"

namespace strata {
namespace cli {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void Number(JsonWriter& w, double value) {
  if (std::isfinite(value)) {
    w.Double(value);
  } else {
    w.Null();
  }
}

void String(JsonWriter& w, const std::string& s) { w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size())); }

class ReportData {
 public:
  ReportData(const Profile& profile, const std::string& source, const ReportOptions& options)
      : profile_(profile), source_(source), options_(options), function_ids_(profile.functions.size(), -1) {}

  std::string Json() {
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.SetMaxDecimalPlaces(4);
    const bool cpu = ProfileHasCpu(profile_);
    w.StartObject();
    w.Key("source");
    String(w, source_);
    w.Key("product");
    String(w, profile_.product);
    w.Key("startEpochMs");
    Number(w, profile_.start_epoch_ms);
    w.Key("interval");
    Number(w, profile_.interval_ms);
    w.Key("cpu");
    w.Bool(cpu);
    w.Key("allocations");
    w.Bool(std::any_of(profile_.threads.begin(), profile_.threads.end(),
                       [](const Thread& t) { return !t.native_allocations.empty(); }));
    w.Key("weight");
    String(w, WeightName(options_.weight));
    w.Key("start");
    Number(w, profile_.start_time);
    w.Key("end");
    Number(w, profile_.end_time);
    w.Key("totalSamples");
    w.Uint64(profile_.total_samples);
    w.Key("categories");
    w.StartArray();
    for (const Category& c : profile_.categories) {
      w.StartArray();
      String(w, c.name);
      String(w, c.color);
      w.EndArray();
    }
    w.EndArray();
    w.Key("processes");
    w.StartArray();
    for (const Process& p : profile_.processes) {
      w.StartObject();
      w.Key("pid");
      w.Int64(p.pid);
      w.Key("name");
      String(w, p.name);
      w.Key("start");
      Number(w, p.start_time);
      w.Key("end");
      Number(w, p.end_time);
      w.EndObject();
    }
    w.EndArray();
    w.Key("threads");
    w.StartArray();
    Progress progress("report", profile_.threads.size());
    for (const Thread& t : profile_.threads) {
      WriteThread(w, t, cpu);
      progress.Advance(1);
    }
    w.EndArray();
    // Functions last: only those the threads used, in first-use order.
    w.Key("functions");
    w.StartArray();
    for (uint32_t f : used_functions_) {
      const Function& function = profile_.functions[f];
      w.StartArray();
      String(w, function.name);
      String(w, function.library);
      String(w, function.file);
      w.EndArray();
    }
    w.EndArray();
    w.EndObject();
    return std::string(buffer.GetString(), buffer.GetSize());
  }

 private:
  int32_t FunctionId(uint32_t f) {
    if (function_ids_[f] < 0) {
      function_ids_[f] = static_cast<int32_t>(used_functions_.size());
      used_functions_.push_back(f);
    }
    return function_ids_[f];
  }

  void WriteThread(JsonWriter& w, const Thread& t, bool cpu) {
    const size_t n = t.sample_count();
    const size_t total = profile_.total_samples;
    const size_t step = total > options_.max_samples && options_.max_samples > 0
                            ? (total + options_.max_samples - 1) / options_.max_samples
                            : 1;
    // Stacks the kept samples use, with their ancestors, renumbered parents first.
    std::vector<int32_t> new_index(t.stack_prefix.size(), -1);
    std::vector<uint8_t> used(t.stack_prefix.size(), 0);
    auto use = [&](int32_t stack) {
      for (int32_t s = stack; s >= 0 && !used[static_cast<size_t>(s)]; s = t.stack_prefix[static_cast<size_t>(s)]) {
        used[static_cast<size_t>(s)] = 1;
      }
    };
    for (size_t i = 0; i < n; i += step) use(t.sample_stack[i]);
    // Native allocations (frees are not shown: an allocation's bytes count as retained when
    // no later free of its address follows, as the front-end and strata summary match them).
    std::vector<size_t> allocations;
    std::vector<uint8_t> retained;
    if (!t.native_allocations.empty()) {
      std::unordered_map<uint64_t, size_t> live;  // Address -> index into `allocations`.
      for (const NativeAllocation& a : t.native_allocations) {
        if (a.bytes < 0) {
          if (auto it = live.find(a.address); it != live.end()) {
            retained[it->second] = 0;
            live.erase(it);
          }
          continue;
        }
        if (auto it = live.find(a.address); it != live.end()) retained[it->second] = 0;  // Freed unseen.
        live[a.address] = allocations.size();
        allocations.push_back(static_cast<size_t>(&a - t.native_allocations.data()));
        retained.push_back(1);
        use(a.stack);
      }
    }
    w.StartObject();
    w.Key("name");
    String(w, t.name);
    w.Key("processName");
    String(w, t.process_name);
    w.Key("pid");
    w.Int64(t.pid);
    w.Key("tid");
    w.Int64(t.tid);
    w.Key("process");
    w.Uint64(t.process);
    w.Key("start");
    Number(w, t.register_time);
    w.Key("end");
    Number(w, std::isnan(t.unregister_time) ? profile_.processes[t.process].end_time : t.unregister_time);
    w.Key("sampleCount");
    w.Uint64(n);
    w.Key("cpuMs");
    Number(w, t.CpuMs());
    w.Key("wallMs");
    Number(w, ThreadWallMs(profile_, t));
    w.Key("thinned");
    w.Uint64(step);
    w.Key("sp");
    w.StartArray();
    int32_t next = 0;
    for (size_t s = 0; s < used.size(); ++s) {
      if (!used[s]) continue;
      new_index[s] = next++;
      const int32_t p = t.stack_prefix[s];
      w.Int(p >= 0 ? new_index[static_cast<size_t>(p)] : -1);
    }
    w.EndArray();
    w.Key("sf");
    w.StartArray();
    for (size_t s = 0; s < used.size(); ++s) {
      if (used[s]) w.Int(FunctionId(t.frames[t.stack_frame[s]].function));
    }
    w.EndArray();
    // "ss": the function each stack's self time goes to (an inlined leaf's outer function).
    w.Key("ss");
    w.StartArray();
    for (size_t s = 0; s < used.size(); ++s) {
      if (used[s]) w.Int(FunctionId(t.SelfFunction(static_cast<int32_t>(s))));
    }
    w.EndArray();
    w.Key("sc");
    w.StartArray();
    for (size_t s = 0; s < used.size(); ++s) {
      if (used[s]) w.Int(t.stack_category[s]);
    }
    w.EndArray();
    w.Key("t");
    w.StartArray();
    for (size_t i = 0; i < n; i += step) w.Double(std::round(t.sample_time[i] * 1000) / 1000);
    w.EndArray();
    w.Key("s");
    w.StartArray();
    for (size_t i = 0; i < n; i += step) {
      const int32_t s = t.sample_stack[i];
      w.Int(s >= 0 ? new_index[static_cast<size_t>(s)] : -1);
    }
    w.EndArray();
    // Weights of the kept samples, each standing for the `step` samples from it on: "w" wall
    // ms, "c" CPU ms (interval per sample without CPU deltas), "n" samples.
    const std::vector<double> wall = SampleWallMs(profile_, t);
    for (const char* key : {"w", "c", "n"}) {
      w.Key(key);
      w.StartArray();
      for (size_t i = 0; i < n; i += step) {
        const size_t until = std::min(n, i + step);
        if (key[0] == 'n') {
          w.Uint64(until - i);
          continue;
        }
        double weight = 0;
        for (size_t j = i; j < until; ++j) {
          weight += key[0] == 'w' ? wall[j] : SampleCpuMs(t, j, cpu, profile_.interval_ms);
        }
        w.Double(weight);
      }
      w.EndArray();
    }
    if (!allocations.empty()) {
      // The allocations: "at" time, "as" stack, "ab" estimated bytes, "ar" the same when
      // retained at the end, else 0.
      w.Key("at");
      w.StartArray();
      for (size_t i : allocations) w.Double(std::round(t.native_allocations[i].time * 1000) / 1000);
      w.EndArray();
      w.Key("as");
      w.StartArray();
      for (size_t i : allocations) {
        const int32_t s = t.native_allocations[i].stack;
        w.Int(s >= 0 ? new_index[static_cast<size_t>(s)] : -1);
      }
      w.EndArray();
      w.Key("ab");
      w.StartArray();
      for (size_t i : allocations) w.Int64(t.native_allocations[i].bytes);
      w.EndArray();
      w.Key("ar");
      w.StartArray();
      for (size_t k = 0; k < allocations.size(); ++k) w.Int64(retained[k] ? t.native_allocations[allocations[k]].bytes : 0);
      w.EndArray();
    }
    // Markers as spans (start/end pairs matched): [name index, start, end, instant], names
    // in "mn".
    std::vector<std::string> names;
    std::unordered_map<std::string, int> name_ids;
    const std::vector<MarkerSpan> spans = MarkerSpans(profile_, t);
    w.Key("markerCount");
    w.Uint64(spans.size());
    w.Key("m");
    w.StartArray();
    for (size_t i = 0; i < spans.size() && i < options_.max_markers; ++i) {
      const MarkerSpan& m = spans[i];
      auto [it, inserted] = name_ids.emplace(m.name, static_cast<int>(names.size()));
      if (inserted) names.push_back(m.name);
      w.StartArray();
      w.Int(it->second);
      Number(w, m.start);
      Number(w, m.end);
      w.Int(m.instant ? 1 : 0);
      w.EndArray();
    }
    w.EndArray();
    w.Key("mn");
    w.StartArray();
    for (const std::string& name : names) String(w, name);
    w.EndArray();
    w.EndObject();
  }

  const Profile& profile_;
  const std::string& source_;
  const ReportOptions& options_;
  std::vector<int32_t> function_ids_;
  std::vector<uint32_t> used_functions_;
};

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace

std::string ReportHtml(const Profile& profile, const std::string& source, const ReportOptions& options) {
  std::string json = ReportData(profile, source, options).Json();
  // Inside <script>: no '<' at all ("</script>", "<!--"); JSON allows \u003c in strings,
  // the only place a '<' can be.
  std::string safe;
  safe.reserve(json.size() + 64);
  for (char c : json) {
    if (c == '<') {
      safe += "\\u003c";
    } else {
      safe.push_back(c);
    }
  }
  std::string_view page = kReportTemplate;
  std::string html;
  html.reserve(page.size() + safe.size());
  const std::string_view data_marker = "/*STRATA_REPORT_DATA*/";
  const std::string_view title_marker = "<!--STRATA_TITLE-->";
  const size_t title_at = page.find(title_marker);
  const size_t data_at = page.find(data_marker);
  if (title_at == std::string_view::npos || data_at == std::string_view::npos || data_at < title_at) return "";
  html.append(page.substr(0, title_at));
  html += HtmlEscape("strata report: " + source);
  html.append(page.substr(title_at + title_marker.size(), data_at - title_at - title_marker.size()));
  html += safe;
  html.append(page.substr(data_at + data_marker.size()));
  return html;
}

bool WriteReport(const Profile& profile, const std::string& source, const ReportOptions& options,
                 const std::string& path, uint64_t* bytes, std::string* error) {
  const std::string html = ReportHtml(profile, source, options);
  if (html.empty()) {
    *error = "the report template is broken (markers missing)";
    return false;
  }
  if (!WriteFileAtomically(path, html, error)) return false;
  *bytes = html.size();
  return true;
}

}  // namespace cli
}  // namespace strata
