// Finding a module's separate debug file: the file that `objcopy --only-keep-debug` made
// from it, which keeps the full symbol table (.symtab) and DWARF that the installed,
// stripped module lacks.
//
// Where it is looked for, in gdb's order:
//   1. by GNU build-id: <D>/.build-id/<2 hex digits>/<the rest>.debug, for each debug
//      directory D: `debug_directory` (/usr/lib/debug by default: Debian's -dbgsym packages),
//      then <the module's directory>/debug (Strata's install layout: PREFIX/lib/debug);
//   2. by .gnu_debuglink name N: <the module's directory>/N, <the module's directory>/.debug/N,
//      <debug_directory>/<the module's directory>/N.
// A candidate is the module's debug file when both have build-ids and they are equal, or,
// without a build-id on either side, when the CRC-32 of the candidate's contents is the one
// the module's .gnu_debuglink names. A candidate without a .symtab is skipped.
//
// Thread safety: the functions are reentrant (no shared state). Not async-signal-safe (they
// open, map and read files).
#ifndef STRATA_SHARED_SYMBOLS_DEBUG_FILE_H_
#define STRATA_SHARED_SYMBOLS_DEBUG_FILE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shared/symbols/elf_symbol_table.h"

namespace strata {

// The paths looked at, in order, for the module at `module_path` (absolute) with
// `build_id` (hex, may be empty) and the module's .gnu_debuglink (may be absent).
std::vector<std::string> SeparateDebugFileCandidates(
    const std::string& module_path, const std::string& build_id,
    const std::optional<ElfSymbolTable::DebugLink>& link, const std::string& debug_directory);

// The symbol table of the module's separate debug file (the first candidate that is this
// module's and has a .symtab), or an empty table. `found_path`, when not null, receives its
// path ("" when none).
ElfSymbolTable ReadSeparateDebugSymbols(const std::string& module_path,
                                        const std::string& build_id,
                                        const std::optional<ElfSymbolTable::DebugLink>& link,
                                        const std::string& debug_directory,
                                        std::string* found_path = nullptr);

// CRC-32 (reflected, polynomial 0xEDB88320: zlib's crc32 and gdb's gnu_debuglink_crc32),
// continuing from `crc` (0 to start).
uint32_t DebugLinkCrc32(uint32_t crc, const void* data, size_t size);

// The CRC-32 of the whole regular file at `path`, or nullopt when it cannot be read.
std::optional<uint32_t> FileDebugLinkCrc32(const std::string& path);

}  // namespace strata

#endif  // STRATA_SHARED_SYMBOLS_DEBUG_FILE_H_
