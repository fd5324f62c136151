// Native address -> function name: the interface every symbolizer implements, and the
// batch result it fills.
//
// ElfSymbolizer (elf_symbolizer.h) answers from ELF symbol tables: one frame per address,
// no source position; it is what the base tier links. A DWARF-based symbolizer (libdw,
// for the command line tool) sits beside it behind the same interface and fills the rest:
// several frames per address (inlined functions, innermost first) and file:line.
//
// Return addresses: a symbolizer looks up exactly the addresses it is given. Stack walks
// record return addresses (the instruction after the call) for every frame but the
// innermost, and a return address can belong to the next function or the next line when
// the call is the last instruction. The CALLER subtracts 1 from those non-leaf addresses
// (CallerAddress() below) before symbolizing; the leaf pc (frames[0].pc of a NativeFrame
// walk) is looked up as is. This only applies to names we resolve ourselves: raw `0x...`
// addresses written into a Gecko profile stay unadjusted (the front-end subtracts 1
// itself; see docs/symbols.md).
#ifndef STRATA_SHARED_SYMBOLS_SYMBOLIZER_H_
#define STRATA_SHARED_SYMBOLS_SYMBOLIZER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"

namespace strata {

// The address to look up for a return address found by a stack walk (not the leaf pc).
constexpr uint64_t CallerAddress(uint64_t return_address) { return return_address - 1; }

// The name of a function that no symbol names but the module's unwind tables delimit
// (stripped code, ElfSymbolTable::UnwindFunctionStart): "<module>!0x<start in hex>", so that
// all the addresses of one function share one name. Distinct from the per-address
// "<module>+0x<offset>" of code no table delimits.
std::string UnwindFunctionDisplayName(std::string_view module, uint64_t start);

// One function at an address. Strings are owned by the symbolizer that produced them and
// stay valid until it is destroyed.
struct SymbolizedFrame {
  std::string_view function;     // Demangled name; never empty in a frame.
  uint64_t function_offset = 0;  // Address minus the function's first byte.
  std::string_view file;         // Source file; empty when unknown (always, from ELF tables).
  uint32_t line = 0;             // 1-based source line; 0 when unknown.
  bool inlined = false;          // Inlined into the next frame of the same address.
};

// One looked-up address.
struct SymbolizedAddress {
  uint64_t address = 0;        // As given.
  std::string_view module;     // Module base name ("libc.so.6"); empty when outside them all.
  uint64_t module_offset = 0;  // Address minus the module's load bias: the address in the
                               // module file's own address space, which is also the Gecko
                               // front-end's lib-relative address. 0 when module is empty.
  uint32_t first_frame = 0;    // Frames: SymbolizeResult::frames[first_frame,
  uint32_t frame_count = 0;    //   first_frame + frame_count); 0 frames: function unknown.
};

struct SymbolizeResult {
  std::vector<SymbolizedAddress> addresses;  // One per input address, in input order.
  std::vector<SymbolizedFrame> frames;       // Innermost first within each address.

  absl::Span<const SymbolizedFrame> FramesOf(size_t index) const {
    // Not subspan(): it can throw, which needs a non-header abseil library.
    const SymbolizedAddress& a = addresses[index];
    return absl::Span<const SymbolizedFrame>(frames.data() + a.first_frame, a.frame_count);
  }
  // A display name for addresses[index]: the outermost (non-inlined) function's name;
  // "module+0x1a2b" (module_offset in hex) when only the module is known; "" when the
  // address is in no module.
  std::string NameOf(size_t index) const;
  void Clear() {
    addresses.clear();
    frames.clear();
  }
};

class Symbolizer {
 public:
  virtual ~Symbolizer() = default;

  // Clears `result` and fills it for `addresses`, looked up exactly (see "Return
  // addresses" above). Implementations say their own thread safety and costs.
  virtual void Symbolize(absl::Span<const uint64_t> addresses, SymbolizeResult* result) = 0;
};

}  // namespace strata

#endif  // STRATA_SHARED_SYMBOLS_SYMBOLIZER_H_
