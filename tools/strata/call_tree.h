// `strata tree` and `strata summary --tree`: a top-down call tree as text for a terminal or a
// pipe, as `perf report --stdio --children` prints one (docs/cli.md, "strata tree").
//
// One root per thread ("renderer (pid 12, tid 14)"), then the functions of its stacks, root
// first; a node's children are the functions called from it, heaviest first. Each line has
// the node's total and self share of the whole profile's weight (wall, cpu or samples, as in
// function_stats.h; self is where the stack ends, the leaf frame, inlined ones included), its
// total in ms (or samples) and its name:
//
//    total    self   wall ms  function
//    33.4%    0.0%    1498.5  renderer (pid 5865, tid 5885)
//    33.4%    0.0%    1498.5  `- clone3 > start_thread > Renderer
//    33.3%   33.2%    1490.0    |- render_frame > paint_pixels
//     0.1%               8.5    `- 2 more under 0.5%
//
// * Folding: a chain of nodes each with one child and no self weight is one line, its names
//   joined by " > " (perf's folded chains); off with `fold` false.
// * Pruning: nodes under `min_percent` of the whole are summed into one "N more" line per
//   parent; nodes deeper than `max_depth` (0: no limit) are not printed, and their parent says
//   "[+N deeper]".
// * Width: every line fits `width` columns (at least 60; default 80), counted in characters:
//   a name that does not fit loses its parameter list, clone suffix and "(anonymous
//   namespace)::", then is cut with "..."; a folded chain that does not fit keeps its first
//   and last names ("a > ... > y > z"); each level indents by 2, up to 12 levels (deeper
//   lines say their level, "[13] f"). Plain ASCII besides the
//   profile's own names, which go through TerminalSafe(): no escape sequence ever.
//
// Thread safety: pure function of its input.
#ifndef STRATA_TOOLS_STRATA_CALL_TREE_H_
#define STRATA_TOOLS_STRATA_CALL_TREE_H_

#include <cstddef>
#include <string>

#include "tools/strata/function_stats.h"
#include "tools/strata/profile_model.h"

namespace strata {
namespace cli {

struct CallTreeOptions {
  Weight weight = Weight::kWall;
  size_t max_depth = 0;      // Printed levels below a thread's root; 0: no limit.
  double min_percent = 0.5;  // Nodes under this share of the whole are summed per parent.
  bool fold = true;
  size_t width = 80;
};

std::string FormatCallTree(const Profile& profile, const CallTreeOptions& options);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_CALL_TREE_H_
