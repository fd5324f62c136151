// The demo program: several threads with labels, markers and a counter. Run it with the base
// tier preloaded (tools/demo.sh does) to get a profile; without Strata it runs the same.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "base/counters.h"
#include "base/labels.h"
#include "base/markers.h"

namespace {

strata::ProfilerCounter g_cache_bytes("Cache bytes", "Memory", "Bytes held by the demo cache");

struct FrameMarker {
  static constexpr const char* MarkerTypeName() { return "DemoFrame"; }
  static void StreamJSONMarkerData(strata::JsonWriter& w, int64_t frame, int64_t shapes) {
    w.IntProperty("frame", frame);
    w.IntProperty("shapes", shapes);
  }
  static std::string MarkerTypeSchemaJson() {
    return R"({"name":"DemoFrame","display":["marker-chart","marker-table","timeline-overview"],)"
           R"("chartLabel":"frame {marker.data.frame}","tableLabel":"frame {marker.data.frame}",)"
           R"("data":[{"key":"frame","label":"Frame","format":"integer"},)"
           R"({"key":"shapes","label":"Shapes","format":"integer"}]})";
  }
};

__attribute__((noinline)) double RasterizeShapes(int shapes) {
  STRATA_LABEL("Rasterize", kGraphics);
  double sum = 0;
  for (int i = 0; i < shapes * 2000; ++i) sum += std::sqrt(static_cast<double>(i));
  return sum;
}

__attribute__((noinline)) double LayoutTree(int nodes) {
  STRATA_LABEL("Layout", kLayout);
  double sum = 0;
  for (int i = 0; i < nodes * 3000; ++i) sum += std::sin(static_cast<double>(i));
  return sum;
}

void RendererThread(std::atomic<bool>* stop) {
  pthread_setname_np(pthread_self(), "renderer");
  double sink = 0;
  for (int64_t frame = 0; !stop->load(); ++frame) {
    const strata::TimeStamp start = strata::TimeStamp::Now();
    STRATA_LABEL("Frame", kGraphics);
    sink += LayoutTree(40 + static_cast<int>(frame % 20));
    sink += RasterizeShapes(60);
    STRATA_MARKER("Frame", kGraphics,
                  strata::MarkerOptions::Interval(start, strata::TimeStamp::Now()), FrameMarker,
                  frame, int64_t{60});
    std::this_thread::sleep_for(std::chrono::milliseconds(4));
  }
  if (sink == 42) std::puts("");
}

// What the io-worker does with each file it reads: a little CPU (~1-2 ms), as a real loader
// decodes what it loads. It also keeps the thread visible in profiler.firefox.com, which at
// first hides threads whose CPU time is under 5 % of the busiest thread's (docs/sampling.md,
// "Wait stacks in the front-end").
__attribute__((noinline)) uint64_t DecodeTexture(uint64_t bytes) {
  for (int i = 0; i < 1'000'000; ++i) bytes = (bytes ^ (bytes >> 29)) * 0xBF58476D1CE4E5B9ull;
  return bytes;
}

void IoThread(std::atomic<bool>* stop) {
  pthread_setname_np(pthread_self(), "io-worker");
  uint64_t decoded = 0;
  for (int request = 0; !stop->load(); ++request) {
    STRATA_LABEL_DYNAMIC("Load file", kIo, "assets/texture.png");
    STRATA_MARKER_UNTYPED("Read", kIo, strata::MarkerOptions::IntervalStart());
    std::this_thread::sleep_for(std::chrono::milliseconds(15));  // The disk's latency.
    STRATA_MARKER_UNTYPED("Read", kIo, strata::MarkerOptions::IntervalEnd());
    decoded = DecodeTexture(decoded + static_cast<uint64_t>(request));
    g_cache_bytes.Add(64 * 1024);
    if (request % 10 == 9) {
      g_cache_bytes.Add(-10 * 64 * 1024);
      STRATA_MARKER_TEXT("Cache evicted", kMemory, {}, "10 entries dropped");
    }
  }
  if (decoded == 42) std::puts("");
}

__attribute__((noinline)) uint64_t Checksum(uint64_t seed, int rounds) {
  for (int i = 0; i < rounds; ++i) seed = (seed ^ (seed >> 31)) * 0x9E3779B97F4A7C15ull;
  return seed;
}

void ComputeThread(std::atomic<bool>* stop) {
  pthread_setname_np(pthread_self(), "compute");
  uint64_t x = 1;
  while (!stop->load()) {
    STRATA_LABEL("Checksum batch", kApplication);
    x = Checksum(x, 5'000'000);
  }
  if (x == 42) std::puts("");
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  STRATA_MARKER_UNTYPED("Demo start", kStartup);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  threads.emplace_back(RendererThread, &stop);
  threads.emplace_back(IoThread, &stop);
  threads.emplace_back(ComputeThread, &stop);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  STRATA_MARKER_TEXT("Demo end", kStartup, {}, "all threads joined");
  std::printf("demo ran %.1f s with 3 threads\n", seconds);
  return 0;
}
