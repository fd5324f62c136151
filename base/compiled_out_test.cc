// With STRATA_PROFILER_DISABLED the macros compile to nothing: their arguments are not even
// evaluated, and a session running in the process sees none of them.
#define STRATA_PROFILER_DISABLED 1

#include <string>

#include "base/labels.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "base/internal/session/core.h"
#include "catch2/catch.hpp"

namespace {

int g_evaluations = 0;
[[maybe_unused]] const char* Evaluated() {
  ++g_evaluations;
  return "evaluated";
}

TEST_CASE("Compiled-out macros evaluate nothing and record nothing") {
  strata::ProfilerSettings settings;
  strata::ProfilerStart(settings);
  REQUIRE(strata::ProfilerIsActive());
  const auto before = strata::base_internal::SessionBuffer().GetState().pushed_block_count;
  for (int i = 0; i < 100; ++i) {
    STRATA_LABEL_DYNAMIC("label", kOther, Evaluated());
    STRATA_MARKER_UNTYPED("marker", kOther);
    STRATA_MARKER_TEXT("text", kOther, {}, Evaluated());
  }
  CHECK(g_evaluations == 0);
  CHECK(strata::base_internal::SessionBuffer().GetState().pushed_block_count == before);
  strata::ProfilerStop();
}

}  // namespace
