// <strata/spidermonkey.h>: JS stacks from SpiderMonkey 102 (full/script/spidermonkey/spidermonkey.h). Forwarding header for Bazel users of
// @strata//:base / @strata//:full (tools/install_tree.sh installs full/script/spidermonkey/spidermonkey.h itself under this name).
#include "full/script/spidermonkey/spidermonkey.h"  // IWYU pragma: export
