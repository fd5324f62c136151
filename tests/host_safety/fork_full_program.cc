// The full tier's public API in fork()ed children (issue 16, "fork"; fork_full_test.sh).
//
//   fork_full_program [CHILDREN]
//
// The parent starts the full tier (StartFull: a session, allocation hooks, IPC parent),
// then its threads keep the full tier's locks busy: one saves the profile to /dev/null in a
// loop (session lock, full tier's capture hooks), one makes and destroys performance groups
// and takes monitor snapshots (monitor registry lock), one reads the IPC status and
// FullIsInCharge (IPC and full-tier locks), one records markers. The main thread forks
// CHILDREN children (default 100); each calls the full tier's API: StartFull (nothing may
// start), FullIsInCharge (false), StopFull, ShutdownFull, strata_full_start (-1),
// StartIpcParent (false), IpcChildEnvironmentEntry (""), GetIpcStatus (empty),
// SpawnProfiledChild of /bin/true, the monitor (groups, stopwatches, a snapshot: it keeps
// working), ProfilerSaveProfile (false); then _exit(0), or 10 + what went wrong.
// The parent waits for every child (at most 60 s in all after the last fork), kills those
// still running and prints:
//   fork_full: children=N exited=E hung=H wrong_status=W
// Exit status 0 when every child exited in time with status 0.
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

#include "base/markers.h"
#include "base/profiler.h"
#include "full/full.h"
#include "full/multiprocess.h"
#include "full/perfmon/perfmon.h"
#include "tests/host_safety/fork_children.h"

namespace {

using fork_children::SleepMilliseconds;

std::atomic<bool> g_stop{false};

void* Saver(void*) {
  while (!g_stop.load()) {
    (void)strata::ProfilerSaveProfile("/dev/null");
    SleepMilliseconds(1);
  }
  return nullptr;
}

void* Monitor(void*) {
  while (!g_stop.load()) {
    strata::perfmon::PerformanceGroup group("fork_full group");
    { strata::perfmon::AutoStopwatch watch({&group}); }
    strata::perfmon::IterationDone();
    (void)strata::perfmon::TakeSnapshot();
  }
  return nullptr;
}

void* StatusReader(void*) {
  while (!g_stop.load()) {
    (void)strata::full::GetIpcStatus();
    (void)strata::full::FullIsInCharge();
    (void)strata::full::IpcChildEnvironmentEntry();
  }
  return nullptr;
}

void* Recorder(void*) {
  while (!g_stop.load()) STRATA_MARKER_UNTYPED("fork_full marker", kOther);
  return nullptr;
}

int RunChild() {
  int wrong = 0;
  const strata::full::StartReport report = strata::full::StartFull();
  if (report.took_over_base_session || strata::ProfilerIsActive()) wrong |= 1;
  if (strata::full::FullIsInCharge()) wrong |= 2;
  strata::full::StopFull();
  if (strata_full_start() != -1) wrong |= 4;
  std::string error;
  if (strata::full::StartIpcParent(strata::full::IpcSettings(), &error)) wrong |= 8;
  if (!strata::full::IpcChildEnvironmentEntry().empty()) wrong |= 16;
  const strata::full::IpcStatus status = strata::full::GetIpcStatus();
  if (status.parent || status.child) wrong |= 32;
  pid_t pid;
  char* const argv[] = {const_cast<char*>("true"), nullptr};
  if (strata::full::SpawnProfiledChild(&pid, "/bin/true", argv) == 0) waitpid(pid, nullptr, 0);
  {
    strata::perfmon::PerformanceGroup group("fork_full child group");
    { strata::perfmon::AutoStopwatch watch({&group}); }
    strata::perfmon::IterationDone();
    if (strata::perfmon::TakeSnapshot().groups.empty()) wrong |= 64;
  }
  strata_full_add_text_marker("child", "text");
  if (strata::ProfilerSaveProfile("/dev/null", &error)) wrong |= 128;
  strata::full::ShutdownFull();
  strata_full_shutdown();
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const int children = argc > 1 ? atoi(argv[1]) : 100;
  strata::ProfilerSettings settings;
  settings.buffer_megabytes = 4;
  (void)strata::full::StartFull(settings);
  std::string error;
  (void)strata::full::StartIpcParent(strata::full::IpcSettings(), &error);

  pthread_t threads[4];
  void* (*routines[4])(void*) = {&Saver, &Monitor, &StatusReader, &Recorder};
  for (int i = 0; i < 4; ++i) pthread_create(&threads[i], nullptr, routines[i], nullptr);
  SleepMilliseconds(50);

  std::vector<pid_t> pids;
  for (int i = 0; i < children; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int wrong = RunChild();
      _exit(wrong == 0 ? 0 : 10 + wrong);
    }
    if (pid > 0) pids.push_back(pid);
    SleepMilliseconds(2);
  }

  const fork_children::Outcome outcome = fork_children::ReapChildren(pids, "fork_full", 60);
  const int exited = outcome.exited, wrong_status = outcome.wrong_status, hung = outcome.hung;
  g_stop.store(true);
  for (pthread_t t : threads) pthread_join(t, nullptr);
  strata::full::ShutdownFull();
  printf("fork_full: children=%d exited=%d hung=%d wrong_status=%d\n", children, exited, hung,
         wrong_status);
  return hung == 0 && wrong_status == 0 && static_cast<int>(pids.size()) == children ? 0 : 1;
}
