#include "platform/mutex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "platform/check.h"
#include "platform/raw_syscall.h"

namespace strata {
namespace {

// Brief spinning before sleeping: a holder is usually out within tens of ns. The waiter
// backs off exponentially between looks at the lock word, so that a holder taking the lock
// again and again (a thread writing many entries) keeps the lock's and the data's cache
// lines instead of handing them to the other CPU at every entry. A pause is ~26 ns here, so
// a waiter spins up to ~26 µs (looks 1, 2, 4 ... 256 pauses apart), then sleeps. Two threads
// putting 64-byte entries into one buffer: 0.14x one writer's throughput when the waiter
// looked after every pause, 0.74-0.81x with the backoff (docs/benchmarks.md).
constexpr int kSpinPausesBeforeSleeping = 1000;
constexpr int kMaxPausesBetweenLooks = 256;

inline void CpuRelax() { __builtin_ia32_pause(); }

void FutexWait(std::atomic<uint32_t>& word, uint32_t expected) {
  // Raw: libc's syscall() is a symbol the program (or Strata's own interposer) can replace.
  RawSyscall(SYS_futex, reinterpret_cast<long>(&word), FUTEX_WAIT_PRIVATE, expected);
}

}  // namespace

Mutex::~Mutex() {
  if (owner_.load(std::memory_order_relaxed) != 0) Fatal("destroyed while locked");
}

// Drepper's "Futexes are tricky" mutex 2: the state says whether anyone may be sleeping,
// so an uncontended Unlock() never makes a system call.
void Mutex::LockSlow() {
  for (int pauses = 1, spent = 0; spent < kSpinPausesBeforeSleeping;
       spent += pauses, pauses = pauses < kMaxPausesBetweenLooks ? 2 * pauses : pauses) {
    for (int i = 0; i < pauses; ++i) CpuRelax();
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
  RawSyscall(SYS_futex, reinterpret_cast<long>(&state_), FUTEX_WAKE_PRIVATE, 1);
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
