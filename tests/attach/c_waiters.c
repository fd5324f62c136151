// A C program (no libstdc++ in the process) with the waits of echo_server --waiters: the main
// thread in read(2) on its stdin, threads in read on a pipe, in epoll_wait, in
// pthread_cond_wait, and one spinning. It runs until killed or until its stdin ends (then exits
// 0). Used by tools/attach_first_bench.sh: a first attach to a C program, whose process lacks
// the libraries a C++ one has loaded.
#include <pthread.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <unistd.h>

static int pipe_fds[2];
static int epoll_fd;
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t condition = PTHREAD_COND_INITIALIZER;
static volatile unsigned long spins;

static void* ReadWaiter(void* unused) {
  (void)unused;
  char byte;
  while (read(pipe_fds[0], &byte, 1) != 0) {
  }
  return NULL;
}

static void* EpollWaiter(void* unused) {
  (void)unused;
  struct epoll_event event;
  for (;;) epoll_wait(epoll_fd, &event, 1, -1);
  return NULL;
}

static void* CondWaiter(void* unused) {
  (void)unused;
  pthread_mutex_lock(&mutex);
  for (;;) pthread_cond_wait(&condition, &mutex);
  return NULL;
}

static void* Spinner(void* unused) {
  (void)unused;
  for (;;) ++spins;
  return NULL;
}

int main(void) {
  if (pipe(pipe_fds) != 0) return 1;
  epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return 1;
  pthread_t thread;
  void* (*bodies[])(void*) = {ReadWaiter, EpollWaiter, CondWaiter, Spinner};
  for (unsigned i = 0; i < sizeof(bodies) / sizeof(bodies[0]); ++i) {
    if (pthread_create(&thread, NULL, bodies[i], NULL) != 0) return 1;
  }
  printf("ready\n");
  fflush(stdout);
  char buffer[64];
  while (read(0, buffer, sizeof(buffer)) > 0) {
  }
  return 0;
}
