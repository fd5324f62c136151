// SIGRTMAX (the default sampling signal) sent by another process while the program starts
// threads (issue 33): main blocks every signal before it creates any thread, a waiter thread
// reads SIGRTMAX with sigtimedwait, and main keeps creating threads that return at once while
// a forked sender queues kSignals instances to the process. Plain, every instance reaches the
// waiter (no thread ever has SIGRTMAX unblocked). Before the fix, a new thread took one
// between glibc's restoring its mask and Strata's setting its view of the mask: the program
// was killed by SIGRTMAX's default action (status 192; the torture matrix's sigwait runs,
// 1 in 5-8).
//
// The sender keeps at most kInFlight instances unread (the waiter acknowledges each through a
// pipe): Strata holds at most 64 at once (docs/host-contract.md, "Signals", capacity), and a
// waiter descheduled under load must not make the count depend on the machine.
//
// Prints "got=N sum=S" (what the waiter read) and "sender=STATUS"; status 0.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kSignals = 200, kInFlight = 16, kMaxThreads = 20000 };

static int g_acks[2];
static int g_got;
static long g_sum;

static void* Waiter(void* unused) {
  (void)unused;
  sigset_t wanted;
  sigemptyset(&wanted);
  sigaddset(&wanted, SIGRTMAX);
  const struct timespec limit = {30, 0};  // The program's own bound: 30 s without a signal.
  while (g_got < kSignals) {
    siginfo_t info;
    const int sig = sigtimedwait(&wanted, &info, &limit);
    if (sig < 0) {
      if (errno == EINTR) continue;
      break;
    }
    ++g_got;
    g_sum += info.si_value.sival_int;
    const char ack = 1;
    if (write(g_acks[1], &ack, 1) != 1) break;
  }
  return NULL;
}

static void* Nothing(void* unused) { return unused; }

int main(void) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  if (pipe(g_acks) != 0) return 2;
  pthread_t waiter;
  if (pthread_create(&waiter, NULL, Waiter, NULL) != 0) return 2;
  const pid_t parent = getpid();
  const pid_t sender = fork();
  if (sender == 0) {
    for (int i = 1; i <= kSignals; ++i) {
      char ack;
      if (i > kInFlight && read(g_acks[0], &ack, 1) != 1) _exit(3);
      union sigval value = {.sival_int = i};
      sigqueue(parent, SIGRTMAX, value);
      sched_yield();
    }
    _exit(0);
  }
  // Threads start while the instances arrive: until the sender is done (bounded).
  int status = -1;
  for (int started = 0; started < kMaxThreads; ++started) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, Nothing, NULL) == 0) pthread_join(thread, NULL);
    if (waitpid(sender, &status, WNOHANG) == sender) break;
  }
  if (status == -1) waitpid(sender, &status, 0);
  pthread_join(waiter, NULL);
  printf("got=%d sum=%ld\nsender=%d\n", g_got, g_sum, status);
  return 0;
}
