#include "tools/strata/program_check.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace strata {
namespace {

bool ReadAt(int fd, uint64_t offset, void* out, size_t size) {
  return pread(fd, out, size, static_cast<off_t>(offset)) == static_cast<ssize_t>(size);
}

}  // namespace

std::string ResolveCommand(const std::string& command) {
  if (command.empty()) return "";
  if (command.find('/') != std::string::npos) return command;
  const char* path = std::getenv("PATH");
  std::string directories = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= directories.size()) {
    const size_t end = std::min(directories.find(':', start), directories.size());
    std::string directory = directories.substr(start, end - start);
    if (directory.empty()) directory = ".";
    const std::string candidate = directory + "/" + command;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return "";
}

std::string WhyStrataCannotEnter(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  if ((st.st_mode & S_ISUID) && st.st_uid != geteuid()) {
    return "it is set-user-ID (the dynamic loader ignores LD_PRELOAD in it)";
  }
  if ((st.st_mode & S_ISGID) && st.st_gid != getegid()) {
    return "it is set-group-ID (the dynamic loader ignores LD_PRELOAD in it)";
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string why;
  Elf64_Ehdr ehdr;
  if (ReadAt(fd, 0, &ehdr, sizeof(ehdr)) && std::memcmp(ehdr.e_ident, ELFMAG, SELFMAG) == 0 &&
      ehdr.e_ident[EI_CLASS] == ELFCLASS64 && ehdr.e_phentsize == sizeof(Elf64_Phdr) &&
      (ehdr.e_type == ET_EXEC || ehdr.e_type == ET_DYN)) {
    bool interpreter = false, read_all = true;
    for (uint64_t i = 0; i < ehdr.e_phnum; ++i) {
      Elf64_Phdr phdr;
      if (!ReadAt(fd, ehdr.e_phoff + i * sizeof(phdr), &phdr, sizeof(phdr))) {
        read_all = false;
        break;
      }
      interpreter = interpreter || phdr.p_type == PT_INTERP;
    }
    // No interpreter: a static executable (ET_EXEC), a static-pie one or a library run
    // directly (ET_DYN). The dynamic loader itself has none either, and run as a command
    // (`ld-linux-x86-64.so.2 ./program`) it does read LD_PRELOAD.
    const size_t slash = path.rfind('/');
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    const bool loader = name.rfind("ld-", 0) == 0 || name.rfind("ld.so", 0) == 0;
    if (read_all && !interpreter && !loader) {
      why = "it is statically linked (no dynamic loader reads LD_PRELOAD in it)";
    }
  }
  close(fd);
  return why;
}

std::vector<NotEnteredProgram> NotEnteredPrograms(const std::string& directory,
                                                  const std::set<int>& saved_pids) {
  std::vector<NotEnteredProgram> result;
  DIR* dir = opendir(directory.c_str());
  if (dir == nullptr) return result;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    const size_t dot = name.find(".exec");
    if (dot == std::string::npos || dot == 0 || dot + 5 != name.size() ||
        name.find_first_not_of("0123456789") != dot) {
      continue;
    }
    const int pid = std::atoi(name.c_str());
    if (saved_pids.count(pid) != 0) continue;
    std::ifstream note(directory + "/" + name);
    std::string path, preload;
    if (!std::getline(note, path) || !std::getline(note, preload) || path.empty()) continue;
    NotEnteredProgram program{pid, path, ""};
    const std::string resolved = ResolveCommand(path);
    program.reason = resolved.empty() ? "" : WhyStrataCannotEnter(resolved);
    if (program.reason.empty() && preload == "cleared") {
      program.reason = "it was started with LD_PRELOAD cleared";
    }
    if (!program.reason.empty()) result.push_back(std::move(program));
  }
  closedir(dir);
  std::sort(result.begin(), result.end(),
            [](const NotEnteredProgram& a, const NotEnteredProgram& b) { return a.pid < b.pid; });
  return result;
}

}  // namespace strata
