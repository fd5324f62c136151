// Narrowing a profile to some processes, threads and a time range, for `strata summary`,
// `report`, `convert` and `view` (docs/cli.md, "Filters"):
//
//   --pid N[,N...]        processes by pid
//   --tid N[,N...]        threads by tid
//   --process GLOB        processes by name (fnmatch(3) glob; "python3" or "python3 (1234)")
//   --thread GLOB         threads by name, as `summary` shows it (a main thread is named after
//                         its program; "GeckoMain" matches it too)
//   --range START,END     ms on the summary's clock (the parent process's meta.startTime,
//                         where the front-end's timeline starts); either end may be left out
//                         ("100," or ",250"); or a marker name: the intervals of every marker
//                         of that name on any thread (overlapping ones merged)
//
// A thread is kept when it passes every kind of filter given (several values of one kind:
// any of them). A range keeps the samples inside it, and the markers that overlap it; each gap
// between two kept intervals counts, for wall time, as a paused range of the process (the
// thread was not looked at then). Processes left without a kept thread are dropped.
//
// Thread safety: pure functions of their inputs.
#ifndef STRATA_TOOLS_STRATA_PROFILE_FILTER_H_
#define STRATA_TOOLS_STRATA_PROFILE_FILTER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rapidjson/document.h"
#include "tools/strata/profile_model.h"

namespace strata {
namespace cli {

struct ProfileFilter {
  std::vector<int64_t> pids;
  std::vector<int64_t> tids;
  std::vector<std::string> process_globs;
  std::vector<std::string> thread_globs;
  // --range as given ("" : none); parsed by ParseRangeText().
  std::string range_text;

  bool empty() const {
    return pids.empty() && tids.empty() && process_globs.empty() && thread_globs.empty() && range_text.empty();
  }
};

// A parsed --range: numbers, or a marker name.
struct RangeSpec {
  bool by_marker = false;
  std::string marker;  // by_marker
  double start = 0;    // ms; -infinity when left out
  double end = 0;      // ms; +infinity when left out
};

// "" when `text` is a valid --range (numbers with START < END, neither negative nor NaN, or a
// marker name), else the message (for CLI11's check: the accepted forms named).
std::string CheckRangeText(const std::string& text);
bool ParseRangeText(const std::string& text, RangeSpec* range, std::string* error);

// What a filter selects in one profile.
struct FilterSelection {
  std::vector<bool> keep_thread;                    // Indexed like Profile::threads.
  std::vector<std::pair<double, double>> intervals;  // Sorted, disjoint; empty: no range.
  std::string description;  // "pid 12; thread 'work*'; range 'Frame' (3 intervals, 15.0 ms)"
};

// Resolves `filter` against `profile`. False with *error set (naming the accepted values or
// what the profile has) when a marker name is not in the profile or has no interval, or when
// no thread (or no sample time) is left: a filter that selects nothing is a usage error.
bool SelectWithFilter(const Profile& profile, const ProfileFilter& filter, FilterSelection* selection,
                      std::string* error);

// The profile narrowed to `selection` (see the file comment).
Profile ApplySelection(const Profile& profile, const FilterSelection& selection);

// The same narrowing on the Gecko document `profile` was loaded from (for `strata view`,
// which serves a document): threads not kept are removed from their process's `threads`,
// sub-processes left without threads are removed, samples outside the range are removed, and
// markers are kept when they overlap the range (an IntervalStart or IntervalEnd when its own
// time is inside the range's envelope); the parent's profilingStartTime/EndTime become the
// range's envelope. `document` must be the one `profile` was loaded from.
void ApplySelectionToDocument(const Profile& profile, const FilterSelection& selection, rapidjson::Document* document);

// One line for the summary and the other commands' messages:
// "Filtered: pid 12; range 'Frame' (3 intervals, 15.0 ms): 2 of 7 threads, 1 of 3 processes, 300 of 1200 samples".
std::string FilterNote(const Profile& before, const Profile& after, const FilterSelection& selection);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_PROFILE_FILTER_H_
