// Can the sampler tell a thread waiting for a CPU from a blocked one without reading /proc?
// (docs/sampling.md, "Unknown waits": today both look alike, a thread whose CPU clock did not
// move.) A per-thread perf event with `context_switch` writes a PERF_RECORD_SWITCH at every
// switch, and the kernel (4.17+) marks a switch-out that preempted a runnable thread with
// PERF_RECORD_MISC_SWITCH_OUT_PREEMPT. This program checks it on the machine it runs on:
//
//   - a worker thread alternates 2 ms of spinning and a 5 ms nanosleep, publishing which of the
//     two it is in; a hog thread pinned to the same CPU preempts it;
//   - the main thread, as a sampler would, polls the event's ring every ~1 ms and classifies the
//     worker from the latest switch record only: switched out preempted (runnable), switched
//     out otherwise (blocked), or on a CPU; it compares that with what the worker published.
//
// Prints the records seen and how often the latest record's verdict agreed with the worker.
// A measurement, not a test: run by hand (tags manual).
//
//   bazel run //tools/bench:switch_records_probe -- [SECONDS]
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

enum WorkerState : int { kStarting, kSpinning, kSleeping };

std::atomic<int> g_worker_tid{0};
std::atomic<int> g_worker_state{kStarting};
std::atomic<bool> g_stop{false};

double NowMs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1e3 + now.tv_nsec / 1e6;
}

void PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

void* Worker(void*) {
  PinToCpu(0);
  g_worker_tid.store(static_cast<int>(syscall(SYS_gettid)));
  while (!g_stop.load()) {
    g_worker_state.store(kSpinning);
    const double until = NowMs() + 2;
    while (NowMs() < until) {
    }
    g_worker_state.store(kSleeping);
    const timespec nap{0, 5 * 1000 * 1000};
    nanosleep(&nap, nullptr);
  }
  return nullptr;
}

void* Hog(void*) {
  PinToCpu(0);
  while (!g_stop.load()) {
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  pthread_t worker, hog;
  pthread_create(&worker, nullptr, Worker, nullptr);
  while (g_worker_tid.load() == 0) {
  }
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;  // No samples: only the switch records.
  attr.context_switch = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  const long fd = syscall(SYS_perf_event_open, &attr, g_worker_tid.load(), -1, -1, 0);
  if (fd < 0) {
    std::perror("perf_event_open");
    return 1;
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t data_pages = 16;
  void* mapping = mmap(nullptr, page * (1 + data_pages), PROT_READ | PROT_WRITE, MAP_SHARED,
                       static_cast<int>(fd), 0);
  if (mapping == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  pthread_create(&hog, nullptr, Hog, nullptr);
  auto* header = static_cast<perf_event_mmap_page*>(mapping);
  const char* data = static_cast<const char*>(mapping) + page;
  const uint64_t data_size = page * data_pages;

  long switched_in = 0, out_preempted = 0, out_blocked = 0, lost = 0;
  long agree_runnable = 0, disagree_runnable = 0, agree_blocked = 0, disagree_blocked = 0;
  uint16_t latest_misc = 0;
  bool have_latest = false;
  uint64_t tail = 0;
  const double end = NowMs() + seconds * 1e3;
  while (NowMs() < end) {
    const uint64_t head = __atomic_load_n(&header->data_head, __ATOMIC_ACQUIRE);
    while (tail < head) {
      const auto* record = reinterpret_cast<const perf_event_header*>(data + tail % data_size);
      if (record->type == PERF_RECORD_SWITCH) {
        if (record->misc & PERF_RECORD_MISC_SWITCH_OUT) {
          ++((record->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) ? out_preempted : out_blocked);
        } else {
          ++switched_in;
        }
        latest_misc = record->misc;
        have_latest = true;
      } else if (record->type == PERF_RECORD_LOST) {
        ++lost;
      }
      tail += record->size;
    }
    __atomic_store_n(&header->data_tail, tail, __ATOMIC_RELEASE);
    // The verdict a sampler would give from the latest record, against the worker's own word
    // (read after the records: a switch after them can still make them disagree).
    const int state = g_worker_state.load();
    if (have_latest && (latest_misc & PERF_RECORD_MISC_SWITCH_OUT) && state != kStarting) {
      if (latest_misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) {
        ++(state == kSpinning ? agree_runnable : disagree_runnable);
      } else {
        ++(state == kSleeping ? agree_blocked : disagree_blocked);
      }
    }
    usleep(1000);
  }
  g_stop.store(true);
  pthread_join(worker, nullptr);
  pthread_join(hog, nullptr);
  std::printf("records: switch-in %ld, switch-out preempted %ld, switch-out blocked %ld, lost %ld\n",
              switched_in, out_preempted, out_blocked, lost);
  std::printf("polls whose latest record said runnable: %ld, worker spinning in %ld\n",
              agree_runnable + disagree_runnable, agree_runnable);
  std::printf("polls whose latest record said blocked: %ld, worker sleeping in %ld\n",
              agree_blocked + disagree_blocked, agree_blocked);
  return 0;
}
