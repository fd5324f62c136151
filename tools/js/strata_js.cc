// strata js: runs a JavaScript file under SpiderMonkey 102 with the profiler on and writes a
// Gecko profile whose JS thread carries JS frames (interpreter and JIT) merged with the native
// frames (docs/js.md). It is also the demo of the feature.
//
//   strata_js [options] FILE.js
//     -o, --output PATH      profile to write (default: profile.json)
//     --interval MS          sampling interval in ms (default 1)
//     --jit MODE             default | nojit | interp | blinterp | baseline (default: default)
//     --no-profile           run the script without profiling (to compare run times)
//     --late-start MS        start the session once the script's thread has run MS ms of
//                            CPU, from another thread (profiling is then turned on through
//                            the interrupt callback, inside the running script); CPU, not
//                            wall time: the same point of the script on a busy machine
//     --framepointers        walk native stacks with frame pointers (default: libunwind)
//     --no-memory-counter    no allocation counter
//     --stats                print sampling statistics and the script's run time (stderr)
//     --spin MS              before attaching, spin MS ms in C++ on the same thread (its
//                            samples show the cost of a sample without a JS context)
//
// Exit status: 0 success, 1 the script failed (message on stderr), 2 usage, 3 the profile
// could not be written.
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "base/profiler.h"
#include "full/full.h"
#include "full/script/script_stack.h"
#include "full/script/spidermonkey/embedding.h"
#include "full/script/spidermonkey/spidermonkey.h"

namespace {

namespace sm = strata::full::spidermonkey;

struct Options {
  std::string script;
  std::string output = "profile.json";
  double interval_ms = 1.0;
  sm::JitMode jit = sm::JitMode::kDefault;
  bool profile = true;
  double late_start_ms = -1;
  bool frame_pointers = false;
  bool memory_counter = true;
  bool stats = false;
  double spin_ms = 0;
};

// The usage text; on stdout with status 0 for --help, on stderr with status 2 for a usage
// error (docs/cli.md).
int Usage(bool asked = false) {
  std::fprintf(asked ? stdout : stderr,
               "usage: strata js [options] FILE.js\n"
               "  -o, --output PATH     profile to write (default: profile.json)\n"
               "  --interval MS         sampling interval in ms (default 1)\n"
               "  --jit MODE            default | nojit | interp | blinterp | baseline\n"
               "  --no-profile          run without profiling\n"
               "  --late-start MS       start the session after MS ms of the script's CPU\n"
               "  --framepointers       walk native stacks with frame pointers\n"
               "  --no-memory-counter   no allocation counter\n"
               "  --stats               print sampling statistics and the run time\n"
               "  --spin MS             spin MS ms in C++ before attaching (cost comparison)\n"
               "  -h, --help            this text\n"
               "Example: strata js script.js -o js-profile.json\n");
  return asked ? 0 : 2;
}

bool ParseArguments(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char** out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    const char* v = nullptr;
    if (arg == "-o" || arg == "--output") {
      if (!value(&v)) return false;
      options->output = v;
    } else if (arg == "--interval") {
      if (!value(&v)) return false;
      options->interval_ms = std::atof(v);
      if (options->interval_ms <= 0) return false;
    } else if (arg == "--jit") {
      if (!value(&v) || !sm::ParseJitMode(v, &options->jit)) return false;
    } else if (arg == "--no-profile") {
      options->profile = false;
    } else if (arg == "--late-start") {
      if (!value(&v)) return false;
      options->late_start_ms = std::atof(v);
    } else if (arg == "--framepointers") {
      options->frame_pointers = true;
    } else if (arg == "--no-memory-counter") {
      options->memory_counter = false;
    } else if (arg == "--stats") {
      options->stats = true;
    } else if (arg == "--spin") {
      if (!value(&v)) return false;
      options->spin_ms = std::atof(v);
    } else if (!arg.empty() && arg[0] == '-') {
      return false;
    } else if (options->script.empty()) {
      options->script = arg;
    } else {
      return false;
    }
  }
  return !options->script.empty();
}

void StartSession(const Options& options) {
  strata::ProfilerSettings session;
  session.interval_ms = options.interval_ms;
  if (options.frame_pointers) session.features |= strata::kFeatureFramePointers;
  strata::full::FullSettings full;
  full.memory_counter = options.memory_counter;
  strata::full::StartFull(session, full);
}

// The script's run, a native frame of its own under which the JS frames appear.
__attribute__((noinline)) bool RunScriptFile(sm::ScriptContext& context, const std::string& path,
                                             std::string* error) {
  return context.EvaluateFile(path, error);
}

