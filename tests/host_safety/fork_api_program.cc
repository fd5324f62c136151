// A program that forks (without exec) while its threads use the profiler's public API, and
// whose children call that API before _exit (issue 16, "fork"; tests/host_safety/fork_test.sh).
//
//   fork_api_program DIR [CHILDREN [--child-without-thread]]
//
// In the parent, for the whole run: two threads record markers, labels and counter values in
// a loop, one saves the profile to DIR/parent.json in a loop (ProfilerSaveProfile: the session
// lock is held most of the time), one creates and joins short threads (thread registration).
// The main thread forks CHILDREN children (default 200), one after the other without waiting.
// Each child calls the public API: ProfilerSaveProfile(DIR/child-<i>.json) (must return
// false: the profiler is off in a fork()ed child), ProfilerGetProfile (must be ""), markers,
// labels, counters (including one made and destroyed in the child), thread registration,
// renaming, a thread of its own, settings, pause/resume, start/stop/shutdown; then _exit(0),
// or _exit(10 + what went wrong).
//
// The parent then waits for every child, at most 60 s in all after the last fork (a hang
// detector: the children do a few milliseconds of work each), kills those still running and
// prints one line:
//   fork_api: children=N exited=E hung=H wrong_status=W
// Exit status 0 when every child exited in time with status 0, else 1. The output does not
// depend on whether the profiler runs (same with and without LD_PRELOAD/STRATA_STARTUP).
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/counters.h"
#include "base/labels.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "tests/host_safety/fork_children.h"

namespace {

using fork_children::SleepMilliseconds;

std::atomic<bool> g_stop{false};
strata::ProfilerCounter g_operations("fork_api operations", "Other", "Operations of the recorders");
std::string g_dir;
bool g_child_thread = true;  // --child-without-thread: false (TSan cannot start threads in
                             // the child of a multi-threaded fork).

void RecordSome(int i) {
  STRATA_LABEL("fork_api record", kOther);
  STRATA_MARKER_UNTYPED("fork_api marker", kOther);
  STRATA_MARKER_TEXT("fork_api text", kOther, strata::MarkerOptions(),
                     i % 2 ? "odd" : "even");
  strata::AddMarker(strata::ProfilerString::Dynamic(i % 2 ? "dynamic odd" : "dynamic even"),
                    strata::Category::kOther);
  g_operations.Add(1);
}

void* Recorder(void*) {
  for (int i = 0; !g_stop.load(std::memory_order_relaxed); ++i) RecordSome(i);
  return nullptr;
}

void* Saver(void*) {
  const std::string path = g_dir + "/parent.json";
  while (!g_stop.load(std::memory_order_relaxed)) {
    (void)strata::ProfilerSaveProfile(path);
    SleepMilliseconds(1);
  }
  return nullptr;
}

void* ShortThread(void*) {
  RecordSome(0);
  return nullptr;
}

void* Churner(void*) {
  while (!g_stop.load(std::memory_order_relaxed)) {
    pthread_t t;
    if (pthread_create(&t, nullptr, &ShortThread, nullptr) == 0) pthread_join(t, nullptr);
  }
  return nullptr;
}

// The child's use of the API. Returns a bit set of what went wrong (0: nothing).
int RunChild(int index) {
  int wrong = 0;
  std::string error;
  const std::string path = g_dir + "/child-" + std::to_string(index) + ".json";
  if (strata::ProfilerSaveProfile(path, &error)) wrong |= 1;
  if (!strata::ProfilerGetProfile().empty()) wrong |= 2;
  RecordSome(index);
  {
    strata::ProfilerCounter local("fork_api child counter", "Other", "Made in the child");
    local.Add(1);
  }
  strata::ProfilerRegisterThread("fork_api child");
  (void)strata::ProfilerIsThreadRegistered();
  strata::ProfilerUnregisterThread();
  pthread_setname_np(pthread_self(), "fk-child");
  if (g_child_thread) {
    pthread_t t;
    if (pthread_create(&t, nullptr, &ShortThread, nullptr) == 0) pthread_join(t, nullptr);
  }
  (void)strata::ProfilerCurrentSettings();
  strata::ProfilerPause();
  strata::ProfilerResume();
  strata::ProfilerSettings settings;
  settings.buffer_megabytes = 1;
  strata::ProfilerStart(settings);
  if (strata::ProfilerIsActive()) wrong |= 4;
  if (strata::ProfilerSaveProfile(path, &error)) wrong |= 1;
  strata::ProfilerStop();
  strata::ProfilerShutdown();
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR [CHILDREN [--child-without-thread]]\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  const int children = argc > 2 ? atoi(argv[2]) : 200;
  g_child_thread = !(argc > 3 && std::string(argv[3]) == "--child-without-thread");

  pthread_t threads[4];
  void* (*routines[4])(void*) = {&Recorder, &Recorder, &Saver, &Churner};
  for (int i = 0; i < 4; ++i) pthread_create(&threads[i], nullptr, routines[i], nullptr);
  SleepMilliseconds(50);

  std::vector<pid_t> pids;
  for (int i = 0; i < children; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int wrong = RunChild(i);
      _exit(wrong == 0 ? 0 : 10 + wrong);
    }
    if (pid > 0) pids.push_back(pid);
    SleepMilliseconds(2);  // Let the parent's threads move on between forks.
  }

  const fork_children::Outcome outcome = fork_children::ReapChildren(pids, "fork_api", 60);
  const int exited = outcome.exited, wrong_status = outcome.wrong_status, hung = outcome.hung;

  g_stop.store(true);
  for (pthread_t t : threads) pthread_join(t, nullptr);
  printf("fork_api: children=%d exited=%d hung=%d wrong_status=%d\n", children, exited, hung,
         wrong_status);
  return hung == 0 && wrong_status == 0 && static_cast<int>(pids.size()) == children ? 0 : 1;
}
