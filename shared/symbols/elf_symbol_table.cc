#include "shared/symbols/elf_symbol_table.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include "platform/private_fd.h"
#include "shared/json/shared_libraries.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ElfSymbolTable reads little-endian ELF64 files on a little-endian host only"
#endif

namespace strata {

// Parses one image. Every read goes through Fits()/Read(), which check offsets against the
// image size with overflow-safe arithmetic and copy (the image may be misaligned).
class ElfImageParser {
 public:
  ElfImageParser(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  ElfSymbolTable Parse() {
    ElfSymbolTable table;
    Elf64_Ehdr ehdr;
    if (!Read(0, &ehdr) || memcmp(ehdr.e_ident, ELFMAG, SELFMAG) != 0 ||
        ehdr.e_ident[EI_CLASS] != ELFCLASS64 || ehdr.e_ident[EI_DATA] != ELFDATA2LSB ||
        (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN)) {
      return table;
    }
    ReadProgramHeaders(ehdr, &table);
    ReadSections(ehdr);
    if (table.code_id_.empty()) table.code_id_ = BuildIdFromSections();
    table.debug_link_ = DebugLinkFromSections(ehdr);
    table.unwind_function_starts_ = UnwindFunctionStarts(ehdr);
    for (size_t i = 0; i < sections_.size(); ++i) {
      const uint32_t type = sections_[i].sh_type;
      if (type != SHT_SYMTAB && type != SHT_DYNSYM) continue;
      if (ReadSymbols(sections_[i])) {
        (type == SHT_SYMTAB ? table.has_symtab_ : table.has_dynsym_) = true;
      }
    }
    AddPltStubs(ehdr);
    Finish(&table);
    return table;
  }

 private:
  struct Candidate {
    uint64_t address;
    uint64_t size;
    const char* name;
    uint32_t name_length;
    uint16_t section;
    uint8_t binding;
  };

  bool Fits(uint64_t offset, uint64_t length) const {
    return offset <= size_ && length <= size_ - offset;
  }
  template <typename T>
  bool Read(uint64_t offset, T* out) const {
    if (!Fits(offset, sizeof(T))) return false;
    memcpy(out, data_ + offset, sizeof(T));
    return true;
  }

  void ReadProgramHeaders(const Elf64_Ehdr& ehdr, ElfSymbolTable* table) {
    if (ehdr.e_phnum == 0 || ehdr.e_phentsize != sizeof(Elf64_Phdr)) return;
    for (uint64_t i = 0; i < ehdr.e_phnum; ++i) {
      Elf64_Phdr phdr;
      if (!Read(ehdr.e_phoff + i * sizeof(Elf64_Phdr), &phdr)) return;
      if (phdr.p_type == PT_LOAD) {
        ElfSymbolTable::LoadSegment segment;
        segment.vaddr = phdr.p_vaddr;
        segment.memsz = phdr.p_memsz;
        segment.offset = phdr.p_offset;
        segment.filesz = phdr.p_filesz;
        segment.executable = (phdr.p_flags & PF_X) != 0;
        table->load_segments_.push_back(segment);
      } else if (phdr.p_type == PT_NOTE && table->code_id_.empty()) {
        table->code_id_ = BuildIdFromNotes(phdr.p_offset, phdr.p_filesz, phdr.p_align);
      }
    }
  }

  void ReadSections(const Elf64_Ehdr& ehdr) {
    if (ehdr.e_shoff == 0 || ehdr.e_shentsize != sizeof(Elf64_Shdr)) return;
    uint64_t count = ehdr.e_shnum;
    if (count == 0) {
      // More than SHN_LORESERVE sections: the count is in section 0's sh_size.
      Elf64_Shdr first;
      if (!Read(ehdr.e_shoff, &first)) return;
      count = first.sh_size;
    }
    if (count == 0 || count > (size_ / sizeof(Elf64_Shdr)) ||
        !Fits(ehdr.e_shoff, count * sizeof(Elf64_Shdr))) {
      return;
    }
    sections_.resize(count);
    memcpy(sections_.data(), data_ + ehdr.e_shoff, count * sizeof(Elf64_Shdr));
  }

  // The NT_GNU_BUILD_ID note in [offset, offset + length), in hex; "" when absent.
  std::string BuildIdFromNotes(uint64_t offset, uint64_t length, uint64_t alignment) const {
    if (!Fits(offset, length)) return std::string();
    const uint64_t align = alignment == 8 ? 8 : 4;
    const uint64_t end = offset + length;
    uint64_t at = offset;
    while (end - at >= sizeof(Elf64_Nhdr)) {
      Elf64_Nhdr note;
      memcpy(&note, data_ + at, sizeof(note));
      const uint64_t name_at = at + sizeof(note);
      const uint64_t name_size = (uint64_t{note.n_namesz} + align - 1) & ~(align - 1);
      const uint64_t desc_size = (uint64_t{note.n_descsz} + align - 1) & ~(align - 1);
      if (name_size > end - name_at || desc_size > end - name_at - name_size) break;
      const uint64_t desc_at = name_at + name_size;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
          memcmp(data_ + name_at, "GNU", 4) == 0 && note.n_descsz > 0) {
        return CodeIdFromBuildId(data_ + desc_at, note.n_descsz);
      }
      at = desc_at + desc_size;
    }
    return std::string();
  }

