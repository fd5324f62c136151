// Reads SIGPROF through a signalfd: sends itself 20 SIGPROFs (kill), reading each, then burns
// CPU and checks nothing else arrived. Prints "reads=N foreign=F late=L" (foreign: a signal
// the program did not send; late: anything readable after the burn) and exits 0.
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "burn.h"

int main(void) {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGPROF);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  const int fd = signalfd(-1, &mask, SFD_CLOEXEC);
  if (fd < 0) {
    perror("signalfd");
    return 2;
  }
  int reads = 0, foreign = 0, late = 0;
  for (int i = 0; i < 20; ++i) {
    BurnCpu(0.02);
    kill(getpid(), SIGPROF);
    struct signalfd_siginfo info;
    // Whatever is pending now: ours, plus anything else that queued up.
    do {
      if (read(fd, &info, sizeof(info)) != sizeof(info)) return 3;
      ++reads;
      if (info.ssi_code != SI_USER || info.ssi_pid != (unsigned)getpid()) ++foreign;
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, 0) != 1) break;
    } while (1);
  }
  BurnCpu(0.3);
  struct pollfd p = {fd, POLLIN, 0};
  while (poll(&p, 1, 0) == 1) {
    struct signalfd_siginfo info;
    if (read(fd, &info, sizeof(info)) != sizeof(info)) break;
    ++late;
  }
  printf("reads=%d foreign=%d late=%d\n", reads, foreign, late);
  return 0;
}
