// A Mutex that is only used when its owner asked for thread safety, for structures that are
// sometimes shared (the session's profile buffer) and sometimes private to one thread (a
// buffer holding one sample), so the private case pays no locking at all.
//
// Thread safety: with ThreadSafety::kThreadSafe, as Mutex; with kSingleThreaded, the user
// promises a single thread and Lock()/Unlock() do nothing.
// Async-signal safety: as Mutex (not async-signal-safe) when thread-safe.
#ifndef STRATA_PLATFORM_MAYBE_MUTEX_H_
#define STRATA_PLATFORM_MAYBE_MUTEX_H_

#include <optional>

#include "platform/mutex.h"

namespace strata {

enum class ThreadSafety { kSingleThreaded, kThreadSafe };

class MaybeMutex {
 public:
  MaybeMutex(ThreadSafety safety, const char* name) {
    if (safety == ThreadSafety::kThreadSafe) mutex_.emplace(name);
  }
  MaybeMutex(const MaybeMutex&) = delete;
  MaybeMutex& operator=(const MaybeMutex&) = delete;

  bool IsThreadSafe() const { return mutex_.has_value(); }
  void Lock() {
    if (mutex_) mutex_->Lock();
  }
  void Unlock() {
    if (mutex_) mutex_->Unlock();
  }
  // Always true when single-threaded.
  bool IsLockedOnCurrentThread() const { return !mutex_ || mutex_->IsLockedOnCurrentThread(); }
  void AssertCurrentThreadOwns() const {
    if (mutex_) mutex_->AssertCurrentThreadOwns();
  }

 private:
  std::optional<Mutex> mutex_;
};

class MaybeAutoLock {
 public:
  explicit MaybeAutoLock(MaybeMutex& mutex) : mutex_(mutex) { mutex_.Lock(); }
  ~MaybeAutoLock() { mutex_.Unlock(); }
  MaybeAutoLock(const MaybeAutoLock&) = delete;
  MaybeAutoLock& operator=(const MaybeAutoLock&) = delete;

 private:
  MaybeMutex& mutex_;
};

}  // namespace strata

#endif  // STRATA_PLATFORM_MAYBE_MUTEX_H_
