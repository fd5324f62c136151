// deny_perf_event_open ERRNO|kill|trap PROGRAM [ARGS...]: runs PROGRAM with a seccomp filter
// that makes every perf_event_open fail with ERRNO (a number, e.g. 13 for EACCES, 38 for
// ENOSYS), as a container's seccomp profile or perf_event_paranoid=3 would, or kills the
// process (`kill`: SECCOMP_RET_KILL_PROCESS, as systemd's SystemCallFilter= does) or traps it
// (`trap`: SIGSYS, as minijail does); every other system call is allowed. For
// tests/sampling_rate_test.sh (the fallback to CPU-clock timers) and
// tests/host_contract/seccomp_kill_test.sh.
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: deny_perf_event_open ERRNO|kill|trap PROGRAM [ARGS...]\n");
    return 2;
  }
  unsigned action = 0;
  const int error = std::atoi(argv[1]);
  if (std::strcmp(argv[1], "kill") == 0) {
    action = SECCOMP_RET_KILL_PROCESS;
  } else if (std::strcmp(argv[1], "trap") == 0) {
    action = SECCOMP_RET_TRAP;
  } else if (error <= 0 || error > 4095) {
    std::fprintf(stderr, "deny_perf_event_open: bad errno '%s'\n", argv[1]);
    return 2;
  } else {
    action = SECCOMP_RET_ERRNO | (static_cast<unsigned>(error) & SECCOMP_RET_DATA);
  }
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, action),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])),
                               filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    std::perror("deny_perf_event_open: seccomp");
    return 2;
  }
  execvp(argv[2], argv + 2);
  std::perror("deny_perf_event_open: exec");
  return 127;
}
