#include "shared/symbols/debug_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>

namespace strata {
namespace {

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return std::string();
  return slash == 0 ? std::string("/") : path.substr(0, slash);
}

std::string Join(const std::string& directory, const std::string& name) {
  if (directory.empty()) return name;
  return directory.back() == '/' ? directory + name : directory + "/" + name;
}

const std::array<uint32_t, 256>& CrcTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Same file as the module (a debuglink naming the module itself, or a symlink to it)?
bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

}  // namespace

uint32_t DebugLinkCrc32(uint32_t crc, const void* data, size_t size) {
  const auto& table = CrcTable();
  const auto* bytes = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::optional<uint32_t> FileDebugLinkCrc32(const std::string& path) {
  // Non-blocking: a FIFO named by an untrusted path (a flight recorder file's library list)
  // must not hang the open; only a regular file is read.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return std::nullopt;
  }
  uint32_t crc = 0;
  std::array<char, 65536> chunk;
  for (;;) {
    const ssize_t n = read(fd, chunk.data(), chunk.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      close(fd);
      return std::nullopt;
    }
    crc = DebugLinkCrc32(crc, chunk.data(), static_cast<size_t>(n));
  }
  close(fd);
  return crc;
}

std::vector<std::string> SeparateDebugFileCandidates(
    const std::string& module_path, const std::string& build_id,
    const std::optional<ElfSymbolTable::DebugLink>& link, const std::string& debug_directory) {
  std::vector<std::string> candidates;
  const std::string module_directory = DirectoryOf(module_path);
  if (build_id.size() > 2) {
    const std::string relative =
        ".build-id/" + build_id.substr(0, 2) + "/" + build_id.substr(2) + ".debug";
    if (!debug_directory.empty()) candidates.push_back(Join(debug_directory, relative));
    if (!module_directory.empty()) {
      candidates.push_back(Join(Join(module_directory, "debug"), relative));
    }
  }
  if (link && !link->file_name.empty() && !module_directory.empty()) {
    candidates.push_back(Join(module_directory, link->file_name));
    candidates.push_back(Join(Join(module_directory, ".debug"), link->file_name));
    if (!debug_directory.empty()) {
      candidates.push_back(Join(debug_directory + module_directory, link->file_name));
    }
  }
  return candidates;
}

ElfSymbolTable ReadSeparateDebugSymbols(const std::string& module_path,
                                        const std::string& build_id,
                                        const std::optional<ElfSymbolTable::DebugLink>& link,
                                        const std::string& debug_directory,
                                        std::string* found_path) {
  if (found_path != nullptr) found_path->clear();
  for (const std::string& candidate :
       SeparateDebugFileCandidates(module_path, build_id, link, debug_directory)) {
    if (access(candidate.c_str(), R_OK) != 0 || SameFile(candidate, module_path)) continue;
    ElfSymbolTable table = ElfSymbolTable::ReadFile(candidate);
    if (!table.has_symtab()) continue;
    bool ours = false;
    if (!build_id.empty() && !table.code_id().empty()) {
      ours = table.code_id() == build_id;
    } else if (link) {
      const std::optional<uint32_t> crc = FileDebugLinkCrc32(candidate);
      ours = crc && *crc == link->crc;
    }
    if (!ours) continue;
    if (found_path != nullptr) *found_path = candidate;
    return table;
  }
  return ElfSymbolTable();
}

}  // namespace strata
