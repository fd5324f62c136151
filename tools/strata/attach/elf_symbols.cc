// See elf_symbols.h.
#include "tools/strata/attach/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace strata {
namespace attach {
namespace {

// Reads `length` bytes at `offset` of `fd` into `out`.
bool ReadAt(int fd, uint64_t offset, size_t length, std::string* out) {
  out->resize(length);
  size_t done = 0;
  while (done < length) {
    const ssize_t n = pread(fd, &(*out)[done], length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// An ELF file open for reading, with its header read and checked (ELF magic, 64-bit, the
// program and section header entry sizes of this build). ok() is false when that failed.
class OpenElf {
 public:
  explicit OpenElf(const std::string& path) : fd_(open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    std::string bytes;
    if (fd_ < 0 || !ReadAt(fd_, 0, sizeof(Elf64_Ehdr), &bytes)) {
      Fail();
      return;
    }
    std::memcpy(&header_, bytes.data(), sizeof(header_));
    if (std::memcmp(header_.e_ident, ELFMAG, SELFMAG) != 0 || header_.e_ident[EI_CLASS] != ELFCLASS64 ||
        header_.e_phentsize != sizeof(Elf64_Phdr) || header_.e_shentsize != sizeof(Elf64_Shdr)) {
      Fail();
    }
  }
  ~OpenElf() { Fail(); }
  OpenElf(const OpenElf&) = delete;
  OpenElf& operator=(const OpenElf&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const Elf64_Ehdr& header() const { return header_; }

 private:
  void Fail() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  int fd_;
  Elf64_Ehdr header_{};
};

// The program headers of `elf`, and the lowest PT_LOAD address, page-aligned.
bool ReadProgramHeaders(const OpenElf& elf, std::vector<Elf64_Phdr>* programs, uint64_t* first_load_vaddr) {
  std::string bytes;
  const Elf64_Ehdr& header = elf.header();
  if (!ReadAt(elf.fd(), header.e_phoff, header.e_phnum * sizeof(Elf64_Phdr), &bytes)) return false;
  programs->resize(header.e_phnum);
  std::memcpy(programs->data(), bytes.data(), bytes.size());
  *first_load_vaddr = UINT64_MAX;
  for (const Elf64_Phdr& program : *programs) {
    if (program.p_type == PT_LOAD) *first_load_vaddr = std::min<uint64_t>(*first_load_vaddr, program.p_vaddr & ~0xfffULL);
  }
  return *first_load_vaddr != UINT64_MAX;
}

constexpr uint8_t kRestoreRt[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};

}  // namespace

bool ReadDynamicSymbols(const std::string& path, std::map<std::string, uint64_t>* symbols,
                        uint64_t* first_load_vaddr) {
  const OpenElf elf(path);
  if (!elf.ok()) return false;
  const int fd = elf.fd();
  const Elf64_Ehdr& header = elf.header();
  std::vector<Elf64_Phdr> programs;
  if (!ReadProgramHeaders(elf, &programs, first_load_vaddr)) return false;
  std::string section_bytes;
  if (header.e_shoff == 0 || !ReadAt(fd, header.e_shoff, header.e_shnum * sizeof(Elf64_Shdr), &section_bytes)) {
    return false;
  }
  const auto section = [&](size_t i) {
    Elf64_Shdr result;
    std::memcpy(&result, section_bytes.data() + i * sizeof(Elf64_Shdr), sizeof(result));
    return result;
  };
  for (int i = 0; i < header.e_shnum; ++i) {
    const Elf64_Shdr table = section(i);
    if (table.sh_type != SHT_DYNSYM) continue;
    if (table.sh_link >= header.e_shnum) return false;
    const Elf64_Shdr strings_header = section(table.sh_link);
    std::string entries, strings;
    if (!ReadAt(fd, table.sh_offset, table.sh_size, &entries) ||
        !ReadAt(fd, strings_header.sh_offset, strings_header.sh_size, &strings)) {
      return false;
    }
    const size_t count = table.sh_size / sizeof(Elf64_Sym);
    for (size_t k = 0; k < count; ++k) {
      Elf64_Sym symbol;
      std::memcpy(&symbol, entries.data() + k * sizeof(Elf64_Sym), sizeof(symbol));
      if (symbol.st_name >= strings.size() || symbol.st_value == 0) continue;
      symbols->emplace(strings.c_str() + symbol.st_name, symbol.st_value);
    }
    return true;
  }
  return false;
}

bool ReadLoadSegments(const std::string& path) {
  const OpenElf elf(path);
  std::vector<Elf64_Phdr> programs;
  uint64_t first_load = 0;
  if (!elf.ok() || !ReadProgramHeaders(elf, &programs, &first_load)) return false;
  std::string chunk;
  for (const Elf64_Phdr& program : programs) {
    if (program.p_type != PT_LOAD) continue;
    for (uint64_t offset = 0; offset < program.p_filesz; offset += 1 << 20) {
      const size_t length = static_cast<size_t>(std::min<uint64_t>(1 << 20, program.p_filesz - offset));
      if (!ReadAt(elf.fd(), program.p_offset + offset, length, &chunk)) return false;
    }
  }
  return true;
}

uint64_t FindRestoreRt(const std::string& libc_file) {
  const OpenElf elf(libc_file);
  std::vector<Elf64_Phdr> programs;
  uint64_t first_load = 0;
  if (!elf.ok() || !ReadProgramHeaders(elf, &programs, &first_load)) return 0;
  uint64_t found = 0;
  int matches = 0;
  std::string text;
  for (const Elf64_Phdr& program : programs) {
    if (program.p_type != PT_LOAD || (program.p_flags & PF_X) == 0 || program.p_filesz > (64u << 20)) continue;
    if (!ReadAt(elf.fd(), program.p_offset, program.p_filesz, &text)) continue;
    for (size_t at = text.find(reinterpret_cast<const char*>(kRestoreRt), 0, sizeof(kRestoreRt));
         at != std::string::npos; at = text.find(reinterpret_cast<const char*>(kRestoreRt), at + 1, sizeof(kRestoreRt))) {
      ++matches;
      found = program.p_vaddr + at - first_load;
    }
  }
  return matches == 1 ? found : 0;
}

bool FindExecutablePadding(const std::string& path, uint64_t min_bytes, uint64_t* offset, uint64_t* bytes) {
  const OpenElf elf(path);
  std::vector<Elf64_Phdr> programs;
  uint64_t first_load = 0;
  if (!elf.ok() || !ReadProgramHeaders(elf, &programs, &first_load)) return false;
  constexpr uint64_t kPage = 4096;
  *bytes = 0;
  for (const Elf64_Phdr& text : programs) {
    if (text.p_type != PT_LOAD || (text.p_flags & PF_X) == 0 || text.p_filesz != text.p_memsz) continue;
    const uint64_t start = (text.p_vaddr + text.p_filesz + 63) & ~uint64_t{63};
    const uint64_t page_end = (text.p_vaddr + text.p_filesz + kPage - 1) & ~(kPage - 1);
    if (start >= page_end || page_end - start < min_bytes || page_end - start <= *bytes) continue;
    bool shared = false;
    for (const Elf64_Phdr& other : programs) {
      if (&other == &text || other.p_type != PT_LOAD) continue;
      const uint64_t other_start = other.p_vaddr & ~(kPage - 1);
      const uint64_t other_end = other.p_vaddr + other.p_memsz;
      shared = shared || (other_start < page_end && other_end > start);
    }
    if (shared) continue;
    *offset = start - first_load;
    *bytes = page_end - start;
  }
  return *bytes != 0;
}

}  // namespace attach
}  // namespace strata
