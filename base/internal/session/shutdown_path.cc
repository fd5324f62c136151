#include "base/internal/session/shutdown_path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

namespace strata {
namespace base_internal {
namespace {

constexpr int kMaxAncestors = 64;
constexpr size_t kMaxProcFileBytes = 64u << 20;  // A maps file of a huge program fits.

// The whole content of a /proc file, read with a close-on-exec descriptor closed before
// returning; false when it cannot be opened or read.
bool ReadProcFile(const std::string& path, std::string* text) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  text->clear();
  char chunk[16384];
  bool ok = true;
  while (text->size() < kMaxProcFileBytes) {
    const ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    text->append(chunk, static_cast<size_t>(n));
  }
  close(fd);
  return ok;
}

std::string_view NextField(std::string_view line, size_t* position) {
  while (*position < line.size() && line[*position] == ' ') ++*position;
  const size_t start = *position;
  while (*position < line.size() && line[*position] != ' ') ++*position;
  return line.substr(start, *position - start);
}

// One maps line: "start-end perms offset dev inode   path".
struct MapsLine {
  unsigned long long start = 0, end = 0;
  MappedFile file;
};

bool ParseMapsLine(std::string_view line, MapsLine* out) {
  size_t position = 0;
  const std::string range(NextField(line, &position));
  char* rest = nullptr;
  out->start = std::strtoull(range.c_str(), &rest, 16);
  if (rest == nullptr || *rest != '-') return false;
  out->end = std::strtoull(rest + 1, nullptr, 16);
  NextField(line, &position);  // perms
  NextField(line, &position);  // offset
  out->file.device = std::string(NextField(line, &position));
  const std::string inode(NextField(line, &position));
  out->file.inode = std::strtoull(inode.c_str(), nullptr, 10);
  while (position < line.size() && line[position] == ' ') ++position;
  out->file.path = std::string(line.substr(position));
  return !out->file.device.empty();
}

template <typename Visit>
void ForEachMapsLine(std::string_view maps, const Visit& visit) {
  size_t start = 0;
  while (start < maps.size()) {
    size_t end = maps.find('\n', start);
    if (end == std::string_view::npos) end = maps.size();
    MapsLine line;
    if (ParseMapsLine(maps.substr(start, end - start), &line) && !visit(line)) return;
    start = end + 1;
  }
}

std::string_view BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Whether an ancestor of this process started with STRATA_SHUTDOWN=`path` and has `library`
// mapped.
bool AncestorSharesPath(const std::string& path, const MappedFile& library) {
  pid_t pid = getppid();
  std::string text;
  for (int depth = 0; depth < kMaxAncestors && pid > 1; ++depth) {
    const std::string proc = "/proc/" + std::to_string(pid);
    if (!ReadProcFile(proc + "/environ", &text)) return false;
    std::string value;
    if (FindInEnvironmentBlock(text, "STRATA_SHUTDOWN", &value) && value == path &&
        ReadProcFile(proc + "/maps", &text) && MapsFile(text, library)) {
      return true;
    }
    if (!ReadProcFile(proc + "/stat", &text)) return false;
    pid = ParentPidFromStat(text);
  }
  return false;
}

}  // namespace

std::string ShutdownPathForThisProcess(const std::string& path, const void* code_address) {
  if (path.empty() || path.find("%p") != std::string::npos) return path;
  std::string maps;
  if (!ReadProcFile("/proc/self/maps", &maps)) return path;
  const MappedFile library = FileMappedAt(maps, reinterpret_cast<unsigned long long>(code_address));
  if (library.inode == 0) return path;
  return AncestorSharesPath(path, library) ? PerProcessShutdownPath(path) : path;
}

bool FindProfiledChild(const void* code_address, pid_t* child, std::string* child_name) {
  std::string text;
  if (!ReadProcFile("/proc/self/maps", &text)) return false;
  const MappedFile library = FileMappedAt(text, reinterpret_cast<unsigned long long>(code_address));
  if (library.inode == 0) return false;
  const std::string self = "/proc/" + std::to_string(getpid()) + "/task/";
  DIR* tasks = opendir(self.c_str());
  if (tasks == nullptr) return false;
  bool found = false;
  std::string children;
  while (dirent* task = found ? nullptr : readdir(tasks)) {
    if (task->d_name[0] == '.' || !ReadProcFile(self + task->d_name + "/children", &children)) continue;
    const char* cursor = children.c_str();
    char* end = nullptr;
    for (long pid; !found && (pid = std::strtol(cursor, &end, 10)) > 0; cursor = end) {
      const std::string proc = "/proc/" + std::to_string(pid);
      if (ReadProcFile(proc + "/maps", &text) && MapsFile(text, library)) {
        found = true;
        *child = static_cast<pid_t>(pid);
        if (!ReadProcFile(proc + "/comm", child_name)) child_name->clear();
        while (!child_name->empty() && child_name->back() == '\n') child_name->pop_back();
      }
    }
  }
  closedir(tasks);
  return found;
}

std::string PerProcessShutdownPath(const std::string& path) {
  constexpr std::string_view kJson = ".json";
  const std::string_view name = BaseName(path);
  if (name.size() > kJson.size() && name.substr(name.size() - kJson.size()) == kJson) {
    return path.substr(0, path.size() - kJson.size()) + ".%p" + std::string(kJson);
  }
  return path + ".%p";
}

bool FindInEnvironmentBlock(std::string_view block, std::string_view name, std::string* value) {
  size_t start = 0;
  while (start < block.size()) {
    size_t end = block.find('\0', start);
    if (end == std::string_view::npos) end = block.size();
    const std::string_view entry = block.substr(start, end - start);
    if (entry.size() > name.size() && entry.substr(0, name.size()) == name && entry[name.size()] == '=') {
      *value = std::string(entry.substr(name.size() + 1));
      return true;
    }
    start = end + 1;
  }
  return false;
}

pid_t ParentPidFromStat(std::string_view stat) {
  // "pid (comm) state ppid ...": comm may hold ") ", so the last ')' ends it.
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return -1;
  size_t position = close + 1;
  NextField(stat, &position);  // state
  const std::string ppid(NextField(stat, &position));
  if (ppid.empty()) return -1;
  char* end = nullptr;
  const long value = std::strtol(ppid.c_str(), &end, 10);
  return end != nullptr && *end == '\0' && value >= 0 ? static_cast<pid_t>(value) : -1;
}

MappedFile FileMappedAt(std::string_view maps, unsigned long long address) {
  MappedFile found;
  ForEachMapsLine(maps, [&](const MapsLine& line) {
    if (address < line.start || address >= line.end) return true;
    if (line.file.inode != 0) found = line.file;
    return false;
  });
  return found;
}

bool MapsFile(std::string_view maps, const MappedFile& file) {
  bool found = false;
  const std::string_view name = BaseName(file.path);
  ForEachMapsLine(maps, [&](const MapsLine& line) {
    found = line.file.inode != 0 &&
            ((line.file.inode == file.inode && line.file.device == file.device) ||
             (!name.empty() && BaseName(line.file.path) == name));
    return !found;
  });
  return found;
}

}  // namespace base_internal
}  // namespace strata
