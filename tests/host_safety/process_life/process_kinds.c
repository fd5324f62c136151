// Issue 33, "every way a process begins": children made with and without glibc's atfork
// handlers, each of which exits with exit() (atexit handlers, Strata's exit save included)
// or _exit()/exec, while the parent has a busy, sampled thread. Not linked to Strata: run
// plain and preloaded (process_kinds_test.sh), the output must be the same.
//
//   process_kinds KIND...   KIND: fork _Fork sysfork clone clone_vm vfork_exit vfork_exec
//                           posix_spawn
// For each kind, one child: it works ~30 ms of CPU (a sample would be due), then ends as said
// and the parent prints "KIND: status N" (N the child's exit status), or "KIND: hung" when
// the child has not ended 20 s later (it is then killed). The parent ends with exit(0).
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static atomic_int g_stop;
// Written by every thread: atomic (relaxed), so that the sink is no data race (TSan).
static atomic_ulong g_sink;

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void Work(double seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  const double end = ts.tv_sec + ts.tv_nsec * 1e-9 + seconds;
  for (;;) {
    unsigned long sum = atomic_load_explicit(&g_sink, memory_order_relaxed);
    for (int i = 0; i < 10000; ++i) sum += (unsigned long)i * 2654435761u;
    atomic_store_explicit(&g_sink, sum, memory_order_relaxed);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    if (ts.tv_sec + ts.tv_nsec * 1e-9 >= end) return;
  }
}

static void* Spinner(void* arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) Work(0.01);
  return NULL;
}

static void* ShortThread(void* arg) {
  Work(0.005);
  return arg;
}

// The child's body: work, a thread (registration) where libc's thread list is the child's
// own, then the way out.
static int ChildBody(int with_thread, int status) {
  Work(0.03);
  if (with_thread) {
    pthread_t t;
    if (pthread_create(&t, NULL, ShortThread, NULL) == 0) pthread_join(t, NULL);
  }
  exit(status);  // atexit handlers: the library's exit save would run here.
}

static int CloneChild(void* arg) { return ChildBody(0, (int)(long)arg); }

// With STRATA_FLIGHT_RECORDER=DIR (preloaded), the parent's own flight recorder file must
// survive every child (a child must never remove its parent's file): checked after each one,
// a missing file reported on stderr.
static void CheckOwnFlightFile(const char* kind) {
  const char* dir = getenv("STRATA_FLIGHT_RECORDER");
  if (!dir || !getenv("LD_PRELOAD")) return;
  char prefix[64];
  snprintf(prefix, sizeof(prefix), "strata-%d-", (int)getpid());
  DIR* d = opendir(dir);
  int found = 0;
  if (d) {
    struct dirent* e;
    while ((e = readdir(d)) != NULL) found |= strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
  }
  if (!found) fprintf(stderr, "process_kinds: parent's flight recorder file gone after %s\n", kind);
}

static void Report(const char* kind, pid_t pid) {
  if (pid < 0) {
    printf("%s: cannot start: %s\n", kind, strerror(errno));
    return;
  }
  const double deadline = Now() + 20;
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG | __WALL);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      printf("%s: waitpid: %s\n", kind, strerror(errno));
      return;
    }
    if (Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, __WALL);
      printf("%s: hung\n", kind);
      fflush(stdout);
      return;
    }
    usleep(2000);
  }
  if (WIFEXITED(status)) {
    printf("%s: status %d\n", kind, WEXITSTATUS(status));
  } else {
    printf("%s: signal %d\n", kind, WTERMSIG(status));
  }
  fflush(stdout);
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  pthread_t spinner;
  pthread_create(&spinner, NULL, Spinner, NULL);
  Work(0.05);
  static char stack[256 * 1024] __attribute__((aligned(16)));
  for (int i = 1; i < argc; ++i) {
    const char* kind = argv[i];
    const int status = 10 + i;
    fflush(stdout);
    pid_t pid = -1;
    if (strcmp(kind, "fork") == 0) {
      pid = fork();
      if (pid == 0) ChildBody(1, status);
    } else if (strcmp(kind, "_Fork") == 0) {
      pid = _Fork();
      if (pid == 0) ChildBody(0, status);
    } else if (strcmp(kind, "sysfork") == 0) {
      pid = (pid_t)syscall(SYS_fork);
      if (pid == 0) ChildBody(0, status);
    } else if (strcmp(kind, "clone") == 0) {
      pid = clone(CloneChild, stack + sizeof(stack), SIGCHLD, (void*)(long)status);
    } else if (strcmp(kind, "clone_vm") == 0) {
      // Shares the parent's memory (not a thread): may only _exit.
      pid = clone((int (*)(void*))(void*)_exit, stack + sizeof(stack), CLONE_VM | SIGCHLD,
                  (void*)(long)status);
    } else if (strcmp(kind, "vfork_exit") == 0) {
      pid = vfork();
      if (pid == 0) _exit(status);
    } else if (strcmp(kind, "vfork_exec") == 0) {
      pid = vfork();
      if (pid == 0) {
        char code[32];
        snprintf(code, sizeof(code), "exit %d", status);
        char* args[] = {"sh", "-c", code, NULL};
        execve("/bin/sh", args, environ);
        _exit(127);
      }
    } else if (strcmp(kind, "posix_spawn") == 0) {
      char code[32];
      snprintf(code, sizeof(code), "exit %d", status);
      char* args[] = {"sh", "-c", code, NULL};
      const int rc = posix_spawn(&pid, "/bin/sh", NULL, NULL, args, environ);
      if (rc != 0) {
        errno = rc;
        pid = -1;
      }
    } else {
      printf("%s: unknown kind\n", kind);
      continue;
    }
    Report(kind, pid);
    CheckOwnFlightFile(kind);
  }
  atomic_store(&g_stop, 1);
  pthread_join(spinner, NULL);
  Work(0.02);
  printf("parent: done\n");
  exit(0);
}
