#include "shared/json/shared_libraries.h"

#include <elf.h>
#include <link.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "platform/checked_read.h"

namespace strata {
namespace {

constexpr char kHexUpper[] = "0123456789ABCDEF";
constexpr char kHexLower[] = "0123456789abcdef";

struct Collected {
  std::vector<SharedLibrary> libs;
  std::string exe_path;
};

// Looks for the NT_GNU_BUILD_ID note in the object's PT_NOTE segments (mapped in memory),
// given its program headers. The notes are copied with CheckedRead (the program may have
// made their page unreadable: no build id then).
std::string FindBuildId(const dl_phdr_info* info, const std::vector<ElfW(Phdr)>& headers,
                        bool breakpad) {
  std::vector<uint8_t> notes;
  for (const ElfW(Phdr)& phdr : headers) {
    if (phdr.p_type != PT_NOTE || phdr.p_memsz > (1u << 16)) continue;
    const size_t align = phdr.p_align == 8 ? 8 : 4;
    notes.resize(phdr.p_memsz);
    if (!CheckedRead(reinterpret_cast<const void*>(info->dlpi_addr + phdr.p_vaddr), notes.data(),
                     notes.size())) {
      continue;
    }
    const uint8_t* p = notes.data();
    const uint8_t* end = p + notes.size();
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

// The NUL-terminated string at `name` (at most PATH_MAX bytes), read a page piece at a time
// with CheckedRead; empty when null or unreadable.
std::string CheckedName(const char* name) {
  std::string out;
  uintptr_t at = reinterpret_cast<uintptr_t>(name);
  if (at == 0) return out;
  char piece[256];
  while (out.size() < PATH_MAX) {
    const size_t to_page_end = 4096 - (at & 4095);
    const size_t length = std::min(sizeof(piece), to_page_end);
    if (!CheckedRead(reinterpret_cast<const void*>(at), piece, length)) return std::string();
    const void* nul = std::memchr(piece, '\0', length);
    if (nul != nullptr) {
      out.append(piece, static_cast<const char*>(nul) - piece);
      return out;
    }
    out.append(piece, length);
    at += length;
  }
  return out;
}

int OnObject(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto* collected = static_cast<Collected*>(data);
  // The program headers lie in the object's first page, which the program may have made
  // unreadable (issue 33): copied with CheckedRead; an object whose headers cannot be read
  // is left out of this listing.
  std::vector<ElfW(Phdr)> headers(info->dlpi_phnum);
  if (!CheckedRead(info->dlpi_phdr, headers.data(), headers.size() * sizeof(ElfW(Phdr)))) {
    return 0;
  }
  uint64_t start = UINT64_MAX;
  uint64_t end = 0;
  for (const ElfW(Phdr)& phdr : headers) {
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
  // The main program has an empty name. The dynamic loader's name is the executable's
  // PT_INTERP string, in the executable's first page: read with CheckedRead too.
  const std::string name = CheckedName(info->dlpi_name);
  lib.path = name.empty() ? collected->exe_path : name;
  size_t slash = lib.path.rfind('/');
  lib.name = slash == std::string::npos ? lib.path : lib.path.substr(slash + 1);
  lib.debug_name = lib.name;
  lib.debug_path = lib.path;
  lib.breakpad_id = FindBuildId(info, headers, /*breakpad=*/true);
  lib.code_id = FindBuildId(info, headers, /*breakpad=*/false);
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
  for (const std::string_view own : {"libstrata_base.so", "libstrata_full.so", "libstrata_record.so",
                                        "libstrata_alloc.so"}) {
    if (name.substr(0, own.size()) == own) return true;
  }
  return false;
}

}  // namespace strata
