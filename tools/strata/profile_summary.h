// A terminal summary of a profile (one process or many): duration, processes and threads with
// sample counts, wall and CPU time, the top functions by self and total time (wall and CPU
// columns, sorted by the weight asked for), and markers by name with counts and durations,
// in aligned columns.
//
// Wall and CPU time are the weights of function_stats.h: wall time is what each sample stands
// for until its thread's next one; CPU time the per-sample CPU deltas (meta.sampleUnits
// threadCPUDelta in ns or µs), or samples times the interval without them (said on the
// third line).
//
// Thread safety: pure function of its input.
#ifndef STRATA_TOOLS_STRATA_PROFILE_SUMMARY_H_
#define STRATA_TOOLS_STRATA_PROFILE_SUMMARY_H_

#include <cstddef>
#include <string>

#include "tools/strata/function_stats.h"
#include "tools/strata/profile_model.h"

namespace strata {
namespace cli {

// `filter_note` ("Filtered: ...", profile_filter.h), when not empty, is the second line.
std::string SummarizeProfile(const Profile& profile, size_t top_functions, Weight sort_by = Weight::kWall,
                             const std::string& filter_note = "");

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_PROFILE_SUMMARY_H_
