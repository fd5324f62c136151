#include "platform/sampling/sampled_thread_for_testing.h"

#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>

#include "platform/sampling/call_chain_for_testing.h"
#include "platform/sampling/frame_pointer_walker.h"
#include "platform/sampling/libunwind_walker.h"
#include "platform/sampling/sampling_signal.h"
#include "platform/sampling/thread_sampling_timer.h"

namespace strata {

// A test process owns all its signals: SIGPROF is as good as the real-time signal a session
// chooses (sampling_signal.h, ChooseSamplingSignal).
constexpr int kTestSamplingSignal = SIGPROF;
namespace sampling_testing {
namespace {

constexpr size_t kSampleCapacity = 4096;

TimeDuration ThreadCpuTimeNow() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return TimeDuration::FromNanoseconds(static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec);
}

// The sampled thread's context: what the callback writes into, all preallocated.
struct Recorder {
  unsigned walkers = kNoWalk;
  StackBounds bounds;
  std::vector<RecordedSample> storage;  // Sized before the timer is armed.
  std::atomic<size_t> signals{0};
  std::atomic<int64_t> overruns{0};
  double tsc_per_ns = 1;
};

// TSC ticks per nanosecond, measured over 20 ms.
double MeasureTscPerNanosecond() {
  const TimeStamp start = TimeStamp::Now();
  const uint64_t start_ticks = __rdtsc();
  usleep(20 * 1000);
  const uint64_t ticks = __rdtsc() - start_ticks;
  return static_cast<double>(ticks) /
         static_cast<double>((TimeStamp::Now() - start).ToNanoseconds());
}

// The sampling callback: runs in the signal handler on the sampled thread.
void RecordSample(void* thread_context, ucontext_t* context, int overruns) {
  Recorder* recorder = static_cast<Recorder*>(thread_context);
  const size_t index = recorder->signals.fetch_add(1, std::memory_order_relaxed);
  recorder->overruns.fetch_add(overruns, std::memory_order_relaxed);
  if (index >= recorder->storage.size()) return;
  RecordedSample& sample = recorder->storage[index];
  sample.thread = CurrentThreadId();
  sample.overruns = overruns;
  // Timed with the TSC: the first vDSO clock read in a signal handler costs ~2 us here.
  if (recorder->walkers & kFramePointerWalk) {
    const uint64_t start = __rdtsc();
    sample.fp_count =
        WalkFramePointers(*context, recorder->bounds, sample.fp_frames, RecordedSample::kMaxFrames);
    sample.fp_walk_ns = static_cast<int64_t>((__rdtsc() - start) / recorder->tsc_per_ns);
  }
  if (recorder->walkers & kLibunwindWalk) {
    const uint64_t start = __rdtsc();
    sample.unwind_count = WalkStackWithLibunwind(context, recorder->bounds, sample.unwind_frames,
                                                 RecordedSample::kMaxFrames);
    sample.unwind_walk_ns = static_cast<int64_t>((__rdtsc() - start) / recorder->tsc_per_ns);
  }
}

struct ThreadArguments {
  Recorder* recorder;
  TimeDuration interval;
  TimeDuration cpu_time;
  void (*extra_work)();
  ChainRun* run;
};

}  // namespace
}  // namespace sampling_testing
}  // namespace strata

// The sampled thread's start routine, with a C name so that tests can find it in stacks.
extern "C" __attribute__((noinline)) void* strata_test_sampled_thread_main(void* argument) {
  using namespace strata;
  using namespace strata::sampling_testing;
  ThreadArguments* arguments = static_cast<ThreadArguments*>(argument);
  Recorder* recorder = arguments->recorder;
  ChainRun* run = arguments->run;

  // Registration: bounds, libunwind warm-up, context, timer -- in that order.
  recorder->bounds = StackBounds::OfCurrentThread();
  run->bounds = recorder->bounds;
  WarmUpLibunwind();
  SetSamplingThreadContext(recorder);
  ThreadSamplingTimer timer;
  run->timer_error = timer.CreateForCurrentThread(kTestSamplingSignal);
  if (run->timer_error == 0) run->timer_error = timer.Arm(arguments->interval);

  const TimeDuration cpu_start = ThreadCpuTimeNow();
  const TimeStamp wall_start = TimeStamp::Now();
  uint64_t sink = 0;
  if (run->timer_error == 0) {
    const TimeDuration cpu_cap =
        TimeDuration::FromNanoseconds(arguments->cpu_time.ToNanoseconds() * 10);
    for (;;) {
      const TimeDuration used = ThreadCpuTimeNow() - cpu_start;
      if (used >= cpu_cap) break;
      if (used >= arguments->cpu_time &&
          recorder->signals.load(std::memory_order_relaxed) >= kMinSamplesPerRun) {
        break;
      }
      sink += strata_test_chain_outer(1000);
      if (arguments->extra_work != nullptr) arguments->extra_work();
    }
  }
  run->cpu_time = ThreadCpuTimeNow() - cpu_start;
  run->wall_time = TimeStamp::Now() - wall_start;

  // Unregistration: timer first, then the context.
  timer.Destroy();
  SetSamplingThreadContext(nullptr);
  __asm__ volatile("" : : "r"(sink) : "memory");
  return nullptr;
}

namespace strata {
namespace sampling_testing {

ChainRun RunChainOnSampledThread(unsigned walkers, TimeDuration interval, TimeDuration cpu_time,
                                 void (*extra_work)()) {
  ChainRun run;
  Recorder recorder;
  recorder.walkers = walkers;
  recorder.storage.resize(kSampleCapacity);
  recorder.tsc_per_ns = MeasureTscPerNanosecond();

  run.install_error = InstallSamplingSignalHandler(kTestSamplingSignal, &RecordSample);
  if (run.install_error != 0) return run;

  ThreadArguments arguments{&recorder, interval, cpu_time, extra_work, &run};
  pthread_t thread;
  if (pthread_create(&thread, nullptr, &strata_test_sampled_thread_main, &arguments) == 0) {
    pthread_join(thread, nullptr);
  } else {
    run.timer_error = -1;
  }
  (void)UninstallSamplingSignalHandler();

  run.signals = recorder.signals.load();
  run.overruns = recorder.overruns.load();
  const size_t kept = std::min(run.signals, recorder.storage.size());
  run.samples.assign(recorder.storage.begin(), recorder.storage.begin() + kept);
  return run;
}

std::string SymbolName(uintptr_t pc, bool is_return_address) {
  Dl_info info;
  const uintptr_t lookup = is_return_address ? pc - 1 : pc;
  if (dladdr(reinterpret_cast<void*>(lookup), &info) == 0 || info.dli_sname == nullptr) {
    return std::string();
  }
  return info.dli_sname;
}

std::vector<std::string> SymbolNames(const NativeFrame* frames, size_t count) {
  std::vector<std::string> names;
  names.reserve(count);
  for (size_t i = 0; i < count; ++i) names.push_back(SymbolName(frames[i].pc, i > 0));
  return names;
}

int64_t Percentile(std::vector<int64_t> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t index = static_cast<size_t>(p / 100.0 * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

}  // namespace sampling_testing
}  // namespace strata
