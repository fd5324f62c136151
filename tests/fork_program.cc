// An unmodified program (no Strata include, no Strata call) that forks while it is sampled
// (issue 10, "Fork"; tests/fork_test.sh):
//
//   fork_program                      the child keeps running without exec
//   fork_program --exec PROGRAM ARGS  the child execs PROGRAM (inheriting the environment)
//   fork_program --child-without-thread  the child without exec starts no thread (for TSan,
//                                      which cannot start threads after a multi-threaded fork)
//
// The main thread starts "fk-spinner" (spins in parent_spin_loop until told to stop), burns
// ~300 ms of CPU in parent_main_work, forks, burns another ~300 ms, waits for the child and
// stops the spinner. Exit status 0 when the child exited with status 0.
//
// The child without exec installs its own SIGPROF handler that counts signals (a profiler
// timer inherited across fork would show here), starts a thread "fk-child-thread" and burns
// ~300 ms of CPU in child_busy_work while that thread burns ~100 ms (then waits), allocates and
// frees, then lists its own threads and prints
//
//   fork_program: child tasks=2 names=fork_program,fk-child-thread sampler_threads=0 sigprof=0
//
// and exits with exit() (atexit handlers run, as in a real program): status 0 when exactly its
// own two threads exist (no profiler thread) and no SIGPROF arrived, else 1. With
// --child-without-thread the child starts no thread and expects exactly one task.
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::atomic<bool> g_stop_spinner{false};
std::atomic<bool> g_child_listed{false};
// Keeps the work from being optimised away; written by main and the spinner (relaxed atomic).
std::atomic<uint64_t> g_sink{0};
volatile sig_atomic_t g_child_sigprof = 0;

double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noipa)) uint64_t Mix(uint64_t x) {
  for (int i = 0; i < 20000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

__attribute__((noipa)) void BurnCpu(double ms) {
  const double start = ThreadCpuMs();
  uint64_t x = 7;
  while (ThreadCpuMs() - start < ms) x = Mix(x);
  g_sink.store(x, std::memory_order_relaxed);
}

// Not tail calls (each keeps its own frame on the stack) and different bodies.
__attribute__((noipa)) void parent_main_work() {
  BurnCpu(300);
  g_sink.fetch_add(1, std::memory_order_relaxed);
}
__attribute__((noipa)) void child_busy_work() {
  BurnCpu(300);
  g_sink.store(g_sink.load(std::memory_order_relaxed) * 3, std::memory_order_relaxed);
}

__attribute__((noipa)) void parent_spin_loop() {
  uint64_t x = 3;
  while (!g_stop_spinner.load(std::memory_order_relaxed)) x = Mix(x);
  g_sink.store(x, std::memory_order_relaxed);
}

void* SpinnerMain(void*) {
  pthread_setname_np(pthread_self(), "fk-spinner");
  parent_spin_loop();
  return nullptr;
}

void* ChildThreadMain(void*) {
  pthread_setname_np(pthread_self(), "fk-child-thread");
  BurnCpu(100);
  while (!g_child_listed.load()) usleep(1000);  // Alive while the child lists its threads.
  return nullptr;
}

void CountSigprof(int) { g_child_sigprof = g_child_sigprof + 1; }

int RunChildWithoutExec(bool start_child_thread) {
  struct sigaction action = {};
  action.sa_handler = CountSigprof;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGPROF, &action, nullptr);

  pthread_t thread{};
  if (start_child_thread && pthread_create(&thread, nullptr, &ChildThreadMain, nullptr) != 0) {
    std::perror("fork_program: child pthread_create");
    return 3;
  }
  child_busy_work();
  std::vector<std::string> blocks;
  for (int i = 0; i < 1000; ++i) blocks.emplace_back(100 + i, 'c');
  // Listed while the child thread is alive: exactly it and the forking thread must exist.
  std::string names;
  int tasks = 0;
  int samplers = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      const std::string path = std::string("/proc/self/task/") + entry->d_name + "/comm";
      char name[64] = {};
      if (FILE* f = std::fopen(path.c_str(), "re")) {
        if (std::fgets(name, sizeof(name), f)) name[std::strcspn(name, "\n")] = 0;
        std::fclose(f);
      }
      ++tasks;
      if (std::strstr(name, "Strata")) ++samplers;
      names += (names.empty() ? "" : ",") + std::string(name);
    }
    closedir(dir);
  }
  g_child_listed.store(true);
  if (start_child_thread) pthread_join(thread, nullptr);
  std::printf("fork_program: child tasks=%d names=%s sampler_threads=%d sigprof=%d\n", tasks,
              names.c_str(), samplers, static_cast<int>(g_child_sigprof));
  std::fflush(stdout);
  const int expected_tasks = start_child_thread ? 2 : 1;
  return (samplers == 0 && g_child_sigprof == 0 && tasks == expected_tasks) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  char** exec_argv = nullptr;
  bool start_child_thread = true;
  if (argc >= 3 && std::strcmp(argv[1], "--exec") == 0) {
    exec_argv = argv + 2;
  } else if (argc == 2 && std::strcmp(argv[1], "--child-without-thread") == 0) {
    start_child_thread = false;
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: %s [--exec PROGRAM ARGS... | --child-without-thread]\n", argv[0]);
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  pthread_t spinner;
  if (pthread_create(&spinner, nullptr, &SpinnerMain, nullptr) != 0) {
    std::perror("fork_program: pthread_create");
    return 3;
  }
  parent_main_work();

  const pid_t child = fork();
  if (child < 0) {
    std::perror("fork_program: fork");
    return 3;
  }
  if (child == 0) {
    if (exec_argv) {
      execv(exec_argv[0], exec_argv);
      std::perror("fork_program: execv");
      _exit(127);
    }
    std::exit(RunChildWithoutExec(start_child_thread));
  }
  std::printf("fork_program: parent pid=%d child_pid=%d mode=%s\n", static_cast<int>(getpid()),
              static_cast<int>(child), exec_argv ? "exec" : "fork");
  parent_main_work();
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
  }
  g_stop_spinner.store(true);
  pthread_join(spinner, nullptr);
  const int child_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::printf("fork_program: parent child_status=%d\n", child_status);
  return child_status == 0 ? 0 : 1;
}
