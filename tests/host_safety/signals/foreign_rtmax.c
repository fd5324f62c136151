// A program that blocks every signal in all its threads (sigfillset + pthread_sigmask before
// creating them) and reads SIGRTMAX -- Strata's default sampling signal -- sent by ANOTHER
// process (a forked sender: sigqueue with values 1..5, or tgkill to one thread). Two workers
// burn CPU all along (they are sampled, and a process-directed signal may land on them).
// Modes (argv[1]):
//   sigwaitinfo, sigtimedwait (50 ms slices), sigwait, signalfd
//       a reader thread reads the five signals; process-directed (sigqueue)
//   raw, raw_signalfd
//       as sigwaitinfo and signalfd, through libc's syscall() with the kernel's 8-byte sets:
//       main blocks with SYS_rt_sigprocmask, the reader waits in SYS_rt_sigtimedwait or reads
//       a SYS_signalfd4 descriptor
//   thread
//       tgkill to the reader thread (five) and to a worker (one, never read: stays pending)
//   unblock
//       no reader: main installs an SA_SIGINFO handler for SIGRTMAX, waits for the sender to
//       end, checks sigpending, then unblocks SIGRTMAX: the five are delivered to the handler
//   sigsuspend, ppoll
//       no reader: main installs the handler and waits in sigsuspend / ppoll with a mask that
//       unblocks SIGRTMAX, until the handler has run five times
//   acceptor
//       main blocks nothing (the workers block every signal themselves) and sleeps until its
//       handler has run five times: a process-directed signal goes to it, plain
// Prints what it read (signal, si_code, whether si_pid is the sender, the values in order) and
// exits 0; plain, before issue 33's fix, SIGRTMAX killed the preloaded program (status 192).
// The signalfd mode also takes a SIGUSR1 after the five, and stops there: it prints what the
// descriptor gave it up to that point.
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "burn.h"

enum { kCount = 5 };

static const char* g_mode;
static atomic_int g_done;
static atomic_int g_worker_tid;
// Written by main after fork, read by the reader thread: atomic, so that it is no data race
// (TSan reported it: main -> pipe -> sender -> signal -> reader is an order TSan cannot see).
static atomic_int g_sender;
static int g_values[kCount + 1];
static int g_codes_ok, g_pids_ok, g_got;
static atomic_int g_handled;
static int g_handler_values[kCount + 1];
static atomic_int g_reader_tid;

static void* Worker(void* arg) {
  if (strcmp(g_mode, "acceptor") == 0) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
  }
  if (arg != NULL) atomic_store(&g_worker_tid, (int)syscall(SYS_gettid));
  // At least 50 ms of CPU each, however fast the signals come: enough to be sampled.
  const double start = ThreadCpuSeconds();
  while (!atomic_load(&g_done) || ThreadCpuSeconds() - start < 0.05) BurnCpu(0.01);
  return NULL;
}

static void Note(const siginfo_t* info, int want_code) {
  if (g_got < kCount) g_values[g_got] = info->si_value.sival_int;
  if (info->si_code == want_code || (want_code == SI_TKILL && info->si_code == SI_USER)) {
    ++g_codes_ok;
  }
  if (info->si_pid == atomic_load(&g_sender)) ++g_pids_ok;
  ++g_got;
}

static void* Reader(void* arg) {
  const sigset_t* all = arg;
  atomic_store(&g_reader_tid, (int)syscall(SYS_gettid));
  // tgkill's si_code is SI_TKILL on most kernels, SI_USER on some (6.18): either.
  const int thread = strcmp(g_mode, "thread") == 0;
  const int want_code = thread ? SI_TKILL : SI_QUEUE;
  if (strcmp(g_mode, "signalfd") == 0 || strcmp(g_mode, "raw_signalfd") == 0) {
    const int fd = strcmp(g_mode, "signalfd") == 0
                       ? signalfd(-1, all, SFD_CLOEXEC)
                       : (int)syscall(SYS_signalfd4, -1, all, 8, SFD_CLOEXEC);
    int done_reading = 0;
    for (;;) {
      if (done_reading) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 0) != 1) break;
      }
      struct signalfd_siginfo si;
      if (read(fd, &si, sizeof(si)) != sizeof(si)) break;
      // Sent after the five: they are all pending now (a lower number is read first), and
      // what is left is read without waiting.
      if ((int)si.ssi_signo == SIGUSR1) done_reading = 1;
      if ((int)si.ssi_signo != SIGRTMAX) continue;
      siginfo_t info;
      memset(&info, 0, sizeof(info));
      info.si_code = si.ssi_code;
      info.si_pid = (pid_t)si.ssi_pid;
      info.si_value.sival_int = si.ssi_int;
      Note(&info, want_code);
    }
    return NULL;
  }
  while (g_got < kCount) {
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    int sig;
    if (strcmp(g_mode, "sigwait") == 0) {
      if (sigwait(all, &sig) != 0) return NULL;
      info.si_code = want_code;
      info.si_pid = atomic_load(&g_sender);
    } else if (strcmp(g_mode, "sigtimedwait") == 0) {
      const struct timespec slice = {0, 50 * 1000 * 1000};
      sig = sigtimedwait(all, &info, &slice);
      if (sig < 0 && errno == EAGAIN) continue;
    } else if (strcmp(g_mode, "raw") == 0) {
      sig = (int)syscall(SYS_rt_sigtimedwait, all, &info, NULL, 8);
    } else {
      sig = sigwaitinfo(all, &info);
    }
    if (sig < 0) {
      if (errno == EINTR) continue;
      return NULL;
    }
    if (sig != SIGRTMAX) continue;  // The sender's SIGCHLD, before or after.
    Note(&info, want_code);
  }
  return NULL;
}

