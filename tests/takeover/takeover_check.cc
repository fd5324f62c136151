// Checks a profile of a taken-over session (tests/takeover):
//   takeover_check PROFILE.json --thread NAME --markers a,b,c [--expect-full]
//   takeover_check PROFILE.json --thread NAME --cycles N [--strict-gaps] [--signal-log FILE]
// - every thread's sample times strictly increase (no two samples share a time stamp);
// - the busy thread's samples continue across the "takeover" marker: the largest gap between
//   consecutive samples across the hand-over (StartFull), in the thread's CPU time (immune to
//   scheduling noise on a shared machine), is at most 2 effective intervals (the median CPU
//   gap before takeover), or the run's own largest gap away from the takeover;
// - the listed markers are all there, in this order;
// - with --expect-full: the profile was written by the full tier, with the malloc counter and
//   the sampler-overhead table.
// With --cycles N (takeover_program's TAKEOVER_REPEAT=N): N takeovers ("takeover-<i>" to
// "taken-over-<i>") and N detaches ("detach-<i>" to "detached-<i>"). For every one of them:
// the largest CPU-time gap between consecutive samples of the busy thread across the call
// (from its last sample before the call to its first after it returned, on the thread's own
// CPU clock: the markers carry that clock's readings, PlaceSamplesOnCpuClock), in effective
// intervals (the median CPU delta of the thread's real samples over the whole run, so that it
// holds for tick-bound timers and for any faster source); and the session's droppedSamples.
// Both are printed. A gap that began with a sample due more than one interval before the call
// started, and never delivered, counts from one interval before the call: every ring was
// drained just before it and no sample was dropped, so that sample was lost by the platform
// (perf overflows under load: docs/takeover.md), not by the hand-over. Whether a sample due
// after the call was lost that way cannot be told from the hand-over making it late, so that
// side counts in full. With --strict-gaps, every call must be placed, and every such gap must
// be at most 2 effective intervals (5 % allowed for the jitter of CPU-clock deltas, plus the
// placement's uncertainty) or, when the sampler thread itself waited
// for a CPU somewhere in the run, at most the largest gap of the run away from every
// hand-over (a hand-over must not make a gap the run does not have anyway; on a machine with
// 2 busy processes per CPU the sampler thread was seen starved for ~30 ms, its 8-slot rings
// overflowing, at a detach and elsewhere alike). droppedSamples is printed, not asserted:
// drops come from that starvation, not from the hand-over, whose own drops the program
// counts (none allowed). Without it (CPU-clock timers, which on a loaded machine leave gaps of many intervals
// anywhere in a run: docs/takeover.md), the hand-overs' own share is checked in the program
// (no sample dropped during a hand-over: then every sample the timers delivered is there,
// and a gap across a hand-over is the timers' own).
// With --signal-log FILE (takeover_program's TAKEOVER_SIGNAL_LOG: the busy thread's CPU clock
// at every sampling signal its handler took), every hand-over window over the bound (from the
// last sample before the call to the first signalled one after it) is checked for signals
// taken there that no sample accounts for (SignalDeficits): any such signal fails it,
// whatever the run's other gaps. A window that fails the bounds above passes as the kernel's
// gap only when every signal taken in it has its sample, no two signals or samples came
// together in it (signals held back by a long handler), the log covers it and the process
// dropped no stray and skipped no sampling signal (the log's trailer): the handler cannot
// lose what it never got, and the hand-over touches no timer or event (docs/takeover.md).
// The whole run's count of signals without a sample is printed.
// Prints "RESULT ..." lines and exits 1 on any failed check.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "rapidjson/document.h"

