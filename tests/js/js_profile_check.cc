// js_profile_check: checks the JS thread of a profile written by `strata js` (or any program
// with a SpiderMonkey context attached) for what issue 5 asks: JS frames present, in the
// right order, under the embedder's native frames, with files, lines and JIT tiers; stacks
// well-formed in every sample; script markers as written. Frames are classified the way the
// front-end does (shared/json/location.h).
//
//   js_profile_check PROFILE [options]
//     --thread NAME            the JS thread (default: the thread with the most JS frames)
//     --window MARKER          only samples inside the interval marker MARKER (start/end pair
//                              or interval) count for --hot
//     --hot F1,F2,...          JS functions that must all be in a sample, root to leaf in this
//                              order, each located in --file
//     --file SUBSTRING         the hot functions' script (location substring)
//     --native SUBSTRING       a native frame that must be rootward of the first hot function
//                              (the embedder's, e.g. "main (in strata_js)")
//     --min-percent P          share of the window's samples that must have all of it (90)
//     --tiers LIST             implementations that must appear on the last hot function
//                              ("ion,baseline", "blinterp", or "none" = interpreter only)
//     --lines                  the interpreter/blinterp frames of hot functions carry a line
//     --max-malformed-percent P  with --well-formed: tolerate P % malformed samples
//     --max-cut-roots-percent P  with --well-formed: tolerate P % samples whose root is the
//                              engine's js::RunScript label, the runner's native frames lost
//                              (known and rare: docs/js.md, "Lost native roots"); otherwise
//                              well-formed. Default 0. Any other problem still fails.
//     --well-formed            every sample: a native root, native frames before any JS frame,
//                              every JS function after an engine entry (js::RunScript label or
//                              a libmozjs frame), known implementations only
//     --label SUBSTRING        some sample has a label frame containing it (repeatable)
//     --marker NAME:PHASE[:TEXT]  a marker with that name and phase (0 instant, 1 interval,
//                              2 start, 3 end) exists on the thread, with that Text payload
//                              (repeatable)
// Prints RESULT lines; exit status 0 when every check passed, 1 otherwise, 2 on bad input.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rapidjson/document.h"
#include "shared/json/location.h"

namespace {

using rapidjson::Value;

[[noreturn]] void Fatal(const std::string& message) {
  std::fprintf(stderr, "js_profile_check: %s\n", message.c_str());
  std::exit(2);
}

int g_failures = 0;
void Check(bool ok, const std::string& message) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", message.c_str());
  if (!ok) ++g_failures;
}

