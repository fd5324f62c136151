#include "tools/strata/function_stats.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <utility>

namespace strata {
namespace cli {

const char* WeightName(Weight weight) {
  switch (weight) {
    case Weight::kWall: return "wall";
    case Weight::kCpu: return "cpu";
    case Weight::kSamples: return "samples";
    case Weight::kBytes: return "bytes";
    case Weight::kRetained: return "retained";
  }
  return "?";
}

const char* WeightNames() { return "wall, cpu, samples, bytes, retained"; }

bool ParseWeight(std::string_view name, Weight* weight) {
  for (Weight w : {Weight::kWall, Weight::kCpu, Weight::kSamples, Weight::kBytes, Weight::kRetained}) {
    if (name == WeightName(w)) {
      *weight = w;
      return true;
    }
  }
  return false;
}

double FunctionTime::Self(Weight weight) const {
  switch (weight) {
    case Weight::kWall: return self_wall;
    case Weight::kCpu: return self_cpu;
    case Weight::kSamples: return static_cast<double>(self_samples);
    case Weight::kBytes: return self_bytes;
    case Weight::kRetained: return self_retained;
  }
  return 0;
}

double FunctionTime::Total(Weight weight) const {
  switch (weight) {
    case Weight::kWall: return total_wall;
    case Weight::kCpu: return total_cpu;
    case Weight::kSamples: return static_cast<double>(total_samples);
    case Weight::kBytes: return total_bytes;
    case Weight::kRetained: return total_retained;
  }
  return 0;
}

double FunctionTimes::Total(Weight weight) const {
  switch (weight) {
    case Weight::kWall: return wall;
    case Weight::kCpu: return cpu_ms;
    case Weight::kSamples: return static_cast<double>(samples);
    case Weight::kBytes: return bytes;
    case Weight::kRetained: return retained;
  }
  return 0;
}

std::vector<double> SampleWallMs(const Profile& profile, const Thread& thread) {
  const size_t n = thread.sample_count();
  std::vector<double> wall(n, 0.0);
  if (n == 0) return wall;
  const double interval = std::isfinite(profile.interval_ms) && profile.interval_ms > 0 ? profile.interval_ms : 1.0;
  // Paused ranges by start, with the latest end among the first k: a gap (from, to) overlaps
  // one iff the latest end of those starting before `to` is after `from`.
  std::vector<std::pair<double, double>> paused = profile.processes[thread.process].paused_ranges;
  std::sort(paused.begin(), paused.end());
  std::vector<double> latest_end(paused.size());
  for (size_t p = 0; p < paused.size(); ++p) {
    latest_end[p] = p == 0 ? paused[p].second : std::max(latest_end[p - 1], paused[p].second);
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    const double from = thread.sample_time[i], to = thread.sample_time[i + 1];
    const double d = to - from;
    if (!(d > 0)) continue;  // Backwards, equal or NaN.
    bool unsampled = false;
    if (!paused.empty()) {
      const size_t k = static_cast<size_t>(
          std::lower_bound(paused.begin(), paused.end(), to,
                           [](const std::pair<double, double>& r, double t) { return r.first < t; }) -
          paused.begin());
      unsampled = k > 0 && latest_end[k - 1] > from;
    }
    wall[i] = unsampled ? std::min(d, interval) : d;
  }
  wall[n - 1] = interval;
  return wall;
}

double ThreadWallMs(const Profile& profile, const Thread& thread) {
  double total = 0;
  for (double w : SampleWallMs(profile, thread)) total += w;
  return total;
}

double SampleCpuMs(const Thread& thread, size_t i, bool cpu, double interval_ms) {
  if (!cpu) return interval_ms;
  if (i == 0) return 0;
  const double d = thread.sample_cpu_ms[i];
  return std::isnan(d) ? 0 : d;
}

bool ProfileHasCpu(const Profile& profile) {
  if (profile.cpu_unit != "ns" && profile.cpu_unit != "\xC2\xB5s") return false;
  for (const Thread& t : profile.threads) {
    if (t.has_cpu()) return true;
  }
  return false;
}

namespace {

// Adds `bytes` to the `self` and `total` members of the stack's functions (each distinct
// function once in total).
void AddToStack(const Thread& thread, int32_t stack, double bytes, double FunctionTime::*self,
                double FunctionTime::*total, FunctionTimes& times, std::vector<size_t>& last_counted,
                size_t& sequence) {
  if (stack < 0) return;
  times.functions[thread.SelfFunction(stack)].*self += bytes;
  ++sequence;
  for (int32_t s = stack; s >= 0; s = thread.stack_prefix[static_cast<size_t>(s)]) {
    const uint32_t f = thread.frames[thread.stack_frame[static_cast<size_t>(s)]].function;
    if (last_counted[f] == sequence) continue;
    last_counted[f] = sequence;
    times.functions[f].*total += bytes;
  }
}

// The thread's native allocations: bytes allocated, and retained (an allocation not matched
// by a later free of its address in the thread's records, as the front-end matches them).
void AddNativeAllocations(const Thread& thread, FunctionTimes& times,
                          std::vector<size_t>& last_counted, size_t& sequence) {
  std::unordered_map<uint64_t, size_t> live;  // address -> index of its allocation
  for (size_t i = 0; i < thread.native_allocations.size(); ++i) {
    const NativeAllocation& a = thread.native_allocations[i];
    if (a.bytes >= 0) {
      times.bytes += static_cast<double>(a.bytes);
      AddToStack(thread, a.stack, static_cast<double>(a.bytes), &FunctionTime::self_bytes,
                 &FunctionTime::total_bytes, times, last_counted, sequence);
      live[a.address] = i;
    } else {
      live.erase(a.address);
    }
  }
  for (const auto& [address, i] : live) {
    (void)address;
    const NativeAllocation& a = thread.native_allocations[i];
    times.retained += static_cast<double>(a.bytes);
    AddToStack(thread, a.stack, static_cast<double>(a.bytes), &FunctionTime::self_retained,
               &FunctionTime::total_retained, times, last_counted, sequence);
  }
}

}  // namespace

FunctionTimes ComputeFunctionTimes(const Profile& profile) {
  FunctionTimes times;
  times.cpu = ProfileHasCpu(profile);
  times.functions.resize(profile.functions.size());
  // Per function: the last sample (as a global sequence number) that counted it in total.
  std::vector<size_t> last_counted(profile.functions.size(), static_cast<size_t>(-1));
  size_t sequence = 0;
  for (const Thread& thread : profile.threads) {
    const std::vector<double> wall = SampleWallMs(profile, thread);
    for (size_t i = 0; i < thread.sample_count(); ++i, ++sequence) {
      const double w = wall[i];
      const double c = SampleCpuMs(thread, i, times.cpu, profile.interval_ms);
      times.wall += w;
      times.cpu_ms += c;
      times.samples++;
      int32_t s = thread.sample_stack[i];
      if (s < 0) continue;
      const uint32_t leaf = thread.SelfFunction(s);
      FunctionTime& l = times.functions[leaf];
      l.self_wall += w;
      l.self_cpu += c;
      l.self_samples++;
      for (; s >= 0; s = thread.stack_prefix[static_cast<size_t>(s)]) {
        const uint32_t f = thread.frames[thread.stack_frame[static_cast<size_t>(s)]].function;
        if (last_counted[f] == sequence) continue;
        last_counted[f] = sequence;
        FunctionTime& t = times.functions[f];
        t.total_wall += w;
        t.total_cpu += c;
        t.total_samples++;
      }
    }
    AddNativeAllocations(thread, times, last_counted, sequence);
  }
  return times;
}

}  // namespace cli
}  // namespace strata
