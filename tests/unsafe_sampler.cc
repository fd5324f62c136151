// A negative control for the signal-safety stress scenario, not a profiler: preloaded into
// `signal_stress`, it does what a sampler must never do. Its SIGPROF handler allocates and
// frees a 40 KiB block (above the tcache sizes, so malloc takes its arena lock), and a thread
// sends SIGPROF to every other thread of the process every 0.2 ms. A signal that lands while
// its thread holds the arena lock deadlocks that thread (glibc's lock is not recursive);
// under it the scenario's watchdog must report a hang (or the process crashes). If it did
// not, the scenario could not detect an unsafe handler.
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>

namespace {

volatile char g_sink;

void OnSigprof(int) {
  // Deliberately not async-signal-safe.
  char* block = static_cast<char*>(std::malloc(40 * 1024));
  if (block) {
    block[0] = 1;
    g_sink = block[0];
  }
  std::free(block);
}

void* InjectorMain(void*) {
  const pid_t pid = getpid();
  const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
  timespec tick = {0, 200000};
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

__attribute__((constructor)) void StartInjector() {
  struct sigaction sa = {};
  sa.sa_handler = OnSigprof;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, nullptr);
  pthread_t thread;
  pthread_create(&thread, nullptr, InjectorMain, nullptr);
  pthread_detach(thread);
}

}  // namespace
