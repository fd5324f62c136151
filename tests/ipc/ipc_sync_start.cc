// StartFull() in a child of a multi-process session is synchronous (issue 17, docs/ipc.md):
// right after it returns, ProfilerIsActive() is true and a marker recorded on the next line is
// in the profile the parent gathers. One program, both ends:
//
//   ipc_sync_start parent <rounds> <out-dir>
//       <rounds> times, in a fresh IPC parent each time: StartFull, StartIpcParent and at once
//       spawn a child (the parent's session was never seen by its IPC threads yet); save the
//       profile (the child is gathered) and look for the child's marker. Then StopFull +
//       StartFull (a new session, not yet seen either) and at once a second child, checked
//       the same way. Prints one line per child and
//       "RESULT children=N active_after_start=A marker_in_profile=M".
//   ipc_sync_start child <name> <ack-fd> <cmd-fd>
//       StartFull(); whether the session is active; the marker "first-<name>"; acks '1' (active)
//       or '0'; waits until the parent closes <cmd-fd>, then exits.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/markers.h"
#include "base/profiler.h"
#include "full/full.h"
#include "full/multiprocess.h"
#include "rapidjson/document.h"

namespace {

int Child(const std::string& name, int ack_fd, int cmd_fd) {
  strata::full::StartFull();
  const bool active = strata::ProfilerIsActive();
  strata::AddMarker(strata::ProfilerString::Dynamic("first-" + name), strata::Category::kOther);
  const char answer = active ? '1' : '0';
  if (write(ack_fd, &answer, 1) != 1) return 5;
  char c;
  while (read(cmd_fd, &c, 1) > 0) {
  }
  return 0;
}

// Whether any thread of any process of the profile at `path` has a marker named `name`.
bool ProfileHasMarker(const std::string& path, const std::string& name) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  rapidjson::Document doc;
  doc.Parse(json.c_str(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) return false;
  std::vector<const rapidjson::Value*> processes = {&doc};
  if (doc.HasMember("processes")) {
    for (const auto& p : doc["processes"].GetArray()) processes.push_back(&p);
  }
  for (const rapidjson::Value* process : processes) {
    if (!process->IsObject() || !process->HasMember("threads")) continue;
    for (const auto& thread : (*process)["threads"].GetArray()) {
      const rapidjson::Value& strings = thread["stringTable"];
      const rapidjson::Value& markers = thread["markers"];
      const int name_col = markers["schema"]["name"].GetInt();
      for (const auto& m : markers["data"].GetArray()) {
        const int index = m[name_col].GetInt();
        if (index >= 0 && static_cast<rapidjson::SizeType>(index) < strings.Size() &&
            name == strings[index].GetString()) {
          return true;
        }
      }
    }
  }
  return false;
}

struct Outcome {
  bool active = false;
  bool marker = false;
};

// Spawns a child at once, waits for its ack, saves the profile, looks for its marker.
Outcome SpawnAndCheck(const char* self, const std::string& name, const std::string& out_dir) {
  Outcome outcome;
  int ack[2], cmd[2];
  if (pipe(ack) != 0 || pipe(cmd) != 0) std::abort();
  fcntl(ack[0], F_SETFD, FD_CLOEXEC);
  fcntl(cmd[1], F_SETFD, FD_CLOEXEC);
  std::string args[] = {self, "child", name, std::to_string(ack[1]), std::to_string(cmd[0])};
  char* argv[] = {args[0].data(), args[1].data(), args[2].data(), args[3].data(), args[4].data(),
                  nullptr};
  pid_t pid = 0;
  const int rc = strata::full::SpawnProfiledChild(&pid, self, argv);
  close(ack[1]);
  close(cmd[0]);
  if (rc != 0) {
    std::printf("FAIL: spawn: %s\n", strerror(rc));
    std::exit(1);
  }
  char answer = 0;
  if (read(ack[0], &answer, 1) != 1) std::printf("FAIL: child %s did not answer\n", name.c_str());
  outcome.active = answer == '1';
  const std::string path = out_dir + "/" + name + ".json";
  std::string error;
  if (!strata::ProfilerSaveProfile(path, &error)) {
    std::printf("FAIL: save %s: %s\n", path.c_str(), error.c_str());
  } else {
    outcome.marker = ProfileHasMarker(path, "first-" + name);
    if (outcome.marker) unlink(path.c_str());  // Kept only when the check fails.
  }
  close(cmd[1]);  // The child exits.
  close(ack[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  std::printf("child %s: active after StartFull %s, marker in the gathered profile %s\n",
              name.c_str(), outcome.active ? "yes" : "NO", outcome.marker ? "yes" : "NO");
  return outcome;
}

int Parent(const char* self, int rounds, const std::string& out_dir) {
  int children = 0, active = 0, marker = 0;
  auto count = [&](const Outcome& o) {
    ++children;
    active += o.active;
    marker += o.marker;
  };
  for (int round = 1; round <= rounds; ++round) {
    // A fresh parent process for every round: its IPC threads have not seen any session.
    fflush(stdout);
    const pid_t parent = fork();
    if (parent == 0) {
      // The fork()ed copy has no profiler: exec ourselves as a round.
      const std::string r = std::to_string(round);
      execl(self, self, "round", r.c_str(), out_dir.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    waitpid(parent, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 100;
    // A round's exit code: bit 0/1 the first child (active, marker), bits 2/3 the second.
    if (code >= 16) {
      std::printf("FAIL: round %d ended with status %d\n", round, status);
      children += 2;
      continue;
    }
    count({(code & 1) != 0, (code & 2) != 0});
    count({(code & 4) != 0, (code & 8) != 0});
  }
  std::printf("RESULT children=%d active_after_start=%d marker_in_profile=%d\n", children, active,
              marker);
  return active == children && marker == children ? 0 : 1;
}

int Round(const char* self, int round, const std::string& out_dir) {
  strata::full::StartFull();
  std::string error;
  if (!strata::full::StartIpcParent(strata::full::IpcSettings(), &error)) {
    std::printf("FAIL: StartIpcParent: %s\n", error.c_str());
    return 16;
  }
  const std::string r = std::to_string(round);
  const Outcome first = SpawnAndCheck(self, r + "a", out_dir);
  // A new session of the parent, with a child spawned at once.
  strata::full::StopFull();
  strata::full::StartFull();
  const Outcome second = SpawnAndCheck(self, r + "b", out_dir);
  fflush(stdout);
  return (first.active ? 1 : 0) | (first.marker ? 2 : 0) | (second.active ? 4 : 0) |
         (second.marker ? 8 : 0);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "child" && argc == 5) return Child(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
  if (mode == "parent" && argc == 4) return Parent(argv[0], std::atoi(argv[2]), argv[3]);
  if (mode == "round" && argc == 4) return Round(argv[0], std::atoi(argv[2]), argv[3]);
  std::fprintf(stderr, "usage: ipc_sync_start parent <rounds> <out-dir>\n");
  return 2;
}
