// Symbolicating the raw native addresses of a (merged) Gecko profile in place, inline
// frames and JIT maps included (docs/symbols.md).
//
// Thread safety: none (functions that modify their documents).
#ifndef STRATA_TOOLS_STRATA_PROFILE_SYMBOLICATION_H_
#define STRATA_TOOLS_STRATA_PROFILE_SYMBOLICATION_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rapidjson/document.h"
#include "shared/json/shared_libraries.h"
#include "shared/symbols/symbolizer.h"

namespace strata {
namespace cli {

// Whether any thread of the profile (or of its sub-processes) has an unsymbolicated "0x..."
// frame.
bool HasRawAddresses(const rapidjson::Value& profile);

// Whether SymbolicateProfile has anything to look up: a raw "0x..." frame, or a frame named
// at capture from ELF symbols that kept its address (frameTable "address" and "lib" set,
// "inlineDepth" null; docs/symbols.md, "Addresses kept beside names").
bool HasAddressesToSymbolicate(const rapidjson::Value& profile);

struct SymbolicateStats {
  size_t processes = 0;         // Processes with address frames.
  size_t address_frames = 0;    // "0x..." frames before.
  size_t lookups = 0;           // Addresses looked up (return addresses minus one, leaves as is).
  size_t named = 0;             // ... that got a function name.
  size_t inline_frames = 0;     // Extra frames for inlined functions.
  size_t with_line = 0;         // Lookups whose innermost frame has file:line.
};

// Makes the symbolizer for one process from its `libs`.
using SymbolizerFactory = std::function<std::unique_ptr<Symbolizer>(std::vector<SharedLibrary> libs)>;

// The libs list of one process's profile.
std::vector<SharedLibrary> ReadLibs(const rapidjson::Value& process_profile);

// Replaces every "0x..." frame of every thread (parent and sub-processes), and every frame
// named at capture that kept its address (see HasAddressesToSymbolicate; its absolute
// address is the lib's start - offset + the address column), with the frames the process's
// symbolizer finds: one per function, outermost first, inlined functions included, each as
// "name (in lib) (file:line)" (or "name (in lib)" without a position) with the line in the
// frameTable's line column, so the front-end reads them as native functions of `lib`. Every
// frame made for an address keeps it (columns "address": lib-relative, raw; "lib": index
// into the process's libs) and says its "inlineDepth": 0 for the function the code belongs
// to (its ELF symbol, the name the capture wrote), 1, 2, ... for the functions inlined into
// it; the front-end's importer ignores these columns. Stacks are rebuilt (one address can
// become several frames); a stack used as a caller is looked up at its return address minus
// one, one used as a leaf at the address itself (both when it is both). A raw address in a
// known module without a function becomes "lib+0x1a2b (in lib)"; one outside every module
// stays "0x..."; a frame named at capture that gets no function keeps its row. A thread
// where nothing is found stays as it was: symbolicating twice changes nothing. Sample and
// marker-backtrace stack indexes are remapped. Sets meta.presymbolicated. With a progress
// bar on a terminal.
void SymbolicateProfile(rapidjson::Document* profile, const SymbolizerFactory& make_symbolizer,
                        SymbolicateStats* stats);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_PROFILE_SYMBOLICATION_H_
