// <strata/script_groups.h>: performance-monitor groups for scripts (full/script/spidermonkey/script_groups.h). Forwarding header for Bazel users of
// @strata//:base / @strata//:full (tools/install_tree.sh installs full/script/spidermonkey/script_groups.h itself under this name).
#include "full/script/spidermonkey/script_groups.h"  // IWYU pragma: export
