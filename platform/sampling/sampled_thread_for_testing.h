// Test support: runs the known call chain (call_chain_for_testing.h) on a new thread under a
// real sampling timer and the real sampling signal handler, and records, in the handler,
// what the stack walkers return. Everything the handler touches is preallocated.
//
// Thread safety: RunChainOnSampledThread() installs and uninstalls the process-wide
// sampling signal handler: one call at a time, and nothing else may hold the handler.
#ifndef STRATA_PLATFORM_SAMPLING_SAMPLED_THREAD_FOR_TESTING_H_
#define STRATA_PLATFORM_SAMPLING_SAMPLED_THREAD_FOR_TESTING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "platform/process_thread_ids.h"
#include "platform/sampling/native_frame.h"
#include "platform/sampling/stack_bounds.h"
#include "platform/time_stamp.h"

namespace strata {
namespace sampling_testing {

// Which walkers the handler runs for each sample (a bit set).
enum Walkers : unsigned {
  kNoWalk = 0,
  kFramePointerWalk = 1,
  kLibunwindWalk = 2,
};

struct RecordedSample {
  static constexpr size_t kMaxFrames = 64;
  ThreadId thread;  // The thread that ran the handler.
  int overruns = 0;
  size_t fp_count = 0;
  NativeFrame fp_frames[kMaxFrames];
  int64_t fp_walk_ns = 0;
  size_t unwind_count = 0;
  NativeFrame unwind_frames[kMaxFrames];
  int64_t unwind_walk_ns = 0;
};

struct ChainRun {
  int install_error = 0;  // InstallSamplingSignalHandler
  int timer_error = 0;    // Create + Arm, on the sampled thread
  std::vector<RecordedSample> samples;
  size_t signals = 0;     // Callbacks on the sampled thread (samples beyond capacity too).
  int64_t overruns = 0;   // Sum of si_overrun.
  StackBounds bounds;     // The sampled thread's.
  TimeDuration cpu_time;  // The sampled thread's CPU time while the timer was armed.
  TimeDuration wall_time;
};

// Whether the sampling signal's handler runs where the signal interrupted the thread, so that
// the callers of an interrupted pc can be checked. Not under ThreadSanitizer: its runtime
// catches an asynchronous signal, saves the signal's context and runs the program's handler
// later, at the thread's next intercepted call, atomic operation or system call
// (rtl_generic_sighandler and ProcessPendingSignals in libtsan). The handler then gets the
// registers of the moment of the signal, but the thread has moved on and newer frames (the
// handler's own among them) overwrite the stack those registers point into: the sample's pc
// is right, the walk above it reads whatever is there now. Tests check callers only when true.
#if defined(__SANITIZE_THREAD__)
constexpr bool kHandlerRunsWhereSignalled = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kHandlerRunsWhereSignalled = false;
#else
constexpr bool kHandlerRunsWhereSignalled = true;
#endif
#else
constexpr bool kHandlerRunsWhereSignalled = true;
#endif

// Runs strata_test_chain_outer in a loop on a new thread (its start routine is
// strata_test_sampled_thread_main) until that thread has used `cpu_time` of CPU and has been
// sampled kMinSamplesPerRun times (up to 10 x `cpu_time` for those), with a
// ThreadSamplingTimer on its CPU clock armed at `interval` and the handler walking with
// `walkers`. `extra_work`, if set, runs on the sampled thread between chain calls. (CPU-clock
// timers are tick-bound, and on a loaded machine fire far less than once a tick: 47 samples
// per CPU-second were seen, where 600 ms had been enough for 30 samples.)
inline constexpr size_t kMinSamplesPerRun = 60;
ChainRun RunChainOnSampledThread(unsigned walkers, TimeDuration interval, TimeDuration cpu_time,
                                 void (*extra_work)() = nullptr);

// The symbol containing `pc` (looked up at pc - 1 for return addresses), or "" when dladdr
// finds none. Not async-signal-safe.
std::string SymbolName(uintptr_t pc, bool is_return_address);

// The symbols of frames[0..count), innermost first.
std::vector<std::string> SymbolNames(const NativeFrame* frames, size_t count);

// The p-th percentile (0..100) of `values` (copied and sorted); 0 for an empty vector.
int64_t Percentile(std::vector<int64_t> values, double p);

}  // namespace sampling_testing
}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_SAMPLED_THREAD_FOR_TESTING_H_
