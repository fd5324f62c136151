// The dynamic symbols of an ELF file, for the injector (injector.h): libc's dlopen and mmap,
// ld.so's _r_debug, libstrata_base.so's attach entry point, read from the files a process has
// mapped (through /proc/PID/root).
//
// Thread safety: thread-safe (no shared state). Not async-signal-safe (allocates).
#ifndef STRATA_TOOLS_STRATA_ATTACH_ELF_SYMBOLS_H_
#define STRATA_TOOLS_STRATA_ATTACH_ELF_SYMBOLS_H_

#include <cstdint>
#include <map>
#include <string>

namespace strata {
namespace attach {

// The .dynsym of the 64-bit ELF file `path` (name -> st_value; versions ignored, undefined and
// zero-valued symbols left out) and its lowest PT_LOAD address, page-aligned: a symbol's
// address in a process is (the mapping at file offset 0) - *first_load_vaddr + value. Reads
// only the headers and the two sections (a library with its debug information is tens of MB).
// False when the file cannot be read or has no .dynsym.
bool ReadDynamicSymbols(const std::string& path, std::map<std::string, uint64_t>* symbols,
                        uint64_t* first_load_vaddr);

// Reads the file ranges of `path`'s PT_LOAD segments (what dlopen maps), so that their pages
// are in the page cache before a thread of the target is stopped to load it: the stop does not
// wait for the disk. False when the file cannot be read as ELF.
bool ReadLoadSegments(const std::string& path);

}  // namespace attach
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_ATTACH_ELF_SYMBOLS_H_
