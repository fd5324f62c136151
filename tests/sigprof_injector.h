// The SIGPROF injector shared by the negative-control preload libraries (eintr_injector.so,
// unsafe_sampler.so): installs `handler` for SIGPROF with SA_RESTART (as a sampler would) and
// starts a thread that sends SIGPROF to every other thread of the process every
// `period_ns`, the way a wall-clock sampler does. Not a profiler: test support only.
#ifndef STRATA_TESTS_SIGPROF_INJECTOR_H_
#define STRATA_TESTS_SIGPROF_INJECTOR_H_

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>

namespace strata_tests {

inline void* SigprofInjectorMain(void* period_ns) {
  const pid_t pid = getpid();
  const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
  const long period = reinterpret_cast<long>(period_ns);
  timespec tick = {period / 1000000000L, period % 1000000000L};
  for (;;) {
    nanosleep(&tick, nullptr);
    DIR* dir = opendir("/proc/self/task");
    if (dir == nullptr) continue;
    while (dirent* entry = readdir(dir)) {
      const pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
      if (tid > 0 && tid != self) syscall(SYS_tgkill, pid, tid, SIGPROF);
    }
    closedir(dir);
  }
  return nullptr;
}

inline void StartSigprofInjector(void (*handler)(int), long period_ns) {
  struct sigaction sa = {};
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, nullptr);
  pthread_t thread;
  pthread_create(&thread, nullptr, &SigprofInjectorMain, reinterpret_cast<void*>(period_ns));
  pthread_detach(thread);
}

}  // namespace strata_tests

#endif  // STRATA_TESTS_SIGPROF_INJECTOR_H_
