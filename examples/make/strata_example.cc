// A small program instrumented with Strata (examples/README.md): a label, an interval
// marker, a typed marker with its schema, and a counter. Built with STRATA_EXAMPLE_FULL it
// also starts the full tier, which takes the running session over.
//
// Run it profiled:
//   STRATA_STARTUP=1 STRATA_SHUTDOWN=profile.json ./strata_example
// then open profile.json at https://profiler.firefox.com, or `strata summary profile.json`.
#include <strata/counters.h>
#include <strata/labels.h>
#include <strata/marker_schema.h>
#include <strata/markers.h>
#include <strata/profiler.h>
#ifdef STRATA_EXAMPLE_FULL
#include <strata/full.h>
#endif

#include <cstdint>
#include <cstdio>
#include <string>

namespace {

// A typed marker: its fields are the parameters of StreamJSONMarkerData.
struct BatchMarker {
  static constexpr const char* MarkerTypeName() { return "ExampleBatch"; }
  static void StreamJSONMarkerData(strata::JsonWriter& writer, const std::string& name,
                                   int64_t items) {
    writer.StringProperty("name", name);
    writer.IntProperty("items", items);
  }
  static strata::MarkerSchema MarkerTypeDisplay() {
    strata::MarkerSchema schema{strata::MarkerSchema::Location::kMarkerChart,
                                strata::MarkerSchema::Location::kMarkerTable};
    schema.AddKeyLabelFormat("name", "Batch", strata::MarkerSchema::Format::kString);
    schema.AddKeyLabelFormat("items", "Items", strata::MarkerSchema::Format::kInteger);
    return schema;
  }
};

// A counter must outlive the session that samples it (counters.h). The profile is saved at
// exit (STRATA_SHUTDOWN) after the program's static objects are destroyed, so this one is
// never destroyed: a global ProfilerCounter would be gone from the saved profile.
strata::ProfilerCounter& ItemsDone() {
  static auto* counter = new strata::ProfilerCounter("Example items", "Example", "Items processed so far");
  return *counter;
}

// The work the profile should show: kept out of line so that it has its own frame.
__attribute__((noinline)) uint64_t ExampleBusyWork(uint64_t iterations) {
  uint64_t value = 1;
  for (uint64_t i = 0; i < iterations; ++i) {
    value = value * 6364136223846793005ULL + 1442695040888963407ULL;
    __asm__ volatile("" : "+r"(value));
  }
  return value;
}

}  // namespace

int main() {
#ifdef STRATA_EXAMPLE_FULL
  strata::full::StartFull();
#endif
  uint64_t checksum = 0;
  for (int batch = 0; batch < 5; ++batch) {
    STRATA_LABEL("Example batch", kOther);
    const strata::TimeStamp start = strata::TimeStamp::Now();
    checksum ^= ExampleBusyWork(20'000'000);
    ItemsDone().Add(1000);
    STRATA_MARKER_UNTYPED("Example compute", kOther,
                          strata::MarkerOptions::Interval(start, strata::TimeStamp::Now()));
    STRATA_MARKER("Example batch done", kOther, strata::MarkerOptions::Instant(), BatchMarker,
                  "batch-" + std::to_string(batch), int64_t{1000});
  }
  std::printf("strata_example: done checksum=%llu\n", static_cast<unsigned long long>(checksum));
  return 0;
}