  std::string BuildIdFromSections() const {
    for (const Elf64_Shdr& section : sections_) {
      if (section.sh_type != SHT_NOTE) continue;
      std::string id = BuildIdFromNotes(section.sh_offset, section.sh_size, section.sh_addralign);
      if (!id.empty()) return id;
    }
    return std::string();
  }

  // The section named `name` (through e_shstrndx), or null.
  const Elf64_Shdr* SectionNamed(const Elf64_Ehdr& ehdr, std::string_view name) const {
    if (ehdr.e_shstrndx == SHN_UNDEF || ehdr.e_shstrndx >= sections_.size()) return nullptr;
    const Elf64_Shdr& names = sections_[ehdr.e_shstrndx];
    if (names.sh_type != SHT_STRTAB || !Fits(names.sh_offset, names.sh_size)) return nullptr;
    for (const Elf64_Shdr& section : sections_) {
      if (section.sh_name >= names.sh_size || names.sh_size - section.sh_name < name.size() + 1) {
        continue;
      }
      const char* text = reinterpret_cast<const char*>(data_ + names.sh_offset + section.sh_name);
      if (memcmp(text, name.data(), name.size()) == 0 && text[name.size()] == '\0') return &section;
    }
    return nullptr;
  }

  // The function start addresses of .eh_frame_hdr's binary-search table, sorted, with the
  // end of the executable segment holding the last one appended as a sentinel. Only the
  // encodings every toolchain emits are read (table: DW_EH_PE_datarel | DW_EH_PE_sdata4;
  // the count: udata4; the eh_frame pointer: any 4-byte form); anything else gives none.
  std::vector<uint64_t> UnwindFunctionStarts(const Elf64_Ehdr& ehdr) const {
    std::vector<uint64_t> starts;
    const Elf64_Shdr* header = SectionNamed(ehdr, ".eh_frame_hdr");
    // x86-64 linkers type it SHT_X86_64_UNWIND, others SHT_PROGBITS (NOBITS in debug files).
    constexpr uint32_t kX86_64Unwind = 0x70000001;
    if (header == nullptr ||
        (header->sh_type != SHT_PROGBITS && header->sh_type != kX86_64Unwind) || header->sh_size < 12 ||
        !Fits(header->sh_offset, header->sh_size)) {
      return starts;
    }
    const uint8_t* hdr = data_ + header->sh_offset;
    constexpr uint8_t kDatarelSdata4 = 0x3b, kUdata4 = 0x03;
    const uint8_t version = hdr[0], frame_pointer_encoding = hdr[1], count_encoding = hdr[2],
                  table_encoding = hdr[3];
    if (version != 1 || (frame_pointer_encoding & 0x0f) != 0x0b || count_encoding != kUdata4 ||
        table_encoding != kDatarelSdata4) {
      return starts;
    }
    uint32_t count;
    memcpy(&count, hdr + 8, 4);
    if (count == 0 || (header->sh_size - 12) / 8 < count) return starts;
    starts.reserve(count + 1);
    for (uint32_t i = 0; i < count; ++i) {
      int32_t relative;
      memcpy(&relative, hdr + 12 + uint64_t{i} * 8, 4);
      starts.push_back(header->sh_addr + static_cast<int64_t>(relative));
    }
    std::sort(starts.begin(), starts.end());
    starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
    // Sentinel: the end of the executable section holding the last function.
    uint64_t end = 0;
    for (const Elf64_Shdr& section : sections_) {
      if ((section.sh_flags & SHF_EXECINSTR) != 0 && section.sh_addr <= starts.back() &&
          starts.back() - section.sh_addr < section.sh_size) {
        end = section.sh_addr + section.sh_size;
      }
    }
    starts.push_back(end > starts.back() ? end : starts.back() + 1);
    return starts;
  }

