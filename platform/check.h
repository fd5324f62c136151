// STRATA_CHECK(cond, "message"): always on; on failure writes file:line and the message to
// stderr with write(2) and aborts. STRATA_DCHECK: the same in debug builds (!NDEBUG), nothing
// in optimised builds (the condition is not evaluated).
//
// Thread safety: yes. Async-signal safety: yes (write + abort only, no allocation), so checks
// may sit in signal handlers and in code running while another thread is suspended.
#ifndef STRATA_PLATFORM_CHECK_H_
#define STRATA_PLATFORM_CHECK_H_

namespace strata {
namespace check_internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition,
                              const char* message);
}  // namespace check_internal

// Writes "strata: fatal: <kind> '<name>' <what>" to stderr with write(2) and aborts: for
// misuse of named objects (locks). Async-signal-safe.
[[noreturn]] void FatalMisuse(const char* kind, const char* name, const char* what);
}  // namespace strata

#define STRATA_CHECK(condition, message)                                               \
  do {                                                                                 \
    if (__builtin_expect(!(condition), 0)) {                                           \
      ::strata::check_internal::CheckFailed(__FILE__, __LINE__, #condition, message);  \
    }                                                                                  \
  } while (0)

#ifdef NDEBUG
#define STRATA_DCHECK(condition, message) \
  do {                                    \
  } while (0)
#else
#define STRATA_DCHECK(condition, message) STRATA_CHECK(condition, message)
#endif

#endif  // STRATA_PLATFORM_CHECK_H_
