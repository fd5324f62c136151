// <strata/profiler.h>: the session and thread API of the base tier (base/profiler.h). Forwarding header for Bazel users of
// @strata//:base / @strata//:full (tools/install_tree.sh installs base/profiler.h itself under this name).
#include "base/profiler.h"  // IWYU pragma: export
