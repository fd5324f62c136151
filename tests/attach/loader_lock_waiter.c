// A process whose main thread waits in read(2) on stdin (a call where it may be borrowed)
// while its other thread holds the loader's write lock: it waits in sigwaitinfo (never
// borrowed) for SIGUSR2 inside a dl_iterate_phdr callback. A dlopen in the main thread waits
// for that lock until SIGUSR2 comes. Prints "waiting" when both wait; then, for each line of
// its stdin, "read N" (N bytes, no EINTR ever: "EINTR" and exit 4); exits 0 at its end.
// Used by attach_test.sh ("call timeout").
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static sigset_t usr2;
// Atomic: written by the holder, read by main (a volatile int was a data race, which TSan
// reported, and its report then waited for the loader's lock the holder keeps: the TSan-built
// program stopped until SIGUSR2 and died with halt_on_error's status 66).
static atomic_int in_callback;

static int Callback(struct dl_phdr_info* info, size_t size, void* data) {
  (void)info, (void)size, (void)data;
  atomic_store_explicit(&in_callback, 1, memory_order_release);
  int signal_number = 0;
  while (sigwait(&usr2, &signal_number) != 0) {
  }
  return 1;
}

static void* HoldLoaderLock(void* unused) {
  (void)unused;
  dl_iterate_phdr(Callback, NULL);
  return NULL;
}

int main(void) {
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &usr2, NULL);  // Inherited: only sigwait takes it.
  pthread_t holder;
  if (pthread_create(&holder, NULL, HoldLoaderLock, NULL) != 0) return 2;
  while (!atomic_load_explicit(&in_callback, memory_order_acquire)) usleep(1000);
  static const char ready[] = "waiting\n";
  if (write(1, ready, sizeof(ready) - 1) < 0) _exit(3);
  char buffer[256];
  for (;;) {
    const ssize_t n = read(0, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) {
      if (write(1, "EINTR\n", 6) < 0) _exit(3);
      return 4;
    }
    if (n <= 0) break;
    char line[32];
    const int length = snprintf(line, sizeof(line), "read %zd\n", n);
    if (write(1, line, (size_t)length) < 0) _exit(3);
  }
  pthread_join(holder, NULL);
  return 0;
}
