// A program for the flight recorder scenarios (tests/flight, issue 21): labelled work with
// markers, then an ending chosen on the command line. Linked with the base tier
// (//base:strata_base) for its labels and markers (and the profiler calls of --reference and
// --end stop): run plain it behaves the same (the markers and labels then record nothing).
//
//   flight_program --end exit|segv|abort|kill|stop|stop-segv [--ms N] [--ready FILE] [--handler]
//                  [--reference FILE]
//
// Two threads (main, "flight-worker") each run steps of ~1 ms of their own CPU time under the
// label "Crunch" until N ms (default 2000) of that thread's CPU, with an interval marker
// "Step" per step. Then:
//   exit   returns 0 (the control run: a normal save at exit);
//   segv   writes through a null pointer (SIGSEGV);
//   abort  calls abort() (SIGABRT);
//   stop   calls ProfilerStop() (a clean end of the session, nothing saved), then _exit(0)
//          (which removes the flight recorder file: the process did not crash, issue 33);
//   stop-segv  calls ProfilerStop(), then writes through a null pointer (a crash after a
//          clean end: the file is kept, marked as cleanly ended);
//   kill   once both threads have done their N ms, writes FILE (--ready) and goes on with
//          steps until it is killed from outside.
// --reference FILE: after the N ms, saves the profile there (ProfilerSaveProfile, the one
// profiler call: a normal save at that moment, for the scenario to compare the recovered
// profile with), then runs 300 ms more of steps on both threads before the ending.
// --handler installs SIGSEGV and SIGABRT handlers that print "flight_program: handler for
// signal N" and re-raise with the default action (the program's own crash handling, which
// the profiler must leave as it is).
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "base/labels.h"
#include "base/markers.h"
#include "base/profiler.h"

namespace {

// Written by every working thread: atomic, no data race (TSan reported the plain volatile).
std::atomic<uint64_t> g_sink{0};
const char* reference = nullptr;
double g_ms = 2000;
// Steps done (Step markers recorded) per thread, printed with "work done": what a recovered
// profile is checked against, not a count assumed from the CPU time (a step takes at least
// 1 ms of CPU; a CPU clock that jumps while the thread is preempted makes fewer).
thread_local uint64_t t_steps = 0;
std::atomic<uint64_t> g_main_steps{0}, g_worker_steps{0};

double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noipa)) uint64_t flight_mix(uint64_t x) {
  for (int i = 0; i < 64; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    x ^= x >> 29;
  }
  return x;
}

__attribute__((noinline)) void flight_step() {
  STRATA_LABEL("Crunch", kOther);
  const strata::TimeStamp start = strata::TimeStamp::Now();
  uint64_t x = 11;
  // 1 ms of CPU: short steps, so that the step in progress at a crash (its marker is
  // recorded at its end) spans little wall time even on a loaded machine.
  const double end = ThreadCpuMs() + 1;
  while (ThreadCpuMs() < end) {
    for (int i = 0; i < 40; ++i) x = flight_mix(x);
  }
  g_sink.store(x, std::memory_order_relaxed);
  STRATA_MARKER_UNTYPED("Step", kOther, strata::MarkerOptions::Interval(start, strata::TimeStamp::Now()));
  ++t_steps;
}

// Steps until `ms` of this thread's CPU (forever when ms < 0).
void Work(double ms) {
  const double end = ThreadCpuMs() + ms;
  while (ms < 0 || ThreadCpuMs() < end) flight_step();
}

// The voluntary context switches of the thread named StrataSampler (-1: none, run plain).
long SamplerVoluntarySwitches() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  long switches = -1;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const std::string task = std::string("/proc/self/task/") + entry->d_name;
    char comm[32] = {};
    FILE* f = fopen((task + "/comm").c_str(), "r");
    if (f == nullptr) continue;
    const bool is_sampler = fgets(comm, sizeof(comm), f) && !strcmp(comm, "StrataSampler\n");
    fclose(f);
    if (!is_sampler || (f = fopen((task + "/status").c_str(), "r")) == nullptr) continue;
    char line[256];
    while (fgets(line, sizeof(line), f)) {
      if (sscanf(line, "voluntary_ctxt_switches: %ld", &switches) == 1) break;
    }
    fclose(f);
  }
  closedir(dir);
  return switches;
}

