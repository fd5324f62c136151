// <strata/perfmon_c.h>: the performance monitor's C API (full tier) (full/perfmon/perfmon_c.h). Forwarding header for Bazel users of
// @strata//:base / @strata//:full (tools/install_tree.sh installs full/perfmon/perfmon_c.h itself under this name).
#include "full/perfmon/perfmon_c.h"  // IWYU pragma: export
