// A plain program for valgrind_test.sh: two threads each sum a sequence of known length; the
// main thread prints both sums. No Strata include or call.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void* Sum(void* argument) {
  const unsigned long count = *(const unsigned long*)argument;
  unsigned long total = 0;
  for (unsigned long i = 0; i < count; ++i) total += i ^ (total >> 3);
  return (void*)total;
}

int main(int argc, char** argv) {
  unsigned long counts[2] = {argc > 1 ? strtoul(argv[1], NULL, 10) : 20000000UL, 0};
  counts[1] = counts[0] / 2;
  pthread_t threads[2];
  for (int i = 0; i < 2; ++i) pthread_create(&threads[i], NULL, Sum, &counts[i]);
  for (int i = 0; i < 2; ++i) {
    void* total = NULL;
    pthread_join(threads[i], &total);
    printf("thread %d: %lu\n", i, (unsigned long)total);
  }
  return 0;
}
