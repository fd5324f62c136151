// <strata/counters.h>: counters (base/counters.h). Forwarding header for Bazel users of
// @strata//:base / @strata//:full (tools/install_tree.sh installs base/counters.h itself under this name).
#include "base/counters.h"  // IWYU pragma: export