  // The .gnu_debuglink section (found by name through e_shstrndx): a NUL-terminated file
  // name, padded to 4 bytes, then a 4-byte CRC. nullopt when absent or malformed.
  std::optional<ElfSymbolTable::DebugLink> DebugLinkFromSections(const Elf64_Ehdr& ehdr) const {
    if (ehdr.e_shstrndx == SHN_UNDEF || ehdr.e_shstrndx >= sections_.size()) return std::nullopt;
    const Elf64_Shdr& names = sections_[ehdr.e_shstrndx];
    if (names.sh_type != SHT_STRTAB || !Fits(names.sh_offset, names.sh_size)) return std::nullopt;
    static constexpr char kName[] = ".gnu_debuglink";
    for (const Elf64_Shdr& section : sections_) {
      if (section.sh_type != SHT_PROGBITS || section.sh_name >= names.sh_size ||
          names.sh_size - section.sh_name < sizeof(kName) ||
          memcmp(data_ + names.sh_offset + section.sh_name, kName, sizeof(kName)) != 0) {
        continue;
      }
      if (!Fits(section.sh_offset, section.sh_size) || section.sh_size < 8) return std::nullopt;
      const char* text = reinterpret_cast<const char*>(data_ + section.sh_offset);
      const void* nul = memchr(text, '\0', section.sh_size - 4);
      if (nul == nullptr || nul == text) return std::nullopt;
      const size_t length = static_cast<const char*>(nul) - text;
      const uint64_t crc_at = (length + 1 + 3) & ~uint64_t{3};
      if (crc_at + 4 > section.sh_size) return std::nullopt;
      ElfSymbolTable::DebugLink link;
      link.file_name.assign(text, length);
      // A name with a directory part would let a file point anywhere: refused.
      if (link.file_name.find('/') != std::string::npos) return std::nullopt;
      memcpy(&link.crc, text + crc_at, 4);
      return link;
    }
    return std::nullopt;
  }

