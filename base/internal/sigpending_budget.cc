#include "base/internal/sigpending_budget.h"

#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <string_view>

#include "base/internal/core.h"
#include "base/internal/log.h"
#include "base/markers.h"
#include "platform/never_destroyed.h"

namespace strata {
namespace base_internal {
namespace {

std::atomic<bool> g_logged{false};

// A text marker on the main thread's track (every profile has it), straight into the
// buffer: no registry lock, no staging.
void RecordNotSampledMarker(std::string_view text) {
  // Never destroyed: a function-local static with a destructor registers it with
  // __cxa_atexit at its first use, which allocates through the program's malloc, and the first
  // use is a new thread's registration, on the program's thread.
  static NeverDestroyed<ProfilerString> kName(ProfilerString::Literal("Thread not sampled"));
  MarkerHeaderRef header;
  header.thread = MainThreadId();
  header.phase = MarkerPhase::kInstant;
  header.start = TimeStamp::Now();
  header.name = &kName.get();
  header.category = static_cast<uint8_t>(Category::kProfiler);
  header.payload_tag = kTextMarkerTag;
  SessionBuffer().PutObjects(EntryKind::kMarker, header, text);
}

}  // namespace

bool SigpendingBudgetAllowsTimerFor(ThreadId thread, const char* thread_name,
                                    int live_timers) {
  rlimit limit{};
  if (getrlimit(RLIMIT_SIGPENDING, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return true;
  const unsigned long long budget = limit.rlim_cur / kSigpendingShareDivisor;
  if (static_cast<unsigned long long>(live_timers) + 1 <= budget) return true;
  char text[256];
  snprintf(text, sizeof(text),
           "thread %d '%s': RLIMIT_SIGPENDING is %llu and Strata keeps its sampling timers to "
           "1/%u of it (%llu), leaving the rest to the program",
           thread.ToNumber(), thread_name, static_cast<unsigned long long>(limit.rlim_cur),
           kSigpendingShareDivisor, budget);
  if (!g_logged.exchange(true)) {
    LogError("%s; threads beyond that are not sampled (a \"Thread not sampled\" marker each)",
             text);
  }
  RecordNotSampledMarker(text);
  return false;
}

}  // namespace base_internal
}  // namespace strata
