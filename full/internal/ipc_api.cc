// The multi-process API (full/multiprocess.h) and the full tier's hooks (ipc.h).
#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/internal/session/core.h"
#include "base/internal/settings/log.h"
#include "full/internal/ipc.h"
#include "full/multiprocess.h"
#include "shared/profile/profile_capture.h"

extern char** environ;

namespace strata {
namespace full {

// --- Hooks

bool IpcOnStartFull() {
  if (base_internal::IsForkedChild()) return false;
  const char* path = getenv(kIpcParentVariable);
  if (!path || !path[0]) return false;
  if (RunningIpcParent()) return false;  // A parent itself: it does not follow another.
  return StartIpcChild(path);
}

void IpcOnShutdownFull() {
  ShutdownIpcChild();
  ShutdownIpcParent();
}

void IpcAdjustCapture(profile::CaptureInputs& inputs) {
  if (AdjustChildCapture(inputs)) return;  // This thread captures for its parent.
  AdjustParentCapture(inputs);
}

// --- API

bool StartIpcParent(const IpcSettings& settings, std::string* error) {
  if (base_internal::IsForkedChild()) {
    if (error) *error = "a fork()ed process does not profile";
    return false;
  }
  std::string why;
  if (StartIpcParentInCharge(settings, &why)) return true;
  base_internal::LogError("ipc: StartIpcParent: not listening for children: %s", why.c_str());
  if (error) *error = why;
  return false;
}

std::string IpcChildEnvironmentEntry() {
  // A fork()ed copy is in no tree (and the IPC objects' locks may be held by its parent's
  // threads, which it does not have).
  if (base_internal::IsForkedChild()) return std::string();
  std::string path = ParentSocketPath();
  if (path.empty()) path = ChildParentSocketPath();
  if (path.empty()) return std::string();
  return std::string(kIpcParentVariable) + "=" + path;
}

std::vector<std::string> IpcChildEnvironment(char* const envp[]) {
  std::vector<std::string> out;
  const std::string prefix = std::string(kIpcParentVariable) + "=";
  for (char* const* e = envp ? envp : environ; e && *e; ++e) {
    if (strncmp(*e, prefix.c_str(), prefix.size()) != 0) out.emplace_back(*e);
  }
  const std::string entry = IpcChildEnvironmentEntry();
  if (!entry.empty()) out.push_back(entry);
  return out;
}

int SpawnProfiledChild(pid_t* pid, const char* path, char* const argv[], char* const envp[]) {
  if (!base_internal::IsForkedChild() && !RunningIpcParent() && !RunningIpcChild()) {
    std::string error;
    if (!StartIpcParentInCharge(IpcSettings(), &error)) {  // Logged once, below.
      base_internal::LogError("ipc: %s; the child is spawned without profiling", error.c_str());
    }
  }
  std::vector<std::string> environment = IpcChildEnvironment(envp);
  std::vector<char*> pointers;
  for (std::string& e : environment) pointers.push_back(e.data());
  pointers.push_back(nullptr);
  return posix_spawn(pid, path, nullptr, nullptr, argv, pointers.data());
}

bool IpcChildFollowsParent() { return !base_internal::IsForkedChild() && ChildFollowsParent(); }

IpcStatus GetIpcStatus() {
  IpcStatus status;
  if (base_internal::IsForkedChild()) return status;
  FillParentStatus(&status);
  FillChildStatus(&status);
  return status;
}

}  // namespace full
}  // namespace strata
