#include "platform/sampling/seccomp_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include "platform/raw_syscall.h"

namespace strata {
namespace {

// The kernel's struct sigaction for rt_sigaction (not glibc's).
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  unsigned long mask;
};

}  // namespace

SeccompMode CurrentSeccompMode() {
  const long fd = RawSyscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc/self/status"),
                             O_RDONLY | O_CLOEXEC);
  if (fd < 0) return SeccompMode::kUnknown;
  char text[8192];
  size_t length = 0;
  for (;;) {
    const long n = RawSyscall(SYS_read, fd, reinterpret_cast<long>(text + length),
                              static_cast<long>(sizeof(text) - 1 - length));
    if (n == -EINTR) continue;
    if (n <= 0) break;
    length += static_cast<size_t>(n);
    if (length == sizeof(text) - 1) break;
  }
  RawSyscall(SYS_close, fd);
  text[length] = '\0';
  static const char kField[] = "\nSeccomp:";
  const char* field = strstr(text, kField);
  if (field == nullptr) return SeccompMode::kUnknown;
  field += sizeof(kField) - 1;
  while (*field == ' ' || *field == '\t') ++field;
  switch (*field) {
    case '0':
      return SeccompMode::kNone;
    case '1':
      return SeccompMode::kStrict;
    case '2':
      return SeccompMode::kFilter;
    default:
      return SeccompMode::kUnknown;
  }
}

TrialResult TrySystemCallInChild(long number, long a1, long a2, long a3, long a4, long a5) {
  // A plain clone: a copy of this process with only the calling thread, and no exit signal.
  const long pid = RawSyscall(SYS_clone, 0, 0, 0, 0, 0);
  if (pid == 0) {
    // The child: raw system calls only (its libc state is a copy of another thread's).
    KernelSigaction default_action{};
    default_action.handler = SIG_DFL;
    RawSyscall(SYS_rt_sigaction, SIGSYS, reinterpret_cast<long>(&default_action), 0,
               sizeof(unsigned long));
    unsigned long unblock = 1UL << (SIGSYS - 1);
    RawSyscall(SYS_rt_sigprocmask, SIG_UNBLOCK, reinterpret_cast<long>(&unblock), 0,
               sizeof(unblock));
    RawSyscall(number, a1, a2, a3, a4, a5);
    RawSyscall(SYS_exit_group, 0);
    __builtin_unreachable();
  }
  if (pid < 0) return TrialResult::kUnknown;
  int status = 0;
  long waited;
  do {
    // __WCLONE: a child with no exit signal; the program's own wait(-1) never reaps it.
    waited = RawSyscall(SYS_wait4, pid, reinterpret_cast<long>(&status), __WCLONE, 0);
  } while (waited == -EINTR);
  if (waited != pid) return TrialResult::kUnknown;
  return WIFSIGNALED(status) ? TrialResult::kKilled : TrialResult::kReturned;
}

}  // namespace strata
