// <strata/markers.h>: markers, untyped, text and typed (base/markers.h). Forwarding header for Bazel users of
// @strata//:base / @strata//:full (tools/install_tree.sh installs base/markers.h itself under this name).
#include "base/markers.h"  // IWYU pragma: export
