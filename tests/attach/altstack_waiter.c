// A process whose only thread waits in read(2) inside a signal handler running on a small
// alternate signal stack taken from the heap (malloc'd), below which lie canary bytes in the
// same heap block. When its stdin gives a byte (or ends), the handler returns and the program
// prints whether the canary is intact ("canary intact" / "canary damaged at OFFSET") and exits
// 0 / 3. Used by attach_test.sh ("altstack"): strata must not write its frame there.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kCanaryBytes = 48 * 1024, kAltStackBytes = 6 * 1024 };
static unsigned char* block;

static void Handler(int signal_number) {
  (void)signal_number;
  static const char ready[] = "waiting\n";
  if (write(1, ready, sizeof(ready) - 1) < 0) _exit(3);
  char byte;
  while (read(0, &byte, 1) < 0) {
  }
}

int main(void) {
  // Below the mmap threshold: on the [heap].
  block = malloc(kCanaryBytes + kAltStackBytes);
  if (block == NULL) return 2;
  memset(block, 0xa5, kCanaryBytes);
  stack_t alternate = {.ss_sp = block + kCanaryBytes, .ss_size = kAltStackBytes, .ss_flags = 0};
  if (sigaltstack(&alternate, NULL) != 0) return 2;
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = Handler;
  action.sa_flags = SA_ONSTACK;
  sigaction(SIGUSR1, &action, NULL);
  raise(SIGUSR1);
  for (int i = 0; i < kCanaryBytes; ++i) {
    if (block[i] != 0xa5) {
      printf("canary damaged at %d\n", i);
      return 3;
    }
  }
  printf("canary intact\n");
  return 0;
}