  // Appends the defined, named function symbols of one symbol table section to
  // candidates_. False when the section or its string table is unusable.
  bool ReadSymbols(const Elf64_Shdr& symbols) {
    if (symbols.sh_entsize != sizeof(Elf64_Sym) || !Fits(symbols.sh_offset, symbols.sh_size) ||
        symbols.sh_link >= sections_.size()) {
      return false;
    }
    const Elf64_Shdr& strings = sections_[symbols.sh_link];
    if (strings.sh_type != SHT_STRTAB || !Fits(strings.sh_offset, strings.sh_size)) {
      return false;
    }
    const char* string_table = reinterpret_cast<const char*>(data_ + strings.sh_offset);
    const uint64_t string_table_size = strings.sh_size;
    const uint64_t count = symbols.sh_size / sizeof(Elf64_Sym);
    candidates_.reserve(candidates_.size() + count);
    for (uint64_t i = 0; i < count; ++i) {
      Elf64_Sym sym;
      memcpy(&sym, data_ + symbols.sh_offset + i * sizeof(Elf64_Sym), sizeof(sym));
      const unsigned type = ELF64_ST_TYPE(sym.st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
          sym.st_name == 0 || sym.st_name >= string_table_size) {
        continue;
      }
      const char* name = string_table + sym.st_name;
      const void* nul = memchr(name, '\0', string_table_size - sym.st_name);
      if (nul == nullptr) continue;  // Unterminated: the table is truncated.
      size_t length = static_cast<const char*>(nul) - name;
      // A symbol version (`name@@GLIBC_2.34`, `name@GLIBC_2.2.5`) is not part of the name.
      if (const void* at = memchr(name, '@', length)) length = static_cast<const char*>(at) - name;
      if (length == 0 || length > std::numeric_limits<uint32_t>::max()) continue;
      Candidate candidate;
      candidate.address = sym.st_value;
      candidate.size = sym.st_size;
      candidate.name = name;
      candidate.name_length = static_cast<uint32_t>(length);
      candidate.section = sym.st_shndx;
      candidate.binding = ELF64_ST_BIND(sym.st_info);
      candidates_.push_back(candidate);
    }
    return true;
  }

  // Names every PLT stub `symbol@plt`, as objdump and perf do (issue 34: stubs were unnamed
  // and merged into one "lib!0x..." function). x86-64 stubs of .plt (lazy binding), .plt.sec
  // (IBT: endbr64 first) and .plt.got (eager) all jump through a GOT slot with `jmp
  // *disp32(%rip)` (ff 25, perhaps after endbr64 and a bnd prefix); the slot's JUMP_SLOT or
  // GLOB_DAT relocation names the symbol. Each stub is one 16-byte entry (8 in a .plt.got
  // of 8-byte entries); .plt's first entry (the resolver's trampoline) has no slot of its own.
  void AddPltStubs(const Elf64_Ehdr& ehdr) {
    std::unordered_map<uint64_t, std::pair<const char*, uint32_t>> slot_symbols;
    for (const Elf64_Shdr& relocations : sections_) {
      if (relocations.sh_type != SHT_RELA || relocations.sh_entsize != sizeof(Elf64_Rela) ||
          !Fits(relocations.sh_offset, relocations.sh_size) ||
          relocations.sh_link >= sections_.size()) {
        continue;
      }
      const Elf64_Shdr& symbols = sections_[relocations.sh_link];
      if (symbols.sh_type != SHT_DYNSYM || symbols.sh_entsize != sizeof(Elf64_Sym) ||
          !Fits(symbols.sh_offset, symbols.sh_size) || symbols.sh_link >= sections_.size()) {
        continue;
      }
      const Elf64_Shdr& strings = sections_[symbols.sh_link];
      if (strings.sh_type != SHT_STRTAB || !Fits(strings.sh_offset, strings.sh_size)) continue;
      const uint64_t count = relocations.sh_size / sizeof(Elf64_Rela);
      for (uint64_t i = 0; i < count; ++i) {
        Elf64_Rela rela;
        memcpy(&rela, data_ + relocations.sh_offset + i * sizeof(Elf64_Rela), sizeof(rela));
        const uint32_t type = ELF64_R_TYPE(rela.r_info);
        const uint64_t index = ELF64_R_SYM(rela.r_info);
        if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || index == 0 ||
            index >= symbols.sh_size / sizeof(Elf64_Sym)) {
          continue;
        }
        Elf64_Sym sym;
        memcpy(&sym, data_ + symbols.sh_offset + index * sizeof(Elf64_Sym), sizeof(sym));
        if (sym.st_name == 0 || sym.st_name >= strings.sh_size) continue;
        const char* name = reinterpret_cast<const char*>(data_ + strings.sh_offset + sym.st_name);
        const void* nul = memchr(name, '\0', strings.sh_size - sym.st_name);
        if (nul == nullptr) continue;
        size_t length = static_cast<const char*>(nul) - name;
        if (const void* at = memchr(name, '@', length)) length = static_cast<const char*>(at) - name;
        if (length == 0 || length > 4096) continue;
        slot_symbols.emplace(rela.r_offset, std::make_pair(name, static_cast<uint32_t>(length)));
      }
    }
    if (slot_symbols.empty()) return;
    for (const char* section_name : {".plt", ".plt.sec", ".plt.got"}) {
      const Elf64_Shdr* plt = SectionNamed(ehdr, section_name);
      if (plt == nullptr || plt->sh_type != SHT_PROGBITS || !Fits(plt->sh_offset, plt->sh_size)) {
        continue;
      }
      const uint64_t entry = plt->sh_entsize == 8 ? 8 : 16;
      const uint16_t section_index = static_cast<uint16_t>(plt - sections_.data());
      for (uint64_t at = 0; at + entry <= plt->sh_size; at += entry) {
        const uint8_t* code = data_ + plt->sh_offset + at;
        uint64_t i = 0;
        if (entry - i >= 4 && memcmp(code + i, "\xf3\x0f\x1e\xfa", 4) == 0) i += 4;  // endbr64
        if (i < entry && code[i] == 0xf2) ++i;                                   // bnd
        if (entry - i < 6 || code[i] != 0xff || code[i + 1] != 0x25) continue;   // jmp *d(%rip)
        int32_t displacement;
        memcpy(&displacement, code + i + 2, sizeof(displacement));
        const uint64_t slot = plt->sh_addr + at + i + 6 + static_cast<int64_t>(displacement);
        const auto found = slot_symbols.find(slot);
        if (found == slot_symbols.end()) continue;
        std::string& name = synthetic_names_.emplace_back(found->second.first, found->second.second);
        name += "@plt";
        Candidate candidate;
        candidate.address = plt->sh_addr + at;
        candidate.size = entry;
        candidate.name = name.c_str();
        candidate.name_length = static_cast<uint32_t>(name.size());
        candidate.section = section_index;
        candidate.binding = STB_LOCAL;  // A real symbol at the same address keeps its name.
        candidates_.push_back(candidate);
      }
    }
  }

