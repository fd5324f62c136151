// What the ipc_parent scenarios share (ipc_parent_common.h).
#include "tests/ipc/ipc_parent_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/markers.h"
#include "base/profiler.h"
#include "full/full.h"
#include "full/ipc/messages.h"
#include "full/multiprocess.h"
#include "rapidjson/document.h"
#include "shared/buffer/chunk.h"

namespace ipc_parent {

int g_failures = 0;
const char* g_child_path = nullptr;

void SkippedUnderTsan(const std::string& what, const std::string& why) {
  std::printf("skipped under TSan: %s (%s)\n", what.c_str(), why.c_str());
  std::fflush(stdout);
}

void Check(bool ok, const std::string& what) {
  if (ok) {
    std::printf("ok: %s\n", what.c_str());
  } else {
    std::printf("FAIL: %s\n", what.c_str());
    ++g_failures;
  }
  std::fflush(stdout);
}

double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

Kid Spawn(std::vector<std::string> args) {
  int cmd[2], ack[2];
  if (pipe(cmd) != 0 || pipe(ack) != 0) std::abort();
  // Our ends stay ours; the child's ends are inherited through exec.
  fcntl(cmd[1], F_SETFD, FD_CLOEXEC);
  fcntl(ack[0], F_SETFD, FD_CLOEXEC);
  std::vector<std::string> all = {g_child_path, args[0], std::to_string(cmd[0]),
                                  std::to_string(ack[1])};
  all.insert(all.end(), args.begin() + 1, args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  Kid kid;
  const int rc = strata::full::SpawnProfiledChild(&kid.pid, g_child_path, argv.data());
  if (rc != 0) {
    std::printf("FAIL: spawn: %s\n", strerror(rc));
    std::exit(1);
  }
  close(cmd[0]);
  close(ack[1]);
  kid.cmd = cmd[1];
  kid.ack = ack[0];
  return kid;
}

void Tell(const Kid& kid, char c) {
  if (write(kid.cmd, &c, 1) != 1) std::printf("FAIL: cannot write to child %d\n", kid.pid);
}

char Answer(const Kid& kid, int timeout_ms) {
  pollfd p{kid.ack, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return 0;
  char c = 0;
  return read(kid.ack, &c, 1) == 1 ? c : 0;
}

bool Reap(const Kid& kid, int timeout_ms) {
  for (int i = 0; i < timeout_ms; ++i) {
    int status;
    if (waitpid(kid.pid, &status, WNOHANG) == kid.pid) return true;
    SleepMs(1);
  }
  kill(kid.pid, SIGKILL);
  waitpid(kid.pid, nullptr, 0);
  return false;
}

ProcessView ReadProcess(const rapidjson::Value& p) {
  ProcessView view;
  view.start_time = p["meta"]["startTime"].GetDouble();
  for (const auto& t : p["threads"].GetArray()) {
    ThreadView thread;
    thread.name = t["name"].GetString();
    thread.pid = t["pid"].IsInt() ? t["pid"].GetInt() : std::atoi(t["pid"].GetString());
    if (t.HasMember("processType") && t["processType"].IsString()) {
      thread.process_type = t["processType"].GetString();
    }
    if (t.HasMember("processName") && t["processName"].IsString()) {
      thread.process_name = t["processName"].GetString();
    }
    view.pid = thread.pid;
    // The Gecko format names a process's main thread "GeckoMain" (docs/gecko-format.md).
    thread.is_main = thread.name == "GeckoMain";
    thread.samples = t["samples"]["data"].Size();
    const int time_col = t["samples"]["schema"]["time"].GetInt();
    const int cpu_col = t["samples"]["schema"]["threadCPUDelta"].GetInt();
    for (const auto& row : t["samples"]["data"].GetArray()) {
      thread.sample_times.push_back(row[time_col].GetDouble());
      if (row[cpu_col].IsNumber()) thread.sampled_cpu_ms += row[cpu_col].GetDouble() / 1e6;
    }
    const auto& strings = t["stringTable"];
    const auto& table = t["markers"];
    const int name_col = table["schema"]["name"].GetInt();
    const int start_col = table["schema"]["startTime"].GetInt();
    const int data_col = table["schema"]["data"].GetInt();
    for (const auto& m : table["data"].GetArray()) {
      if (!m[start_col].IsNumber()) continue;
      const std::string name = strings[m[name_col].GetInt()].GetString();
      thread.markers.emplace_back(name, m[start_col].GetDouble());
      const auto& data = m[data_col];
      if (data.IsObject() && data.HasMember("type") && data["type"] == "Text" &&
          data.HasMember("name") && data["name"].IsString()) {
        thread.marker_text.emplace(name, data["name"].GetString());
      }
    }
    view.threads.push_back(std::move(thread));
  }
  return view;
}

bool ReadProfile(const std::string& path, ProfileView* view) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  view->doc.Parse(json.c_str(), json.size());
  if (view->doc.HasParseError() || !view->doc.IsObject() || !view->doc.HasMember("processes")) {
    std::printf("FAIL: %s is not a profile with processes\n", path.c_str());
    ++g_failures;
    return false;
  }
  view->parent = ReadProcess(view->doc);
  for (const auto& p : view->doc["processes"].GetArray()) view->children.push_back(ReadProcess(p));
  return true;
}

double Capture(const std::string& path) {
  const double t0 = NowMs();
  std::string error;
  const bool ok = strata::ProfilerSaveProfile(path, &error);
  const double took = NowMs() - t0;
  Check(ok, "profile saved (" + (ok ? path : error) + ")");
  return took;
}

void PrintStatus() {
  const IpcStatus s = GetIpcStatus();
  std::printf(
      "RESULT ipc_children=%zu updates=%llu destroy_requests=%llu chunks_destroyed=%llu "
      "max_tracked_bytes=%zu max_tracked_bytes_on_time=%zu late_chunks=%llu limit=%zu "
      "messages_sent=%llu messages_received=%llu "
      "bytes_sent=%llu bytes_received=%llu refused=%llu closed=%llu exit_profiles=%zu\n",
      s.children, (unsigned long long)s.updates, (unsigned long long)s.destroy_requests,
      (unsigned long long)s.chunks_destroyed, s.max_tracked_bytes, s.max_tracked_bytes_on_time,
      (unsigned long long)s.late_chunks, s.global_limit_bytes,
      (unsigned long long)s.messages_sent, (unsigned long long)s.messages_received,
      (unsigned long long)s.bytes_sent, (unsigned long long)s.bytes_received,
      (unsigned long long)s.refused_connections, (unsigned long long)s.closed_connections,
      s.exit_profiles);
  std::printf("RESULT destroy_latency_mean_ms=%.3f destroy_latency_max_ms=%.3f\n",
              s.destroy_latency_mean_ms, s.destroy_latency_max_ms);
  for (const std::string& e : s.events) std::printf("event: %s\n", e.c_str());
}

void StartParent(uint32_t buffer_megabytes, strata::full::IpcSettings ipc) {
  strata::ProfilerSettings session;
  session.interval_ms = 1;
  session.buffer_megabytes = buffer_megabytes;
  strata::full::StartFull(session);
  std::string error;
  if (!strata::full::StartIpcParent(ipc, &error)) {
    std::printf("FAIL: StartIpcParent: %s\n", error.c_str());
    std::exit(1);
  }
}

}  // namespace ipc_parent
