#include "tools/strata/profile_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "tools/strata/function_stats.h"
#include "tools/strata/terminal_text.h"

namespace strata {
namespace cli {
namespace {

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  return buffer;
}

// Every string from the profile goes through TerminalSafe() before it is measured or cut.
// The cut never falls inside a UTF-8 sequence.
std::string Shorten(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  size_t cut = width - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

size_t Width(size_t wanted, size_t at_least, size_t at_most) { return std::min(at_most, std::max(at_least, wanted)); }

struct MarkerStats {
  size_t count = 0;
  double total_ms = 0;
  double max_ms = 0;
  size_t with_duration = 0;
};

}  // namespace

std::string SummarizeProfile(const Profile& profile, size_t top_functions, Weight sort_by,
                             const std::string& filter_note) {
  const FunctionTimes times = ComputeFunctionTimes(profile);
  std::string out;
  out += Format("Profile of %s: %.1f ms, %zu process(es), %zu thread(s), %zu samples, interval %.2f ms\n",
                profile.product.empty() ? "?" : TerminalSafe(profile.product).c_str(), profile.duration(),
                profile.processes.size(), profile.threads.size(), profile.total_samples, profile.interval_ms);
  if (!filter_note.empty()) out += filter_note + "\n";
  // One line per distinct source, with the processes it sampled ("pid: source" each).
  std::vector<std::pair<std::string, std::vector<std::string>>> sources;
  for (const std::string& entry : profile.sampling_sources) {
    const size_t colon = entry.find(": ");
    const std::string pid = colon == std::string::npos ? std::string() : entry.substr(0, colon);
    const std::string source = colon == std::string::npos ? entry : entry.substr(colon + 2);
    auto it = std::find_if(sources.begin(), sources.end(), [&](const auto& s) { return s.first == source; });
    if (it == sources.end()) it = sources.insert(sources.end(), {source, {}});
    it->second.push_back(pid);
  }
  for (const auto& [source, pids] : sources) {
    std::string who;
    if (pids.size() > 4) {
      who = std::to_string(pids.size()) + " processes";
    } else {
      for (const std::string& pid : pids) who += (who.empty() ? "pid " : ", ") + pid;
    }
    out += Format("Sampled by: %s (%s)\n", TerminalSafe(source).c_str(), who.c_str());
  }
  for (const std::string& note : profile.sampling_notes) {  // "pid: key: text"
    out += Format("Sampling note, pid %s\n", TerminalSafe(note).c_str());
  }
  out += Format("Wall ms: the time each sample stands for (to the thread's next sample). CPU ms: %s.\n",
                times.cpu ? "per-sample CPU deltas" : "samples x interval; the profile has no CPU deltas");

  // Per thread: wall and CPU time (the same weights as the functions').
  std::vector<double> thread_wall(profile.threads.size()), thread_cpu(profile.threads.size());
  for (size_t i = 0; i < profile.threads.size(); ++i) {
    const Thread& t = profile.threads[i];
    thread_wall[i] = ThreadWallMs(profile, t);
    for (size_t j = 0; j < t.sample_count(); ++j) thread_cpu[i] += SampleCpuMs(t, j, times.cpu, profile.interval_ms);
  }

  // Processes.
  std::vector<std::string> process_names;
  for (const Process& p : profile.processes) process_names.push_back(TerminalSafe(p.name));
  size_t name_width = 7;
  for (const std::string& name : process_names) name_width = Width(name.size(), name_width, 32);
  out += Format("\nProcesses:\n  %8s  %-*s %10s %12s %8s %9s %11s %11s\n", "pid", static_cast<int>(name_width),
                "process", "start ms", "duration ms", "threads", "samples", "wall ms", "CPU ms");
  for (size_t i = 0; i < profile.processes.size(); ++i) {
    const Process& p = profile.processes[i];
    size_t samples = 0;
    double cpu = 0, wall = 0;
    for (size_t t : p.threads) {
      samples += profile.threads[t].sample_count();
      cpu += thread_cpu[t];
      wall += thread_wall[t];
    }
    out += Format("  %8lld  %-*s %10.1f %12.1f %8zu %9zu %11.1f %11.1f\n", static_cast<long long>(p.pid),
                  static_cast<int>(name_width), Shorten(process_names[i], name_width).c_str(), p.start_time,
                  p.end_time - p.start_time, p.threads.size(), samples, wall, cpu);
  }

  // Threads.
  std::vector<std::string> thread_names;
  for (const Thread& t : profile.threads) thread_names.push_back(TerminalSafe(t.name));
  size_t thread_width = 6;
  for (const std::string& name : thread_names) thread_width = Width(name.size(), thread_width, 28);
  out += Format("\nThreads:\n  %8s %8s  %-*s %9s %11s %11s %7s\n", "pid", "tid", static_cast<int>(thread_width),
                "thread", "samples", "wall ms", "CPU ms", "CPU %");
  for (size_t i = 0; i < profile.threads.size(); ++i) {
    const Thread& t = profile.threads[i];
    const double end = std::isnan(t.unregister_time) ? profile.processes[t.process].end_time : t.unregister_time;
    const double life = end - t.register_time;
    const double cpu = thread_cpu[i];
    out += Format("  %8lld %8lld  %-*s %9zu %11.1f %11.1f %6.1f%%\n", static_cast<long long>(t.pid),
                  static_cast<long long>(t.tid), static_cast<int>(thread_width),
                  Shorten(thread_names[i], thread_width).c_str(), t.sample_count(), thread_wall[i], cpu,
                  life > 0 && t.has_cpu() ? 100.0 * cpu / life : 0.0);
  }

  // Functions: wall and CPU columns, sorted by `sort_by`, % of all of it.
  const char* sort_name = sort_by == Weight::kWall      ? "wall time"
                          : sort_by == Weight::kCpu     ? "CPU time"
                          : sort_by == Weight::kBytes   ? "allocated bytes"
                          : sort_by == Weight::kRetained ? "retained bytes"
                                                         : "samples";
  if (IsAllocationWeight(sort_by)) {
    out += Format("\nNative allocations: %.2f MiB allocated, %.2f MiB retained at the end (estimates; "
                  "docs/memory.md)%s\n",
                  times.bytes / 1048576.0, times.retained / 1048576.0,
                  times.bytes > 0 ? "" : ": none in this profile (record with --features nativeallocations)");
  }
  std::vector<size_t> order(times.functions.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto print_top = [&](const char* title, bool by_self) {
    auto key = [&](size_t f) { return by_self ? times.functions[f].Self(sort_by) : times.functions[f].Total(sort_by); };
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const double ka = key(a), kb = key(b);
      return ka != kb ? ka > kb : profile.functions[a].name < profile.functions[b].name;
    });
    if (IsAllocationWeight(sort_by)) {
      // Native allocations (docs/memory.md): estimated bytes, in MiB.
      out += Format("\nTop functions by %s %s (%% of all %s, MiB):\n  %12s %8s %12s %8s  %s\n", title,
                    sort_name, sort_name, "self MiB", "self %", "total MiB", "total %", "function");
      const double all = std::max(times.Total(sort_by), 1e-12);
      for (size_t i = 0; i < order.size() && i < top_functions; ++i) {
        const FunctionTime& f = times.functions[order[i]];
        if (key(order[i]) <= 0) break;
        const Function& function = profile.functions[order[i]];
        std::string name = Shorten(TerminalSafe(function.name), 90);
        if (!function.library.empty()) name += "  [" + TerminalSafe(function.library) + "]";
        out += Format("  %12.2f %7.1f%% %12.2f %7.1f%%  %s\n", f.Self(sort_by) / 1048576.0,
                      100.0 * f.Self(sort_by) / all, f.Total(sort_by) / 1048576.0,
                      100.0 * f.Total(sort_by) / all, name.c_str());
      }
      return;
    }
    out += Format("\nTop functions by %s time, sorted by %s (%% of all %s):\n  %10s %10s %8s %11s %10s %8s %9s  %s\n",
                  title, sort_name, sort_name, "self wall", "self CPU", "self %", "total wall", "total CPU", "total %",
                  "samples", "function");
    const double all = std::max(times.Total(sort_by), 1e-12);
    for (size_t i = 0; i < order.size() && i < top_functions; ++i) {
      const FunctionTime& f = times.functions[order[i]];
      if (key(order[i]) <= 0) break;
      const Function& function = profile.functions[order[i]];
      std::string name = Shorten(TerminalSafe(function.name), 90);
      if (!function.library.empty()) name += "  [" + TerminalSafe(function.library) + "]";
      out += Format("  %10.1f %10.1f %7.1f%% %11.1f %10.1f %7.1f%% %9zu  %s\n", f.self_wall, f.self_cpu,
                    100.0 * f.Self(sort_by) / all, f.total_wall, f.total_cpu, 100.0 * f.Total(sort_by) / all,
                    f.total_samples, name.c_str());
    }
  };
  print_top("self", true);
  print_top("total", false);