  // Ranks aliases: true when `a` is the better name for their shared address.
  static bool Better(const Candidate& a, const Candidate& b) {
    const bool a_sized = a.size != 0, b_sized = b.size != 0;
    if (a_sized != b_sized) return a_sized;
    const bool a_local = a.binding == STB_LOCAL, b_local = b.binding == STB_LOCAL;
    if (a_local != b_local) return b_local;
    const size_t a_underscores = LeadingUnderscores(a), b_underscores = LeadingUnderscores(b);
    if (a_underscores != b_underscores) return a_underscores < b_underscores;
    if (a.name_length != b.name_length) return a.name_length < b.name_length;
    return memcmp(a.name, b.name, a.name_length) < 0;
  }
  static size_t LeadingUnderscores(const Candidate& c) {
    size_t n = 0;
    while (n < c.name_length && c.name[n] == '_') ++n;
    return n;
  }

  // End of the allocated section holding `candidate`, or 0 when unknown.
  uint64_t SectionEnd(const Candidate& candidate) const {
    if (candidate.section >= SHN_LORESERVE || candidate.section >= sections_.size()) return 0;
    const Elf64_Shdr& section = sections_[candidate.section];
    if ((section.sh_flags & SHF_ALLOC) == 0 || candidate.address < section.sh_addr ||
        candidate.address - section.sh_addr >= section.sh_size) {
      return 0;
    }
    return section.sh_addr + section.sh_size;
  }

