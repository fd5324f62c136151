// Labels among inlined frames (issue 34; tests/symbols/label_inline_test.sh), built -O2 -g and
// linked with the base tier. A label must sit right below the function that pushed it, also
// when that function was inlined into another or has functions inlined into it:
//   - thread "worker": Worker (not inlined) enters "Handle requests", then calls Crunch
//     (inlined), which calls std::sin(int) (the template std::sin<int>, inlined, calling
//     libm's sin): Worker;Handle requests;Crunch;std::sin<int>;sin;...
//   - main thread: OuterLevel (not inlined) inlines MiddleLevel, which enters "Middle step"
//     and inlines InnerLevel (the hot loop): OuterLevel;MiddleLevel;Middle step;InnerLevel
// Before push sites, both labels went below every inlined frame of their physical frame
// (Worker;Crunch;std::sin<int>;Handle requests;sin).
//
//   label_inline [SECONDS]   (default 0.6 of CPU time on each of the two threads)
#include <time.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "base/labels.h"
#include "base/profiler.h"

namespace {

volatile double g_sink;

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
  STRATA_LABEL("Middle step", kOther);
  double y = InnerLevel(x * 1.5);
  return y - InnerLevel(y * 0.25);
}

__attribute__((noinline)) double OuterLevel(double x) { return MiddleLevel(x) + 1.0; }

inline __attribute__((always_inline)) double Crunch(int i) {
  double s = 0;
  for (int k = 0; k < 200; ++k) s += std::sin(i + k);  // std::sin<int>
  return s;
}

__attribute__((noinline)) void Worker(double seconds) {
  STRATA_LABEL("Handle requests", kOther);
  const double end = ThreadCpuSeconds() + seconds;
  double total = 0;
  for (int i = 0; ThreadCpuSeconds() < end; ++i) total += Crunch(i);
  g_sink = total;
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
  std::printf("label_inline: done\n");
  return 0;
}
