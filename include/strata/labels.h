// <strata/labels.h>: labels (label frames on the stack) (base/labels.h). Forwarding header for Bazel users of
// @strata//:base / @strata//:full (tools/install_tree.sh installs base/labels.h itself under this name).
#include "base/labels.h"  // IWYU pragma: export