  void Finish(ElfSymbolTable* table) {
    std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
      if (a.address != b.address) return a.address < b.address;
      return Better(a, b);
    });
    // Keep the best-ranked candidate of each address (the first after sorting).
    size_t kept = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      if (kept > 0 && candidates_[kept - 1].address == candidates_[i].address) continue;
      candidates_[kept++] = candidates_[i];
    }
    candidates_.resize(kept);

    size_t name_bytes = 0;
    for (const Candidate& c : candidates_) name_bytes += c.name_length + 1;
    if (name_bytes > std::numeric_limits<uint32_t>::max()) return;  // Absurd; give up.
    table->names_.reserve(name_bytes);
    table->entries_.reserve(candidates_.size());
    constexpr uint64_t kMaxSize = std::numeric_limits<uint32_t>::max();
    for (size_t i = 0; i < candidates_.size(); ++i) {
      const Candidate& c = candidates_[i];
      uint64_t size = c.size;
      if (size == 0) {
        // Up to the next symbol or the end of the section; only its own address when the
        // section is unknown.
        uint64_t end = SectionEnd(c);
        if (end == 0) {
          end = c.address + 1;
        } else if (i + 1 < candidates_.size() && candidates_[i + 1].address < end) {
          end = candidates_[i + 1].address;
        }
        size = end > c.address ? end - c.address : 1;
      }
      ElfSymbolTable::Entry entry;
      entry.address = c.address;
      entry.size = static_cast<uint32_t>(std::min(size, kMaxSize));
      entry.name = static_cast<uint32_t>(table->names_.size());
      table->names_.append(c.name, c.name_length);
      table->names_.push_back('\0');
      table->entries_.push_back(entry);
    }
  }

  const uint8_t* const data_;
  const size_t size_;
  std::vector<Elf64_Shdr> sections_;
  std::vector<Candidate> candidates_;
  std::deque<std::string> synthetic_names_;  // "symbol@plt": stable addresses for candidates_.
};

std::optional<uint64_t> ElfSymbolTable::UnwindFunctionStart(uint64_t file_address) const {
  if (unwind_function_starts_.size() < 2) return std::nullopt;
  auto it = std::upper_bound(unwind_function_starts_.begin(), unwind_function_starts_.end(),
                             file_address);
  if (it == unwind_function_starts_.begin() || it == unwind_function_starts_.end()) {
    return std::nullopt;  // Before the first function, or at/after the sentinel.
  }
  return *(it - 1);
}

void ElfSymbolTable::AddPltStubsFrom(const ElfSymbolTable& runtime) {
  constexpr std::string_view kPlt = "@plt";
  bool added = false;
  for (const Entry& entry : runtime.entries_) {
    const std::string_view name(runtime.names_.data() + entry.name);
    if (name.size() <= kPlt.size() || name.substr(name.size() - kPlt.size()) != kPlt) continue;
    const size_t index = Find(entry.address);
    if (index != kNotFound && entries_[index].address == entry.address) continue;
    Entry copy = entry;
    copy.name = static_cast<uint32_t>(names_.size());
    names_.append(name);
    names_.push_back('\0');
    entries_.push_back(copy);
    added = true;
  }
  if (!added) return;
  std::sort(entries_.begin(), entries_.end(),
            [](const Entry& a, const Entry& b) { return a.address < b.address; });
}

ElfSymbolTable ElfSymbolTable::ReadImage(const void* data, size_t size) {
  if (data == nullptr) return ElfSymbolTable();
  return ElfImageParser(static_cast<const uint8_t*>(data), size).Parse();
}

ElfSymbolTable ElfSymbolTable::ReadFile(const std::string& path) {
  // Non-blocking: a FIFO named by an untrusted path (a flight recorder file's library list)
  // must not hang the open; only a regular file is read.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return ElfSymbolTable();
  ElfSymbolTable table;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    const size_t size = static_cast<size_t>(st.st_size);
    void* image = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (image != MAP_FAILED) {
      table = ReadImage(image, size);
      munmap(image, size);
    }
  }
#if STRATA_TSAN_BUILD
  // TSan's mmap interceptor recorded a use of this number, and in libstrata_base.so `close`
  // is Strata's own wrapper, past TSan's interceptor (private_fd.h): closed so that TSan sees
  // it, else the next descriptor given the number (the sampler's opendir) was reported racing
  // with this mmap.
  CloseSeenByTsan(fd);
#else
  close(fd);
#endif
  return table;
}

