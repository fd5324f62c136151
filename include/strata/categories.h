// <strata/categories.h>: marker categories (base/categories.h). Forwarding header for Bazel users of
// @strata//:base / @strata//:full (tools/install_tree.sh installs base/categories.h itself under this name).
#include "base/categories.h"  // IWYU pragma: export
