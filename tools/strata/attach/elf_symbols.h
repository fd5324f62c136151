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

// __restore_rt's offset from libc's first PT_LOAD address (as ReadDynamicSymbols' values are
// related to *first_load_vaddr), found by its bytes (`mov $15, %rax; syscall`) in the file's
// executable segments; 0 when it is not there exactly once.
uint64_t FindRestoreRt(const std::string& libc_file);

// The unused tail of an executable segment of `path`: the bytes from the end of a PT_LOAD
// segment with PF_X (rounded up to 64) to the end of its last page, which the loader maps
// executable with the segment but which hold no code (the file's padding up to the next
// page-aligned segment), when no other PT_LOAD shares that page and at least `min_bytes` are
// left. The largest such tail: its offset from the first PT_LOAD address (as FindRestoreRt's)
// in *offset and its length in *bytes. The borrowed thread's trampoline is written there
// (borrowed_thread.h); the caller checks the process's bytes there before writing. False when
// there is none.
bool FindExecutablePadding(const std::string& path, uint64_t min_bytes, uint64_t* offset, uint64_t* bytes);

}  // namespace attach
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_ATTACH_ELF_SYMBOLS_H_
