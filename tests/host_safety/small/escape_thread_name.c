// Unmodified test program (no Strata include or call): starts a thread named with terminal
// escape sequences (an OSC title, a bell and a screen clear), which spins `iterations` rounds
// of a loop the compiler cannot drop; prints one line when it has joined it.
//   escape_thread_name [iterations]
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void spin(unsigned long iterations) {
  for (unsigned long i = 0; i < iterations; ++i) sink = sink * 31 + i;
}

static void* worker(void* arg) {
  // 15 bytes at most (the kernel's comm): ESC ] 0 ; X BEL ESC [ 2 J
  pthread_setname_np(pthread_self(), "\x1b]0;X\x07\x1b[2J");
  spin(*(unsigned long*)arg);
  return NULL;
}

int main(int argc, char** argv) {
  unsigned long iterations = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000000UL;
  pthread_t thread;
  if (pthread_create(&thread, NULL, worker, &iterations) != 0) return 3;
  pthread_join(thread, NULL);
  printf("escape_thread_name: done\n");
  return 0;
}
