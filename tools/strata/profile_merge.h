// Merging the per-process profiles of a recorded process tree into one multi-process Gecko
// profile (symbolication: profile_symbolication.h).
//
// Thread safety: none (functions that modify their documents).
#ifndef STRATA_TOOLS_STRATA_PROFILE_MERGE_H_
#define STRATA_TOOLS_STRATA_PROFILE_MERGE_H_

#include <cstddef>
#include <vector>

#include "rapidjson/document.h"

namespace strata {
namespace cli {

// Puts `children` under `parent`'s "processes" (moved out of them), ordered by
// meta.startTime; sub-processes of any input are flattened into the same list (the
// front-end reads one level). Each process keeps its own meta.startTime (epoch ms) and its
// times relative to it: the front-end, and our own tools (profile_model.h), shift every
// sub-process by the difference of the start times. Also:
//  * categories are unified by name: only the parent's list counts in the front-end, so a
//    child whose list differs has its frame and marker category indexes remapped, and every
//    process gets the unified list;
//  * marker schemas of all processes are united (by name) into the parent's meta;
//  * the parent's profilingStartTime/EndTime, when present, are widened to cover every
//    process (otherwise the front-end would cut off children that outlive the parent).
// The documents should share `parent`'s allocator (then moves cost nothing); otherwise the
// children are copied.
void MergeProfiles(rapidjson::Document* parent, std::vector<rapidjson::Document>* children);

// The threads and samples of a (merged) profile, its sub-processes' included: what `strata
// record` says it saved.
size_t CountThreads(const rapidjson::Value& profile);
size_t CountSamples(const rapidjson::Value& profile);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_PROFILE_MERGE_H_
