// The loaded shared objects of this process, as the profile's `libs` list.
//
// One entry per loaded ELF object (main executable, shared libraries, the vDSO), found with
// dl_iterate_phdr: start/end span its PT_LOAD segments, offset = start - load bias, so that
// the front-end's relative address (address - (start - offset)) is the address in the ELF
// file's own virtual address space, the one symbol files use (Firefox does the same).
// breakpadId/codeId come from the GNU build-id note read from memory.
//
// Thread safety: CollectSharedLibraries() is thread-safe (dl_iterate_phdr holds the loader
// lock while it runs). Not async-signal-safe (allocates).
#ifndef STRATA_SHARED_JSON_SHARED_LIBRARIES_H_
#define STRATA_SHARED_JSON_SHARED_LIBRARIES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

struct SharedLibrary {
  uint64_t start = 0;   // First mapped address.
  uint64_t end = 0;     // One past the last mapped address.
  uint64_t offset = 0;  // start - (load bias), see above.
  std::string name;        // Base name: "libc.so.6".
  std::string path;        // "/usr/lib/x86_64-linux-gnu/libc.so.6".
  std::string debug_name;  // Name of the file holding the symbols (= name).
  std::string debug_path;  // (= path).
  std::string breakpad_id;  // 33 upper-case hex digits (GUID + age 0); "" without build-id.
  std::string code_id;      // Build-id in lower-case hex; "" without build-id.
  std::string arch;         // "x86_64", "aarch64", ...
};

// Every loaded object, sorted by start; overlapping entries (never seen in practice) are
// dropped so that the list is strictly non-overlapping, as the front-end needs.
std::vector<SharedLibrary> CollectSharedLibraries();

// Whether `name` (a library's file name, or its path) is one of Strata's own libraries
// (libstrata_base.so, libstrata_full.so, libstrata_record.so, libstrata_alloc.so, with any
// version suffix):
// their code is never a frame of a profile (docs/symbols.md, "Strata's own frames").
bool IsStrataLibrary(std::string_view name);

// Breakpad's id for an ELF build-id: the first 16 bytes (zero-padded) read as a GUID whose
// first three fields are little-endian, printed upper-case, then the age "0".
std::string BreakpadIdFromBuildId(const uint8_t* build_id, size_t size);
// The build-id in lower-case hex.
std::string CodeIdFromBuildId(const uint8_t* build_id, size_t size);

// The architecture name the front-end and symbol servers use for this build.
const char* CurrentArchName();

}  // namespace strata

#endif  // STRATA_SHARED_JSON_SHARED_LIBRARIES_H_
