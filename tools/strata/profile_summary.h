// A terminal summary of a Gecko profile: threads with sample counts and CPU time, the top
// functions by self and total samples, and markers by name with counts and durations.
//
// Thread safety: none needed (pure function of its input).
#ifndef STRATA_TOOLS_STRATA_PROFILE_SUMMARY_H_
#define STRATA_TOOLS_STRATA_PROFILE_SUMMARY_H_

#include <string>

namespace strata {
namespace tools {

// Returns the summary text, or "" with *error set when `json` is not a Gecko profile.
std::string SummarizeProfile(const std::string& json, size_t top_functions, std::string* error);

}  // namespace tools
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_PROFILE_SUMMARY_H_
