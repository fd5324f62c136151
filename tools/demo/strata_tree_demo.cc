// The multi-process demo (docs/ipc.md): a parent with a renderer thread spawns two worker
// processes (this same program, "--child"), all three profiled in one session under one
// memory limit; the parent saves one profile with the children under "processes".
//
//   strata_tree_demo [seconds] [profile.json]
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/labels.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "full/full.h"
#include "full/multiprocess.h"

namespace {

__attribute__((noinline)) double Shade(int pixels) {
  STRATA_LABEL("Shade", kGraphics);
  double sum = 0;
  for (int i = 0; i < pixels * 1000; ++i) sum += std::sqrt(static_cast<double>(i));
  return sum;
}

__attribute__((noinline)) uint64_t Hash(uint64_t seed, int rounds) {
  STRATA_LABEL("Hash", kApplication);
  for (int i = 0; i < rounds; ++i) seed = (seed ^ (seed >> 31)) * 0x9E3779B97F4A7C15ull;
  return seed;
}

// A child: a worker thread hashing in batches, each batch a marker, until `seconds` pass.
int Child(int index, double seconds) {
  strata::full::StartFull();  // Joins the parent's session (STRATA_IPC_PARENT).
  std::thread worker([index, seconds] {
    pthread_setname_np(pthread_self(), ("hasher-" + std::to_string(index)).c_str());
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    uint64_t x = index + 1;
    for (int batch = 0; std::chrono::steady_clock::now() < end; ++batch) {
      const strata::TimeStamp start = strata::TimeStamp::Now();
      x = Hash(x, 2'000'000);
      STRATA_MARKER_TEXT("Batch", kApplication,
                         strata::MarkerOptions::Interval(start, strata::TimeStamp::Now()),
                         "batch " + std::to_string(batch));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (x == 42) std::puts("");
  });
  worker.join();
  return 0;  // Exit: had the parent not gathered it yet, its exit profile goes over.
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && !std::strcmp(argv[1], "--child")) {
    return Child(std::atoi(argv[2]), std::atof(argv[3]));
  }
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  const std::string out = argc > 2 ? argv[2] : "strata-tree-profile.json";
  strata::ProfilerSettings settings;
  settings.buffer_megabytes = 16;  // For the whole tree.
  strata::full::StartFull(settings);
  std::vector<pid_t> children;
  for (int i = 0; i < 2; ++i) {
    const std::string index = std::to_string(i), duration = std::to_string(seconds + 1);
    char* child_argv[] = {argv[0], const_cast<char*>("--child"), const_cast<char*>(index.c_str()),
                          const_cast<char*>(duration.c_str()), nullptr};
    pid_t pid;
    if (strata::full::SpawnProfiledChild(&pid, "/proc/self/exe", child_argv) == 0) {
      children.push_back(pid);
    }
  }
  STRATA_MARKER_UNTYPED("Children spawned", kStartup);
  std::atomic<bool> stop{false};
  std::thread renderer([&stop] {
    pthread_setname_np(pthread_self(), "renderer");
    double sink = 0;
    for (int frame = 0; !stop.load(); ++frame) {
      const strata::TimeStamp start = strata::TimeStamp::Now();
      sink += Shade(200);
      STRATA_MARKER_TEXT("Frame", kGraphics,
                         strata::MarkerOptions::Interval(start, strata::TimeStamp::Now()),
                         "frame " + std::to_string(frame));
      std::this_thread::sleep_for(std::chrono::milliseconds(8));
    }
    if (sink == 42) std::puts("");
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  std::string error;
  const bool saved = strata::ProfilerSaveProfile(out, &error);
  stop = true;
  renderer.join();
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  const strata::full::IpcStatus status = strata::full::GetIpcStatus();
  std::printf("tree demo: %zu child process(es) ran %.1f s; %s %s\n", children.size(), seconds,
              saved ? "profile written to" : "no profile:", saved ? out.c_str() : error.c_str());
  std::printf("tree demo: %llu chunk-manager updates, %zu bytes of buffer tracked at most\n",
              static_cast<unsigned long long>(status.updates), status.max_tracked_bytes);
  return saved ? 0 : 1;
}
