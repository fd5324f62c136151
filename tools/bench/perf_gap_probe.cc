// perf_gap_probe: does this machine signal every overflow of a 1 ms task-clock event?
//
//   bazel build -c opt //tools/bench:perf_gap_probe
//   bazel-bin/tools/bench/perf_gap_probe [SECONDS]     (0 or none: until killed)
//
// No Strata in it: one thread spins in user code (no system call in its loop), sampled by its
// own perf task-clock event opened the way Strata opens one (user mode only, 1 ms of the
// thread's CPU per overflow, F_SETOWN_EX to this thread, F_SETSIG to a real-time signal). The
// handler only reads the thread's CPU clock. Every overflow-to-overflow CPU gap above 2.2 ms
// is printed with the longest the loop itself stood still (wall time) inside it, and how many
// times it stood still for more than 1 µs (each overflow, each timer tick and any other
// interrupt stops it for a few microseconds here). A gap with no long stall means the thread
// ran its own code and the kernel signalled no overflow; one with no stall at all, that no
// interrupt reached the thread's CPU, not even the timer's. A summary line follows every 60 s
// of CPU and at the end. Run it as one of the busy processes
// beside a workload (docs/takeover.md, "Open: a 6.6-interval gap").
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int64_t kPeriodNs = 1'000'000;
constexpr int64_t kReportGapNs = 2'200'000;
constexpr int kLogCapacity = 1 << 16;

int64_t Now(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return t.tv_sec * int64_t{1'000'000'000} + t.tv_nsec;
}

constexpr int64_t kInterruptionNs = 1000;

struct Gap {
  int64_t cpu_ns;
  int64_t loop_stall_ns;
  int64_t interruptions;
  int64_t realtime_ns;
};

// Written by the handler, read by the loop (same thread: the handler interrupts the loop).
Gap g_gaps[kLogCapacity];
std::atomic<int> g_gap_count{0};
std::atomic<int64_t> g_signals{0};
int64_t g_last_signal_cpu = 0;
std::atomic<int64_t> g_loop_stall_ns{0};  // Longest loop stall since the last signal.
std::atomic<int64_t> g_interruptions{0};   // Loop stalls > 1 µs since the last signal.

// Signal handler: clock_gettime only (async-signal-safe).
void OnOverflow(int, siginfo_t*, void*) {
  const int64_t cpu = Now(CLOCK_THREAD_CPUTIME_ID);
  g_signals.fetch_add(1, std::memory_order_relaxed);
  if (g_last_signal_cpu != 0 && cpu - g_last_signal_cpu > kReportGapNs) {
    const int n = g_gap_count.load(std::memory_order_relaxed);
    if (n < kLogCapacity) {
      g_gaps[n] = {cpu - g_last_signal_cpu, g_loop_stall_ns.load(std::memory_order_relaxed),
                   g_interruptions.load(std::memory_order_relaxed), Now(CLOCK_REALTIME)};
      std::atomic_signal_fence(std::memory_order_release);
      g_gap_count.store(n + 1, std::memory_order_relaxed);
    }
  }
  g_last_signal_cpu = cpu;
  g_loop_stall_ns.store(0, std::memory_order_relaxed);
  g_interruptions.store(0, std::memory_order_relaxed);
}

struct Totals {
  int over_2ms = 0, over_4ms = 0, over_6ms = 0, over_4ms_never_stalled = 0;
  int64_t largest_ns = 0;
};

void PrintSummary(const Totals& t) {
  const double cpu_s = Now(CLOCK_THREAD_CPUTIME_ID) / 1e9;
  const int64_t signals = g_signals.load(std::memory_order_relaxed);
  std::printf(
      "# %.1f s of CPU, %lld overflow signals (%.1f per CPU-second); CPU gaps between signals: "
      "> 2.2 ms %d, > 4 ms %d (the loop never stood still 1 ms in %d), > 6 ms %d, largest "
      "%.2f ms\n",
      cpu_s, static_cast<long long>(signals), cpu_s > 0 ? signals / cpu_s : 0.0, t.over_2ms,
      t.over_4ms, t.over_4ms_never_stalled, t.over_6ms, t.largest_ns / 1e6);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = &OnOverflow;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  const int signal_number = SIGRTMIN + 3;
  sigaction(signal_number, &action, nullptr);

  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.sample_period = kPeriodNs;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.wakeup_events = 1;
  const int fd = static_cast<int>(
      syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) {
    std::perror("perf_event_open");
    return 1;
  }
  f_owner_ex owner{F_OWNER_TID, static_cast<pid_t>(syscall(SYS_gettid))};
  if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, signal_number) != 0 ||
      fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0) {
    std::perror("fcntl");
    return 1;
  }

  Totals totals;
  int printed = 0;
  const int64_t start = Now(CLOCK_MONOTONIC);
  const int64_t end = seconds > 0 ? start + static_cast<int64_t>(seconds * 1e9) : INT64_MAX;
  int64_t previous = start;
  int64_t next_summary_cpu = 60'000'000'000;
  for (uint64_t iteration = 1;; ++iteration) {
    // The stall is kept only when no signal came while it was measured (a signal starts a new
    // gap; the handler may still land between the check and the store: rare, and then a
    // stall is counted in the next gap).
    const int64_t signals_before = g_signals.load(std::memory_order_relaxed);
    const int64_t now = Now(CLOCK_MONOTONIC);  // vDSO: no system call.
    const int64_t stall = now - previous;
    if (stall > kInterruptionNs && g_signals.load(std::memory_order_relaxed) == signals_before) {
      g_interruptions.store(g_interruptions.load(std::memory_order_relaxed) + 1,
                            std::memory_order_relaxed);
      if (stall > g_loop_stall_ns.load(std::memory_order_relaxed)) {
        g_loop_stall_ns.store(stall, std::memory_order_relaxed);
      }
    }
    previous = now;
    const int logged = g_gap_count.load(std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_acquire);
    for (; printed < logged; ++printed) {
      const Gap& gap = g_gaps[printed];
      ++totals.over_2ms;
      if (gap.cpu_ns > 4'000'000) {
        ++totals.over_4ms;
        if (gap.loop_stall_ns < 1'000'000) ++totals.over_4ms_never_stalled;
      }
      if (gap.cpu_ns > 6'000'000) ++totals.over_6ms;
      if (gap.cpu_ns > totals.largest_ns) totals.largest_ns = gap.cpu_ns;
      std::printf(
          "%lld.%06lld CPU gap %.3f ms, the loop stood still at most %.3f ms in it, %lld times "
          "> 1 us\n",
          static_cast<long long>(gap.realtime_ns / 1'000'000'000),
          static_cast<long long>(gap.realtime_ns % 1'000'000'000 / 1000), gap.cpu_ns / 1e6,
          gap.loop_stall_ns / 1e6, static_cast<long long>(gap.interruptions));
      std::fflush(stdout);
    }
    if (Now(CLOCK_MONOTONIC) > end) break;
    // Reading the CPU clock is a system call: once per 65 536 iterations.
    if (iteration % 65536 == 0 && Now(CLOCK_THREAD_CPUTIME_ID) > next_summary_cpu) {
      PrintSummary(totals);
      next_summary_cpu += 60'000'000'000;
    }
  }
  close(fd);
  PrintSummary(totals);
  return 0;
}
