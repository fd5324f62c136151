// Self and total time per function over a whole profile (all processes and threads), shared
// by `summary` and `report`.
//
// Each sample weighs its CPU delta in ms when the profile has CPU deltas (the first sample
// of a thread, whose delta the front-end ignores, and unknown deltas weigh 0), otherwise the
// interval. Self time goes to the stack's leaf function; total time to every distinct
// function on the stack (recursion counted once).
//
// Thread safety: pure function of its input.
#ifndef STRATA_TOOLS_STRATA_FUNCTION_STATS_H_
#define STRATA_TOOLS_STRATA_FUNCTION_STATS_H_

#include <cstddef>
#include <vector>

#include "tools/strata/profile_model.h"

namespace strata {
namespace cli {

struct FunctionTime {
  double self = 0;   // ms
  double total = 0;  // ms
  size_t self_samples = 0;
  size_t total_samples = 0;
};

struct FunctionTimes {
  bool cpu = false;   // Weights are CPU deltas.
  double total = 0;   // ms over every sample.
  std::vector<FunctionTime> functions;  // Indexed like Profile::functions.
};

// The weight of sample i of `thread` (see above).
double SampleWeight(const Thread& thread, size_t i, bool cpu, double interval_ms);

// Whether the profile's samples carry CPU deltas that can be used as weights.
bool ProfileHasCpu(const Profile& profile);

FunctionTimes ComputeFunctionTimes(const Profile& profile);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_FUNCTION_STATS_H_