namespace {

int g_failures = 0;
void Check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++g_failures;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

struct Sampled {
  std::vector<double> times;   // ms
  std::vector<double> cpu_ms;  // CPU delta of each sample, ms (-1: none)
};

Sampled ReadSamples(const rapidjson::Value& thread) {
  Sampled out;
  const rapidjson::Value& samples = thread["samples"];
  const int time_col = samples["schema"]["time"].GetInt();
  const int cpu_col = samples["schema"]["threadCPUDelta"].GetInt();
  for (const auto& s : samples["data"].GetArray()) {
    out.times.push_back(s[time_col].GetDouble());
    out.cpu_ms.push_back(s[cpu_col].IsNumber() ? s[cpu_col].GetDouble() / 1e6 : -1);  // ns units
  }
  return out;
}

// The largest CPU delta of the samples from the last one at or before `from` (excluded: its
// delta covers the time before) to the first signalled one at or after `to` (included). Sets
// *found false when the thread has no sample on one side.
// `in_window`, when given, gets true at the index of every sample the gap was taken over.
double LargestCpuGapAcross(const Sampled& s, double from, double to, bool* found,
                           std::vector<bool>* in_window = nullptr) {
  size_t last_before = 0;
  bool any_before = false;
  for (size_t i = 0; i < s.times.size(); ++i) {
    if (s.times[i] <= from) {
      last_before = i;
      any_before = true;
    }
  }
  double gap = 0;
  *found = false;
  if (!any_before) return 0;
  for (size_t i = last_before + 1; i < s.times.size(); ++i) {
    gap = std::max(gap, s.cpu_ms[i]);
    if (in_window) (*in_window)[i] = true;
    // A copy with CPU delta 0 does not end it: the CPU since the previous sample is in the
    // next signalled one. (A copy that carries missed CPU cannot be told from a signalled
    // sample: docs/takeover.md.)
    if (s.times[i] >= to && s.cpu_ms[i] > 0) {
      *found = true;
      break;
    }
  }
  return gap;
}

// Calls fn(name, time, text) for every marker of `thread`, in profile order; the time is the
// start, or the end for a marker that has only an end; the text is a Text marker's, else "".
template <typename Fn>
void ForEachMarker(const rapidjson::Value& thread, Fn&& fn) {
  const rapidjson::Value& strings = thread["stringTable"];
  const rapidjson::Value& table = thread["markers"];
  const int name_col = table["schema"]["name"].GetInt();
  const int start_col = table["schema"]["startTime"].GetInt();
  const int end_col = table["schema"]["endTime"].GetInt();
  const int data_col = table["schema"]["data"].GetInt();
  for (const auto& m : table["data"].GetArray()) {
    std::string text;
    const rapidjson::Value& data = m[data_col];
    if (data.IsObject() && data.HasMember("type") && data["type"] == "Text" &&
        data.HasMember("name") && data["name"].IsString()) {
      text = data["name"].GetString();
    }
    fn(std::string(strings[m[name_col].GetInt()].GetString()),
       m[start_col].IsNumber() ? m[start_col].GetDouble() : m[end_col].GetDouble(), text);
  }
}

// Reads "<key><a>..<b>" (nanoseconds) from a marker text into milliseconds.
bool ReadCpuRange(const std::string& text, const std::string& key, double* a_ms, double* b_ms) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return false;
  long long a = 0, b = 0;
  if (std::sscanf(text.c_str() + at + key.size(), "%lld..%lld", &a, &b) != 2) return false;
  *a_ms = a / 1e6;
  *b_ms = b / 1e6;
  return true;
}

// Where the busy thread's samples lie on its own CPU clock. The profile has each sample's CPU
// delta; their running sum is the thread's CPU clock up to one offset (every delta counts
// from the previous recorded sample, so a dropped sample's CPU is in the next one's). The
// offset comes from markers whose time was read between two readings of that CPU clock
// (takeover_program's MarkWithBusyCpu): a sample at or before such a marker used at most the
// second reading, a signalled one at or after it at least the first. Each marker bounds the
// offset; all of them together pin it within `uncertainty_ms`.
struct CpuPlacement {
  bool ok = false;
  std::vector<double> cpu_ms;  // The busy thread's CPU clock at each sample.
  double uncertainty_ms = 0;
  int markers = 0;
};

struct BusyCpuMark {
  double time_ms, cpu_lo_ms, cpu_hi_ms;
};

CpuPlacement PlaceSamplesOnCpuClock(const Sampled& s, const std::vector<BusyCpuMark>& marks) {
  CpuPlacement out;
  std::vector<double> running(s.times.size(), 0);
  for (size_t i = 1; i < s.times.size(); ++i) {
    running[i] = running[i - 1] + std::max(0.0, s.cpu_ms[i]);
  }
  double low = -1e300, high = 1e300;
  for (const BusyCpuMark& m : marks) {
    // The last sample at or before the marker, and the first signalled one at or after it: a
    // copy with CPU delta 0 leaves the CPU the thread used since its previous sample (less
    // than an interval) to its next sample (base/internal/sampling/thread_sampling.cc), so the running
    // sum lags the clock there. (A copy with a delta carries all of it: exact.)
    size_t after = std::lower_bound(s.times.begin(), s.times.end(), m.time_ms) - s.times.begin();
    while (after < s.times.size() && !(s.cpu_ms[after] > 0)) ++after;
    size_t before = std::upper_bound(s.times.begin(), s.times.end(), m.time_ms) - s.times.begin();
    if (before == 0 || after == s.times.size()) continue;
    --before;
    high = std::min(high, m.cpu_hi_ms - running[before]);
    low = std::max(low, m.cpu_lo_ms - running[after]);
    ++out.markers;
  }
  // 20 us: a sample's time and CPU clock are read one after the other in its signal handler.
  const double slack_ms = 0.02;
  if (out.markers == 0 || low > high + slack_ms) {
    std::printf("INFO: samples not placed on the CPU clock (%d markers, bounds %.3f..%.3f ms)\n",
                out.markers, low, high);
    return out;
  }
  const double offset = (low + high) / 2;
  out.uncertainty_ms = std::max(0.0, (high - low) / 2) + slack_ms;
  for (double& r : running) r += offset;
  out.cpu_ms = std::move(running);
  out.ok = true;
  return out;
}

