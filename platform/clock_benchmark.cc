// Cost of reading the clocks and ids the sampler and markers use. Results are recorded in
// docs/benchmarks.md ("Clocks"). Run optimised, on an otherwise idle machine:
//
//   bazel run -c opt //platform:clock_benchmark -- --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true   (one command line)
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "benchmark/benchmark.h"
#include "platform/cpu_time.h"
#include "platform/memory_usage.h"
#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "platform/tsc_clock.h"

namespace strata {
namespace {

void BM_TimeStampNow(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(TimeStamp::Now());
}
BENCHMARK(BM_TimeStampNow);

void BM_ReadTscTicks(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ReadTscTicks());
}
BENCHMARK(BM_ReadTscTicks);

// Conversion alone, with the calibration already measured; the tick value varies so that
// the compiler cannot fold the work.
void BM_TscCalibrationToTimeStamp(benchmark::State& state) {
  const TscCalibration& calibration = ProcessTscCalibration();
  uint64_t ticks = ReadTscTicks();
  for (auto _ : state) {
    benchmark::DoNotOptimize(calibration.ToTimeStamp(ticks));
    ticks += 977;
  }
}
BENCHMARK(BM_TscCalibrationToTimeStamp);

// What a signal handler would do: read the counter and convert through the process-wide
// (atomically published) calibration.
void BM_ReadTscAndConvert(benchmark::State& state) {
  ProcessTscCalibration();
  for (auto _ : state) benchmark::DoNotOptimize(TscTicksToTimeStamp(ReadTscTicks()));
}
BENCHMARK(BM_ReadTscAndConvert);

void BM_TscAnchorCapture(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(TscAnchor::Capture());
}
BENCHMARK(BM_TscAnchorCapture);

void BM_ClockMonotonicCoarse(benchmark::State& state) {
  timespec ts;
  for (auto _ : state) {
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    benchmark::DoNotOptimize(ts);
  }
}
BENCHMARK(BM_ClockMonotonicCoarse);

void BM_CurrentThreadId(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(CurrentThreadId());
}
BENCHMARK(BM_CurrentThreadId);

// The inactive cost of every public macro: one relaxed load (plus the loop).
std::atomic<uint32_t> g_flag{0};
void BM_RelaxedAtomicLoad(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(g_flag.load(std::memory_order_relaxed));
}
BENCHMARK(BM_RelaxedAtomicLoad);

void BM_CurrentThreadCpuTime(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(CurrentThreadCpuTime());
}
BENCHMARK(BM_CurrentThreadCpuTime);

void BM_ProcessCpuTime(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ProcessCpuTime());
}
BENCHMARK(BM_ProcessCpuTime);

// Another thread's CPU clock, read from here while that thread is blocked.
void BM_OtherThreadCpuTime(benchmark::State& state) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread other([&] {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done; });
  });
  const ThreadCpuClock clock = ThreadCpuClock::ForThread(other.native_handle()).value();
  for (auto _ : state) benchmark::DoNotOptimize(clock.Read());
  {
    std::lock_guard<std::mutex> lock(m);
    done = true;
  }
  cv.notify_one();
  other.join();
}
BENCHMARK(BM_OtherThreadCpuTime);

void BM_ReadProcessMemoryUsage(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ReadProcessMemoryUsage());
}
BENCHMARK(BM_ReadProcessMemoryUsage);

}  // namespace
}  // namespace strata
