#include "platform/rw_lock.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "platform/check.h"

namespace strata {

RWLock::~RWLock() {
  if (exclusive_owner_.load(std::memory_order_relaxed) != 0) Fatal("destroyed while locked");
  // Anyone still holding it shared makes the try fail; destroying it then would leave them
  // unlocking freed memory.
  if (pthread_rwlock_trywrlock(&rwlock_) != 0) Fatal("destroyed while locked");
  pthread_rwlock_unlock(&rwlock_);
  pthread_rwlock_destroy(&rwlock_);
}

void RWLock::LockExclusive() {
  CheckNotExclusiveOnCurrentThread("locked exclusive recursively");
  if (pthread_rwlock_wrlock(&rwlock_) != 0) Fatal("pthread_rwlock_wrlock failed");
  exclusive_owner_.store(CurrentThreadId().ToNumber(), std::memory_order_relaxed);
}

bool RWLock::TryLockExclusive() {
  CheckNotExclusiveOnCurrentThread("try-locked exclusive recursively");
  const int error = pthread_rwlock_trywrlock(&rwlock_);
  if (error == EBUSY) return false;
  if (error != 0) Fatal("pthread_rwlock_trywrlock failed");
  exclusive_owner_.store(CurrentThreadId().ToNumber(), std::memory_order_relaxed);
  return true;
}

void RWLock::UnlockExclusive() {
  if (!IsLockedExclusiveOnCurrentThread()) {
    Fatal("unlocked exclusive by a thread that does not hold it exclusive");
  }
  exclusive_owner_.store(0, std::memory_order_relaxed);
  pthread_rwlock_unlock(&rwlock_);
}

void RWLock::LockShared() {
  CheckNotExclusiveOnCurrentThread("locked shared by the thread that holds it exclusive");
  if (pthread_rwlock_rdlock(&rwlock_) != 0) Fatal("pthread_rwlock_rdlock failed");
}

bool RWLock::TryLockShared() {
  CheckNotExclusiveOnCurrentThread("try-locked shared by the thread that holds it exclusive");
  const int error = pthread_rwlock_tryrdlock(&rwlock_);
  if (error == EBUSY) return false;
  if (error != 0) Fatal("pthread_rwlock_tryrdlock failed");
  return true;
}

void RWLock::UnlockShared() {
  CheckNotExclusiveOnCurrentThread("unlocked shared by the thread that holds it exclusive");
  pthread_rwlock_unlock(&rwlock_);
}

void RWLock::AssertCurrentThreadOwnsExclusive() const {
  if (!IsLockedExclusiveOnCurrentThread()) Fatal("not held exclusive by the current thread");
}

void RWLock::Fatal(const char* what) const { FatalMisuse("rw-lock", name_, what); }

}  // namespace strata