std::vector<std::string> Split(const std::string& s, char separator) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(separator, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

struct Frame {
  std::string location;
  strata::LocationKind kind;
  std::string implementation;  // "" = null
  std::optional<int64_t> line;
  std::string name;            // JS: the function name ("" for a top-level script)
};

struct Sample {
  double time;
  std::vector<int> frames;  // Root first, indexes into the frame list.
  double cpu_delta = -1;    // threadCPUDelta; -1 when absent or null.
};

struct Thread {
  std::string name;
  std::vector<Frame> frames;
  std::vector<Sample> samples;
  struct Marker {
    std::string name;
    int phase;
    std::optional<double> start, end;
    std::string type, text;
  };
  std::vector<Marker> markers;
  size_t js_frame_uses = 0;
};

int Column(const Value& schema, const char* key) {
  if (!schema.HasMember(key)) return -1;
  return schema[key].GetInt();
}

const Value* Cell(const Value& row, int column) {
  if (column < 0 || !row.IsArray() || static_cast<rapidjson::SizeType>(column) >= row.Size()) {
    return nullptr;
  }
  const Value& v = row[static_cast<rapidjson::SizeType>(column)];
  return v.IsNull() ? nullptr : &v;
}

// "b (/tmp/x.js:1:10)" -> "b"; "(root scope)" forms -> "".
std::string JsName(const std::string& location) {
  const size_t open = location.rfind(" (");
  if (open == std::string::npos) return std::string();
  std::string name = location.substr(0, open);
  return name;
}

Thread ReadThread(const Value& t) {
  Thread thread;
  thread.name = t["name"].GetString();
  const Value& strings = t["stringTable"];
  auto string_at = [&](const Value* v) -> std::string {
    if (!v || !v->IsUint() || v->GetUint() >= strings.Size()) return std::string();
    return strings[v->GetUint()].GetString();
  };
  const Value& ft = t["frameTable"];
  const int f_location = Column(ft["schema"], "location");
  const int f_impl = Column(ft["schema"], "implementation");
  const int f_line = Column(ft["schema"], "line");
  for (const Value& row : ft["data"].GetArray()) {
    Frame f;
    f.location = string_at(Cell(row, f_location));
    f.kind = strata::ClassifyLocation(f.location);
    f.implementation = string_at(Cell(row, f_impl));
    if (const Value* l = Cell(row, f_line)) f.line = l->GetInt64();
    if (f.kind == strata::LocationKind::kJs) f.name = JsName(f.location);
    thread.frames.push_back(std::move(f));
  }
  const Value& st = t["stackTable"];
  const int s_prefix = Column(st["schema"], "prefix");
  const int s_frame = Column(st["schema"], "frame");
  std::vector<std::pair<int, int>> stacks;  // (prefix, frame)
  for (const Value& row : st["data"].GetArray()) {
    const Value* p = Cell(row, s_prefix);
    stacks.emplace_back(p ? p->GetInt() : -1, Cell(row, s_frame)->GetInt());
  }
  const Value& samples = t["samples"];
  const int sm_stack = Column(samples["schema"], "stack");
  const int sm_time = Column(samples["schema"], "time");
  const int sm_cpu = Column(samples["schema"], "threadCPUDelta");
  for (const Value& row : samples["data"].GetArray()) {
    Sample s;
    s.time = Cell(row, sm_time) ? Cell(row, sm_time)->GetDouble() : 0;
    if (const Value* cpu = Cell(row, sm_cpu); cpu && cpu->IsNumber()) s.cpu_delta = cpu->GetDouble();
    const Value* stack = Cell(row, sm_stack);
    for (int i = stack ? stack->GetInt() : -1; i >= 0 && i < static_cast<int>(stacks.size());
         i = stacks[i].first) {
      s.frames.push_back(stacks[i].second);
    }
    std::reverse(s.frames.begin(), s.frames.end());
    for (int f : s.frames) {
      if (thread.frames[f].kind == strata::LocationKind::kJs) ++thread.js_frame_uses;
    }
    thread.samples.push_back(std::move(s));
  }
  const Value& markers = t["markers"];
  const Value& ms = markers["schema"];
  const int m_name = Column(ms, "name"), m_phase = Column(ms, "phase"),
            m_start = Column(ms, "startTime"), m_end = Column(ms, "endTime"),
            m_data = Column(ms, "data");
  for (const Value& row : markers["data"].GetArray()) {
    Thread::Marker m;
    m.name = string_at(Cell(row, m_name));
    m.phase = Cell(row, m_phase) ? Cell(row, m_phase)->GetInt() : -1;
    if (const Value* v = Cell(row, m_start)) m.start = v->GetDouble();
    if (const Value* v = Cell(row, m_end)) m.end = v->GetDouble();
    if (const Value* d = Cell(row, m_data); d && d->IsObject()) {
      if (d->HasMember("type") && (*d)["type"].IsString()) m.type = (*d)["type"].GetString();
      if (d->HasMember("name") && (*d)["name"].IsString()) m.text = (*d)["name"].GetString();
    }
    thread.markers.push_back(std::move(m));
  }
  return thread;
}

bool IsNativeLocation(const Frame& f) {
  return f.kind == strata::LocationKind::kNative || f.kind == strata::LocationKind::kAddress;
}

bool IsEngineEntry(const Frame& f) {
  return (f.kind == strata::LocationKind::kLabel && f.location.find("RunScript") != std::string::npos) ||
         (IsNativeLocation(f) && f.location.find("libmozjs") != std::string::npos);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Fatal("usage: js_profile_check PROFILE [options] (see the source)");
  const std::string path = argv[1];
  std::string thread_name, window, file, native, tiers;
  std::vector<std::string> hot, labels, marker_specs;
  double min_percent = 90;
  bool lines = false, well_formed = false;
  double max_malformed_percent = 0;
  double max_cut_roots_percent = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Fatal("missing value after " + arg);
      return argv[++i];
    };
    if (arg == "--thread") thread_name = next();
    else if (arg == "--window") window = next();
    else if (arg == "--hot") hot = Split(next(), ',');
    else if (arg == "--file") file = next();
    else if (arg == "--native") native = next();
    else if (arg == "--min-percent") min_percent = std::atof(next().c_str());
    else if (arg == "--tiers") tiers = next();
    else if (arg == "--lines") lines = true;
    else if (arg == "--well-formed") well_formed = true;
    else if (arg == "--max-malformed-percent") max_malformed_percent = std::atof(next().c_str());
    else if (arg == "--max-cut-roots-percent") max_cut_roots_percent = std::atof(next().c_str());
    else if (arg == "--label") labels.push_back(next());
    else if (arg == "--marker") marker_specs.push_back(next());
    else Fatal("unknown option " + arg);
  }

  std::ifstream in(path, std::ios::binary);
  if (!in) Fatal("cannot read " + path);
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("threads")) {
    Fatal(path + " is not a profile");
  }
  std::vector<Thread> threads;
  for (const Value& t : doc["threads"].GetArray()) threads.push_back(ReadThread(t));
  const Thread* js = nullptr;
  for (const Thread& t : threads) {
    if (!thread_name.empty() ? t.name == thread_name : (!js || t.js_frame_uses > js->js_frame_uses)) {
      js = &t;
    }
  }
  if (!js || js->js_frame_uses == 0) {
    Check(false, "a thread with JS frames" + (thread_name.empty() ? "" : " named " + thread_name));
    return 1;
  }
  std::printf("RESULT thread=%s samples=%zu js_frame_uses=%zu\n", js->name.c_str(),
              js->samples.size(), js->js_frame_uses);

  // The window: [start of the IntervalStart/Interval named `window`, its end].
  double window_start = -1e300, window_end = 1e300;
  if (!window.empty()) {
    bool found_start = false, found_end = false;
    for (const auto& m : js->markers) {
      if (m.name != window) continue;
      if ((m.phase == 1 || m.phase == 2) && m.start) {
        window_start = *m.start;
        found_start = true;
      }
      if ((m.phase == 1 || m.phase == 3) && m.end) {
        window_end = *m.end;
        found_end = true;
      }
    }
    Check(found_start && found_end, "window marker '" + window + "' has a start and an end");
  }

  if (!hot.empty()) {
    size_t in_window = 0, complete = 0, under_native = 0, with_line = 0, line_frames = 0;
    std::map<std::string, size_t> tier_counts;
    std::map<std::string, size_t> per_function;
    for (const Sample& s : js->samples) {
      if (s.time < window_start || s.time > window_end) continue;
      // The share is of the samples in which the thread ran: a sample with no CPU (a wait
      // in an engine lock whose holder a busy machine descheduled, a copy while it waited
      // for a CPU) says where it waited, not what its JavaScript was doing (issue 35).
      if (s.cpu_delta == 0) continue;
      ++in_window;
      // Hot functions root to leaf, in order.
      size_t next = 0;
      int first_hot = -1, last_hot = -1;
      for (size_t k = 0; k < s.frames.size() && next < hot.size(); ++k) {
        const Frame& f = js->frames[s.frames[k]];
        if (f.kind != strata::LocationKind::kJs || f.name != hot[next]) continue;
        if (!file.empty() && f.location.find(file) == std::string::npos) continue;
        if (first_hot < 0) first_hot = static_cast<int>(k);
        last_hot = static_cast<int>(k);
        ++per_function[hot[next]];
        ++next;
      }
      if (next != hot.size()) continue;
      ++complete;
      bool native_before = native.empty();
      for (int k = 0; k < first_hot && !native_before; ++k) {
        const Frame& f = js->frames[s.frames[k]];
        native_before = IsNativeLocation(f) && f.location.find(native) != std::string::npos;
      }
      if (!native_before) continue;
      ++under_native;
      const Frame& leaf_hot = js->frames[s.frames[last_hot]];
      ++tier_counts[leaf_hot.implementation.empty() ? "none" : leaf_hot.implementation];
      for (int k = first_hot; k <= last_hot; ++k) {
        const Frame& f = js->frames[s.frames[k]];
        if (f.kind != strata::LocationKind::kJs) continue;
        if (f.implementation.empty() || f.implementation == "blinterp") {
          ++line_frames;
          if (f.line) ++with_line;
        }
      }
    }
    const double pct = in_window ? 100.0 * static_cast<double>(under_native) /
                                       static_cast<double>(in_window)
                                 : 0;
    std::string tier_text;
    for (const auto& [tier, count] : tier_counts) {
      tier_text += (tier_text.empty() ? "" : ",") + tier + ":" + std::to_string(count);
    }
    std::printf("RESULT window_samples=%zu hot_in_order=%zu hot_under_native=%zu hot_pct=%.1f "
                "leaf_tiers=%s line_frames=%zu with_line=%zu\n",
                in_window, complete, under_native, pct, tier_text.c_str(), line_frames,
                with_line);
    Check(in_window > 0, "samples in the window: " + std::to_string(in_window));
    std::string order;
    for (const std::string& h : hot) order += (order.empty() ? "" : " > ") + h;
    char text[512];
    std::snprintf(text, sizeof(text), "%.1f%% of the samples have %s in order%s%s (>= %.0f%%)",
                  pct, order.c_str(), native.empty() ? "" : " under ", native.c_str(),
                  min_percent);
    Check(pct >= min_percent, text);
    if (!tiers.empty()) {
      for (const std::string& tier : Split(tiers, ',')) {
        Check(tier_counts.count(tier) > 0, "the leaf hot function ran in tier " + tier);
      }
      if (tiers == "none") {
        Check(tier_counts.size() == 1, "no JIT tier at all (interpreter only)");
      }
    }
    if (lines) {
      Check(line_frames > 0 && with_line * 100 >= line_frames * 95,
            "interpreter frames of hot functions carry a line (" + std::to_string(with_line) +
                " of " + std::to_string(line_frames) + ")");
    }
  }

  if (well_formed) {
    size_t bad = 0, js_samples = 0, cut_roots = 0;
    std::string first_problem;
    std::set<std::string> implementations;
    for (const Sample& s : js->samples) {
      std::string problem;
      bool has_js = false, seen_native = false, seen_entry = false;
      // A lost native root: the stack starts at the engine's entry label. What follows it
      // must still be well-formed.
      const bool cut_root = !s.frames.empty() &&
                            js->frames[s.frames[0]].kind == strata::LocationKind::kLabel &&
                            IsEngineEntry(js->frames[s.frames[0]]);
      if (cut_root) {
        ++cut_roots;
        seen_native = true;
      } else if (!s.frames.empty() && !IsNativeLocation(js->frames[s.frames[0]])) {
        problem = "root frame is not native: " + js->frames[s.frames[0]].location;
      }
      for (int index : s.frames) {
        const Frame& f = js->frames[index];
        if (IsNativeLocation(f)) seen_native = true;
        if (IsEngineEntry(f)) seen_entry = true;
        if (f.kind != strata::LocationKind::kJs) continue;
        has_js = true;
        implementations.insert(f.implementation);
        if (problem.empty() && !seen_native) problem = "JS frame before any native: " + f.location;
        if (problem.empty() && !seen_entry) problem = "JS frame before the engine entry: " + f.location;
        if (problem.empty() && !f.implementation.empty() && f.implementation != "blinterp" &&
            f.implementation != "baseline" && f.implementation != "ion" &&
            f.implementation != "wasm") {
          problem = "unknown implementation " + f.implementation;
        }
      }
      if (has_js) ++js_samples;
      if (!problem.empty()) {
        ++bad;
        if (first_problem.empty()) first_problem = problem;
      }
    }
    std::printf("RESULT well_formed_samples=%zu js_samples=%zu bad=%zu cut_roots=%zu\n",
                js->samples.size() - bad - cut_roots, js_samples, bad, cut_roots);
    if (max_malformed_percent <= 0) {
      Check(bad == 0, "every sample is well-formed" +
                          std::string(cut_roots ? ", apart from lost native roots" : "") +
                          (first_problem.empty() ? "" : " (first problem: " + first_problem + ")"));
      char text[160];
      std::snprintf(text, sizeof(text),
                    "%zu of %zu samples lost their native root (at most %g %%; docs/js.md)",
                    cut_roots, js->samples.size(), max_cut_roots_percent);
      Check(100.0 * cut_roots <= max_cut_roots_percent * js->samples.size(), text);
    } else {
      // The attach/detach stress: a sample taken while a context is being attached or
      // detached loses its native root more often (no cached segment yet; docs/js.md).
      // A percentage, but never less than one sample: a loaded machine (or a sanitizer) leaves
      // the window few samples, where one was over 1 % (1 of 52; issue 35).
      const double allowed = std::max(1.0, max_malformed_percent * js->samples.size() / 100.0);
      Check(static_cast<double>(bad + cut_roots) <= allowed,
            "at most " + std::to_string(max_malformed_percent) + " % (at least one) malformed samples" +
                (first_problem.empty() ? "" : " (first problem: " + first_problem + ")"));
    }
  }

  for (const std::string& label : labels) {
    size_t count = 0;
    for (const Sample& s : js->samples) {
      for (int index : s.frames) {
        const Frame& f = js->frames[index];
        if (f.kind == strata::LocationKind::kLabel && f.location.find(label) != std::string::npos) {
          ++count;
          break;
        }
      }
    }
    std::printf("RESULT label=%s samples=%zu\n", label.c_str(), count);
    Check(count > 0, "samples with a label frame containing '" + label + "': " + std::to_string(count));
  }

  for (const std::string& spec : marker_specs) {
    const std::vector<std::string> parts = Split(spec, ':');
    if (parts.size() < 2) Fatal("bad --marker " + spec);
    const int phase = std::atoi(parts[1].c_str());
    bool found = false;
    for (const auto& m : js->markers) {
      if (m.name != parts[0] || m.phase != phase) continue;
      if (parts.size() >= 3 && (m.type != "Text" || m.text != parts[2])) continue;
      if (phase == 1 && !(m.start && m.end && *m.end >= *m.start)) continue;
      found = true;
    }
    Check(found, "marker " + spec);
  }

  std::printf("js_profile_check: %s\n", g_failures ? "FAILED" : "all checks passed");
  return g_failures ? 1 : 0;
}
