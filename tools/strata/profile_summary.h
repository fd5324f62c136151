// A terminal summary of a profile (one process or many): duration, processes, threads with
// sample counts and CPU use, the top functions by self and total time, and markers by name
// with counts and durations, in aligned columns.
//
// Time is CPU time where the profile has per-sample CPU deltas (meta.sampleUnits
// threadCPUDelta in ns or µs), otherwise samples times the interval.
//
// Thread safety: pure function of its input.
#ifndef STRATA_TOOLS_STRATA_PROFILE_SUMMARY_H_
#define STRATA_TOOLS_STRATA_PROFILE_SUMMARY_H_

#include <cstddef>
#include <string>

#include "tools/strata/profile_model.h"

namespace strata {
namespace cli {

std::string SummarizeProfile(const Profile& profile, size_t top_functions);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_PROFILE_SUMMARY_H_
