// Native address -> function names with inline frames and file:line, from DWARF debug
// information through elfutils' libdw (Debian libdw-dev), for the command-line tool and the
// full tier's writer. Not for the preloadable base tier (it links libdw and libelf).
//
// Given a module list (a profile's `libs`, or CollectSharedLibraries()), each address is
// mapped to its module by binary search and to a file address by the module's load bias
// (start - offset, the SharedLibrary contract). The module's file is opened once through
// libdwfl (one Dwfl per file, reported at its own file addresses), and then:
//   * the outermost function is the ELF symbol covering the address (.symtab, .dynsym, or
//     the separate debug file's .symtab), demangled: the same names ElfSymbolizer gives,
//     without a symbol version ("__libc_start_main", not "__libc_start_main@@GLIBC_2.34");
//   * DWARF scopes at the address (dwarf_getscopes) add one frame per inlined subroutine,
//     innermost first, named by their linkage name (demangled) or DW_AT_name;
//   * the line table gives the innermost frame's file:line; each inlined subroutine's
//     DW_AT_call_file/DW_AT_call_line gives the file:line of the frame that contains it.
// A module without DWARF still gets its ELF symbol names (no file:line, no inline frames).
// Separate debug files are found by build-id and .gnu_debuglink under `debug_directory`
// (libdwfl's standard lookup for DWARF; shared/symbols/debug_file.h for the symbol table,
// which also looks under <the module's directory>/debug). A module whose file's build-id differs from the module's
// code_id gets no names (module+0x... only) rather than wrong ones. The vDSO
// ("linux-vdso.so.1" / "[vdso]", no file on disk) is read from this process's own vDSO
// when its build-id matches.
//
// Caching: files and per-address results live in a DwarfModuleCache keyed by (path,
// code_id) and by file address, so several symbolizers (one per process of a multi-process
// profile, each with its own module list and load addresses) share the work for the same
// libc or program. Results are immutable once made; the strings in them are owned by the
// cache and stay valid while it lives (a symbolizer keeps its cache alive).
//
// Thread safety: thread-safe (the cache's mutex is held for each batch). Not
// async-signal-safe.
#ifndef STRATA_SHARED_SYMBOLS_DWARF_SYMBOLIZER_H_
#define STRATA_SHARED_SYMBOLS_DWARF_SYMBOLIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "shared/json/shared_libraries.h"
#include "shared/symbols/symbolizer.h"

namespace strata {

struct DwarfSymbolizerOptions {
  // Where separate debug files are looked up (by build-id, <dir>/.build-id/ab/cdef.debug,
  // and by .gnu_debuglink). "" leaves only the files themselves and their own directory.
  std::string debug_directory = "/usr/lib/debug";
  // Expand inlined functions into frames of their own (off: outermost function only, with
  // the line-table file:line of the address).
  bool inline_frames = true;
};

// Opened module files and their symbolized addresses; share one between symbolizers.
class DwarfModuleCache {
 public:
  explicit DwarfModuleCache(DwarfSymbolizerOptions options = {});
  ~DwarfModuleCache();
  DwarfModuleCache(const DwarfModuleCache&) = delete;
  DwarfModuleCache& operator=(const DwarfModuleCache&) = delete;

  struct Stats {
    size_t files = 0;            // Module files opened (or tried).
    size_t files_with_dwarf = 0;  // ... of which had DWARF (in the file or a debug file).
    size_t addresses = 0;        // Distinct file addresses symbolized.
    size_t frames = 0;           // Frames made for them (inline frames included).
  };
  Stats GetStats() const;

 private:
  friend class DwarfSymbolizer;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class DwarfSymbolizer final : public Symbolizer {
 public:
  // `modules` in any order (overlapping entries after the first are ignored). Without a
  // cache, the symbolizer makes its own.
  explicit DwarfSymbolizer(std::vector<SharedLibrary> modules,
                           std::shared_ptr<DwarfModuleCache> cache = nullptr);
  ~DwarfSymbolizer() override;
  DwarfSymbolizer(const DwarfSymbolizer&) = delete;
  DwarfSymbolizer& operator=(const DwarfSymbolizer&) = delete;

  // See symbolizer.h: addresses are looked up exactly (the caller subtracts 1 from return
  // addresses). Frames are innermost first; all but the last of an address are `inlined`.
  void Symbolize(absl::Span<const uint64_t> addresses, SymbolizeResult* result) override;

 private:
  struct Module {
    SharedLibrary library;
    uint64_t load_bias = 0;
    int file = -1;  // Index into the cache's files; -1 until first used.
  };
  std::vector<Module> modules_;  // Sorted by start, non-overlapping.
  std::shared_ptr<DwarfModuleCache> cache_;
};

}  // namespace strata

#endif  // STRATA_SHARED_SYMBOLS_DWARF_SYMBOLIZER_H_
