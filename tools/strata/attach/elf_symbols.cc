// See elf_symbols.h.
#include "tools/strata/attach/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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

}  // namespace

bool ReadDynamicSymbols(const std::string& path, std::map<std::string, uint64_t>* symbols,
                        uint64_t* first_load_vaddr) {
  const OpenElf elf(path);
  if (!elf.ok()) return false;
  const int fd = elf.fd();
  const Elf64_Ehdr& header = elf.header();
  std::string bytes;
  *first_load_vaddr = UINT64_MAX;
  if (!ReadAt(fd, header.e_phoff, header.e_phnum * sizeof(Elf64_Phdr), &bytes)) return false;
  for (int i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr program;
    std::memcpy(&program, bytes.data() + i * sizeof(Elf64_Phdr), sizeof(program));
    if (program.p_type == PT_LOAD) *first_load_vaddr = std::min<uint64_t>(*first_load_vaddr, program.p_vaddr & ~0xfffULL);
  }
  if (*first_load_vaddr == UINT64_MAX) return false;
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
  if (!elf.ok()) return false;
  const int fd = elf.fd();
  const Elf64_Ehdr& header = elf.header();
  std::string bytes;
  if (!ReadAt(fd, header.e_phoff, header.e_phnum * sizeof(Elf64_Phdr), &bytes)) return false;
  std::string chunk;
  for (int i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr program;
    std::memcpy(&program, bytes.data() + i * sizeof(Elf64_Phdr), sizeof(program));
    if (program.p_type != PT_LOAD) continue;
    for (uint64_t offset = 0; offset < program.p_filesz; offset += 1 << 20) {
      const size_t length = static_cast<size_t>(std::min<uint64_t>(1 << 20, program.p_filesz - offset));
      if (!ReadAt(fd, program.p_offset + offset, length, &chunk)) return false;
    }
  }
  return true;
}

}  // namespace attach
}  // namespace strata
