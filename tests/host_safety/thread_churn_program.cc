// A program that makes many short-lived threads (issue 16, "memory grows with every thread
// ever created"; tests/host_safety/thread_churn_test.sh).
//
//   thread_churn_program THREADS
//
// Four creator threads each create and join THREADS/4 threads, one at a time. Each short
// thread names itself "churn-<n>" and records one text marker (a 1000-byte payload: a 1 MiB buffer holds those of about 1000 threads) through
// the public API, so that every thread has data in the profile buffer while the buffer
// holds it. The main thread reads its resident set size (/proc/self/statm) every 20 ms.
// stdout (the same with and without the profiler):
//   churn: threads=N
// stderr: "churn: rss_max_kb=R" (the largest resident size seen during the run, before the
// exit-time save of a profiler).
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/markers.h"

namespace {

std::atomic<int> g_next{0};
std::atomic<int> g_running_creators{0};
int g_threads = 0;
const std::string g_payload(1000, 'x');

void* ShortThread(void* arg) {
  const long n = reinterpret_cast<long>(arg);
  char name[16];
  snprintf(name, sizeof(name), "churn-%ld", n);
  pthread_setname_np(pthread_self(), name);
  STRATA_MARKER_TEXT("churn", kOther, strata::MarkerOptions(), g_payload);
  return nullptr;
}

void* Creator(void*) {
  for (;;) {
    const int n = g_next.fetch_add(1);
    if (n >= g_threads) break;
    pthread_t t;
    if (pthread_create(&t, nullptr, &ShortThread, reinterpret_cast<void*>(static_cast<long>(n))) !=
        0) {
      perror("pthread_create");
      exit(3);
    }
    pthread_join(t, nullptr);
  }
  g_running_creators.fetch_sub(1);
  return nullptr;
}

long ResidentKilobytes() {
  FILE* f = fopen("/proc/self/statm", "re");
  if (!f) return 0;
  long size = 0, resident = 0;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
  fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s THREADS\n", argv[0]);
    return 2;
  }
  g_threads = atoi(argv[1]);
  constexpr int kCreators = 4;
  g_running_creators = kCreators;
  pthread_t creators[kCreators];
  for (pthread_t& c : creators) pthread_create(&c, nullptr, &Creator, nullptr);
  long rss_max = ResidentKilobytes();
  while (g_running_creators.load() > 0) {
    timespec t{0, 20 * 1000 * 1000};
    nanosleep(&t, nullptr);
    const long rss = ResidentKilobytes();
    if (rss > rss_max) rss_max = rss;
  }
  for (pthread_t c : creators) pthread_join(c, nullptr);
  const long rss = ResidentKilobytes();
  if (rss > rss_max) rss_max = rss;
  printf("churn: threads=%d\n", g_threads);
  fprintf(stderr, "churn: rss_max_kb=%ld\n", rss_max);
  return 0;
}