// A clock's reading, in ms.
double ClockMs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// The calling thread's CPU time (the sampling handler's time included), in ms.
double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// C++ work on the JS thread, a few frames deep, for --spin.
__attribute__((noinline)) double SpinLeaf(double x) {
  for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 0.5;
  return x;
}
__attribute__((noinline)) double Spin(double ms) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
  double x = 0;
  while (std::chrono::steady_clock::now() < end) x = SpinLeaf(x);
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") return Usage(true);
  }
  if (!ParseArguments(argc, argv, &options)) return Usage();

  std::string error;
  if (!sm::InitEngine(options.jit, &error)) {
    std::fprintf(stderr, "strata js: %s\n", error.c_str());
    return 1;
  }
  int status = 0;
  {
    std::unique_ptr<sm::ScriptContext> context = sm::ScriptContext::Create(options.jit, &error);
    if (!context) {
      std::fprintf(stderr, "strata js: %s\n", error.c_str());
      return 1;
    }
    JSContext* cx = context->context();
    if (options.profile && options.late_start_ms < 0) StartSession(options);
    if (options.spin_ms > 0) {
      volatile double sink = Spin(options.spin_ms);
      (void)sink;
    }
    if (options.profile && !sm::AttachJSContext(cx)) {
      std::fprintf(stderr, "strata js: cannot attach the JS context to the profiler\n");
      return 1;
    }
    if (!sm::DefineStrataObject(cx, context->global())) {
      std::fprintf(stderr, "strata js: cannot define the Strata object\n");
      return 1;
    }
    std::thread late_start;
    std::atomic<bool> script_done{false};
    if (options.profile && options.late_start_ms >= 0) {
      // The script's progress, not the wall clock: on a busy machine 300 ms of wall time may
      // be 100 ms of the script's CPU, still inside the JIT's warm-up.
      clockid_t script_clock;
      if (pthread_getcpuclockid(pthread_self(), &script_clock) != 0) {
        script_clock = CLOCK_MONOTONIC;
      }
      const double script_start_ms = ClockMs(script_clock);
      late_start = std::thread([&options, &script_done, script_clock, script_start_ms] {
        while (!script_done.load() &&
               ClockMs(script_clock) - script_start_ms < options.late_start_ms) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (!script_done.load()) StartSession(options);
      });
    }

    const auto start = std::chrono::steady_clock::now();
    const double start_cpu_ms = ThreadCpuMs();
    const bool ok = RunScriptFile(*context, options.script, &error);
    const double run_cpu_ms = ThreadCpuMs() - start_cpu_ms;
    const double run_ms = std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - start)
                              .count();
    script_done.store(true);
    if (late_start.joinable()) late_start.join();
    if (!ok) {
      std::fprintf(stderr, "strata js: %s\n", error.c_str());
      status = 1;
    }
    if (options.stats) {
      std::fprintf(stderr, "strata js: script ran %.1f ms, %.1f ms of thread CPU (jit %s, %s)\n",
                   run_ms, run_cpu_ms, sm::JitModeName(options.jit),
                   options.profile ? "profiled" : "not profiled");
    }
    if (options.profile) {
      const sm::ThreadStats stats = sm::ReadThreadStats(cx);
      if (options.stats) {
        std::fprintf(stderr,
                     "strata js: %llu samples of the JS thread, %llu with JS frames (%.1f%%), "
                     "%.2f frames per sample, %llu dropped, %llu cached native walks, %llu resumed from "
                     "the cache, %llu from a stack scan, %llu cut; per "
                     "sample %.2f us median, %.2f us p90, %.2f us mean, %.1f us max; profiling "
                     "turned on %llu time(s), off %llu\n",
                     static_cast<unsigned long long>(stats.samples),
                     static_cast<unsigned long long>(stats.samples_with_js),
                     stats.samples ? 100.0 * static_cast<double>(stats.samples_with_js) /
                                         static_cast<double>(stats.samples)
                                   : 0.0,
                     stats.samples ? static_cast<double>(stats.script_frames) /
                                         static_cast<double>(stats.samples)
                                   : 0.0,
                     static_cast<unsigned long long>(stats.dropped_frames),
                     static_cast<unsigned long long>(stats.cached_walks),
                     static_cast<unsigned long long>(stats.cache_resumes),
                     static_cast<unsigned long long>(stats.scan_resumes),
                     static_cast<unsigned long long>(stats.cut_walks),
                     stats.median_sample_us, stats.p90_sample_us, stats.mean_sample_us,
                     stats.max_sample_us, static_cast<unsigned long long>(stats.enable_count),
                     static_cast<unsigned long long>(stats.disable_count));
      }
      if (options.stats) {
        const strata::full::script::OrdinarySampleStats ordinary =
            strata::full::script::ReadOrdinarySampleStats();
        std::fprintf(stderr,
                     "strata js: %llu samples without a JS context, per sample %.2f us median, "
                     "%.2f us p90, %.2f us mean\n",
                     static_cast<unsigned long long>(ordinary.samples), ordinary.median_sample_us,
                     ordinary.p90_sample_us, ordinary.mean_sample_us);
      }
      sm::DetachJSContext(cx);
      std::string save_error;
      if (!strata::ProfilerSaveProfile(options.output, &save_error)) {
        std::fprintf(stderr, "strata js: cannot write %s: %s\n", options.output.c_str(),
                     save_error.c_str());
        status = status ? status : 3;
      } else if (options.stats) {
        std::fprintf(stderr, "strata js: profile written to %s\n", options.output.c_str());
      }
      strata::full::ShutdownFull();
      strata::ProfilerStop();
    }
  }
  sm::ShutdownEngine();
  return status;
}
