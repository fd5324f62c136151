// Writes a profile with typed markers whose schema comes from MarkerTypeDisplay()
// (shared/json/marker_schema.h), recorded through the base tier's public API in process, for
// typed_marker_test.js to import with the front-end.
//
//   typed_marker_profile OUTPUT.json
//
// HttpRequest has four typed fields (url, status, duration, bytes). It also defines
// MarkerTypeSchemaJson() with a decoy schema: MarkerTypeDisplay() must win. PlainJson has
// only MarkerTypeSchemaJson(): the raw path keeps working.
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/markers.h"
#include "base/profiler.h"
#include "shared/json/marker_schema.h"

namespace {

struct HttpRequest {
  static constexpr const char* MarkerTypeName() { return "HttpRequest"; }
  static void StreamJSONMarkerData(strata::JsonWriter& w, const std::string& url, int64_t status,
                                   double duration_ms, uint64_t bytes) {
    w.StringProperty("url", url);
    w.IntProperty("status", status);
    w.DoubleProperty("duration", duration_ms);
    w.UintProperty("bytes", bytes);
  }
  static strata::MarkerSchema MarkerTypeDisplay() {
    using MS = strata::MarkerSchema;
    MS schema{MS::Location::kMarkerChart, MS::Location::kMarkerTable,
              MS::Location::kTimelineOverview};
    schema.SetChartLabel("{marker.data.url}")
        .SetTooltipLabel("HTTP {marker.data.status}")
        .SetTableLabel("{marker.data.url} ({marker.data.status}, {marker.data.bytes})")
        .AddKeyLabelFormat("url", "URL", MS::Format::kUrl, MS::Searchable::kYes)
        .AddKeyLabelFormat("status", "Status", MS::Format::kInteger)
        .AddKeyLabelFormat("duration", "Duration", MS::Format::kDuration)
        .AddKeyLabelFormat("bytes", "Size", MS::Format::kBytes)
        .AddStaticLabelValue("Description", "One HTTP request of the test program");
    return schema;
  }
  // A decoy: MarkerTypeDisplay() is preferred when both exist.
  static std::string MarkerTypeSchemaJson() {
    return R"({"name":"HttpRequest","display":["marker-table"],"tableLabel":"decoy",)"
           R"("data":[{"key":"url","label":"Decoy","format":"string"}]})";
  }
};

struct PlainJson {
  static constexpr const char* MarkerTypeName() { return "PlainJson"; }
  static void StreamJSONMarkerData(strata::JsonWriter& w, int64_t count) {
    w.IntProperty("count", count);
  }
  static std::string MarkerTypeSchemaJson() {
    return R"({"name":"PlainJson","display":["marker-chart","marker-table"],)"
           R"("data":[{"key":"count","label":"Count","format":"integer"}]})";
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT.json\n", argv[0]);
    return 2;
  }
  strata::ProfilerSettings settings;
  settings.interval_ms = 1;
#if defined(__SANITIZE_THREAD__)
  // TSan runs the sampling handler late, with the signal's stale registers, so a sampled stack
  // can hold garbage frames that the format checker rightly flags (docs/reliability.md,
  // "Sanitizers"). This test is about markers: samples without stacks under TSan.
  settings.features &= ~strata::kFeatureStackWalk;
#endif
  strata::ProfilerStart(settings);
  if (!strata::ProfilerIsActive()) {
    std::fprintf(stderr, "no session\n");
    return 1;
  }
  const strata::TimeStamp t0 = strata::TimeStamp::Now();
  STRATA_MARKER("GET index", kNetwork,
                strata::MarkerOptions::Interval(t0, t0 + strata::TimeDuration::FromMicroseconds(
                                                             12500)),
                HttpRequest, std::string("https://example.org/index.html"), int64_t{200}, 12.5,
                uint64_t{4096});
  STRATA_MARKER("GET missing", kNetwork, {}, HttpRequest,
                std::string("https://example.org/missing.png"), int64_t{404}, 0.75,
                uint64_t{1536000});
  STRATA_MARKER("batch", kOther, {}, PlainJson, int64_t{1234567});

  const std::string json = strata::ProfilerGetProfile();
  strata::ProfilerStop();
  if (json.empty()) {
    std::fprintf(stderr, "empty profile\n");
    return 1;
  }
  std::FILE* out = std::fopen(argv[1], "w");
  if (!out || std::fwrite(json.data(), 1, json.size(), out) != json.size() ||
      std::fclose(out) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  return 0;
}
