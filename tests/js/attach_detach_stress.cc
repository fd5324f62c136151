// attach_detach_stress: attaches and detaches SpiderMonkey contexts while sampling runs at a
// high rate (precise timers: a signal every --interval ms of wall-clock time, landing in the
// middle of attach, detach, context creation and destruction), and while another thread
// stops and restarts the session (so profiling is switched on and off through the interrupt
// callback, inside running scripts).
//
//   attach_detach_stress [--cycles N] [--interval MS] [--profile PATH]
//
// Two phases of N cycles each on the main thread:
//   1. a new context per cycle: create, attach, run a script (~10 ms), detach, destroy;
//   2. one context, attached and detached N times, a script run attached and another detached
//      in each cycle.
// Prints "attach_detach_stress: ok ..." with the counts, and writes a last profile (one more
// attached run in a fresh session) to --profile. Exit status 0 unless something failed.
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
#include "full/script/spidermonkey/embedding.h"
#include "full/script/spidermonkey/spidermonkey.h"

namespace {

namespace sm = strata::full::spidermonkey;

const char kScript[] = R"(
function b(n) { let s = 0; for (let i = 0; i < n; i++) s += i % 7; return s; }
function a() { return b(20000) + 1; }
var garbage = [];
function run(ms) {
  const end = Date.now() + ms;
  let t = 0;
  while (Date.now() < end) {
    t += a();
    garbage.push({ t: t, s: "x" + t });
    if (garbage.length > 5000) garbage = [];
  }
  return t;
}
)";

strata::ProfilerSettings Settings(double interval_ms) {
  strata::ProfilerSettings settings;
  settings.interval_ms = interval_ms;
  settings.features |= strata::kFeaturePrecise;
  return settings;
}

strata::full::FullSettings Full() {
  strata::full::FullSettings full;
  full.unregistered_threads = false;
  return full;
}

struct Totals {
  uint64_t samples = 0;
  uint64_t samples_with_js = 0;
  uint64_t enables = 0;
  uint64_t disables = 0;
  uint64_t cache_resumes = 0;
  uint64_t scan_resumes = 0;
  uint64_t cut_walks = 0;
  double max_sample_us = 0;
};

void Add(Totals* totals, const sm::ThreadStats& s) {
  totals->samples += s.samples;
  totals->samples_with_js += s.samples_with_js;
  totals->enables += s.enable_count;
  totals->disables += s.disable_count;
  totals->cache_resumes += s.cache_resumes;
  totals->scan_resumes += s.scan_resumes;
  totals->cut_walks += s.cut_walks;
  if (s.max_sample_us > totals->max_sample_us) totals->max_sample_us = s.max_sample_us;
}

bool Run(sm::ScriptContext& context, int ms, std::string* error) {
  return context.Evaluate("run(" + std::to_string(ms) + ");", "stress-call.js", error);
}

}  // namespace

