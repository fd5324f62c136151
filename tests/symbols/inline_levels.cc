// Inline levels for the symbol check (issue 34, tests/symbols/inline_chains_test.sh), built
// -O2 -g: OuterLevel (not inlined) inlines MiddleLevel, which inlines InnerLevel (the hot
// loop); a worker thread's Worker inlines Crunch, which calls std::sin, and takes a
// std::lock_guard around a shared total (std::mutex::lock inlined into Worker). Each level
// must be a frame of its own, in caller-to-callee order, as llvm-symbolizer --inlining gives.
//
//   inline_levels [SECONDS]   (default 0.6 of CPU time on each of the two threads)
#include <time.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace {

volatile double g_sink;
std::mutex g_total_mutex;
double g_total = 0;

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

inline __attribute__((always_inline)) double InnerLevel(double x) {
  double y = x;
  for (int i = 0; i < 4000; ++i) y = y * 1.0000001 + 0.5;
  return y;
}

inline __attribute__((always_inline)) double MiddleLevel(double x) {
  double y = InnerLevel(x * 1.5);
  return y - InnerLevel(y * 0.25);
}

__attribute__((noinline)) double OuterLevel(double x) { return MiddleLevel(x) + 1.0; }

inline __attribute__((always_inline)) double Crunch(int i) {
  double s = 0;
  for (int k = 0; k < 200; ++k) s += std::sin(i * 0.001 + k);
  return s;
}

__attribute__((noinline)) void Worker(double seconds) {
  const double end = ThreadCpuSeconds() + seconds;
  for (int i = 0; ThreadCpuSeconds() < end; ++i) {
    const double part = Crunch(i);
    std::lock_guard<std::mutex> lock(g_total_mutex);
    g_total += part;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0.6;
  std::thread worker(Worker, seconds);
  const double end = ThreadCpuSeconds() + seconds;
  double x = 1;
  while (ThreadCpuSeconds() < end) x = OuterLevel(x) * 1e-9;
  g_sink = x;
  worker.join();
  std::printf("inline_levels: done\n");
  return 0;
}
