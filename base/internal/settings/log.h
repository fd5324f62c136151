// Diagnostics of the base tier on stderr: "strata[<pid>]: message".
//
// LogError always prints (bad environment values, unwritable profile paths); LogInfo only
// with STRATA_LOGGING=1.
//
// Thread safety: thread-safe (one raw write system call per message, past every interposer
// of write). Async-signal safety: no (vsnprintf);
// never log from a signal handler.
#ifndef STRATA_BASE_INTERNAL_LOG_H_
#define STRATA_BASE_INTERNAL_LOG_H_

namespace strata {
namespace base_internal {

void SetLoggingEnabled(bool enabled);
bool LoggingEnabled();

void LogError(const char* format, ...) __attribute__((format(printf, 1, 2)));
void LogInfo(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_LOG_H_