// A sampling signal the busy thread's handler took (takeover_program's TAKEOVER_SIGNAL_LOG).
struct SignalArrival {
  double cpu_ms;  // The thread's CPU clock when its loop saw it (just after its handler).
  int signals;
};

struct SignalLog {
  std::vector<SignalArrival> arrivals;
  // The process's sampling signals that reached no sample without being taken on a thread
  // (its trailer line): strays dropped, samples skipped for want of stack. -1: not given.
  long long stray_notifications = -1, skipped_low_stack = -1;
};

bool ReadSignalLog(const std::string& path, SignalLog* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    long long cpu_ns = 0;
    int signals = 0;
    if (std::sscanf(line.c_str(), "# stray_notifications_dropped %lld samples_skipped_low_stack %lld",
                    &out->stray_notifications, &out->skipped_low_stack) == 2) {
      continue;
    }
    if (std::sscanf(line.c_str(), "%lld %d", &cpu_ns, &signals) != 2) return false;
    out->arrivals.push_back({cpu_ns / 1e6, signals});
  }
  return true;
}

// For each arrival, the signals taken up to it that no sample accounts for, up to a constant
// (the running count of signals less the signalled samples placed up to it). A signal's
// handler counts it, then reads the CPU clock for its sample; the busy thread reads its
// clock between two equal readings of the count, after the handler returned (usually
// microseconds later; once 0.32 ms of its CPU later, beside a 20 ms wait for a CPU). So the
// samples up to an arrival (plus `slack_ms` for the placement) are those of its signals and
// of earlier ones. A lost signal raises the deficit for good; a sample counted one arrival
// early (a late notice followed at once by the next signal) lowers it for one arrival only;
// a copy that carries CPU, or a sample before the log began, lowers it for good.
// `sample_cpu_ms` is sorted.
std::vector<long long> SignalDeficits(const std::vector<SignalArrival>& log,
                                      const std::vector<double>& sample_cpu_ms,
                                      double slack_ms) {
  std::vector<long long> deficit(log.size(), 0);
  size_t samples = 0;
  long long signals = 0;
  for (size_t i = 0; i < log.size(); ++i) {
    signals += log[i].signals;
    while (samples < sample_cpu_ms.size() && sample_cpu_ms[samples] <= log[i].cpu_ms + slack_ms) {
      ++samples;
    }
    deficit[i] = signals - static_cast<long long>(samples);
  }
  return deficit;
}

