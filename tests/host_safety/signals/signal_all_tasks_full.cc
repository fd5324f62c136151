// signal_all_tasks.c in a program linked with the full tier, with its session and IPC parent
// running (threads StrataIpcParent and StrataIpcWork beside the sampler): every task in
// /proc/self/task must acknowledge the program's signal, those threads included. Same output
// as signal_all_tasks; prints "ipc_threads=1" first once both StrataIpc* threads run.
#include <dirent.h>
#include <unistd.h>

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
  // The IPC threads name themselves when they start: wait until both are there (10 s at most).
  int ipc_threads = CountIpcThreads();
  for (int i = 0; i < 10000 && ipc_threads < 2; ++i) {
    usleep(1000);
    ipc_threads = CountIpcThreads();
  }
  std::printf("ipc_threads=%d\n", ipc_threads >= 2 ? 1 : 0);
  std::fflush(stdout);
  const int status = SignalAllTasksMain(argc, argv);
  strata::full::ShutdownFull();
  return status;
}
