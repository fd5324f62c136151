#include "base/internal/signals/profiler_thread_signals.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>

#include <cstring>

#include "platform/raw_syscall.h"

namespace strata {
namespace base_internal {
namespace {

// The kernel's sigset_t: one word of 64 signals on the architectures we build for.
constexpr long kKernelSigsetBytes = sizeof(uint64_t);

bool ParseHexMaskAfter(const char* text, const char* key, uint64_t* mask) {
  const char* line = std::strstr(text, key);
  if (line == nullptr) return false;
  const char* p = line + std::strlen(key);
  while (*p == ' ' || *p == '\t') ++p;
  uint64_t value = 0;
  int digits = 0;
  for (;; ++p, ++digits) {
    const char c = *p;
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      break;
    }
    value = (value << 4) | static_cast<uint64_t>(digit);
  }
  if (digits == 0) return false;
  *mask = value;
  return true;
}

// This thread's SigPnd and ShdPnd, from /proc/thread-self/status.
bool ReadPendingSignalMasks(uint64_t* thread_pending, uint64_t* shared_pending) {
  const long fd = RawSyscall(SYS_openat, AT_FDCWD,
                             reinterpret_cast<long>("/proc/thread-self/status"),
                             O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[4096];
  size_t length = 0;
  while (length < sizeof(text) - 1) {
    const long got = RawSyscall(SYS_read, fd, reinterpret_cast<long>(text + length),
                                static_cast<long>(sizeof(text) - 1 - length));
    if (got <= 0) break;
    length += static_cast<size_t>(got);
  }
  RawSyscall(SYS_close, fd);
  text[length] = '\0';
  return ParsePendingSignalMasks(text, thread_pending, shared_pending);
}

}  // namespace

bool ParsePendingSignalMasks(const char* status, uint64_t* thread_pending,
                             uint64_t* shared_pending) {
  return ParseHexMaskAfter(status, "\nSigPnd:", thread_pending) &&
         ParseHexMaskAfter(status, "\nShdPnd:", shared_pending);
}

int AnswerThreadDirectedSignals(ThreadDirectedSignalCheck* state) {
  uint64_t pending = 0;  // Blocked and pending, for this thread or the process.
  if (RawSyscall(SYS_rt_sigpending, reinterpret_cast<long>(&pending), kKernelSigsetBytes) != 0 ||
      pending == 0) {
    state->last_pending = 0;
    return 0;
  }
  if (pending == state->last_pending) return 0;  // Seen: the process's, waiting for its threads.
  state->last_pending = pending;
  uint64_t thread_pending = 0, shared_pending = 0;
  if (!ReadPendingSignalMasks(&thread_pending, &shared_pending)) return 0;
  const uint64_t ours = thread_pending & ~shared_pending & pending;
  if (ours == 0) return 0;
  uint64_t previous = 0;
  if (RawSyscall(SYS_rt_sigprocmask, SIG_UNBLOCK, reinterpret_cast<long>(&ours),
                 reinterpret_cast<long>(&previous), kKernelSigsetBytes) != 0) {
    return 0;
  }
  // Delivered on the way out of the call above; every signal blocked again.
  RawSyscall(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&previous), 0,
             kKernelSigsetBytes);
  state->last_pending = 0;  // What is left is read again next time.
  return __builtin_popcountll(ours);
}

}  // namespace base_internal
}  // namespace strata
