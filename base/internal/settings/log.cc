#include "base/internal/settings/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "platform/raw_syscall.h"

namespace strata {
namespace base_internal {
namespace {

std::atomic<bool> g_logging{false};

void VLog(const char* level, const char* format, va_list args) {
  char line[1024];
  int n = snprintf(line, sizeof(line), "strata[%d]: %s", static_cast<int>(getpid()), level);
  if (n < 0) return;
  size_t used = static_cast<size_t>(n) < sizeof(line) ? static_cast<size_t>(n) : sizeof(line) - 1;
  const int m = vsnprintf(line + used, sizeof(line) - used, format, args);
  if (m > 0) used += static_cast<size_t>(m) < sizeof(line) - used ? static_cast<size_t>(m)
                                                                   : sizeof(line) - used - 1;
  if (used < sizeof(line) - 1) {
    line[used++] = '\n';
  } else {  // Cut (a hostile path or value): say so, and still end the line.
    std::memcpy(line + sizeof(line) - 5, "...\n", 4);
    used = sizeof(line) - 1;
  }
  // A raw system call, not write(): the message is Strata's own, so it goes past every
  // interposer of write (Strata's I/O wrapper, a sanitizer's, the program's). Under TSan the
  // interceptor took it for an access to descriptor 2 that raced with the program closing
  // its stderr at exit (footguns_test: `timeout`'s fclose(stderr) against the control
  // thread's message; docs/reliability.md, TSan). The kernel's answer is the same.
  RawSyscall(SYS_write, STDERR_FILENO, reinterpret_cast<long>(line), static_cast<long>(used));
}

}  // namespace

void SetLoggingEnabled(bool enabled) { g_logging.store(enabled, std::memory_order_relaxed); }
bool LoggingEnabled() { return g_logging.load(std::memory_order_relaxed); }

void LogError(const char* format, ...) {
  va_list args;
  va_start(args, format);
  VLog("", format, args);
  va_end(args);
}

void LogInfo(const char* format, ...) {
  if (!LoggingEnabled()) return;
  va_list args;
  va_start(args, format);
  VLog("", format, args);
  va_end(args);
}

}  // namespace base_internal
}  // namespace strata
