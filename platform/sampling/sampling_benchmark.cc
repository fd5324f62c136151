// In-handler cost of the stack walkers at several stack depths, under the real mechanism: a
// CPU-clock ThreadSamplingTimer at 1 ms and the sampling signal handler. Also the cost of the
// first and second vDSO clock read inside the handler, and of a sample's two time stamps as
// base's handler takes them (wall-clock stamp first, then the thread's CPU clock), with the
// stamp from TimeStamp::Now() (CLOCK_MONOTONIC, what samples use) or from the calibrated TSC
// (what they used before issue 17). Manual (docs/sampling.md):
//   bazel run -c opt //platform/sampling:sampling_benchmark -- [cpu_seconds_per_run]
// Prints one line per walker and depth: samples per CPU second, walk p50/p90/p99 (rdtsc,
// converted with a TSC rate measured over 50 ms), mean frames, and the p50 per frame.
// "libunwind" is the walker as sampling uses it (verified frame-pointer steps where
// libunwind confirmed them, libunwind_walker.h); "libunwind-all" steps every frame with
// libunwind, as before issue 38. Both on the same stacks (Recurse keeps frame pointers).
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "platform/sampling/call_chain_for_testing.h"
#include "platform/sampling/frame_pointer_walker.h"
#include "platform/sampling/libunwind_walker.h"
#include "platform/sampling/sampling_signal.h"
#include "platform/sampling/stack_bounds.h"
#include "platform/sampling/thread_sampling_timer.h"
#include "platform/cpu_time.h"
#include "platform/time_stamp.h"
#include "platform/tsc_clock.h"

