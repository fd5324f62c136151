// A typed marker with three fields (int64, double, literal string): the "typed marker with
// three fields" of the hot-path benchmarks (base/base_benchmark, tools/bench). Test support.
#ifndef STRATA_BASE_TESTING_THREE_FIELD_MARKER_H_
#define STRATA_BASE_TESTING_THREE_FIELD_MARKER_H_

#include <cstdint>

#include "base/markers.h"

namespace strata {
namespace testing {

struct ThreeFieldMarker {
  static constexpr const char* MarkerTypeName() { return "ThreeField"; }
  static void StreamJSONMarkerData(JsonWriter& w, int64_t a, double b, const ProfilerString& c) {
    w.IntProperty("a", a);
    w.DoubleProperty("b", b);
    w.StringProperty("c", c.View());
  }
};

}  // namespace testing
}  // namespace strata

#endif  // STRATA_BASE_TESTING_THREE_FIELD_MARKER_H_
