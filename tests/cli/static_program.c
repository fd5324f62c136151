// A statically linked program (issue 34): `strata record` cannot enter it (no dynamic loader
// reads LD_PRELOAD) and must refuse it, not run it unprofiled and exit 0.
#include <stdio.h>

int main(void) {
  volatile long sum = 0;
  for (long i = 0; i < 10000000; ++i) sum += i;
  printf("static_program: %ld\n", (long)sum);
  return 0;
}
