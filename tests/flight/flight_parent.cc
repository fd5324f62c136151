// An unmodified program (no Strata include or call) for the `strata record` flight recorder
// scenario (tests/flight): starts three children running PROGRAM (flight_program), two that
// end normally and one that it SIGKILLs once the child says it has done its work.
//
//   flight_parent PROGRAM READY_FILE
//
// Children: `PROGRAM --end exit --ms 1500` twice, and `PROGRAM --end kill --ms 1000 --ready
// READY_FILE`, killed 200 ms after READY_FILE appears. Waits for all three; prints
// "flight_parent: killed pid P" and exits 0.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <initializer_list>

namespace {

pid_t Start(char* const argv[]) {
  const pid_t pid = fork();
  if (pid == 0) {
    execv(argv[0], argv);
    _exit(127);
  }
  return pid;
}

void SleepMs(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: flight_parent PROGRAM READY_FILE\n");
    return 2;
  }
  char end_exit[] = "exit", end_kill[] = "kill", ms_normal[] = "1500", ms_killed[] = "1000";
  char opt_end[] = "--end", opt_ms[] = "--ms", opt_ready[] = "--ready";
  char* normal[] = {argv[1], opt_end, end_exit, opt_ms, ms_normal, nullptr};
  char* victim[] = {argv[1], opt_end, end_kill, opt_ms, ms_killed, opt_ready, argv[2], nullptr};
  const pid_t a = Start(normal);
  const pid_t killed = Start(victim);
  const pid_t b = Start(normal);
  struct stat st;
  for (int i = 0; i < 1200 && stat(argv[2], &st) != 0; ++i) SleepMs(100);
  SleepMs(200);
  kill(killed, SIGKILL);
  printf("flight_parent: killed pid %d\n", killed);
  fflush(stdout);
  int status = 0;
  for (pid_t pid : {a, killed, b}) waitpid(pid, &status, 0);
  return 0;
}
