// A program with labels and markers for the report scenario (tests/cli): linked with the base
// tier (//base:strata_base) and recorded with `strata record`, so that the report's timeline
// has markers of every kind and its flame graph has label frames with categories.
//
//   marked_program [--ms N]    (default 400)
//
// Thread "renderer": frames of ~5 ms CPU (label "Frame", kGraphics), each an Interval marker
// "Frame", with an instant "Tick" every 10th frame; thread "io-worker": "Read" as
// IntervalStart/IntervalEnd pairs around 5 ms sleeps (label "Load file", kIo). The main thread
// spins in main_spin() until both are done.
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/labels.h"
#include "base/markers.h"
#include "base/profiler.h"

namespace {

volatile uint64_t g_sink;
double g_ms = 400;

double CpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noipa)) uint64_t paint_pixels(uint64_t x) {
  for (int i = 0; i < 64; ++i) {
    x = x * 6364136223846793005ULL + 99ULL;
    x ^= x >> 27;
  }
  return x;
}

__attribute__((noinline)) void render_frame(double ms) {
  STRATA_LABEL("Frame", kGraphics);
  uint64_t x = 5;
  const double end = CpuMs() + ms;
  while (CpuMs() < end) {
    for (int i = 0; i < 500; ++i) x = paint_pixels(x);
  }
  g_sink = x;
}

void Renderer(std::atomic<bool>* done) {
  pthread_setname_np(pthread_self(), "renderer");
  const double end = CpuMs() + g_ms;
  for (int frame = 0; CpuMs() < end; ++frame) {
    const strata::TimeStamp start = strata::TimeStamp::Now();
    render_frame(5);
    STRATA_MARKER_UNTYPED("Frame", kGraphics, strata::MarkerOptions::Interval(start, strata::TimeStamp::Now()));
    if (frame % 10 == 0) STRATA_MARKER_TEXT("Tick", kOther, {}, "every tenth frame");
  }
  done->store(true);
}

void IoWorker(std::atomic<bool>* stop) {
  pthread_setname_np(pthread_self(), "io-worker");
  while (!stop->load()) {
    STRATA_LABEL("Load file", kIo);
    STRATA_MARKER_UNTYPED("Read", kIo, strata::MarkerOptions::IntervalStart());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    STRATA_MARKER_UNTYPED("Read", kIo, strata::MarkerOptions::IntervalEnd());
  }
}

__attribute__((noinline)) void main_spin(std::atomic<bool>* done) {
  uint64_t x = 7;
  while (!done->load()) {
    for (int i = 0; i < 500; ++i) x = paint_pixels(x);
  }
  g_sink = x;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--ms") == 0) g_ms = std::atof(argv[2]);
  std::atomic<bool> done{false};
  std::thread renderer(Renderer, &done);
  std::thread io(IoWorker, &done);
  main_spin(&done);
  renderer.join();
  io.join();
  std::printf("marked_program: done\n");
  return 0;
}
