// The function symbols of one ELF64 file, sorted by address, for nearest-symbol lookup.
//
// What is read: the section header table, then .symtab and .dynsym (both when both are
// present: a stripped file keeps only .dynsym, the exported functions), keeping STT_FUNC
// and STT_GNU_IFUNC symbols that are defined (not SHN_UNDEF) and named. Also the PT_LOAD
// segments (for load-bias computations), the GNU build-id note and the .gnu_debuglink
// section (the name and CRC of a separate debug file, shared/symbols/debug_file.h).
//
// Names: a symbol version appended by the linker (`__libc_start_main@@GLIBC_2.34`,
// `memcpy@GLIBC_2.2.5`, as .symtab holds them since binutils 2.35) is cut off at the first
// '@': names are the source's. Mangled C++ names never contain '@'.
//
// Addresses are the file's own virtual addresses (st_value, p_vaddr): add the module's load
// bias to get a run-time address, subtract it from a run-time address before Find().
//
// Aliases (several symbols at one address, like libc's `write` and `__write`) keep one
// name, chosen in this order: the one with a size, then global/weak over local, then fewer
// leading underscores, then the shorter name, then the smaller one in byte order.
//
// Coverage: a symbol with a size covers [address, address + size); an address past its
// end is "not found" rather than attributed to the preceding function (padding, PLT stubs,
// code of functions the table does not name). A zero-size symbol (hand-written assembly)
// covers up to the next symbol or the end of its section, whichever is first, or only its
// own address when its section is unknown.
//
// Robustness: every offset and size read from the file is bounds-checked against the
// image; anything that does not fit (truncated file, garbage, ELF32, big-endian, ET_REL
// objects) yields fewer or no symbols, never a crash or an out-of-bounds read. ReadFile
// maps the file only while parsing and copies the kept names out; a file truncated by
// someone else *during* that parse can still raise SIGBUS (mmap's nature).
//
// Thread safety: a table is immutable after construction; const methods are thread-safe.
// Nothing here is async-signal-safe (construction allocates and maps files).
#ifndef STRATA_SHARED_SYMBOLS_ELF_SYMBOL_TABLE_H_
#define STRATA_SHARED_SYMBOLS_ELF_SYMBOL_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

class ElfSymbolTable {
 public:
  struct Symbol {
    uint64_t address = 0;   // File virtual address of the first byte.
    uint64_t size = 0;      // Bytes covered (see "Coverage"); at least 1.
    std::string_view name;  // As in the file (mangled), NUL-terminated; lives as the table.
  };

  // One PT_LOAD program header.
  struct LoadSegment {
    uint64_t vaddr = 0;
    uint64_t memsz = 0;
    uint64_t offset = 0;  // File offset.
    uint64_t filesz = 0;
    bool executable = false;  // PF_X.
  };

  // The .gnu_debuglink section: the separate debug file's base name and the CRC-32 of its
  // whole contents (the polynomial of zlib's crc32 and gdb's gnu_debuglink_crc32).
  struct DebugLink {
    std::string file_name;
    uint32_t crc = 0;
  };

  static constexpr size_t kNotFound = static_cast<size_t>(-1);

  // Maps the regular file at `path` read-only and parses it. A missing, unreadable,
  // non-regular or malformed file gives an empty table.
  static ElfSymbolTable ReadFile(const std::string& path);
  // Parses an ELF image laid out as a file: `size` readable bytes at `data`.
  static ElfSymbolTable ReadImage(const void* data, size_t size);
  // This process's vDSO, read from memory at getauxval(AT_SYSINFO_EHDR); empty when the
  // process has none.
  static ElfSymbolTable ReadVdso();

  ElfSymbolTable() = default;

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  // The index-th symbol by address, 0 <= index < size().
  Symbol symbol(size_t index) const;

  // Index of the symbol covering `file_address`, or kNotFound. O(log size()).
  size_t Find(uint64_t file_address) const;

  // Which tables the symbols came from.
  bool has_symtab() const { return has_symtab_; }
  bool has_dynsym() const { return has_dynsym_; }
  // The GNU build-id in lower-case hex, as SharedLibrary::code_id; "" when there is none.
  const std::string& code_id() const { return code_id_; }
  const std::vector<LoadSegment>& load_segments() const { return load_segments_; }
  // The .gnu_debuglink section, when the file has a well-formed one.
  const std::optional<DebugLink>& debug_link() const { return debug_link_; }

  // For an address no symbol covers: the start of the function that holds it according to
  // the unwind tables (.eh_frame_hdr's sorted list of FDE start addresses, which stripped
  // binaries keep), when the address lies between a function's start and the next one's.
  // nullopt otherwise. Lets stripped code be grouped by function ("python3.11!0x1a2b0")
  // instead of by instruction. O(log n).
  std::optional<uint64_t> UnwindFunctionStart(uint64_t file_address) const;
  size_t unwind_function_count() const { return unwind_function_starts_.size(); }

  // The load bias (run-time address minus file address) of this file when a mapping that
  // starts at run-time address `map_start` maps it from file offset `map_offset` (the
  // start and offset columns of /proc/self/maps): bias = map_start - map_offset + p_offset
  // - p_vaddr for the first PT_LOAD segment whose page-aligned file range holds
  // `map_offset` and whose PF_X matches `executable`. nullopt when no segment does.
  // Segments may share a file page, so pass the executable mapping (r-x) where there is
  // one: a read-only mapping's offset can be ambiguous (read-only data vs RELRO).
  std::optional<uint64_t> LoadBiasForMapping(uint64_t map_start, uint64_t map_offset,
                                             bool executable = true) const;
  // Lowest p_vaddr and highest p_vaddr + p_memsz over the PT_LOAD segments, or nullopt.
  std::optional<std::pair<uint64_t, uint64_t>> LoadedRange() const;

  // Adds `runtime`'s PLT stub names ("symbol@plt") where this table has no symbol starting
  // at the stub's address: a separate debug file's .plt is SHT_NOBITS, so a table read from
  // it has no stubs, while the file that is loaded does. For a table replaced by its debug
  // file's (ReadSeparateDebugSymbols).
  void AddPltStubsFrom(const ElfSymbolTable& runtime);

  // Heap bytes this table holds.
  size_t MemoryUsage() const;

 private:
  friend class ElfImageParser;

  struct Entry {
    uint64_t address;
    uint32_t size;  // Clamped to 4 GiB - 1; at least 1.
    uint32_t name;  // Offset of the NUL-terminated name in names_.
  };

  std::vector<Entry> entries_;  // Sorted by address, unique addresses.
  std::string names_;
  std::vector<LoadSegment> load_segments_;
  std::string code_id_;
  std::optional<DebugLink> debug_link_;
  std::vector<uint64_t> unwind_function_starts_;  // Sorted, unique; last = end sentinel.
  bool has_symtab_ = false;
  bool has_dynsym_ = false;
};

}  // namespace strata

#endif  // STRATA_SHARED_SYMBOLS_ELF_SYMBOL_TABLE_H_
