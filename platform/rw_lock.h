// A named readers-writer lock that knows which thread holds it exclusively, and its RAII
// locks.
//
// Many threads may hold it shared at once; one thread may hold it exclusive, and then nobody
// holds it shared. Like Mutex, it carries a name for its fatal messages and records its
// exclusive owner, so that misuse aborts loudly instead of deadlocking quietly:
//   - LockExclusive / TryLockExclusive / LockShared / TryLockShared by the thread that
//     already holds it exclusive;
//   - UnlockExclusive by a thread that does not hold it exclusive;
//   - UnlockShared by the thread that holds it exclusive;
//   - destruction while anyone holds it (shared or exclusive).
// Not detected (it would cost per-thread state on every shared lock): UnlockShared without a
// matching LockShared, which is undefined behaviour, and recursive shared locking.
//
// Policy: writer-preferring. Once a thread waits in LockExclusive, new LockShared calls wait
// too (and TryLockShared fails), so a steady stream of readers cannot starve a writer. The
// price: shared locking is NOT recursive. A thread that takes the shared lock twice
// deadlocks if a writer started waiting in between.
//
// The constructor is constexpr: a namespace-scope RWLock is constant-initialized, usable
// before main and from other static initializers.
//
// Thread safety: thread-safe (that is its purpose).
// Async-signal safety: NOT async-signal-safe. Never lock an RWLock in a signal handler or
// while another thread is suspended: the suspended thread may hold it. The observers
// (IsLockedExclusiveOnCurrentThread, name) are async-signal-safe.
#ifndef STRATA_PLATFORM_RW_LOCK_H_
#define STRATA_PLATFORM_RW_LOCK_H_

#include <pthread.h>

#include <atomic>

#include "platform/process_thread_ids.h"

namespace strata {

class RWLock {
 public:
  // `name` must outlive the lock (a string literal).
  constexpr explicit RWLock(const char* name) : name_(name) {}
  ~RWLock();
  RWLock(const RWLock&) = delete;
  RWLock& operator=(const RWLock&) = delete;

  void LockExclusive();
  // Returns true when the exclusive lock was taken; false when anyone holds it.
  bool TryLockExclusive();
  void UnlockExclusive();

  void LockShared();
  // Returns true when a shared lock was taken; false when a thread holds it exclusive or
  // waits for it (writer preference).
  bool TryLockShared();
  void UnlockShared();

  // True when the calling thread holds the exclusive lock. Exact for the calling thread.
  bool IsLockedExclusiveOnCurrentThread() const {
    return exclusive_owner_.load(std::memory_order_relaxed) == CurrentThreadId().ToNumber();
  }
  // Aborts with the lock's name when the calling thread does not hold it exclusive.
  void AssertCurrentThreadOwnsExclusive() const;

  const char* name() const { return name_; }

 private:
  [[noreturn]] void Fatal(const char* what) const;
  void CheckNotExclusiveOnCurrentThread(const char* what) const {
    if (IsLockedExclusiveOnCurrentThread()) Fatal(what);
  }

  pthread_rwlock_t rwlock_ = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
  // Tid of the exclusive holder, 0 otherwise. Written only by the holder, so a thread that
  // reads its own tid here is certain to hold it (relaxed is enough for that).
  std::atomic<ThreadId::NumberType> exclusive_owner_{0};
  const char* const name_;
};

// Holds `lock` shared for the scope.
class AutoLockShared {
 public:
  explicit AutoLockShared(RWLock& lock) : lock_(lock) { lock_.LockShared(); }
  ~AutoLockShared() { lock_.UnlockShared(); }
  AutoLockShared(const AutoLockShared&) = delete;
  AutoLockShared& operator=(const AutoLockShared&) = delete;

 private:
  RWLock& lock_;
};

// Holds `lock` exclusive for the scope.
class AutoLockExclusive {
 public:
  explicit AutoLockExclusive(RWLock& lock) : lock_(lock) { lock_.LockExclusive(); }
  ~AutoLockExclusive() { lock_.UnlockExclusive(); }
  AutoLockExclusive(const AutoLockExclusive&) = delete;
  AutoLockExclusive& operator=(const AutoLockExclusive&) = delete;

 private:
  RWLock& lock_;
};

}  // namespace strata

#endif  // STRATA_PLATFORM_RW_LOCK_H_
