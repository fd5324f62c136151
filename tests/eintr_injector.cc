// A negative control for the sleeper scenario, not a profiler: preloaded into `sleeper`, it
// sends SIGPROF (handler installed with SA_RESTART, like a sampler's) to every thread of the
// process every millisecond, the way a wall-clock sampler does. Under it, sleeper must report
// EINTR / early returns (sampling-mechanisms.md lists nanosleep, usleep, clock_nanosleep,
// poll, select, epoll_wait and sleep as affected even with SA_RESTART); if it did not, the
// sleeper could not detect what its scenario is meant to catch.
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace {

void OnSigprof(int) {}

void* InjectorMain(void*) {
  const pid_t pid = getpid();
  const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
  timespec tick = {0, 1000000};
  for (;;) {
    nanosleep(&tick, nullptr);
    DIR* dir = opendir("/proc/self/task");
    if (dir == nullptr) continue;
    while (dirent* entry = readdir(dir)) {
      pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
      if (tid > 0 && tid != self) syscall(SYS_tgkill, pid, tid, SIGPROF);
    }
    closedir(dir);
  }
  return nullptr;
}

__attribute__((constructor)) void StartInjector() {
  struct sigaction sa = {};
  sa.sa_handler = OnSigprof;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, nullptr);
  pthread_t t;
  pthread_create(&t, nullptr, InjectorMain, nullptr);
  pthread_detach(t);
}

}  // namespace