ElfSymbolTable ElfSymbolTable::ReadVdso() {
  const uintptr_t base = getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return ElfSymbolTable();
  // The kernel maps the whole vDSO file image, page-rounded. Its headers are in the first
  // page; the image size is the file-backed extent of the PT_LOAD that starts at offset 0
  // (the vDSO is linked at 0 and mapped as one segment), rounded up to whole pages.
  const auto* ehdr = reinterpret_cast<const Elf64_Ehdr*>(base);
  const long page = sysconf(_SC_PAGESIZE);
  const uint64_t page_size = page > 0 ? static_cast<uint64_t>(page) : 4096;
  if (memcmp(ehdr->e_ident, ELFMAG, SELFMAG) != 0 || ehdr->e_ident[EI_CLASS] != ELFCLASS64 ||
      ehdr->e_phentsize != sizeof(Elf64_Phdr) || ehdr->e_phoff > page_size ||
      ehdr->e_phnum * sizeof(Elf64_Phdr) > page_size - ehdr->e_phoff) {
    return ElfSymbolTable();
  }
  uint64_t image_size = 0;
  for (int i = 0; i < ehdr->e_phnum; ++i) {
    Elf64_Phdr phdr;
    memcpy(&phdr, reinterpret_cast<const uint8_t*>(base) + ehdr->e_phoff + i * sizeof(phdr),
           sizeof(phdr));
    if (phdr.p_type == PT_LOAD && phdr.p_offset == 0) image_size = phdr.p_filesz;
  }
  if (image_size == 0 || image_size > (uint64_t{1} << 24)) return ElfSymbolTable();
  image_size = (image_size + page_size - 1) & ~(page_size - 1);
  return ReadImage(ehdr, image_size);
}

ElfSymbolTable::Symbol ElfSymbolTable::symbol(size_t index) const {
  const Entry& entry = entries_[index];
  Symbol symbol;
  symbol.address = entry.address;
  symbol.size = entry.size;
  const char* name = names_.data() + entry.name;
  symbol.name = std::string_view(name, strlen(name));
  return symbol;
}

size_t ElfSymbolTable::Find(uint64_t file_address) const {
  auto it = std::upper_bound(
      entries_.begin(), entries_.end(), file_address,
      [](uint64_t address, const Entry& entry) { return address < entry.address; });
  if (it == entries_.begin()) return kNotFound;
  --it;
  if (file_address - it->address >= it->size) return kNotFound;
  return static_cast<size_t>(it - entries_.begin());
}

std::optional<uint64_t> ElfSymbolTable::LoadBiasForMapping(uint64_t map_start, uint64_t map_offset,
                                                           bool executable) const {
  constexpr uint64_t kPageMask = ~uint64_t{4095};
  for (const LoadSegment& segment : load_segments_) {
    if (segment.executable != executable) continue;
    const uint64_t aligned = segment.offset & kPageMask;
    if (map_offset < aligned ||
        map_offset - aligned >= segment.filesz + (segment.offset - aligned)) {
      continue;
    }
    // File offset X of the segment sits at bias + p_vaddr + (X - p_offset); the mapping
    // puts file offset map_offset at map_start.
    return map_start - map_offset + segment.offset - segment.vaddr;
  }
  return std::nullopt;
}

std::optional<std::pair<uint64_t, uint64_t>> ElfSymbolTable::LoadedRange() const {
  if (load_segments_.empty()) return std::nullopt;
  uint64_t low = std::numeric_limits<uint64_t>::max(), high = 0;
  for (const LoadSegment& segment : load_segments_) {
    low = std::min(low, segment.vaddr);
    high = std::max(high, segment.vaddr + segment.memsz);
  }
  return std::make_pair(low, high);
}

size_t ElfSymbolTable::MemoryUsage() const {
  return entries_.capacity() * sizeof(Entry) + names_.capacity() +
         load_segments_.capacity() * sizeof(LoadSegment) + code_id_.capacity() +
         unwind_function_starts_.capacity() * sizeof(uint64_t);
}

}  // namespace strata
