#include "full/internal/ipc_link.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include <memory>

#include "base/internal/session/core.h"
#include "base/internal/session/tier_extension.h"
#include "base/profiler.h"

namespace strata {
namespace full {

// --- LocalManagerLink

void LocalManagerLink::OnUpdate(Update&& update) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (update.IsFinal()) {
      // The session's manager is going away (session stopped): for the controller, this
      // process now holds nothing. The next session's manager will be hooked by Sync().
      hooked_ = false;
      pending_.Fold(Update(0, 0, TimeStamp(), {}));
    } else {
      pending_.Fold(std::move(update));
    }
  }
  wake_();
}

bool LocalManagerLink::Sync() {
  if (!ProfilerIsActive() || hooked()) return false;  // The common case, without the lock.
  base_internal::SessionLock session;
  ControlledChunkManager* manager = base_internal::SessionControlledChunkManager();
  if (!manager) return false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (hooked_) return false;
    hooked_ = true;
  }
  // The callback gets the manager's current state at once (all its released chunks).
  manager->SetUpdateCallback([this](Update&& update) { OnUpdate(std::move(update)); });
  return true;
}

void LocalManagerLink::DestroyAtOrBefore(TimeStamp done) {
  base_internal::SessionLock session;
  if (!hooked()) return;  // A chunk of a session that is gone.
  ControlledChunkManager* manager = base_internal::SessionControlledChunkManager();
  if (manager) manager->DestroyChunksAtOrBefore(done);
}

void LocalManagerLink::Unhook() {
  base_internal::SessionLock session;
  ControlledChunkManager* manager = base_internal::SessionControlledChunkManager();
  if (!manager || !hooked()) return;
  manager->SetUpdateCallback(nullptr);  // Our callback gets a final update: hooked_ = false.
}

bool LocalManagerLink::HasPending() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !pending_.IsNotUpdate();
}

LocalManagerLink::Update LocalManagerLink::TakePending() {
  std::lock_guard<std::mutex> lock(mutex_);
  Update update = std::move(pending_);
  pending_.Clear();
  return update;
}

bool LocalManagerLink::hooked() {
  std::lock_guard<std::mutex> lock(mutex_);
  return hooked_;
}

// --- Threads, names, clocks

namespace {

struct ThreadStart {
  std::string name;
  std::function<void()> body;
};

void* InternalThreadMain(void* arg) {
  std::unique_ptr<ThreadStart> start(static_cast<ThreadStart*>(arg));
  pthread_setname_np(pthread_self(), start->name.substr(0, 15).c_str());
  start->body();
  return nullptr;
}

}  // namespace

bool StartInternalThread(pthread_t* thread, const char* name, std::function<void()> body) {
  auto* start = new ThreadStart{name, std::move(body)};
  // The new thread inherits this mask: no sampling signal ever lands on it.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  const int rc = base_internal::CreateProfilerThread(thread, &InternalThreadMain, start);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    delete start;
    return false;
  }
  return true;
}

namespace {
constexpr int kMaxInheritedFds = 1100;
// A slot: the number (0: free, -1: being filled) and the identity it had when registered.
struct InheritedFd {
  std::atomic<int> fd{0};
  std::atomic<uint64_t> device{0};
  std::atomic<uint64_t> inode{0};
};
InheritedFd g_inherited_fds[kMaxInheritedFds];
std::once_flag g_atfork_once;

void CloseInheritedFdsInForkedChild() {
  // Async-signal-safe: loads, fstat(2) and close(2). A number the program closed and reused
  // (another device or inode now) is the program's: left alone.
  for (InheritedFd& slot : g_inherited_fds) {
    const int fd = slot.fd.load(std::memory_order_acquire);
    if (fd > 0) {
      struct stat status;
      if (fstat(fd, &status) == 0 &&
          static_cast<uint64_t>(status.st_dev) == slot.device.load(std::memory_order_relaxed) &&
          static_cast<uint64_t>(status.st_ino) == slot.inode.load(std::memory_order_relaxed)) {
        close(fd);
      }
    }
    slot.fd.store(0, std::memory_order_relaxed);
  }
}
}  // namespace

void RegisterInheritedFd(int fd) {
  if (fd <= 0) return;
  struct stat status;
  if (fstat(fd, &status) != 0) return;
  std::call_once(g_atfork_once,
                 [] { pthread_atfork(nullptr, nullptr, &CloseInheritedFdsInForkedChild); });
  for (InheritedFd& slot : g_inherited_fds) {
    int expected = 0;
    if (!slot.fd.compare_exchange_strong(expected, -1)) continue;  // Claimed: being filled.
    slot.device.store(static_cast<uint64_t>(status.st_dev), std::memory_order_relaxed);
    slot.inode.store(static_cast<uint64_t>(status.st_ino), std::memory_order_relaxed);
    slot.fd.store(fd, std::memory_order_release);
    return;
  }
}

void UnregisterInheritedFd(int fd) {
  if (fd <= 0) return;
  for (InheritedFd& slot : g_inherited_fds) {
    int expected = fd;
    if (slot.fd.compare_exchange_strong(expected, 0)) return;
  }
}

std::string ProgramName() {
  const char* name = program_invocation_short_name;
  return name && name[0] ? name : "program";
}

int64_t ReadEpochOffsetNs() {
  int64_t best_offset = 0;
  int64_t best_width = INT64_MAX;
  for (int i = 0; i < 5; ++i) {
    timespec a, r, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_REALTIME, &r);
    clock_gettime(CLOCK_MONOTONIC, &b);
    const int64_t ns_a = int64_t{a.tv_sec} * 1000000000 + a.tv_nsec;
    const int64_t ns_b = int64_t{b.tv_sec} * 1000000000 + b.tv_nsec;
    const int64_t ns_r = int64_t{r.tv_sec} * 1000000000 + r.tv_nsec;
    if (ns_b - ns_a < best_width) {
      best_width = ns_b - ns_a;
      best_offset = ns_r - (ns_a + (ns_b - ns_a) / 2);
    }
  }
  return best_offset;
}

}  // namespace full
}  // namespace strata
