#include "platform/mutex.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "platform/check.h"

namespace strata {

Mutex::~Mutex() {
  if (owner_.load(std::memory_order_relaxed) != 0) Fatal("destroyed while locked");
}

void Mutex::Lock() {
  const ThreadId::NumberType self = CurrentThreadId().ToNumber();
  if (owner_.load(std::memory_order_relaxed) == self) Fatal("locked recursively");
  pthread_mutex_lock(&mutex_);
  owner_.store(self, std::memory_order_relaxed);
}

bool Mutex::TryLock() {
  const ThreadId::NumberType self = CurrentThreadId().ToNumber();
  if (owner_.load(std::memory_order_relaxed) == self) Fatal("try-locked recursively");
  if (pthread_mutex_trylock(&mutex_) != 0) return false;
  owner_.store(self, std::memory_order_relaxed);
  return true;
}

void Mutex::Unlock() {
  if (!IsLockedOnCurrentThread()) Fatal("unlocked by a thread that does not hold it");
  owner_.store(0, std::memory_order_relaxed);
  pthread_mutex_unlock(&mutex_);
}

void Mutex::AssertCurrentThreadOwns() const {
  if (!IsLockedOnCurrentThread()) Fatal("not held by the current thread");
}

void Mutex::Fatal(const char* what) const { FatalMisuse("mutex", name_, what); }

}  // namespace strata
