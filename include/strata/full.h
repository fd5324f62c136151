// <strata/full.h>: the full tier (full/full.h). Forwarding header for Bazel users of
// @strata//:base / @strata//:full (tools/install_tree.sh installs full/full.h itself under this name).
#include "full/full.h"  // IWYU pragma: export
