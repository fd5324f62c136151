// Notes of the programs a process starts, for `strata record` (exec_notes.h), and the
// posix_spawn wrappers that take them (the exec family's are in preload.cc).
#include "base/internal/process/exec_notes.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "platform/next_definition.h"
#include "platform/raw_syscall.h"

extern char** environ;

namespace strata {
namespace base_internal {
namespace {

constexpr size_t kDirectoryMax = 3800;  // Room for "/<pid>.exec" in a 4 KiB path.
char g_directory[kDirectoryMax + 1];    // Written once, by the library's constructor.

// Appends `text` to `out` (at `*used`, capacity `size`, always terminated); false when it
// does not fit.
bool Append(char* out, size_t size, size_t* used, const char* text, size_t length) {
  if (*used + length >= size) return false;
  std::memcpy(out + *used, text, length);
  *used += length;
  out[*used] = '\0';
  return true;
}

bool AppendNumber(char* out, size_t size, size_t* used, unsigned long value) {
  char digits[24];
  size_t count = 0;
  do {
    digits[sizeof(digits) - 1 - count++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  return Append(out, size, used, digits + sizeof(digits) - count, count);
}

// Whether `environment` preloads Strata's base tier (its LD_PRELOAD names the library).
bool PreloadsStrata(char* const* environment) {
  static const char kName[] = "LD_PRELOAD=";
  for (; environment != nullptr && *environment != nullptr; ++environment) {
    if (std::strncmp(*environment, kName, sizeof(kName) - 1) == 0) {
      static const char kLibrary[] = "libstrata_base";  // strstr is not allowed here.
      for (const char* at = *environment; *at != '\0'; ++at) {
        if (std::strncmp(at, kLibrary, sizeof(kLibrary) - 1) == 0) return true;
      }
      return false;
    }
  }
  return false;
}

}  // namespace

std::atomic<void*> g_spawn_functions[2];  // posix_spawn, posix_spawnp.
constexpr const char* kSpawnNames[2] = {"posix_spawn", "posix_spawnp"};

void ResolveProgramStartFunctions() {
  for (int i = 0; i < 2; ++i) {
    g_spawn_functions[i].store(NextDefinition(kSpawnNames[i]), std::memory_order_release);
  }
}

SpawnFunction RealSpawnFunction(bool search_path) {
  std::atomic<void*>& slot = g_spawn_functions[search_path ? 1 : 0];
  void* function = slot.load(std::memory_order_acquire);
  if (function == nullptr) {  // Called before the library's constructor ran.
    function = NextDefinition(kSpawnNames[search_path ? 1 : 0]);
    slot.store(function, std::memory_order_release);
  }
  return reinterpret_cast<SpawnFunction>(function);
}

int SpawnAndNote(bool search_path, pid_t* pid, const char* path,
                 const posix_spawn_file_actions_t* actions, const posix_spawnattr_t* attributes,
                 char* const argv[], char* const envp[]) {
  const SpawnFunction real = RealSpawnFunction(search_path);
  if (real == nullptr) return ENOSYS;
  const int error = real(pid, path, actions, attributes, argv, envp);
  if (error == 0 && pid != nullptr) NoteProgramStart(*pid, path, envp);
  return error;
}

void SetExecNotesDirectory(const char* directory) {
  const size_t length = std::strlen(directory);
  if (length > kDirectoryMax) return;
  std::memcpy(g_directory, directory, length + 1);
}

void NoteProgramStart(pid_t pid, const char* path, char* const* environment) {
  if (g_directory[0] == '\0' || path == nullptr) return;
  char name[kDirectoryMax + 32];
  size_t used = 0;
  name[0] = '\0';
  if (!Append(name, sizeof(name), &used, g_directory, std::strlen(g_directory)) ||
      !Append(name, sizeof(name), &used, "/", 1) ||
      !AppendNumber(name, sizeof(name), &used, static_cast<unsigned long>(pid)) ||
      !Append(name, sizeof(name), &used, ".exec", 5)) {
    return;
  }
  const long fd = RawSyscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>(name),
                             O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const bool preloads = PreloadsStrata(environment != nullptr ? environment : environ);
  const char* const status = preloads ? "\npreload\n" : "\ncleared\n";
  iovec parts[2] = {{const_cast<char*>(path), std::strlen(path)},
                    {const_cast<char*>(status), std::strlen(status)}};
  RawSyscall(SYS_writev, fd, reinterpret_cast<long>(parts), 2);
  RawSyscall(SYS_close, fd);
}

}  // namespace base_internal
}  // namespace strata

// posix_spawn and posix_spawnp start a program without the exec wrappers (glibc's own
// clone and internal execve): the parent notes the child once it has its pid.
extern "C" {

int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                const posix_spawnattr_t* attributes, char* const argv[], char* const envp[]) {
  return strata::base_internal::SpawnAndNote(false, pid, path, actions, attributes, argv, envp);
}

int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                 const posix_spawnattr_t* attributes, char* const argv[], char* const envp[]) {
  return strata::base_internal::SpawnAndNote(true, pid, file, actions, attributes, argv, envp);
}

}  // extern "C"
