// docs/api.md, "Labels, markers and counters": every kind of marker and a counter, in a
// session scoped to main. Base tier (strata-base, Strata::base).
//   ./markers_counters profile.json
#include <strata/counters.h>
#include <strata/labels.h>
#include <strata/marker_schema.h>
#include <strata/markers.h>
#include <strata/profiler.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace {

__attribute__((noinline)) uint64_t Work(uint64_t iterations) {
  uint64_t value = 1;
  for (uint64_t i = 0; i < iterations; ++i) {
    value = value * 6364136223846793005ULL + 1;
    __asm__ volatile("" : "+r"(value));
  }
  return value;
}

// A typed marker: the parameters of StreamJSONMarkerData are what is recorded.
struct RequestMarker {
  static constexpr const char* MarkerTypeName() { return "ApiRequest"; }
  static void StreamJSONMarkerData(strata::JsonWriter& writer, const std::string& url,
                                   int64_t status) {
    writer.StringProperty("url", url);
    writer.IntProperty("status", status);
  }
  // How the front-end shows it (meta.markerSchema).
  static strata::MarkerSchema MarkerTypeDisplay() {
    strata::MarkerSchema schema{strata::MarkerSchema::Location::kMarkerChart,
                                strata::MarkerSchema::Location::kMarkerTable};
    schema.SetTableLabel("{marker.data.url} ({marker.data.status})");
    schema.AddKeyLabelFormat("url", "URL", strata::MarkerSchema::Format::kUrl);
    schema.AddKeyLabelFormat("status", "Status", strata::MarkerSchema::Format::kInteger);
    return schema;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PROFILE.json\n", argv[0]);
    return 2;
  }
  // Declared before the session: a counter must outlive every session that samples it.
  strata::ProfilerCounter requests("Requests in flight", "Network", "Requests not answered yet");
  strata::AutoProfilerSession session{strata::ProfilerSettings()};

  {
    STRATA_LABEL("Handle requests", kNetwork);           // A frame on this thread's stack.
    STRATA_LABEL_DYNAMIC("Request", kNetwork, "/index");  // + a string copied per sample.
    STRATA_MARKER_UNTYPED("Frame start", kGraphics);      // Instant, now.
    const strata::TimeStamp start = strata::TimeStamp::Now();
    requests.Add(1);
    STRATA_MARKER("Request", kNetwork, strata::MarkerOptions::IntervalStart(), RequestMarker,
                  std::string("https://example.org/"), int64_t{0});
    STRATA_MARKER_TEXT("Log", kOther, {}, "cache miss for key 42");  // Instant with text.
    Work(20'000'000);  // The sampler reads counters each time it samples.
    STRATA_MARKER("Request", kNetwork, strata::MarkerOptions::IntervalEnd(), RequestMarker,
                  std::string("https://example.org/"), int64_t{200});
    requests.Add(-1);
    STRATA_MARKER_UNTYPED("Load", kIo, strata::MarkerOptions::Interval(start, strata::TimeStamp::Now()));
  }

  std::string error;
  if (!strata::ProfilerSaveProfile(argv[1], &error)) {
    std::fprintf(stderr, "markers_counters: %s\n", error.c_str());
    return 1;
  }
  std::printf("markers_counters: saved %s\n", argv[1]);
  return 0;
}
