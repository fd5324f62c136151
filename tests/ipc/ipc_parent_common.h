// What the ipc_parent scenarios share (ipc_parent.cc, ipc_parent_hostile.cc): the checks
// and their failure count, the children spawned through the full tier with their command and
// answer pipes, and the reading of the captured profile. Defined in ipc_parent_common.cc.
//
// Thread safety: the main thread of ipc_parent only.
#ifndef STRATA_TESTS_IPC_IPC_PARENT_COMMON_H_
#define STRATA_TESTS_IPC_IPC_PARENT_COMMON_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "full/multiprocess.h"
#include "rapidjson/document.h"

namespace ipc_parent {

using strata::full::GetIpcStatus;
using strata::full::IpcStatus;

extern int g_failures;
extern const char* g_child_path;

// A TSan build (docs/reliability.md, "Sanitizers"): TSan runs a SIGPROF handler late, at the
// thread's next intercepted call, so a thread spinning in plain code is sampled once or not at
// all; in a program linked with TSan, TSan's pthread_create comes before Strata's, which then
// does not register the threads the program starts (base/internal/process/preload.cc); and every
// process runs several times slower. So under TSan the worker threads' presence and samples
// are not checked (SkippedUnderTsan prints why), gathering polls every second instead of every
// 200 ms, and the limit scenario's writers write 4x slower.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kUnderTsan = true;
#else
inline constexpr bool kUnderTsan = false;
#endif

void SkippedUnderTsan(const std::string& what, const std::string& why);

inline constexpr char kUnregisteredUnderTsan[] =
    "in a TSan-linked program Strata's pthread_create comes after TSan's and does not register "
    "the threads it starts";
// The gathering poll interval of the scenarios that use 200 ms: under TSan a running child
// can take longer than two such polls to answer.
inline constexpr double kShortPollMs = kUnderTsan ? 1000 : 200;

void Check(bool ok, const std::string& what);

double NowMs();

void SleepMs(int ms);

// --- Children

struct Kid {
  pid_t pid = 0;
  int cmd = -1;  // Our end: commands to the child.
  int ack = -1;  // Our end: the child's answers.
};

Kid Spawn(std::vector<std::string> args);

void Tell(const Kid& kid, char c);

// The child's next answer, or 0 after `timeout_ms`.
char Answer(const Kid& kid, int timeout_ms = 10000);

bool Reap(const Kid& kid, int timeout_ms = 10000);

// --- Profile reading

struct ThreadView {
  std::string name;
  int pid = 0;
  std::string process_type;
  std::string process_name;
  bool is_main = false;
  size_t samples = 0;
  std::vector<double> sample_times;
  double sampled_cpu_ms = 0;  // The sum of the samples' CPU deltas.
  std::vector<std::pair<std::string, double>> markers;  // name, start (own process times)
  std::map<std::string, std::string> marker_text;       // name -> a Text marker's text
};
struct ProcessView {
  double start_time = 0;  // meta.startTime (epoch ms)
  int pid = 0;
  std::vector<ThreadView> threads;
  const ThreadView* Thread(const std::string& name) const {
    for (const ThreadView& t : threads) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
  // The first marker named `name` (any thread), in the parent's time: own time + offset.
  std::optional<double> Marker(const std::string& name, double offset) const {
    for (const ThreadView& t : threads) {
      for (const auto& m : t.markers) {
        if (m.first == name) return m.second + offset;
      }
    }
    return std::nullopt;
  }
};

ProcessView ReadProcess(const rapidjson::Value& p);

struct ProfileView {
  rapidjson::Document doc;
  ProcessView parent;
  std::vector<ProcessView> children;
  const ProcessView* Child(int pid) const {
    for (const ProcessView& c : children) {
      if (c.pid == pid) return &c;
    }
    return nullptr;
  }
  // The gathering log's entry for `pid`, or null.
  const rapidjson::Value* GatherEntry(int pid) const {
    if (!doc.HasMember("profileGatheringLog")) return nullptr;
    for (const auto& c : doc["profileGatheringLog"]["children"].GetArray()) {
      if (c["pid"].GetInt() == pid) return &c;
    }
    return nullptr;
  }
  bool EventMentions(const std::string& text) const {
    if (!doc.HasMember("profileGatheringLog")) return false;
    for (const auto& e : doc["profileGatheringLog"]["events"].GetArray()) {
      if (std::string(e.GetString()).find(text) != std::string::npos) return true;
    }
    return false;
  }
};

bool ReadProfile(const std::string& path, ProfileView* view);

double Capture(const std::string& path);

void PrintStatus();

void StartParent(uint32_t buffer_megabytes, strata::full::IpcSettings ipc);

// The scenario of ipc_parent_hostile.cc: garbage, truncated and oversized messages, a silent
// peer, peers of another uid.
int Hostile(const std::string& out);

}  // namespace ipc_parent

#endif  // STRATA_TESTS_IPC_IPC_PARENT_COMMON_H_
