// The soak program (tools/soak.sh, docs/reliability.md "Soak and leaks"): linked with the base
// tier (//base:strata_base) and started with STRATA_STARTUP=1, it keeps N threads busy and
// recording markers as fast as they can for --seconds, so that the buffer fills, reaches its
// limit and keeps dropping its oldest chunks for the whole run.
//
//   soak_program [--seconds S] [--threads N] [--marker-every K]
//
// Thread "soak-<i>": a loop of ~20 µs of arithmetic in soak_work(), then every K-th iteration
// (default 1) an instant untyped marker, a text marker with a changing text, and an interval
// marker around the next work item. Main prints "soak_program: result threads=N markers=M"
// and exits 0.
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/markers.h"
#include "base/profiler.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_markers{0};
int g_marker_every = 1;
volatile uint64_t g_sink;

__attribute__((noipa)) uint64_t soak_work(uint64_t x) {
  for (int i = 0; i < 4000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

void* SoakThreadMain(void* raw) {
  const int index = static_cast<int>(reinterpret_cast<intptr_t>(raw));
  const std::string name = "soak-" + std::to_string(index);
  pthread_setname_np(pthread_self(), name.c_str());
  uint64_t x = static_cast<uint64_t>(index) + 1;
  uint64_t markers = 0;
  for (uint64_t iteration = 0; !g_stop.load(std::memory_order_relaxed); ++iteration) {
    if (iteration % g_marker_every != 0) {
      x = soak_work(x);
      continue;
    }
    STRATA_MARKER_UNTYPED("SoakTick", kOther);
    STRATA_MARKER_TEXT("SoakText", kOther, {}, "iteration " + std::to_string(iteration));
    const strata::TimeStamp start = strata::TimeStamp::Now();
    x = soak_work(x);
    STRATA_MARKER_UNTYPED("SoakWork", kOther,
                          strata::MarkerOptions::Interval(start, strata::TimeStamp::Now()));
    markers += 3;
  }
  g_sink = x;
  g_markers.fetch_add(markers);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10;
  int threads = 16;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--marker-every") == 0 && i + 1 < argc) {
      g_marker_every = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--threads N] [--marker-every K]\n",
                   argv[0]);
      return 2;
    }
  }
  if (seconds <= 0 || threads < 1 || g_marker_every < 1) {
    std::fprintf(stderr, "soak_program: --seconds, --threads, --marker-every must be positive\n");
    return 2;
  }
  std::vector<pthread_t> workers(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    if (pthread_create(&workers[i], nullptr, &SoakThreadMain,
                       reinterpret_cast<void*>(static_cast<intptr_t>(i))) != 0) {
      std::perror("soak_program: pthread_create");
      return 3;
    }
  }
  timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += static_cast<time_t>(seconds);
  deadline.tv_nsec += static_cast<long>((seconds - static_cast<double>(static_cast<time_t>(seconds))) * 1e9);
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000L;
  }
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr) != 0) {
  }
  g_stop.store(true);
  for (pthread_t thread : workers) pthread_join(thread, nullptr);
  std::printf("soak_program: result threads=%d markers=%llu\n", threads,
              static_cast<unsigned long long>(g_markers.load()));
  return 0;
}
