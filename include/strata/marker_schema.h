// <strata/marker_schema.h>: how the front-end shows a typed marker (shared/json/marker_schema.h). Forwarding header for Bazel users of
// @strata//:base / @strata//:full (tools/install_tree.sh installs shared/json/marker_schema.h itself under this name).
#include "shared/json/marker_schema.h"  // IWYU pragma: export
