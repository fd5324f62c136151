// Symbolizes this process's native addresses from the ELF symbol tables of its modules.
//
// Given the module list (CollectSharedLibraries()), each address is mapped to its module
// by binary search, to a file address by the module's load bias (start - offset, the
// SharedLibrary contract), and to the function symbol covering it (ElfSymbolTable). A
// module's table is read on the first address that falls in it and kept, with the
// demangled names already produced, until the symbolizer is destroyed. The vDSO is read
// from memory; every other module from its path (a deleted main executable through
// /proc/self/exe); a module without .symtab also from a separate debug file found by
// build-id (ElfSymbolizerOptions).
//
// A module whose file on disk is not the loaded one (build-ids differ, or without build-ids
// the PT_LOAD extent does not match the mapping) gets no symbols rather than wrong ones.
//
// Results: one frame per address with a known function (the demangled name and the offset
// in it); no file/line, no inline frames. See symbolizer.h for the return-address rule
// (the caller subtracts 1 from non-leaf addresses).
//
// Costs (docs/symbols.md, -O2): the first lookup in a module maps and parses its file
// once (~0.5 us per function symbol: 0.2-0.3 ms for libc's .dynsym, ~25 ms for a 44k-symbol
// .symtab) and keeps ~16 bytes plus the mangled name per symbol; the first hit of a symbol
// demangles it once (~1-3 us); after that a lookup is two binary searches and a hash
// lookup (~65 ns per address in a 10,000-address batch).
//
// Thread safety: thread-safe (a mutex is held for each batch). NOT async-signal-safe: it
// allocates, maps files and locks; call it at capture time, never while a thread is
// suspended.
#ifndef STRATA_SHARED_SYMBOLS_ELF_SYMBOLIZER_H_
#define STRATA_SHARED_SYMBOLS_ELF_SYMBOLIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/types/span.h"
#include "platform/mutex.h"
#include "shared/json/shared_libraries.h"
#include "shared/symbols/demangle.h"
#include "shared/symbols/elf_symbol_table.h"
#include "shared/symbols/symbolizer.h"

namespace strata {

struct ElfSymbolizerOptions {
  // Modules without a .symtab (stripped binaries and system libraries) take the symbols of
  // their separate debug file, looked up by build-id under this directory (Debian's -dbgsym
  // packages, Fedora's debuginfo) and under <the module's directory>/debug (Strata's install
  // layout), then by .gnu_debuglink beside the module (shared/symbols/debug_file.h). A file
  // found is used when it is the module's (same build-id, or the debuglink's CRC). "" leaves
  // out this directory only.
  std::string debug_directory = "/usr/lib/debug";
};

class ElfSymbolizer final : public Symbolizer {
 public:
  // `modules` as CollectSharedLibraries() returns them (any order; overlapping entries
  // after the first are ignored).
  explicit ElfSymbolizer(std::vector<SharedLibrary> modules);
  ElfSymbolizer(std::vector<SharedLibrary> modules, ElfSymbolizerOptions options);
  ~ElfSymbolizer() override;
  ElfSymbolizer(const ElfSymbolizer&) = delete;
  ElfSymbolizer& operator=(const ElfSymbolizer&) = delete;

  void Symbolize(absl::Span<const uint64_t> addresses, SymbolizeResult* result) override;

  struct Stats {
    size_t modules = 0;          // In the module list.
    size_t modules_read = 0;     // Whose symbol table was read (successfully or not).
    size_t symbols = 0;          // Function symbols held, over all read modules.
    size_t demangled_names = 0;  // Distinct names demangled so far.
    size_t memory_bytes = 0;     // Approximate heap bytes of tables and caches.
  };
  Stats GetStats() const;

 private:
  struct Module {
    SharedLibrary library;
    uint64_t load_bias = 0;
    bool read = false;
    ElfSymbolTable table;
    // Demangled names by symbol index. Node-based: the strings never move, so the
    // string_views handed out stay valid.
    std::unordered_map<uint32_t, std::string> demangled;
    // Names of functions known only from the unwind tables, by start ("python3!0x1a2b0").
    std::unordered_map<uint64_t, std::string> unwind_names;
  };

  Module* FindModule(uint64_t address);
  void ReadTable(Module& module);
  std::string_view DemangledName(Module& module, size_t symbol_index);
  std::string_view UnwindFunctionName(Module& module, uint64_t start);

  const ElfSymbolizerOptions options_;
  mutable Mutex mutex_{"ElfSymbolizer"};
  std::vector<std::unique_ptr<Module>> modules_;  // Sorted by start, non-overlapping.
  const uint64_t vdso_address_;                   // getauxval(AT_SYSINFO_EHDR), or 0.
  Demangler demangler_;
};

}  // namespace strata

#endif  // STRATA_SHARED_SYMBOLS_ELF_SYMBOLIZER_H_
