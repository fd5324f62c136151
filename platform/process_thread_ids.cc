#include "platform/process_thread_ids.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "platform/raw_syscall.h"

namespace strata {
namespace {

// Per-thread cache of gettid(). initial-exec: the library is loaded at start-up (preload or
// DT_NEEDED), so static TLS is available and reading it is a plain %fs-relative load that is
// safe inside a signal handler.
__attribute__((tls_model("initial-exec"))) thread_local pid_t t_cached_tid = 0;

std::atomic<pid_t> g_main_thread_tid{0};

void ResetTidCacheInForkChild() {
  // Only the forking thread exists in the child; its tid changed.
  t_cached_tid = 0;
  g_main_thread_tid.store(0, std::memory_order_relaxed);
}

struct AtForkRegistration {
  AtForkRegistration() { pthread_atfork(nullptr, nullptr, &ResetTidCacheInForkChild); }
};
const AtForkRegistration g_at_fork_registration;

}  // namespace

ProcessId CurrentProcessId() { return ProcessId::FromNumber(getpid()); }

ThreadId CurrentThreadId() {
  pid_t tid = t_cached_tid;
  if (__builtin_expect(tid == 0, 0)) {
    tid = static_cast<pid_t>(RawSyscall(SYS_gettid));
    t_cached_tid = tid;
  }
  return ThreadId::FromNumber(tid);
}

void InitMainThreadId() {
  g_main_thread_tid.store(CurrentThreadId().ToNumber(), std::memory_order_relaxed);
}

ThreadId MainThreadId() {
  pid_t tid = g_main_thread_tid.load(std::memory_order_relaxed);
  return ThreadId::FromNumber(tid != 0 ? tid : getpid());
}

bool IsMainThread() { return CurrentThreadId() == MainThreadId(); }

}  // namespace strata
