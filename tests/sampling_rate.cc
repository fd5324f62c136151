// An unmodified program (no Strata include, no Strata call) for the sampling-rate scenario
// (tests/sampling_rate_test.sh, issue 17 "The sampling rate is the kernel tick").
//
// Threads:
//   sr-busy     burns --busy-ms of its own CPU time in user mode (the clock is read every few
//               hundred microseconds of work), then prints its CPU time as it measured it.
//   sr-sleeper  burns 20 ms of CPU, then calls nanosleep(200 ms) once and reports whether it
//               returned 0 after the full time (a signal during the sleep would cut it short:
//               the program installs no handler, so only a profiler's signal could).
//
// --daemon: the main thread, once sr-busy has burned half its CPU, does what daemons do:
// closes every descriptor above 2 (close_range(3, ~0U, 0), or a close loop where the system
// call is missing), then opens its own files on the freed numbers, writes and reads them back.
// sr-busy then burns its second half in BurnAfterClose, a function of its own, so that the
// profile tells which samples came after the close.
//
// stdout carries only what does not depend on timing (compared byte for byte with a plain
// run); the measurements go to stderr, one line each:
//   sampling_rate: thread=sr-busy cpu_ms=1500.2 after_close_cpu_ms=750.1
//   sampling_rate: thread=sr-sleeper sleep_result=0 slept_ms=200.1 status=ok
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

double g_busy_ms = 1500;
bool g_daemon = false;
std::atomic<bool> g_half_done{false};
std::atomic<bool> g_closed{false};
std::atomic<uint64_t> g_sink{0};
bool g_sleep_ok = false;  // Written by sr-sleeper, read by main after joining it.

double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double MonotonicMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// User-mode work until the thread's CPU clock reaches `until_ms`.
__attribute__((noinline)) void BurnUntil(double until_ms) {
  uint64_t x = g_sink.load(std::memory_order_relaxed) | 1;
  while (ThreadCpuMs() < until_ms) {
    for (int i = 0; i < 200000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  g_sink.fetch_add(x, std::memory_order_relaxed);
}

// Not tail calls, not folded into one (noipa: GCC merges identical functions at -O2): each
// keeps its own frame, so that samples name it.
__attribute__((noipa)) void BurnBeforeClose(double until_ms) {
  BurnUntil(until_ms);
  g_sink.fetch_add(1, std::memory_order_relaxed);
}
__attribute__((noipa)) void BurnAfterClose(double until_ms) {
  BurnUntil(until_ms);
  g_sink.fetch_add(1, std::memory_order_relaxed);
}

void* Busy(void*) {
  pthread_setname_np(pthread_self(), "sr-busy");
  const double start = ThreadCpuMs();
  BurnBeforeClose(start + g_busy_ms / 2);
  g_half_done.store(true);
  double after_close_start = ThreadCpuMs();
  if (g_daemon) {
    while (!g_closed.load()) {
      const timespec wait{0, 1000 * 1000};
      nanosleep(&wait, nullptr);
    }
    after_close_start = ThreadCpuMs();
  }
  BurnAfterClose(start + g_busy_ms);
  const double end = ThreadCpuMs();
  fprintf(stderr, "sampling_rate: thread=sr-busy cpu_ms=%.3f after_close_cpu_ms=%.3f\n", end,
          end - after_close_start);
  return nullptr;
}

void* Sleeper(void*) {
  pthread_setname_np(pthread_self(), "sr-sleeper");
  BurnUntil(ThreadCpuMs() + 20);
  const timespec sleep{0, 200 * 1000 * 1000};
  timespec left{0, 0};
  const double before = MonotonicMs();
  const int result = nanosleep(&sleep, &left);
  const double slept = MonotonicMs() - before;
  const bool ok = result == 0 && slept >= 199.5;
  fprintf(stderr, "sampling_rate: thread=sr-sleeper sleep_result=%d slept_ms=%.1f status=%s\n",
          result, slept, ok ? "ok" : (result != 0 ? strerror(errno) : "short"));
  g_sleep_ok = ok;
  return nullptr;
}

// What a daemon does after closing everything: its own files, on the numbers it freed.
void CloseEverythingAndWorkAlone() {
  if (syscall(SYS_close_range, 3U, ~0U, 0) != 0) {
    for (int fd = 3; fd < 65536; ++fd) close(fd);
  }
  char path[] = "/tmp/sampling_rate_daemon_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) {
    printf("daemon: mkstemp failed\n");
    return;
  }
  printf("daemon: first descriptor after the close is %d\n", fd);
  const std::string text = "what the daemon wrote\n";
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  char back[64] = {0};
  ok = ok && lseek(fd, 0, SEEK_SET) == 0 &&
       read(fd, back, sizeof(back) - 1) == static_cast<ssize_t>(text.size()) && text == back;
  const int second = open("/dev/null", O_WRONLY | O_CLOEXEC);
  printf("daemon: second descriptor %d, file round trip %s\n", second, ok ? "ok" : "FAILED");
  if (second >= 0) close(second);
  close(fd);
  unlink(path);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--busy-ms") == 0 && i + 1 < argc) {
      g_busy_ms = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--daemon") == 0) {
      g_daemon = true;
    } else {
      fprintf(stderr, "usage: sampling_rate [--busy-ms N] [--daemon]\n");
      return 2;
    }
  }
  pthread_t busy;
  pthread_t sleeper;
  pthread_create(&busy, nullptr, &Busy, nullptr);
  pthread_create(&sleeper, nullptr, &Sleeper, nullptr);
  if (g_daemon) {
    while (!g_half_done.load()) {
      const timespec wait{0, 1000 * 1000};
      nanosleep(&wait, nullptr);
    }
    CloseEverythingAndWorkAlone();
    g_closed.store(true);
  }
  pthread_join(busy, nullptr);
  pthread_join(sleeper, nullptr);
  printf("sleeper: nanosleep %s\n", g_sleep_ok ? "completed" : "cut short");
  printf("sampling_rate: done\n");
  return 0;
}