int main(int argc, char** argv) {
  int cycles = 100;
  double interval_ms = 0.5;
  std::string profile_path;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--cycles") && i + 1 < argc) {
      cycles = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--interval") && i + 1 < argc) {
      interval_ms = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--profile") && i + 1 < argc) {
      profile_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: attach_detach_stress [--cycles N] [--interval MS] [--profile PATH]\n");
      return 2;
    }
  }
  std::string error;
  if (!sm::InitEngine(sm::JitMode::kDefault, &error)) {
    std::fprintf(stderr, "attach_detach_stress: %s\n", error.c_str());
    return 1;
  }
  strata::full::StartFull(Settings(interval_ms), Full());

  // Stops and restarts the session every ~25 ms meanwhile.
  std::atomic<bool> stop{false};
  std::atomic<int> restarts{0};
  std::thread toggler([&] {
    while (!stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (stop.load()) break;
      strata::full::StopFull();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      strata::full::StartFull(Settings(interval_ms), Full());
      restarts.fetch_add(1);
    }
  });

  Totals totals;
  int failures = 0;
  // Phase 1: a new context per cycle.
  for (int i = 0; i < cycles; ++i) {
    std::unique_ptr<sm::ScriptContext> context = sm::ScriptContext::Create(sm::JitMode::kDefault, &error);
    if (!context) {
      std::fprintf(stderr, "attach_detach_stress: %s\n", error.c_str());
      return 1;
    }
    if (!sm::AttachJSContext(context->context())) ++failures;
    if (!context->Evaluate(kScript, "stress.js", &error) || !Run(*context, 10, &error)) {
      std::fprintf(stderr, "attach_detach_stress: phase 1: %s\n", error.c_str());
      ++failures;
    }
    Add(&totals, sm::ReadThreadStats(context->context()));
    if (!sm::DetachJSContext(context->context())) ++failures;
  }
  // Phase 2: one context, attached and detached again and again.
  {
    std::unique_ptr<sm::ScriptContext> context = sm::ScriptContext::Create(sm::JitMode::kDefault, &error);
    if (!context || !context->Evaluate(kScript, "stress.js", &error)) {
      std::fprintf(stderr, "attach_detach_stress: %s\n", error.c_str());
      return 1;
    }
    for (int i = 0; i < cycles; ++i) {
      if (!sm::AttachJSContext(context->context())) ++failures;
      if (!Run(*context, 8, &error)) {
        std::fprintf(stderr, "attach_detach_stress: phase 2: %s\n", error.c_str());
        ++failures;
      }
      Add(&totals, sm::ReadThreadStats(context->context()));
      if (!sm::DetachJSContext(context->context())) ++failures;
      if (!Run(*context, 2, &error)) ++failures;  // Detached: the engine runs on, unprofiled.
    }
  }
  stop.store(true);
  toggler.join();

  // A last attached run in a session of its own, saved for the checks.
  if (!profile_path.empty()) {
    strata::full::StopFull();
    strata::ProfilerSettings settings;  // CPU-time sampling, 1 ms.
    strata::full::StartFull(settings, Full());
    std::unique_ptr<sm::ScriptContext> context = sm::ScriptContext::Create(sm::JitMode::kDefault, &error);
    if (!context || !sm::AttachJSContext(context->context()) ||
        !sm::DefineStrataObject(context->context(), context->global()) ||
        !context->Evaluate(kScript, "stress.js", &error) ||
        !context->Evaluate("Strata.markerStart('run'); run(1000); Strata.markerEnd('run');",
                           "stress-last.js", &error)) {
      std::fprintf(stderr, "attach_detach_stress: last run: %s\n", error.c_str());
      ++failures;
    }
    if (context) sm::DetachJSContext(context->context());
    if (!strata::ProfilerSaveProfile(profile_path, &error)) {
      std::fprintf(stderr, "attach_detach_stress: cannot save %s: %s\n", profile_path.c_str(),
                   error.c_str());
      ++failures;
    }
  }
  strata::full::ShutdownFull();
  strata::ProfilerStop();
  sm::ShutdownEngine();

  std::printf("attach_detach_stress: %s cycles=%d session_restarts=%d samples=%llu "
              "samples_with_js=%llu enables=%llu disables=%llu max_sample_us=%.1f cache_resumes=%llu scan_resumes=%llu cut_walks=%llu "
              "failures=%d\n",
              failures ? "FAILED" : "ok", 2 * cycles, restarts.load(),
              static_cast<unsigned long long>(totals.samples),
              static_cast<unsigned long long>(totals.samples_with_js),
              static_cast<unsigned long long>(totals.enables),
              static_cast<unsigned long long>(totals.disables), totals.max_sample_us,
              static_cast<unsigned long long>(totals.cache_resumes),
              static_cast<unsigned long long>(totals.scan_resumes),
              static_cast<unsigned long long>(totals.cut_walks), failures);
  return failures ? 1 : 0;
}
