// A child program of the multi-process scenarios (ipc_test.sh): it links the full tier, is
// spawned by ipc_parent through SpawnProfiledChild (STRATA_IPC_PARENT set), and therefore
// follows the parent's session from StartFull() on.
//
//   ipc_child worker <cmd-fd> <ack-fd>
//       A busy thread ("child-worker") burns CPU for 300 ms, then naps. The main thread
//       answers one-byte commands from <cmd-fd>: 'm' adds the next "sync-<n>" marker and
//       acks 'a'; 'M' + 8 bytes of the parent's TimeStamp adds "sync-<n>" at that instant and
//       "sync-<n>-woken" at its own wake-up, and acks 'a'; 's' answers the session as the
//       child has it (32 bytes: "active paused interval_ms buffer_megabytes"); 'x' adds 20000
//       "filler" markers, then an "early-exit" marker with the main thread's CPU time
//       ("main_cpu_ns=<n>"), and exits (normally: the exit profile goes to the parent); 'q'
//       exits. 'r' is acked once the parent's session is followed.
//   ipc_child writer <cmd-fd> <ack-fd> <slots-file> <slot> <duration-ms> <bytes-per-ms>
//       Writes text markers ("w <seq>") at the given rate for the given time, storing the
//       process's live buffer bytes in its slot of the shared file after every marker, then
//       acks 'd' and waits for 'q'.
//   ipc_child starved <cmd-fd> <ack-fd> <slots-file> <slot>
//       The child whose IPC thread the parent holds stopped (ipc_parent starved): 'w' writes
//       4 MiB of text markers, stores the most live buffer bytes it had meanwhile in its slot,
//       and acks 'w'; 'q' exits.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "base/markers.h"
#include "base/profiler.h"
#include "full/full.h"
#include "full/multiprocess.h"
#include "shared/buffer/chunk.h"
#include "tests/ipc/writer_slots.h"

namespace {


std::atomic<bool> g_stop{false};

__attribute__((noinline)) uint64_t ChildBusyLeaf(uint64_t x) {
  return x * 6364136223846793005ull + 1442695040888963407ull;
}

double ThreadCpuMs() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return now.tv_sec * 1e3 + now.tv_nsec / 1e6;
}

__attribute__((noinline)) void ChildBusyLoop() {
  // Registered at creation (pthread_create is interposed); the profile reads the name.
  pthread_setname_np(pthread_self(), "child-worker");
  // 300 ms of this thread's CPU time (not of wall time): on a busy machine the thread still
  // wants the same CPU, so the same number of samples once it has had it.
  uint64_t x = 1;
  while (!g_stop.load() && ThreadCpuMs() < 300) {
    for (int i = 0; i < 1000; ++i) x = ChildBusyLeaf(x) ^ (x >> 7);
  }
  while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (x == 42) std::puts("");
}

void Ack(int fd, char c) {
  if (write(fd, &c, 1) != 1) std::exit(5);
}

char Command(int fd) {
  char c = 0;
  const ssize_t n = read(fd, &c, 1);
  return n == 1 ? c : 'q';  // The parent went away: leave.
}

