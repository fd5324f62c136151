// A small server that runs until it is killed, for the control-signal scenario
// (tests/daemon/daemon_test.sh). No Strata includes: it is profiled only by preloading.
//
// It reads one command per line on stdin and answers on stdout:
//   phase NAME      the worker thread switches to NAME's work (before, idle, beta, gamma,
//                   delta, epsilon, zeta); answers "ok NAME" once the worker runs it
//   wait NAME N     answers "NAME reached N" once the current phase NAME did N units of work
//   forks start     a thread forks children one after another, each calling exit(0) at once
//                   (its exit handlers run, as a pre-forked worker's would); answers "forking"
//   forks stop      stops it; answers "forks: N children, M hung" (M: children that did not
//                   end by themselves, killed by their alarm(10))
// SIGTERM ends it: "server: SIGTERM after K commands" and exit status 3. With --own-usr2 it
// installs its own SIGUSR2 handler first, which writes "server: SIGUSR2" for each.
// Built once more as server_full (SERVER_STARTS_FULL), the only Strata-aware variant: it
// starts the full tier at the top of main (strata_full_start: a session of the full tier).
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#ifdef SERVER_STARTS_FULL
#include "full/full.h"
#endif

namespace {

std::atomic<int> g_wanted_phase{0};
std::atomic<int> g_running_phase{-1};
std::atomic<long> g_units{0};  // Units of the running phase.
volatile sig_atomic_t g_terminate = 0;
volatile unsigned long g_sink = 0;

const char* const kPhases[] = {"before", "idle", "beta", "gamma", "delta", "epsilon", "zeta"};
constexpr int kPhaseCount = sizeof(kPhases) / sizeof(kPhases[0]);

// About a millisecond of arithmetic, in a function of the phase's own.
#define PHASE_WORK(Name)                                                       \
  __attribute__((noinline)) void Name() {                                     \
    unsigned long x = g_sink;                                                  \
    for (int i = 0; i < 400000; ++i) x = x * 2862933555777941757UL + 3037000493UL; \
    g_sink = x;                                                                \
  }
PHASE_WORK(PhaseBefore)
PHASE_WORK(PhaseBeta)
PHASE_WORK(PhaseGamma)
PHASE_WORK(PhaseDelta)
PHASE_WORK(PhaseEpsilon)
PHASE_WORK(PhaseZeta)

__attribute__((noinline)) void PhaseIdle() {
  timespec pause{0, 1000000};
  nanosleep(&pause, nullptr);
}

void (*const kWork[])() = {PhaseBefore, PhaseIdle,    PhaseBeta, PhaseGamma,
                           PhaseDelta,  PhaseEpsilon, PhaseZeta};

void* Worker(void*) {
  pthread_setname_np(pthread_self(), "worker");
  for (;;) {
    const int phase = g_wanted_phase.load();
    if (phase != g_running_phase.load()) {
      g_units.store(0);
      g_running_phase.store(phase);
    }
    kWork[phase]();
    g_units.fetch_add(1);
  }
  return nullptr;
}

std::atomic<bool> g_forking{false};
std::atomic<long> g_forked{0};
std::atomic<long> g_hung{0};
pthread_t g_forker;

void* Forker(void*) {
  pthread_setname_np(pthread_self(), "forker");
  while (g_forking.load()) {
    const pid_t child = fork();
    if (child == 0) {
      alarm(10);  // A child stuck in its exit handlers is ended by SIGALRM, and counted.
      exit(0);
    }
    if (child < 0) continue;
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    g_forked.fetch_add(1);
    if (!WIFEXITED(status)) {
      g_hung.fetch_add(1);
      if (WIFSIGNALED(status)) fprintf(stderr, "child %d: signal %d\n", child, WTERMSIG(status));
    }
  }
  return nullptr;
}

void Say(const std::string& line) {
  const std::string text = line + "\n";
  (void)!write(STDOUT_FILENO, text.data(), text.size());
}

void OnTerm(int) { g_terminate = 1; }

void OnUsr2(int) {
  static const char kText[] = "server: SIGUSR2\n";
  (void)!write(STDOUT_FILENO, kText, sizeof(kText) - 1);
}

int PhaseIndex(const std::string& name) {
  for (int i = 0; i < kPhaseCount; ++i) {
    if (name == kPhases[i]) return i;
  }
  return -1;
}

void Pause() {
  timespec pause{0, 2000000};
  nanosleep(&pause, nullptr);
}

void Serve(const std::string& command) {
  char name[32] = {0};
  long count = 0;
  if (sscanf(command.c_str(), "phase %31s", name) == 1 && PhaseIndex(name) >= 0) {
    const int phase = PhaseIndex(name);
    g_wanted_phase.store(phase);
    while (g_running_phase.load() != phase && !g_terminate) Pause();
    Say(std::string("ok ") + name);
  } else if (sscanf(command.c_str(), "wait %31s %ld", name, &count) == 2 &&
             PhaseIndex(name) >= 0) {
    while ((g_running_phase.load() != PhaseIndex(name) || g_units.load() < count) &&
           !g_terminate) {
      Pause();
    }
    Say(std::string(name) + " reached " + std::to_string(count));
  } else if (command == "forks start" && !g_forking.load()) {
    g_forking.store(true);
    pthread_create(&g_forker, nullptr, &Forker, nullptr);
    Say("forking");
  } else if (command == "forks stop" && g_forking.load()) {
    g_forking.store(false);
    pthread_join(g_forker, nullptr);
    Say("forks: " + std::to_string(g_forked.load()) + " children, " +
        std::to_string(g_hung.load()) + " hung");
  } else {
    Say("unknown command: " + command);
  }
}

}  // namespace

int main(int argc, char** argv) {
#ifdef SERVER_STARTS_FULL
  (void)strata_full_start();
#endif
  struct sigaction term;
  memset(&term, 0, sizeof(term));
  term.sa_handler = &OnTerm;  // No SA_RESTART: the blocking read returns EINTR.
  sigaction(SIGTERM, &term, nullptr);
  if (argc > 1 && strcmp(argv[1], "--own-usr2") == 0) {
    struct sigaction usr2;
    memset(&usr2, 0, sizeof(usr2));
    usr2.sa_handler = &OnUsr2;
    usr2.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &usr2, nullptr);
  }
  pthread_t worker;
  pthread_create(&worker, nullptr, &Worker, nullptr);
  std::string pending;
  long commands = 0;
  char buffer[256];
  while (!g_terminate) {
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer (this libtsan) runs an asynchronous signal's handler that lands in read()
    // only at the thread's next intercepted call: the TSan-built server alone, blocked here,
    // printed "server: SIGUSR2" only once its next command came (4 s and more later:
    // daemon_test gave up waiting for it, and for the sessions the control signal starts,
    // whose handler waits the same way). So under TSan the input is polled every 20 ms first,
    // each return an intercepted call that runs the handlers due (docs/reliability.md,
    // "Sanitizers", sixth round). Other builds: read() blocks, as before.
    struct pollfd input = {STDIN_FILENO, POLLIN, 0};
    if (poll(&input, 1, 20) <= 0) continue;
#endif
    const ssize_t n = read(STDIN_FILENO, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buffer, static_cast<size_t>(n));
    size_t newline;
    while (!g_terminate && (newline = pending.find('\n')) != std::string::npos) {
      Serve(pending.substr(0, newline));
      pending.erase(0, newline + 1);
      ++commands;
    }
  }
  if (g_terminate) {
    Say("server: SIGTERM after " + std::to_string(commands) + " commands");
    return 3;
  }
  Say("server: end of input");
  return 0;
}
