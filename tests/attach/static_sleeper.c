/* A statically linked program that waits (attach_test.sh: attach refuses it). */
#include <unistd.h>
int main(void) {
  for (;;) pause();
}
