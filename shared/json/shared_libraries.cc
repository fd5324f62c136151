#include "shared/json/shared_libraries.h"

#include <elf.h>
#include <link.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace strata {
namespace {

constexpr char kHexUpper[] = "0123456789ABCDEF";
constexpr char kHexLower[] = "0123456789abcdef";

struct Collected {
  std::vector<SharedLibrary> libs;
  std::string exe_path;
};

// Looks for the NT_GNU_BUILD_ID note in the object's PT_NOTE segments (mapped in memory).
std::string FindBuildId(const dl_phdr_info* info, bool breakpad) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    if (phdr.p_type != PT_NOTE) continue;
    const size_t align = phdr.p_align == 8 ? 8 : 4;
    const auto* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + phdr.p_vaddr);
    const uint8_t* end = p + phdr.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      memcpy(&note, p, sizeof(note));
      const uint8_t* name = p + sizeof(note);
      const uint8_t* desc = name + ((note.n_namesz + align - 1) & ~(align - 1));
      const uint8_t* next = desc + ((note.n_descsz + align - 1) & ~(align - 1));
      if (desc + note.n_descsz > end) break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
          memcmp(name, "GNU", 4) == 0 && note.n_descsz > 0) {
        return breakpad ? BreakpadIdFromBuildId(desc, note.n_descsz)
                        : CodeIdFromBuildId(desc, note.n_descsz);
      }
      p = next;
    }
  }
  return std::string();
}

int OnObject(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto* collected = static_cast<Collected*>(data);
  uint64_t start = UINT64_MAX;
  uint64_t end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    if (phdr.p_type != PT_LOAD) continue;
    uint64_t segment_start = info->dlpi_addr + phdr.p_vaddr;
    start = std::min(start, segment_start);
    end = std::max(end, segment_start + phdr.p_memsz);
  }
  if (start >= end) return 0;  // No loadable segment.

  SharedLibrary lib;
  lib.start = start;
  lib.end = end;
  lib.offset = start - info->dlpi_addr;
  const char* name = info->dlpi_name;
  // The main program has an empty name.
  lib.path = (name == nullptr || name[0] == '\0') ? collected->exe_path : std::string(name);
  size_t slash = lib.path.rfind('/');
  lib.name = slash == std::string::npos ? lib.path : lib.path.substr(slash + 1);
  lib.debug_name = lib.name;
  lib.debug_path = lib.path;
  lib.breakpad_id = FindBuildId(info, /*breakpad=*/true);
  lib.code_id = FindBuildId(info, /*breakpad=*/false);
  lib.arch = CurrentArchName();
  collected->libs.push_back(std::move(lib));
  return 0;
}

}  // namespace

std::string BreakpadIdFromBuildId(const uint8_t* build_id, size_t size) {
  uint8_t guid[16] = {};
  memcpy(guid, build_id, std::min<size_t>(size, 16));
  // Fields 1-3 of the GUID are stored little-endian.
  std::swap(guid[0], guid[3]);
  std::swap(guid[1], guid[2]);
  std::swap(guid[4], guid[5]);
  std::swap(guid[6], guid[7]);
  std::string out;
  out.reserve(33);
  for (uint8_t b : guid) {
    out.push_back(kHexUpper[b >> 4]);
    out.push_back(kHexUpper[b & 0xF]);
  }
  out.push_back('0');  // Age.
  return out;
}

std::string CodeIdFromBuildId(const uint8_t* build_id, size_t size) {
  std::string out;
  out.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kHexLower[build_id[i] >> 4]);
    out.push_back(kHexLower[build_id[i] & 0xF]);
  }
  return out;
}

const char* CurrentArchName() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__i386__)
  return "x86";
#elif defined(__arm__)
  return "arm";
#else
  return "unknown";
#endif
}

std::vector<SharedLibrary> CollectSharedLibraries() {
  Collected collected;
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) collected.exe_path.assign(exe, static_cast<size_t>(n));
  dl_iterate_phdr(OnObject, &collected);

  std::vector<SharedLibrary>& libs = collected.libs;
  std::sort(libs.begin(), libs.end(),
            [](const SharedLibrary& a, const SharedLibrary& b) { return a.start < b.start; });
  std::vector<SharedLibrary> out;
  out.reserve(libs.size());
  for (SharedLibrary& lib : libs) {
    if (!out.empty() && lib.start < out.back().end) continue;  // Overlap: keep the first.
    out.push_back(std::move(lib));
  }
  return out;
}

bool IsStrataLibrary(std::string_view name) {
  const size_t slash = name.rfind('/');
  if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
  for (const std::string_view own : {"libstrata_base.so", "libstrata_full.so", "libstrata_record.so"}) {
    if (name.substr(0, own.size()) == own) return true;
  }
  return false;
}

}  // namespace strata
