// <strata/multiprocess.h>: multi-process profiling (full tier) (full/multiprocess.h). Forwarding header for Bazel users of
// @strata//:base / @strata//:full (tools/install_tree.sh installs full/multiprocess.h itself under this name).
#include "full/multiprocess.h"  // IWYU pragma: export