namespace strata {

// A test process owns all its signals: SIGPROF is as good as the real-time signal a session
// chooses (sampling_signal.h, ChooseSamplingSignal).
constexpr int kTestSamplingSignal = SIGPROF;
namespace {

enum class Walker {
  kFramePointers,
  kLibunwind,
  kLibunwindEveryFrame,
  kClockReads,
  kMonotonicStamp,
  kTscStamp
};

constexpr size_t kMaxSamples = 100000;
constexpr size_t kMaxFrames = 1024;  // Base keeps up to 1 024 (SampleSlot).

struct Run {
  Walker walker = Walker::kFramePointers;
  int depth = 0;
  double cpu_seconds = 1;
  StackBounds bounds;
  std::vector<uint64_t> ticks;   // Walk (or first clock read) per sample.
  std::vector<uint64_t> ticks2;  // Second clock read per sample.
  std::vector<uint32_t> frames;  // Frames per sample.
  std::atomic<size_t> count{0};
  double measured_cpu_seconds = 0;
  NativeFrame walked[kMaxFrames];  // The walk's output: not on the handler's stack (16 KiB).
};

void OnSample(void* thread_context, ucontext_t* context, int) {
  Run* run = static_cast<Run*>(thread_context);
  const size_t index = run->count.load(std::memory_order_relaxed);
  if (index >= kMaxSamples) return;
  NativeFrame* const frames = run->walked;
  size_t count = 0;
  uint64_t ticks = 0, ticks2 = 0;
  if (run->walker == Walker::kClockReads) {
    timespec ts;
    const uint64_t t0 = __rdtsc();
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const uint64_t t1 = __rdtsc();
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ticks = t1 - t0;
    ticks2 = __rdtsc() - t1;
  } else if (run->walker == Walker::kMonotonicStamp || run->walker == Walker::kTscStamp) {
    // ticks: the wall-clock stamp alone; ticks2: the stamp and the CPU clock together.
    const uint64_t t0 = __rdtsc();
    const TimeStamp stamp = run->walker == Walker::kMonotonicStamp
                                ? TimeStamp::Now()
                                : TscTicksToTimeStamp(ReadTscTicks());
    const uint64_t t1 = __rdtsc();
    const TimeDuration cpu = CurrentThreadCpuTime();
    ticks = t1 - t0;
    ticks2 = __rdtsc() - t0;
    __asm__ volatile("" : : "r"(stamp.ToNanoseconds()), "r"(cpu.ToNanoseconds()) : "memory");
  } else {
    const uint64_t start = __rdtsc();
    count = run->walker == Walker::kFramePointers
                ? WalkFramePointers(*context, run->bounds, frames, kMaxFrames)
                : WalkStackWithLibunwind(context, run->bounds, frames, kMaxFrames);  // Either mode.
    ticks = __rdtsc() - start;
  }
  run->ticks[index] = ticks;
  run->ticks2[index] = ticks2;
  run->frames[index] = static_cast<uint32_t>(count);
  run->count.store(index + 1, std::memory_order_relaxed);
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

__attribute__((noinline, noclone)) uint64_t Recurse(int depth, Run* run) {
  if (depth <= 0) {
    const double start = ThreadCpuSeconds();
    uint64_t sink = 0;
    while (ThreadCpuSeconds() - start < run->cpu_seconds) sink += strata_test_chain_outer(1000);
    run->measured_cpu_seconds = ThreadCpuSeconds() - start;
    return sink;
  }
  const uint64_t result = Recurse(depth - 1, run);
  __asm__ volatile("" : : "r"(result) : "memory");
  return result + 1;
}

void* SampledThread(void* argument) {
  Run* run = static_cast<Run*>(argument);
  run->bounds = StackBounds::OfCurrentThread();
  WarmUpLibunwind();
  SetSamplingThreadContext(run);
  ThreadSamplingTimer timer;
  if (timer.CreateForCurrentThread(kTestSamplingSignal) != 0 ||
      timer.Arm(TimeDuration::FromMilliseconds(1)) != 0) {
    std::fprintf(stderr, "timer failed\n");
    std::exit(1);
  }
  const uint64_t sink = Recurse(run->depth, run);
  timer.Destroy();
  SetSamplingThreadContext(nullptr);
  __asm__ volatile("" : : "r"(sink) : "memory");
  return nullptr;
}

double Percentile(std::vector<uint64_t> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return static_cast<double>(values[static_cast<size_t>(p / 100 * (values.size() - 1))]);
}

double MeasureTscPerNanosecond() {
  const TimeStamp start = TimeStamp::Now();
  const uint64_t start_ticks = __rdtsc();
  usleep(50 * 1000);
  return static_cast<double>(__rdtsc() - start_ticks) /
         static_cast<double>((TimeStamp::Now() - start).ToNanoseconds());
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  using namespace strata;
  const double cpu_seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  const double tsc_per_ns = MeasureTscPerNanosecond();
  if (InstallSamplingSignalHandler(kTestSamplingSignal, &OnSample) != 0) return 1;
  std::printf("%-15s %5s %8s %10s %10s %10s %7s %9s\n", "walker", "depth", "samples/s", "p50 ns",
              "p90 ns", "p99 ns", "frames", "ns/frame");
  struct Config {
    Walker walker;
    int depth;
  };
  (void)ProcessTscCalibration();  // For kTscStamp (the TSC stamp base used before issue 17).
  const Config configs[] = {{Walker::kClockReads, 0},     {Walker::kMonotonicStamp, 0},
                            {Walker::kTscStamp, 0},       {Walker::kFramePointers, 0},
                            {Walker::kFramePointers, 40}, {Walker::kLibunwind, 0},
                            {Walker::kLibunwind, 10},     {Walker::kLibunwind, 40},
                            {Walker::kFramePointers, 600}, {Walker::kLibunwind, 600},
                            {Walker::kLibunwindEveryFrame, 40},
                            {Walker::kFramePointers, 1000}, {Walker::kLibunwind, 1000},
                            {Walker::kLibunwindEveryFrame, 1000}};
  for (const Config& config : configs) {
    Run run;
    run.walker = config.walker;
    run.depth = config.depth;
    run.cpu_seconds = cpu_seconds;
    run.ticks.resize(kMaxSamples);
    run.ticks2.resize(kMaxSamples);
    run.frames.resize(kMaxSamples);
    SetVerifiedFramePointerSteps(config.walker != Walker::kLibunwindEveryFrame);
    pthread_t thread;
    pthread_create(&thread, nullptr, &SampledThread, &run);
    pthread_join(thread, nullptr);
    const size_t n = run.count.load();
    std::vector<uint64_t> ticks(run.ticks.begin(), run.ticks.begin() + n);
    double frames = 0;
    for (size_t i = 0; i < n; ++i) frames += run.frames[i];
    const char* name = config.walker == Walker::kFramePointers ? "frame pointers"
                       : config.walker == Walker::kLibunwind   ? "libunwind"
                       : config.walker == Walker::kLibunwindEveryFrame ? "libunwind-all"
                       : config.walker == Walker::kMonotonicStamp ? "stamp Now()"
                       : config.walker == Walker::kTscStamp       ? "stamp TSC"
                                                                  : "clock_gettime#1";
    const double mean_frames = n ? frames / n : 0;
    std::printf("%-15s %5d %8.0f %10.0f %10.0f %10.0f %7.1f %9.1f\n", name, config.depth,
                n / run.measured_cpu_seconds, Percentile(ticks, 50) / tsc_per_ns,
                Percentile(ticks, 90) / tsc_per_ns, Percentile(ticks, 99) / tsc_per_ns,
                mean_frames, mean_frames > 0 ? Percentile(ticks, 50) / tsc_per_ns / mean_frames : 0);
    if (config.walker != Walker::kFramePointers && config.walker != Walker::kLibunwind &&
        config.walker != Walker::kLibunwindEveryFrame) {
      std::vector<uint64_t> second(run.ticks2.begin(), run.ticks2.begin() + n);
      std::printf("%-15s %5s %8s %10.0f %10.0f %10.0f\n",
                  config.walker == Walker::kClockReads ? "clock_gettime#2" : " +CPU clock", "",
                  "",
                  Percentile(second, 50) / tsc_per_ns, Percentile(second, 90) / tsc_per_ns,
                  Percentile(second, 99) / tsc_per_ns);
    }
  }
  return UninstallSamplingSignalHandler();
}
