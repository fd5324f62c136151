// The base tier's life-cycle and thread API (libstrata_base.so).
//
//   init      ProfilerInit(): main thread id, core state, main thread registered. Runs by
//             itself when the library loads (it reads the STRATA_* environment there:
//             docs/env-vars.md); calling it again is harmless.
//   start     ProfilerStart(settings): a session: buffer, sampling of registered threads.
//   pause     ProfilerPause()/ProfilerResume(): no samples, markers still recorded.
//   stop      ProfilerStop(): the session ends and its data is dropped (save it first).
//   shutdown  ProfilerShutdown(): with STRATA_SHUTDOWN, pause sampling and save the profile;
//             then stop. Runs by itself at exit.
//
// Everything may be called at any time from any thread; calls that need a session do
// nothing without one. ProfilerIsActive() is one relaxed atomic load.
//
// fork() without exec: the child has no profiler, for good (docs/session.md, "fork"). Every
// call returns at once there, waiting for no lock a parent's thread may have held at the
// fork: ProfilerSaveProfile returns false and makes no file, ProfilerGetProfile returns "",
// ProfilerStart and thread registration do nothing, markers and labels record nothing,
// ProfilerCurrentSettings gives the defaults, counters made in the child are not registered.
//
// Thread safety: thread-safe. Async-signal safety: only ProfilerIsActive() and
// ProfilerIsPaused().
#ifndef STRATA_BASE_PROFILER_H_
#define STRATA_BASE_PROFILER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace strata {

// Features of a session (STRATA_STARTUP_FEATURES names in brackets).
enum ProfilerFeature : uint32_t {
  kFeatureStackWalk = 1u << 0,      // [stackwalk] native stacks in samples.
  kFeatureThreads = 1u << 1,        // [threads] register threads made with pthread_create.
                                    // Decided once, when the library loads, from
                                    // STRATA_STARTUP_FEATURES (default on); the bit given to
                                    // ProfilerStart is recorded in the profile but does not
                                    // change it (docs/api.md).
  kFeatureCpu = 1u << 2,            // [cpu] per-sample thread CPU time.
  kFeaturePrecise = 1u << 3,        // [precise] wall-clock timers: a real rate, but sleeps of
                                    // sampled threads may be cut short (EINTR).
  kFeatureFramePointers = 1u << 4,  // [framepointers] walk frame pointers, not libunwind.
  kFeatureRawAddresses = 1u << 5,   // [rawaddresses] no symbolication at capture.
  kFeatureWaitStacks = 1u << 6,     // [waitstacks] exact stacks of threads blocked in wrapped
                                    // libc calls, without a signal (docs/sampling.md).
  kFeatureOwnFrames = 1u << 7,      // [ownframes] keep frames of Strata's own code in stacks
                                    // (elided by default: docs/symbols.md); for profiling
                                    // Strata itself.
  kFeatureNativeAllocations = 1u << 8,  // [nativeallocations] sampled malloc/new/free with
                                        // stacks, in the front-end's allocation views; needs
                                        // libstrata_alloc.so loaded (docs/memory.md).
};
inline constexpr uint32_t kDefaultFeatures =
    kFeatureStackWalk | kFeatureThreads | kFeatureCpu | kFeatureWaitStacks;

// What sends the sampling signal in the default (non-precise) mode (STRATA_SAMPLING_SOURCE;
// docs/sampling.md, "Sampling sources").
enum class SamplingSourceRequest : uint8_t {
  kAuto,        // Perf task-clock events where the kernel allows them, else CPU-clock timers.
  kPerfEvents,  // The same, but a refusal is logged as an error.
  kTimers,      // CPU-clock timers (at most one signal per scheduler tick).
};

struct ProfilerSettings {
  double interval_ms = 1.0;        // Requested sampling interval.
  uint32_t buffer_megabytes = 64;  // Memory limit of the session's buffer.
  uint32_t features = kDefaultFeatures;
  // Thread-name substrings (case-insensitive); empty = every thread.
  std::vector<std::string> thread_filters;
  // The sampling signal (STRATA_SAMPLING_SIGNAL): 0 lets Strata choose a free real-time signal at
  // start (docs/sampling.md); else SIGRTMIN..SIGRTMAX, SIGPROF, SIGVTALRM, SIGUSR1 or SIGUSR2.
  int sampling_signal = 0;
  SamplingSourceRequest sampling_source = SamplingSourceRequest::kAuto;
};

