// System V signal calls over every signal, as old code bases make them at start-up: sigset
// (SIG_DFL, then SIG_HOLD and back), sighold/sigrelse, and sigignore of every real-time
// signal; then 0.4 s of CPU in spin_after_sysv_calls. No Strata include, no Strata call.
// glibc implements these with its internal sigaction/sigprocmask, which no wrapper of
// sigaction sees: before issue 33 the sampling signal's disposition became SIG_DFL and the
// next sample killed the program (8 of 8 runs), and sigignore() stopped sampling for good.
// Prints "sysv_signals: calls=N" and exits 0.
#define _GNU_SOURCE 1
#include <signal.h>
#include <time.h>

#include <cstdio>

namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline, noipa)) unsigned long spin_after_sysv_calls(double seconds) {
  const double end = ThreadCpuSeconds() + seconds;
  unsigned long sum = 0;
  while (ThreadCpuSeconds() < end) {
    for (int i = 0; i < 10000; ++i) sum += static_cast<unsigned long>(i) * i;
  }
  return sum;
}

}  // namespace

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

int main() {
  int calls = 0;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    if (sigset(sig, SIG_DFL) != SIG_ERR) ++calls;
    if (sigset(sig, SIG_HOLD) != SIG_ERR) ++calls;
    if (sigset(sig, SIG_DFL) != SIG_ERR) ++calls;
    if (sighold(sig) == 0) ++calls;
    if (sigrelse(sig) == 0) ++calls;
  }
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) {
    if (sigignore(sig) == 0) ++calls;
  }
  const unsigned long sum = spin_after_sysv_calls(0.4);
  std::printf("sysv_signals: calls=%d%s\n", calls, sum == 1 ? "!" : "");
  return 0;
}