  // Markers.
  std::map<std::string, MarkerStats> markers;
  for (const Thread& t : profile.threads) {
    for (const MarkerSpan& m : MarkerSpans(profile, t)) {
      MarkerStats& s = markers[TerminalSafe(m.name)];
      ++s.count;
      if (!m.instant) {
        const double d = m.end - m.start;
        s.total_ms += d;
        s.max_ms = std::max(s.max_ms, d);
        ++s.with_duration;
      }
    }
  }
  size_t marker_width = 4;
  for (const auto& [name, s] : markers) marker_width = Width(name.size(), marker_width, 40);
  out += Format("\nMarkers:%s\n", markers.empty() ? " none" : "");
  if (!markers.empty()) {
    out += Format("  %-*s %8s %12s %10s\n", static_cast<int>(marker_width), "name", "count", "total ms", "max ms");
  }
  for (const auto& [name, s] : markers) {
    if (s.with_duration > 0) {
      out += Format("  %-*s %8zu %12.2f %10.2f\n", static_cast<int>(marker_width),
                    Shorten(name, marker_width).c_str(), s.count, s.total_ms, s.max_ms);
    } else {
      out += Format("  %-*s %8zu %12s %10s\n", static_cast<int>(marker_width), Shorten(name, marker_width).c_str(),
                    s.count, "-", "-");
    }
  }
  return out;
}

}  // namespace cli
}  // namespace strata