namespace base_internal {
// Bit 0: a session is active. Bit 1: paused. Read by the inline fast paths.
inline constexpr uint32_t kStateActive = 1u << 0;
inline constexpr uint32_t kStatePaused = 1u << 1;
extern std::atomic<uint32_t> g_profiler_state;
}  // namespace base_internal

inline bool ProfilerIsActive() {
  return (base_internal::g_profiler_state.load(std::memory_order_relaxed) &
          base_internal::kStateActive) != 0;
}
inline bool ProfilerIsPaused() {
  return (base_internal::g_profiler_state.load(std::memory_order_relaxed) &
          base_internal::kStatePaused) != 0;
}

void ProfilerInit();
// Starts a session (stopping a running one first). An interval outside 0.05-1000 ms or a
// buffer outside 1-4096 MiB is logged as an error with the range, and the default is used.
void ProfilerStart(const ProfilerSettings& settings);
void ProfilerStop();
void ProfilerPause();
void ProfilerResume();
// Saves (with STRATA_SHUTDOWN; sampling paused first, so the save is not in its own
// profile) and stops. Idempotent.
void ProfilerShutdown();

// The settings of the running session (defaults when none).
ProfilerSettings ProfilerCurrentSettings();

// Writes the current session's profile (Gecko JSON) to `path` through a temporary file and a
// rename. Returns false and sets `*error` (if given) when there is no session (also in a
// fork()ed child, without making any file) or on I/O error.
bool ProfilerSaveProfile(const std::string& path, std::string* error = nullptr);
// The current session's profile as a string ("" without a session).
std::string ProfilerGetProfile();

// Registers the calling thread under `name`, which the profile shows for it (the main thread
// is always "GeckoMain", as the front-end expects). With a null `name` the thread is listed
// under its kernel name (pthread_setname_np), read again whenever a profile is written.
// Idempotent: on a thread registered before -- threads made with pthread_create are registered
// by themselves (feature `threads`) -- a non-null `name` renames it and the thread filters are
// applied to the new name; null changes nothing. Threads registered while a session runs are
// sampled at once if they pass the filters.
void ProfilerRegisterThread(const char* name);
// Unregisters the calling thread; call before it exits (registered threads made with
// pthread_create are unregistered automatically when they end). An ended thread is kept
// (name, times) only while the session's buffer may still hold its data, and is listed in
// a profile only when the profile has data of it: memory does not grow with the number of
// threads ever created (docs/session.md, "Threads").
void ProfilerUnregisterThread();
bool ProfilerIsThreadRegistered();

// RAII: registers the thread under `name` for the scope. A thread already registered (by
// pthread_create's wrapper, or an earlier call) takes `name` (ProfilerRegisterThread) and
// stays registered after the scope: only a registration made here is undone at its end.
class AutoProfilerRegisterThread {
 public:
  explicit AutoProfilerRegisterThread(const char* name)
      : registered_here_(!ProfilerIsThreadRegistered()) {
    ProfilerRegisterThread(name);  // Registers, or names a thread registered before.
  }
  ~AutoProfilerRegisterThread() {
    if (registered_here_) ProfilerUnregisterThread();
  }
  AutoProfilerRegisterThread(const AutoProfilerRegisterThread&) = delete;
  AutoProfilerRegisterThread& operator=(const AutoProfilerRegisterThread&) = delete;

 private:
  bool registered_here_;
};

// RAII: a session for the scope.
class AutoProfilerSession {
 public:
  explicit AutoProfilerSession(const ProfilerSettings& settings) { ProfilerStart(settings); }
  ~AutoProfilerSession() { ProfilerStop(); }
  AutoProfilerSession(const AutoProfilerSession&) = delete;
  AutoProfilerSession& operator=(const AutoProfilerSession&) = delete;
};

}  // namespace strata

#endif  // STRATA_BASE_PROFILER_H_