// --cycles N.
int CheckCycles(const rapidjson::Document& profile, const std::string& thread_name, int cycles,
                bool strict_gaps, const SignalLog* signal_log) {
  std::map<std::string, double> marker_time;  // First occurrence.
  std::map<std::string, std::pair<double, double>> call_cpu;  // Hand-over call, busy CPU ms.
  std::vector<BusyCpuMark> cpu_marks;
  const rapidjson::Value* busy = nullptr;
  for (const auto& thread : profile["threads"].GetArray()) {
    ForEachMarker(thread, [&](const std::string& name, double t, const std::string& text) {
      marker_time.emplace(name, t);
      BusyCpuMark mark{t, 0, 0};
      if (ReadCpuRange(text, "busy_cpu_ns=", &mark.cpu_lo_ms, &mark.cpu_hi_ms)) {
        cpu_marks.push_back(mark);
      }
      double a = 0, b = 0;
      if (ReadCpuRange(text, "handover_busy_cpu_ns=", &a, &b)) {
        call_cpu.emplace(name, std::make_pair(a, b));
      }
    });
    if (thread_name == thread["name"].GetString()) busy = &thread;
  }
  Check(busy != nullptr, "thread '" + thread_name + "' is in the profile");
  if (!busy) return 1;
  const Sampled s = ReadSamples(*busy);
  std::vector<double> deltas;
  for (size_t i = 1; i < s.times.size(); ++i) {
    if (s.cpu_ms[i] > 0) deltas.push_back(s.cpu_ms[i]);
  }
  std::sort(deltas.begin(), deltas.end());
  const double interval = deltas.empty() ? 0 : deltas[deltas.size() / 2];
  Check(interval > 0, "the busy thread has real samples");
  double dropped = -1;
  if (profile.HasMember("profilingLog")) {
    for (auto it = profile["profilingLog"].MemberBegin(); it != profile["profilingLog"].MemberEnd();
         ++it) {
      if (it->value.IsObject() && it->value.HasMember("droppedSamples")) {
        dropped = std::max(dropped, it->value["droppedSamples"].GetDouble());
      }
    }
  }
  const CpuPlacement placed = PlaceSamplesOnCpuClock(s, cpu_marks);
  if (placed.ok) {
    std::printf("samples placed on the busy thread's CPU clock by %d markers (+-%.3f ms)\n",
                placed.markers, placed.uncertainty_ms);
  }
  const double limit = 2 * interval * 1.05;
  double worst_takeover = 0, worst_detach = 0, run_max = 0;
  for (size_t i = 2; i < s.times.size(); ++i) run_max = std::max(run_max, s.cpu_ms[i]);
  std::vector<bool> in_window(s.times.size(), false);
  struct Gap {
    std::string from, to;
    double gap_ms, own_ms, span_ms;
    // The busy thread's CPU clock at its last sample before the call and its first signalled
    // one after it returned: the hand-over's whole window (placed calls only; else both 0).
    double open_cpu_ms, close_cpu_ms;
  };
  std::vector<Gap> gaps_over;
  int over = 0, missing = 0, placed_calls = 0, lost_before_call = 0;
  for (int i = 1; i <= cycles; ++i) {
    const std::string n = std::to_string(i);
    const std::pair<std::string, std::string> spans[2] = {{"takeover-" + n, "taken-over-" + n},
                                                           {"detach-" + n, "detached-" + n}};
    for (int k = 0; k < 2; ++k) {
      auto from = marker_time.find(spans[k].first);
      auto to = marker_time.find(spans[k].second);
      if (from == marker_time.end() || to == marker_time.end()) {
        ++missing;
        continue;
      }
      // The gap across the hand-over: with the call placed on the busy thread's CPU clock,
      // from its last sample before the call to its first after it; else from its last sample
      // before the first marker to its first after the second.
      double gap = 0, own = 0, open_cpu = 0, close_cpu = 0;
      auto call = call_cpu.find(spans[k].second);
      if (placed.ok && call != call_cpu.end()) {
        const double call_start = call->second.first, call_end = call->second.second;
        const std::vector<double>& at = placed.cpu_ms;
        size_t last_before = at.size();
        for (size_t j = 0; j < at.size() && at[j] <= call_start; ++j) last_before = j;
        bool found = false;
        if (last_before < at.size()) {
          for (size_t j = last_before + 1; j < at.size(); ++j) {
            in_window[j] = true;
            gap = std::max(gap, s.cpu_ms[j]);
            // A sample due more than one interval before the call began and never delivered
            // (rings drained just before the call; no sample dropped) is the platform's, not
            // the hand-over's: that gap counts from one interval before the call.
            double counted = s.cpu_ms[j];
            if (j == last_before + 1 && at[last_before] < call_start - interval * 1.05) {
              counted = at[j] - (call_start - interval * 1.05);
              ++lost_before_call;
            }
            own = std::max(own, counted);
            open_cpu = at[last_before];
            close_cpu = at[j];
            if (at[j] >= call_end) {
              found = true;
              break;
            }
          }
        }
        if (!found) ++missing;
        ++placed_calls;
      } else {
        bool found = false;
        gap = own = LargestCpuGapAcross(s, from->second, to->second, &found, &in_window);
        if (!found) ++missing;
      }
      double& worst = k == 0 ? worst_takeover : worst_detach;
      worst = std::max(worst, own);
      if (gap > limit) {
        gaps_over.push_back({spans[k].first, spans[k].second, gap, own,
                             to->second - from->second, open_cpu, close_cpu});
      }
    }
  }
  // The run's own largest gap away from every hand-over (the first two samples left out).
  double away_max = 0;
  for (size_t i = 2; i < s.times.size(); ++i) {
    if (!in_window[i]) away_max = std::max(away_max, s.cpu_ms[i]);
  }
  const double own_limit = limit + (placed.ok ? placed.uncertainty_ms : 0);
  // The signal log: signals taken that no sample accounts for (SignalDeficits).
  const double arrival_slack = (placed.ok ? placed.uncertainty_ms : 0) + 0.05;
  std::vector<long long> deficit;
  std::vector<double> signalled_cpu;  // The busy thread's signalled samples on its CPU clock.
  if (signal_log != nullptr && placed.ok) {
    for (size_t i = 0; i < placed.cpu_ms.size(); ++i) {
      if (s.cpu_ms[i] > 0) signalled_cpu.push_back(placed.cpu_ms[i]);
    }
    deficit = SignalDeficits(signal_log->arrivals, signalled_cpu, arrival_slack);
  }
  const std::vector<SignalArrival>* arrivals = signal_log ? &signal_log->arrivals : nullptr;
  // Signals taken from the window's opening sample to half an interval after its closing one
  // (a lost signal's count may be noted with the closing one's) that no sample accounts for:
  // the deficit's rise over its highest at the 3 arrivals before the window.
  auto lost_within = [&](double open_ms, double close_ms) {
    long long before = LLONG_MIN, highest = LLONG_MIN;
    size_t before_seen = 0;
    for (size_t i = deficit.size(); i-- > 0;) {
      const double at = (*arrivals)[i].cpu_ms;
      if (at > open_ms && at <= close_ms + 0.5 * interval) highest = std::max(highest, deficit[i]);
      if (at <= open_ms && before_seen < 3) {
        before = std::max(before, deficit[i]);
        ++before_seen;
      }
    }
    if (highest == LLONG_MIN) return 0LL;
    if (before == LLONG_MIN) before = 0;
    return std::max(0LL, highest - before);
  };
  // Why a window with every signal sampled may still be Strata's: signals held back and then
  // delivered together (a handler that ran long with every signal blocked: two counted at
  // once, or two samples within a quarter interval), signals taken on no thread or skipped
  // (the trailer's counts), or a log that ends before the window does.
  auto not_the_kernels = [&](double open_ms, double close_ms) -> std::string {
    if (signal_log->stray_notifications < 0 || signal_log->skipped_low_stack < 0) {
      return "the log does not give the process's stray and skipped signals";
    }
    if (signal_log->stray_notifications != 0 || signal_log->skipped_low_stack != 0) {
      return "sampling signals were dropped as strays or skipped in the process";
    }
    if (arrivals->empty() || arrivals->back().cpu_ms <= close_ms) return "the log ends before it";
    for (const SignalArrival& a : *arrivals) {
      if (a.cpu_ms > open_ms && a.cpu_ms <= close_ms + 0.5 * interval && a.signals > 1) {
        return "signals were taken together in it";
      }
    }
    for (size_t i = 1; i < signalled_cpu.size(); ++i) {
      if (signalled_cpu[i] >= open_ms && signalled_cpu[i - 1] <= close_ms + 0.5 * interval &&
          signalled_cpu[i] - signalled_cpu[i - 1] < 0.25 * interval) {
        return "two samples came together in it";
      }
    }
    return "";
  };
  int kernel_gaps = 0, lost_at_handovers = 0;
  for (const Gap& g : gaps_over) {
    const bool own_over = g.own_ms > own_limit;
    const bool worse_than_run = own_over && g.own_ms > away_max + 0.5;
    std::string why = !own_over ? ": a sample due before the call was never delivered"
                      : !worse_than_run ? "; the run has as large a gap away from hand-overs"
                                        : "";
    bool failed = worse_than_run, kernels = false;
    if (own_over && !deficit.empty() && g.close_cpu_ms > g.open_cpu_ms) {
      const long long lost = lost_within(g.open_cpu_ms, g.close_cpu_ms);
      const std::string not_kernels = not_the_kernels(g.open_cpu_ms, g.close_cpu_ms);
      // Where, for tests/takeover/drop_samples.py and for a reader of a failure.
      std::printf("GAP %s open_cpu_ms=%.6f close_cpu_ms=%.6f signals_without_sample=%lld%s%s\n",
                  g.from.c_str(), g.open_cpu_ms, g.close_cpu_ms, lost,
                  not_kernels.empty() ? "" : " not_the_kernels: ", not_kernels.c_str());
      if (lost > 0) {
        // Whatever the run's other gaps: a signal taken and left without a sample.
        failed = true;
        lost_at_handovers += static_cast<int>(lost);
        why = "; " + std::to_string(lost) + " sampling signal(s) taken inside it left no sample";
      } else if (worse_than_run && not_kernels.empty()) {
        failed = false;
        kernels = true;
        why = "; every signal the busy thread took has its sample: the kernel's gap";
      } else if (worse_than_run) {
        why += "; not the kernel's: " + not_kernels;
      }
    }
    if (kernels) ++kernel_gaps;
    if (failed) ++over;
    std::printf("  %s: largest CPU gap %.3f ms = %.2f effective intervals (%.3f ms to %s); "
                "the hand-over's own %.3f ms%s\n",
                g.from.c_str(), g.gap_ms, g.gap_ms / interval, g.span_ms, g.to.c_str(), g.own_ms,
                why.c_str());
  }
  if (!deficit.empty()) {
    // The whole run, from its first signalled sample to its last sample: signals taken, and
    // the deficit's rise (signals no sample accounts for, less copies that carried CPU).
    int taken = 0;
    long long first = LLONG_MIN, highest = LLONG_MIN;
    int first_seen = 0;
    for (size_t i = 0; i < deficit.size(); ++i) {
      const double cpu = (*arrivals)[i].cpu_ms;
      if (signalled_cpu.empty() || cpu < signalled_cpu.front() - arrival_slack ||
          cpu > placed.cpu_ms.back()) {
        continue;
      }
      taken += (*arrivals)[i].signals;
      if (first_seen++ < 3) first = std::max(first, deficit[i]);
      highest = std::max(highest, deficit[i]);
    }
    std::printf("RESULT signal_log arrivals=%zu signals_taken_in_profile_span=%d "
                "signalled_samples=%zu signals_without_sample=%lld lost_at_handovers=%d "
                "kernel_gaps_at_handovers=%d stray=%lld skipped_low_stack=%lld\n",
                arrivals->size(), taken, signalled_cpu.size(),
                highest == LLONG_MIN ? 0 : std::max(0LL, highest - first), lost_at_handovers,
                kernel_gaps, signal_log->stray_notifications, signal_log->skipped_low_stack);
  }
  std::printf("RESULT thread=%s cycles=%d samples=%zu effective_interval_ms=%.3f "
              "worst_takeover_cpu_gap_ms=%.3f (%.2f intervals) worst_detach_cpu_gap_ms=%.3f "
              "(%.2f intervals) run_max_cpu_gap_ms=%.3f away_from_handovers_max_cpu_gap_ms=%.3f "
              "dropped=%.0f calls_placed=%d lost_before_call=%d\n",
              thread_name.c_str(), cycles, s.times.size(), interval, worst_takeover,
              interval > 0 ? worst_takeover / interval : 0, worst_detach,
              interval > 0 ? worst_detach / interval : 0, run_max, away_max, dropped,
              placed_calls, lost_before_call);
  Check(missing == 0, "every takeover and detach has its markers and samples on both sides (" +
                          std::to_string(missing) + " missing)");
  const std::string gaps = "largest CPU gap across each of " + std::to_string(cycles) +
                           " takeovers and detaches is at most 2 effective intervals or the "
                           "run's own largest gap away from hand-overs (" +
                           std::to_string(over) + " over)";
  if (strict_gaps) {
    Check(placed.ok && placed.uncertainty_ms <= 0.1 * interval,
          "the samples are placed on the busy thread's CPU clock within 0.1 interval");
    Check(placed_calls == 2 * cycles,
          "every hand-over call placed on the busy thread's CPU clock (" +
              std::to_string(placed_calls) + " of " + std::to_string(2 * cycles) + ")");
    Check(over == 0, gaps);
    std::printf("INFO: droppedSamples %.0f in the whole run (the sampler thread waiting for a "
                "CPU longer than the rings last; the program counts those of the hand-overs)\n",
                dropped);
  } else {
    std::printf("INFO: %s; droppedSamples %.0f (not checked without --strict-gaps)\n",
                gaps.c_str(), dropped);
  }
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: takeover_check PROFILE --thread NAME --markers a,b [--expect-full]\n"
                 "       takeover_check PROFILE --thread NAME --cycles N [--strict-gaps] "
                 "[--signal-log FILE]\n");
    return 2;
  }
  std::string thread_name = "busy-worker";
  std::vector<std::string> expected_markers;
  bool expect_full = false;
  int cycles = 0;
  bool strict_gaps = false;
  std::string signal_log_path;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--thread") && i + 1 < argc) thread_name = argv[++i];
    else if (!std::strcmp(argv[i], "--markers") && i + 1 < argc) expected_markers = Split(argv[++i]);
    else if (!std::strcmp(argv[i], "--expect-full")) expect_full = true;
    else if (!std::strcmp(argv[i], "--cycles") && i + 1 < argc) cycles = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--strict-gaps")) strict_gaps = true;
    else if (!std::strcmp(argv[i], "--signal-log") && i + 1 < argc) signal_log_path = argv[++i];
  }
  std::ifstream file(argv[1]);
  std::stringstream text;
  text << file.rdbuf();
  const std::string json = text.str();
  rapidjson::Document profile;
  profile.Parse(json.c_str(), json.size());
  if (profile.HasParseError() || !profile.HasMember("threads")) {
    std::printf("FAIL: %s is not a profile\n", argv[1]);
    return 1;
  }
  SignalLog signal_log;
  if (!signal_log_path.empty() && !ReadSignalLog(signal_log_path, &signal_log)) {
    std::printf("FAIL: cannot read the signal log %s\n", signal_log_path.c_str());
    return 1;
  }
  if (cycles > 0) {
    return CheckCycles(profile, thread_name, cycles, strict_gaps,
                       signal_log_path.empty() ? nullptr : &signal_log);
  }

  // Markers of all threads: name -> start (or end) times, in profile order per thread.
  std::vector<std::pair<double, std::string>> markers;
  double takeover_ms = -1;
  const rapidjson::Value* busy = nullptr;
  for (const auto& thread : profile["threads"].GetArray()) {
    ForEachMarker(thread, [&](const std::string& name, double t, const std::string&) {
      markers.emplace_back(t, name);
      if (name == "takeover") takeover_ms = t;
    });
    // Strictly increasing sample times.
    const rapidjson::Value& samples = thread["samples"];
    const int time_col = samples["schema"]["time"].GetInt();
    double last = -1e300;
    size_t duplicates = 0;
    for (const auto& s : samples["data"].GetArray()) {
      const double t = s[time_col].GetDouble();
      if (t <= last) ++duplicates;
      last = t;
    }
    Check(duplicates == 0, std::string("thread '") + thread["name"].GetString() +
                               "': no two samples share a time stamp (" +
                               std::to_string(duplicates) + " repeated)");
    if (thread_name == thread["name"].GetString()) busy = &thread;
  }

  Check(takeover_ms >= 0, "the takeover marker is in the profile");
  Check(busy != nullptr, "thread '" + thread_name + "' is in the profile");
  if (busy && takeover_ms >= 0) {
    const rapidjson::Value& samples = (*busy)["samples"];
    const int time_col = samples["schema"]["time"].GetInt();
    const int cpu_col = samples["schema"]["threadCPUDelta"].GetInt();
    std::vector<double> times, cpu_ms;
    for (const auto& s : samples["data"].GetArray()) {
      times.push_back(s[time_col].GetDouble());
      cpu_ms.push_back(s[cpu_col].IsNumber() ? s[cpu_col].GetDouble() / 1e6 : -1);  // ns units
    }
    std::vector<double> before_gaps;
    size_t before = 0, after = 0;
    for (size_t i = 1; i < times.size(); ++i) {
      if (times[i] < takeover_ms && cpu_ms[i] > 0) before_gaps.push_back(cpu_ms[i]);
      if (times[i] < takeover_ms) ++before; else ++after;
    }
    std::sort(before_gaps.begin(), before_gaps.end());
    const double interval = before_gaps.empty() ? 0 : before_gaps[before_gaps.size() / 2];
    // Gaps around the takeover (the last samples before it, the first ones after it), and,
    // as the machine's own noise floor, gaps in an equally long window well before it.
    auto max_gaps = [&](double from, double to, double* cpu, double* wall) {
      *cpu = *wall = 0;
      for (size_t i = 1; i < times.size(); ++i) {
        if (times[i] < from || times[i - 1] > to) continue;
        *cpu = std::max(*cpu, cpu_ms[i]);
        *wall = std::max(*wall, times[i] - times[i - 1]);
      }
    };
    double max_cpu_gap, max_wall_gap, base_cpu_gap = 0, base_wall_gap = 0;
    max_gaps(takeover_ms - 20, takeover_ms + 50, &max_cpu_gap, &max_wall_gap);
    // The baseline: every gap of the run away from the takeover (the first sample's delta
    // covers the thread's start and is left out).
    for (size_t i = 2; i < times.size(); ++i) {
      if (times[i] >= takeover_ms - 20 && times[i - 1] <= takeover_ms + 50) continue;
      base_cpu_gap = std::max(base_cpu_gap, cpu_ms[i]);
      base_wall_gap = std::max(base_wall_gap, times[i] - times[i - 1]);
    }
    // The hand-over itself: from the last sample at or before the "takeover" marker (just
    // before StartFull) to the first sample at or after the expected marker that follows it
    // (recorded once StartFull has returned). What the takeover could lose is there: the
    // samples taken while the sampler thread was being replaced. The largest CPU time
    // without a sample among them, in effective intervals, is the takeover's own gap.
    std::string handover_end_name;
    for (size_t i = 0; i + 1 < expected_markers.size(); ++i) {
      if (expected_markers[i] == "takeover") handover_end_name = expected_markers[i + 1];
    }
    double handover_end_ms = -1;
    for (const auto& m : markers) {
      if (m.second == handover_end_name && m.first >= takeover_ms &&
          (handover_end_ms < 0 || m.first < handover_end_ms)) {
        handover_end_ms = m.first;
      }
    }
    double handover_cpu_gap = 0, handover_wall_gap = 0;
    size_t handover_samples = 0;
    if (handover_end_ms >= 0) {
      size_t first = 0;
      while (first + 1 < times.size() && times[first + 1] <= takeover_ms) ++first;
      for (size_t i = first + 1; i < times.size(); ++i) {
        handover_cpu_gap = std::max(handover_cpu_gap, cpu_ms[i]);
        handover_wall_gap = std::max(handover_wall_gap, times[i] - times[i - 1]);
        if (times[i] < handover_end_ms) ++handover_samples;
        // Not at a copy with CPU delta 0: the CPU since the last sample is in the next one.
        if (times[i] >= handover_end_ms && cpu_ms[i] > 0) break;
      }
    }
    std::printf("RESULT thread=%s samples_before=%zu samples_after=%zu effective_interval_ms=%.3f "
                "max_cpu_gap_ms=%.3f max_wall_gap_ms=%.3f baseline_cpu_gap_ms=%.3f "
                "baseline_wall_gap_ms=%.3f handover_ms=%.3f handover_samples=%zu "
                "handover_cpu_gap_ms=%.3f handover_wall_gap_ms=%.3f\n",
                thread_name.c_str(), before, after, interval, max_cpu_gap, max_wall_gap,
                base_cpu_gap, base_wall_gap,
                handover_end_ms >= 0 ? handover_end_ms - takeover_ms : -1.0, handover_samples,
                handover_cpu_gap, handover_wall_gap);
    Check(before >= 10 && after >= 10, "samples on both sides of the takeover");
    // Sampling is on the thread's CPU clock: the gap that matters is CPU time without a
    // sample. The hand-over (StartFull, from the last sample before it to the first after it
    // returned) must add none beyond 2 effective intervals, or beyond the largest gap the
    // same run shows away from the takeover (a loaded machine's own jitter). The wider
    // window (-20 ms, +50 ms) is printed above, not asserted: on a loaded machine (this
    // 2-vCPU VM at load 15) a busy thread's perf signals sometimes leave 3-20 ms of CPU
    // without a sample anywhere in a run, no sample dropped (a single late overflow), and
    // one landing in that window said nothing about the hand-over (ci24 and a helper's runs
    // failed that way: 3.75 and 4.77 ms in the window, the hand-over's own 1.0 ms).
    Check(handover_end_ms >= 0, "the marker after the takeover is in the profile");
    Check(interval > 0 && handover_cpu_gap <= std::max(2 * interval, base_cpu_gap) + 0.5,
          "largest CPU-time gap across the hand-over is at most 2 effective intervals "
          "(or the run's own largest gap away from the takeover)");
  }

  // Expected markers, in order.
  std::stable_sort(markers.begin(), markers.end());
  size_t next = 0;
  for (const auto& m : markers) {
    if (next < expected_markers.size() && m.second == expected_markers[next]) ++next;
  }
  Check(next == expected_markers.size(),
        "markers present in order (" + std::to_string(next) + " of " +
            std::to_string(expected_markers.size()) + " matched)");

  if (expect_full) {
    bool malloc_counter = false;
    if (profile.HasMember("counters")) {
      for (const auto& c : profile["counters"].GetArray()) {
        if (std::string(c["name"].GetString()) == "malloc" && c["samples"]["data"].Size() > 0) {
          malloc_counter = true;
        }
      }
    }
    Check(malloc_counter, "the malloc counter (allocation hooks) has samples");
    const bool overhead = profile.HasMember("profilerOverhead") &&
                          profile["profilerOverhead"]["samples"]["data"].Size() > 0;
    Check(overhead, "profilerOverhead has samples");
    bool full_log = false;
    if (profile.HasMember("profilingLog")) {
      for (auto it = profile["profilingLog"].MemberBegin(); it != profile["profilingLog"].MemberEnd(); ++it) {
        if (it->value.HasMember("profiler") && std::string(it->value["profiler"].GetString()) == "full") {
          full_log = true;
        }
      }
    }
    Check(full_log, "profilingLog says the full tier wrote it");
  }
  return g_failures == 0 ? 0 : 1;
}
