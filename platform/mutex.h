// A named, non-recursive mutex that knows which thread holds it, and its RAII lock.
//
// The name shows up in the fatal message when the mutex is misused (locked twice on one
// thread, unlocked by a non-owner, destroyed while locked), which is how such bugs get found
// in a profiler that runs inside someone else's program.
//
// Thread safety: thread-safe (that is its purpose).
// Async-signal safety: NOT async-signal-safe. Never lock a Mutex in a signal handler or
// while another thread is suspended: the suspended thread may hold it.
#ifndef STRATA_PLATFORM_MUTEX_H_
#define STRATA_PLATFORM_MUTEX_H_

#include <atomic>
#include <pthread.h>

#include "platform/process_thread_ids.h"

namespace strata {

class Mutex {
 public:
  // `name` must outlive the mutex (a string literal). constexpr: a namespace-scope Mutex is
  // constant-initialized, usable before main and from other static initializers.
  constexpr explicit Mutex(const char* name) : name_(name) {}
  ~Mutex();
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock();
  // Returns true when the lock was taken. Aborts if the caller already holds it.
  bool TryLock();
  void Unlock();

  // True when the calling thread holds this mutex. Exact for the calling thread; for any
  // other thread the answer is only a hint.
  bool IsLockedOnCurrentThread() const {
    return owner_.load(std::memory_order_relaxed) == CurrentThreadId().ToNumber();
  }
  // Aborts with the mutex's name when the calling thread does not hold it.
  void AssertCurrentThreadOwns() const;

  const char* name() const { return name_; }

 private:
  [[noreturn]] void Fatal(const char* what) const;

  // glibc's adaptive mutex: spins briefly before sleeping, which suits the profiler's short
  // critical sections (a buffer reservation is tens of ns; a futex sleep and wake-up costs
  // microseconds here).
  pthread_mutex_t mutex_ = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
  // Tid of the holder, 0 when unlocked. Written only by the holder.
  std::atomic<ThreadId::NumberType> owner_{0};
  const char* const name_;
};

// Holds `mutex` for the scope.
class AutoLock {
 public:
  explicit AutoLock(Mutex& mutex) : mutex_(mutex) { mutex_.Lock(); }
  ~AutoLock() { mutex_.Unlock(); }
  AutoLock(const AutoLock&) = delete;
  AutoLock& operator=(const AutoLock&) = delete;

 private:
  Mutex& mutex_;
};

}  // namespace strata

#endif  // STRATA_PLATFORM_MUTEX_H_
