#include "tools/strata/function_stats.h"

#include <cmath>

namespace strata {
namespace cli {

double SampleWeight(const Thread& thread, size_t i, bool cpu, double interval_ms) {
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

FunctionTimes ComputeFunctionTimes(const Profile& profile) {
  FunctionTimes times;
  times.cpu = ProfileHasCpu(profile);
  times.functions.resize(profile.functions.size());
  // Per function: the last sample (as a global sequence number) that counted it in total.
  std::vector<size_t> last_counted(profile.functions.size(), static_cast<size_t>(-1));
  size_t sequence = 0;
  for (const Thread& thread : profile.threads) {
    for (size_t i = 0; i < thread.sample_count(); ++i, ++sequence) {
      const double w = SampleWeight(thread, i, times.cpu, profile.interval_ms);
      times.total += w;
      int32_t s = thread.sample_stack[i];
      if (s < 0) continue;
      const uint32_t leaf = thread.frames[thread.stack_frame[static_cast<size_t>(s)]].function;
      times.functions[leaf].self += w;
      times.functions[leaf].self_samples++;
      for (; s >= 0; s = thread.stack_prefix[static_cast<size_t>(s)]) {
        const uint32_t f = thread.frames[thread.stack_frame[static_cast<size_t>(s)]].function;
        if (last_counted[f] == sequence) continue;
        last_counted[f] = sequence;
        times.functions[f].total += w;
        times.functions[f].total_samples++;
      }
    }
  }
  return times;
}

}  // namespace cli
}  // namespace strata