// Before saying "ready" to be killed: waits (doing steps) until the sampler thread has gone to
// sleep 3 more times, so that a whole sampler loop ran after the steps counted so far and
// published them to the flight recorder file. The check's "at least the steps done by the
// ready file" then holds however long the loaded machine kept the sampler off a CPU, instead
// of trusting the parent's 200 ms. At most 60 s (a note then); nothing to wait for plain.
void WaitForSamplerLoops() {
  const long start = SamplerVoluntarySwitches();
  if (start < 0) return;
  const strata::TimeStamp t0 = strata::TimeStamp::Now();
  while (SamplerVoluntarySwitches() < start + 3) {
    if ((strata::TimeStamp::Now() - t0).ToMilliseconds() > 60000) {
      printf("flight_program: the sampler thread did not loop in 60 s\n");
      return;
    }
    flight_step();
  }
}

void OnFatalSignal(int signal_number) {
  char text[64];
  const int n = snprintf(text, sizeof(text), "flight_program: handler for signal %d\n", signal_number);
  (void)!write(STDERR_FILENO, text, n);
  signal(signal_number, SIG_DFL);
  raise(signal_number);
}

}  // namespace

int main(int argc, char** argv) {
  const char* end = "exit";
  const char* ready = nullptr;
  bool handler = false;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--end") && i + 1 < argc) {
      end = argv[++i];
    } else if (!strcmp(argv[i], "--ms") && i + 1 < argc) {
      g_ms = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--ready") && i + 1 < argc) {
      ready = argv[++i];
    } else if (!strcmp(argv[i], "--reference") && i + 1 < argc) {
      reference = argv[++i];
    } else if (!strcmp(argv[i], "--handler")) {
      handler = true;
    } else {
      fprintf(stderr, "usage: flight_program --end exit|segv|abort|kill|stop [--ms N] [--ready FILE] [--handler] "
                      "[--reference FILE]\n");
      return 2;
    }
  }
  if (handler) {
    signal(SIGSEGV, &OnFatalSignal);
    signal(SIGABRT, &OnFatalSignal);
  }
  const bool until_killed = !strcmp(end, "kill");
  static std::atomic<bool> worker_done{false};
  static std::atomic<bool> saved{false};
  std::thread worker([until_killed] {
    pthread_setname_np(pthread_self(), "flight-worker");
    Work(g_ms);
    g_worker_steps.store(t_steps);
    worker_done.store(true);
    if (until_killed) {
      Work(-1);
    } else if (reference) {
      while (!saved.load()) flight_step();
      Work(300);
    }
    g_worker_steps.store(t_steps);
  });
  Work(g_ms);
  if (until_killed || reference) {
    while (!worker_done.load()) flight_step();  // Both threads' N ms first.
  }
  if (reference) {
    std::string error;
    if (!strata::ProfilerSaveProfile(reference, &error)) {
      fprintf(stderr, "flight_program: reference not saved: %s\n", error.c_str());
    }
    saved.store(true);
    if (!until_killed) Work(300);
  }
  if (!until_killed) worker.join();
  g_main_steps.store(t_steps);
  // For kill: the worker goes on with steps; these are the ones it had done by then (all
  // done before the ready file, so before the kill).
  printf("flight_program: work done, ending by %s (pid %d, steps main=%llu worker=%llu)\n", end,
         static_cast<int>(getpid()), static_cast<unsigned long long>(g_main_steps.load()),
         static_cast<unsigned long long>(g_worker_steps.load()));
  fflush(stdout);
  if (until_killed) {
    WaitForSamplerLoops();
    if (ready) {
      const int fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) close(fd);
    }
    Work(-1);
  }
  if (worker.joinable()) worker.join();
  if (!strcmp(end, "segv")) {
    *static_cast<volatile int*>(nullptr) = 1;
  } else if (!strcmp(end, "abort")) {
    abort();
  } else if (!strcmp(end, "stop")) {
    strata::ProfilerStop();
    _exit(0);
  } else if (!strcmp(end, "stop-segv")) {
    strata::ProfilerStop();
    *static_cast<volatile int*>(nullptr) = 1;
  }
  return 0;
}