void WaitUntilFollowing() {
  for (int i = 0; i < 2000 && !strata::full::IpcChildFollowsParent(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!strata::full::IpcChildFollowsParent()) {
    std::fprintf(stderr, "ipc_child: not following a parent\n");
    std::exit(4);
  }
}

int Worker(int cmd, int ack) {
  strata::full::StartFull();
  WaitUntilFollowing();
  std::thread busy(&ChildBusyLoop);
  Ack(ack, 'r');
  int sync = 0;
  for (;;) {
    const char c = Command(cmd);
    if (c == 'M') {
      // The parent's instant (8 bytes of monotonic nanoseconds) follows: "sync-<n>" at that
      // very instant (the profile's alignment is what is measured), "sync-<n>-woken" now
      // (the pipe's wake-up latency adds to it).
      int64_t ns = 0;
      if (read(cmd, &ns, sizeof(ns)) != sizeof(ns)) break;
      const std::string name = "sync-" + std::to_string(++sync);
      strata::AddMarker(strata::ProfilerString::Dynamic(name), strata::Category::kOther,
                        strata::MarkerOptions::Instant(strata::TimeStamp::FromNanoseconds(ns)));
      strata::AddMarker(strata::ProfilerString::Dynamic(name + "-woken"),
                        strata::Category::kOther);
      Ack(ack, 'a');
    } else if (c == 'm') {
      const std::string name = "sync-" + std::to_string(++sync);
      strata::AddMarker(strata::ProfilerString::Dynamic(name), strata::Category::kOther);
      Ack(ack, 'a');
    } else if (c == 's') {
      // The session as this child has it: "active paused interval_ms buffer_megabytes".
      const strata::ProfilerSettings settings = strata::ProfilerCurrentSettings();
      char line[32] = {};
      std::snprintf(line, sizeof(line), "%d %d %.3f %u", strata::ProfilerIsActive() ? 1 : 0,
                    strata::ProfilerIsPaused() ? 1 : 0, settings.interval_ms,
                    settings.buffer_megabytes);
      if (write(ack, line, sizeof(line)) != static_cast<ssize_t>(sizeof(line))) std::exit(5);
    } else if (c == 'x') {
      // A buffer that takes the exit profile's capture tens of ms of this thread's CPU: that
      // capture is Strata's work and must not be sampled into the profile it makes. The last
      // marker says how much CPU this thread had used before exiting.
      for (int i = 0; i < 20000; ++i) {
        strata::AddTextMarker(strata::ProfilerString::Literal("filler"), strata::Category::kOther,
                              strata::MarkerOptions(), std::string(100, 'f'));
      }
      timespec cpu{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
      const long long cpu_ns = cpu.tv_sec * 1000000000ll + cpu.tv_nsec;
      strata::AddTextMarker(strata::ProfilerString::Literal("early-exit"), strata::Category::kOther,
                            strata::MarkerOptions(), "main_cpu_ns=" + std::to_string(cpu_ns));
      break;
    } else if (c == 'q') {
      break;
    }
  }
  g_stop = true;
  busy.join();
  return 0;  // exit(): the exit profile goes to the parent.
}

int Writer(int cmd, int ack, const char* slots_path, int slot, int duration_ms,
           int bytes_per_ms) {
  auto* slots = strata_test::MapSlots(slots_path, /*create=*/false);
  if (slots == nullptr) return 6;
  strata::BufferChunk::AlsoCountLiveBytesIn(strata_test::TreeLive(slots));
  strata::full::StartFull();
  WaitUntilFollowing();
  // The slot is also refreshed between markers: chunks are prepared by the sampler thread
  // and destroyed by the IPC worker, not only when the writer writes.
  std::atomic<bool> refreshing{true};
  std::thread refresher([&] {
    pthread_setname_np(pthread_self(), "slot-refresher");
    while (refreshing.load()) {
      slots[slot].store(strata::BufferChunk::LiveBufferBytes(), std::memory_order_relaxed);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  Ack(ack, 'r');
  const std::string padding(200, 'p');
  // Each marker: ~200 bytes of text plus the header (~40 bytes).
  const int per_ms = std::max(1, bytes_per_ms / 240);
  const auto start = std::chrono::steady_clock::now();
  auto next = start;
  uint64_t seq = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(duration_ms)) {
    for (int i = 0; i < per_ms; ++i) {
      strata::AddTextMarker(strata::ProfilerString::Literal("w"), strata::Category::kOther,
                            strata::MarkerOptions(), std::to_string(++seq) + padding);
      slots[slot].store(strata::BufferChunk::LiveBufferBytes(), std::memory_order_relaxed);
    }
    next += std::chrono::milliseconds(1);
    std::this_thread::sleep_until(next);
  }
  refreshing = false;
  refresher.join();
  slots[slot].store(strata::BufferChunk::LiveBufferBytes(), std::memory_order_relaxed);
  Ack(ack, 'd');
  while (Command(cmd) != 'q') {
  }
  return 0;
}

// --- starved

int Starved(int cmd, int ack, const char* slots_path, int slot) {
  auto* slots = strata_test::MapSlots(slots_path, /*create=*/false);
  if (slots == nullptr) return 6;
  strata::BufferChunk::AlsoCountLiveBytesIn(strata_test::TreeLive(slots));
  strata::full::StartFull();
  WaitUntilFollowing();
  Ack(ack, 'r');
  for (;;) {
    const char c = Command(cmd);
    if (c == 'w') {
      // 4 MiB: four times the session's buffer (the child's own local limit).
      const std::string padding(200, 'p');
      uint64_t most = 0;
      for (uint64_t seq = 1, written = 0; written < (4u << 20); ++seq) {
        strata::AddTextMarker(strata::ProfilerString::Literal("w"), strata::Category::kOther,
                              strata::MarkerOptions(), std::to_string(seq) + padding);
        written += 240;
        most = std::max<uint64_t>(most, strata::BufferChunk::LiveBufferBytes());
        // Room for the sampler thread to prepare spares, as a real program leaves it.
        if (seq % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      slots[slot].store(most, std::memory_order_relaxed);
      Ack(ack, 'w');
    } else if (c == 'q') {
      return 0;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && !std::strcmp(argv[1], "worker")) {
    return Worker(std::atoi(argv[2]), std::atoi(argv[3]));
  }
  if (argc >= 8 && !std::strcmp(argv[1], "writer")) {
    return Writer(std::atoi(argv[2]), std::atoi(argv[3]), argv[4], std::atoi(argv[5]),
                  std::atoi(argv[6]), std::atoi(argv[7]));
  }
  if (argc >= 6 && !std::strcmp(argv[1], "starved")) {
    return Starved(std::atoi(argv[2]), std::atoi(argv[3]), argv[4], std::atoi(argv[5]));
  }
  std::fprintf(stderr, "usage: ipc_child worker|writer|starved ...\n");
  return 2;
}
