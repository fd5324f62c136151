// <strata/perfmon.h>: the performance monitor (full tier) (full/perfmon/perfmon.h). Forwarding header for Bazel users of
// @strata//:base / @strata//:full (tools/install_tree.sh installs full/perfmon/perfmon.h itself under this name).
#include "full/perfmon/perfmon.h"  // IWYU pragma: export
