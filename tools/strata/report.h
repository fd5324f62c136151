// `strata report`: one self-contained HTML file (inline CSS and JavaScript, no network, no
// external URL) with, per thread, a zoomable flame graph, a timeline of samples (CPU use,
// coloured by category) and markers, and a sortable top-functions table. Dragging over the
// timeline restricts the flame graph and the table to that time range.
//
// The flame graph and the table weigh samples by wall time, CPU time or sample count
// (function_stats.h), or, in a profile with native allocations (docs/memory.md), the
// allocations by their estimated bytes (allocated, or retained: not freed at the end, matched
// by address as `strata summary --weight retained` does), switched by a control in the page;
// `weight` is the one it opens with.
//
// The page's data is embedded as JSON: functions used by the samples, and per thread the
// stack table (pruned to the stacks samples use), the samples (time, stack, wall ms, CPU ms,
// count) and the markers. A profile with more than `max_samples` samples in all is thinned evenly (every
// k-th sample of each thread kept, with the weight of the k samples it stands for), so the
// file stays loadable for large profiles (~25 bytes per kept sample).
//
// Thread safety: pure function of its input.
#ifndef STRATA_TOOLS_STRATA_REPORT_H_
#define STRATA_TOOLS_STRATA_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "tools/strata/function_stats.h"
#include "tools/strata/profile_model.h"

namespace strata {
namespace cli {

struct ReportOptions {
  size_t max_samples = 300000;  // Over all threads.
  size_t max_markers = 20000;   // Per thread (the first ones are kept).
  // What the flame graph and the table weigh first. bytes and retained weigh the native
  // allocations (estimated bytes allocated; those not freed at the end) instead of samples.
  Weight weight = Weight::kWall;
};

// The HTML text. `source` names the profile in the page title.
std::string ReportHtml(const Profile& profile, const std::string& source, const ReportOptions& options);

bool WriteReport(const Profile& profile, const std::string& source, const ReportOptions& options,
                 const std::string& path, uint64_t* bytes, std::string* error);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_REPORT_H_
