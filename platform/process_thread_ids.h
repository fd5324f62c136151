// Typed process and thread ids, and the current / main thread.
//
// ProcessId and ThreadId wrap the kernel's numbers so that a pid can never be passed where a
// tid is expected; convert with FromNumber()/ToNumber() only at the edges (syscalls, JSON).
// A default-constructed id is "unspecified" (number 0, which Linux never uses for a process
// or thread we can observe).
//
// Thread safety: every function here is thread-safe.
// Async-signal safety: CurrentProcessId(), CurrentThreadId(), MainThreadId() and
// IsMainThread() are async-signal-safe (no lock, no allocation; the thread-id cache lives in
// initial-exec TLS, so reading it never calls into the dynamic loader).
#ifndef STRATA_PLATFORM_PROCESS_THREAD_IDS_H_
#define STRATA_PLATFORM_PROCESS_THREAD_IDS_H_

#include <cstdint>

namespace strata {

namespace ids_internal {
// One strongly-typed id; Tag keeps ProcessId and ThreadId apart.
template <typename Tag>
class TypedId {
 public:
  using NumberType = int32_t;  // pid_t on Linux.

  constexpr TypedId() = default;
  static constexpr TypedId FromNumber(NumberType number) { return TypedId(number); }
  constexpr NumberType ToNumber() const { return number_; }
  constexpr bool IsSpecified() const { return number_ != 0; }

  friend constexpr bool operator==(TypedId a, TypedId b) { return a.number_ == b.number_; }
  friend constexpr bool operator!=(TypedId a, TypedId b) { return a.number_ != b.number_; }
  friend constexpr bool operator<(TypedId a, TypedId b) { return a.number_ < b.number_; }

 private:
  constexpr explicit TypedId(NumberType number) : number_(number) {}
  NumberType number_ = 0;
};
struct ProcessTag {};
struct ThreadTag {};
}  // namespace ids_internal

using ProcessId = ids_internal::TypedId<ids_internal::ProcessTag>;
using ThreadId = ids_internal::TypedId<ids_internal::ThreadTag>;

// The calling process's id. Correct in a forked child (never cached across fork).
ProcessId CurrentProcessId();

// The calling thread's kernel id (gettid), cached per thread after the first call; the cache
// is reset in the child after fork().
ThreadId CurrentThreadId();

// Records the calling thread as the main thread. Call once, early, from the main thread
// (the base tier does it at load). Without it, the main thread is the one whose tid equals
// the pid, which is what Linux gives the initial thread.
void InitMainThreadId();

// The main thread's id (see InitMainThreadId()).
ThreadId MainThreadId();

// True when called on the main thread.
bool IsMainThread();

}  // namespace strata

#endif  // STRATA_PLATFORM_PROCESS_THREAD_IDS_H_