static void Handler(int sig, siginfo_t* info, void* context) {
  (void)context;
  const int n = atomic_fetch_add(&g_handled, 1);
  if (sig == SIGRTMAX && n < kCount) g_handler_values[n] = info->si_value.sival_int;
}

int main(int argc, char** argv) {
  g_mode = argc > 1 ? argv[1] : "sigwaitinfo";
  sigset_t all;
  sigfillset(&all);
  const int acceptor = strcmp(g_mode, "acceptor") == 0;
  if (strncmp(g_mode, "raw", 3) == 0) {
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, 8);
  } else if (!acceptor) {
    pthread_sigmask(SIG_BLOCK, &all, NULL);
  }
  pthread_t workers[2], reader;
  pthread_create(&workers[0], NULL, &Worker, (void*)1);
  pthread_create(&workers[1], NULL, &Worker, NULL);
  while (atomic_load(&g_worker_tid) == 0) BurnCpu(0.001);
  // Modes where main takes the signals in its handler.
  const int suspend = strcmp(g_mode, "sigsuspend") == 0;
  const int poll_mode = strcmp(g_mode, "ppoll") == 0;
  const int handled_by_main = suspend || poll_mode || acceptor;
  const int unblock = strcmp(g_mode, "unblock") == 0 || handled_by_main;
  const int thread = strcmp(g_mode, "thread") == 0;
  if (unblock) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = &Handler;
    action.sa_flags = SA_SIGINFO;
    sigaction(SIGRTMAX, &action, NULL);
  }
  int pipe_fds[2], done_fds[2];
  if (pipe(pipe_fds) != 0 || pipe(done_fds) != 0) return 2;
  if (!unblock) pthread_create(&reader, NULL, &Reader, &all);
  const pid_t parent = getpid();
  const pid_t sender = fork();
  atomic_store(&g_sender, sender);
  if (sender == 0) {
    int tids[2];
    if (read(pipe_fds[0], tids, sizeof(tids)) != sizeof(tids)) _exit(3);
    for (int i = 1; i <= kCount; ++i) {
      const struct timespec gap = {0, 20 * 1000 * 1000};
      nanosleep(&gap, NULL);
      if (thread) {
        syscall(SYS_tgkill, parent, tids[0], SIGRTMAX);
      } else {
        union sigval value;
        value.sival_int = i;
        sigqueue(parent, SIGRTMAX, value);
      }
    }
    if (thread) {
      // Once the reader is done: to a worker, which never reads it (it stays pending).
      char byte;
      if (read(done_fds[0], &byte, 1) != 1) _exit(4);
      syscall(SYS_tgkill, parent, tids[1], SIGRTMAX);
    }
    if (strstr(g_mode, "signalfd") != NULL) kill(parent, SIGUSR1);
    _exit(0);
  }
  if (!unblock) {
    while (atomic_load(&g_reader_tid) == 0) BurnCpu(0.001);
  }
  int tids[2] = {atomic_load(&g_reader_tid), atomic_load(&g_worker_tid)};
  if (write(pipe_fds[1], tids, sizeof(tids)) != sizeof(tids)) return 4;
  int status = 0;
  if (handled_by_main) {
    sigset_t wait_mask = all;
    sigdelset(&wait_mask, SIGRTMAX);
    while (atomic_load(&g_handled) < kCount) {
      if (suspend) {
        sigsuspend(&wait_mask);
      } else if (poll_mode) {
        ppoll(NULL, 0, NULL, &wait_mask);
      } else {
        const struct timespec nap = {0, 1000 * 1000};
        nanosleep(&nap, NULL);
      }
    }
    waitpid(sender, &status, 0);
    printf("mode=%s handled=%d values=", g_mode, atomic_load(&g_handled));
    for (int i = 0; i < kCount; ++i) printf("%d ", g_handler_values[i]);
    printf("\n");
  } else if (unblock) {
    waitpid(sender, &status, 0);  // Everything is sent (and pending, plain).
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    printf("pending_before_unblock=%d\n", sigismember(&pending, SIGRTMAX));
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, SIGRTMAX);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    printf("handled=%d values=", atomic_load(&g_handled));
    for (int i = 0; i < kCount && i < atomic_load(&g_handled); ++i) printf("%d ", g_handler_values[i]);
    printf("\n");
  } else {
    pthread_join(reader, NULL);
    if (write(done_fds[1], "x", 1) != 1) return 5;
    waitpid(sender, &status, 0);
    printf("mode=%s got=%d codes_ok=%d pids_ok=%d values=", g_mode, g_got, g_codes_ok, g_pids_ok);
    for (int i = 0; i < kCount && i < g_got; ++i) printf("%d ", thread ? 0 : g_values[i]);
    printf("\n");
  }
  printf("sender_status=%d\n", status);
  atomic_store(&g_done, 1);
  for (int i = 0; i < 2; ++i) pthread_join(workers[i], NULL);
  return 0;
}
