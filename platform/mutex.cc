#include "platform/mutex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "platform/check.h"

namespace strata {
namespace {

// Brief spinning before sleeping: a holder is usually out within tens of ns.
constexpr int kSpinsBeforeSleeping = 100;

inline void CpuRelax() { __builtin_ia32_pause(); }

void FutexWait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}

}  // namespace

Mutex::~Mutex() {
  if (owner_.load(std::memory_order_relaxed) != 0) Fatal("destroyed while locked");
}

// Drepper's "Futexes are tricky" mutex 2: the state says whether anyone may be sleeping,
// so an uncontended Unlock() never makes a system call.
void Mutex::LockSlow() {
  for (int i = 0; i < kSpinsBeforeSleeping; ++i) {
    CpuRelax();
    uint32_t expected = kUnlocked;
    if (state_.load(std::memory_order_relaxed) == kUnlocked &&
        state_.compare_exchange_weak(expected, kLocked, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
      return;
    }
  }
  // Announce a waiter; whoever unlocks will wake one.
  while (state_.exchange(kLockedWithWaiters, std::memory_order_acquire) != kUnlocked) {
    FutexWait(state_, kLockedWithWaiters);
  }
}

void Mutex::WakeOneWaiter() {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr,
          nullptr, 0);
}

bool Mutex::TryLock() {
  const uintptr_t self = CurrentThreadToken();
  if (owner_.load(std::memory_order_relaxed) == self) Fatal("try-locked recursively");
  uint32_t expected = kUnlocked;
  if (!state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
    return false;
  }
  owner_.store(self, std::memory_order_relaxed);
  return true;
}

void Mutex::AssertCurrentThreadOwns() const {
  if (!IsLockedOnCurrentThread()) Fatal("not held by the current thread");
}

void Mutex::Fatal(const char* what) const { FatalMisuse("mutex", name_, what); }

}  // namespace strata
