// signal_all_tasks.c in a program linked with the full tier, with its session and IPC parent
// running (threads StrataIpcParent and StrataIpcWork beside the sampler): every task in
// /proc/self/task must acknowledge the program's signal, those threads included. Same output
// as signal_all_tasks; prints "ipc_threads=N" first (how many StrataIpc* threads there were).
#include <dirent.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "full/full.h"
#include "full/multiprocess.h"

extern "C" int SignalAllTasksMain(int argc, char** argv);

namespace {

int CountIpcThreads() {
  int count = 0;
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return -1;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    const std::string path = std::string("/proc/self/task/") + entry->d_name + "/comm";
    FILE* file = std::fopen(path.c_str(), "r");
    if (file == nullptr) continue;
    char name[32] = {};
    if (std::fgets(name, sizeof(name), file) != nullptr && std::strncmp(name, "StrataIpc", 9) == 0) {
      ++count;
    }
    std::fclose(file);
  }
  closedir(tasks);
  return count;
}

}  // namespace

int main(int argc, char** argv) {
  strata::full::StartFull();
  std::string error;
  if (!strata::full::StartIpcParent(strata::full::IpcSettings(), &error)) {
    std::fprintf(stderr, "StartIpcParent: %s\n", error.c_str());
  }
  std::printf("ipc_threads=%d\n", CountIpcThreads() > 0 ? 1 : 0);
  std::fflush(stdout);
  const int status = SignalAllTasksMain(argc, argv);
  strata::full::ShutdownFull();
  return status;
}
