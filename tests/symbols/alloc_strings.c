// alloc_strings ITERATIONS: a program that spends its time in malloc/free, in libc string
// functions (strlen, memchr) and in a function of its own with an inlined helper, for
// tests/symbols/same_leaves_test.sh. No Strata includes. Prints a checksum.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char text[1 << 17];

// Inlined into OwnWork: a DWARF inline frame in the program's own code (with or without
// libc's debug file).
static inline __attribute__((always_inline)) unsigned long Mix(unsigned long x) {
  return x * 6364136223846793005UL + 1442695040888963407UL;
}

__attribute__((noinline)) static unsigned long OwnWork(unsigned long seed) {
  unsigned long x = seed;
  for (int i = 0; i < 2000; ++i) x = Mix(x);
  return x;
}

__attribute__((noinline)) static unsigned long Allocate(unsigned long seed) {
  void* blocks[64];
  unsigned long sum = 0;
  for (int i = 0; i < 64; ++i) {
    size_t size = 16 + ((seed >> (i % 32)) & 511);
    blocks[i] = malloc(size);
    if (blocks[i] == NULL) abort();
    ((volatile char*)blocks[i])[0] = (char)i;
    sum += size;
  }
  for (int i = 63; i >= 0; --i) free(blocks[i]);
  return sum;
}

__attribute__((noinline)) static unsigned long Scan(void) {
  return strlen(text) + (unsigned long)(memchr(text, 'z', sizeof(text)) != NULL);
}

int main(int argc, char** argv) {
  long iterations = argc > 1 ? atol(argv[1]) : 20000;
  memset(text, 'a', sizeof(text) - 1);
  unsigned long total = 0;
  for (long i = 0; i < iterations; ++i) {
    total += OwnWork((unsigned long)i);
    for (int j = 0; j < 8; ++j) total += Allocate(total + (unsigned long)j);
    total += Scan();
  }
  printf("%lu\n", total % 1000);
  return 0;
}
