// The symbolication and source API that the Firefox Profiler front-end calls on a symbol
// server (the Tecken-compatible format, as samply serves it), answered from local files for
// the libraries one profile names. Used by `strata view` (view.h).
//
//   POST /symbolicate/v5   {"jobs": [{"memoryMap": [[debugName, breakpadId], ...],
//                                     "stacks": [[[moduleIndex, moduleOffset], ...], ...]}]}
//                          (or one job at the top level)  ->
//                          {"results": [{"stacks": [[{"frame", "module_offset", "module",
//                            "function", "function_offset", "file", "line", "inlines"}...]],
//                            "found_modules": {"debugName/breakpadId": true|false}}]}
//   POST /source/v1        {"debugName", "debugId", "moduleOffset", "file"} -> {"source": text}
//
// A frame's "function"/"file"/"line" are its outermost function and the line in it;
// "inlines" are the functions inlined at that address, innermost first (what the front-end
// reads). Addresses are looked up exactly as given (module-relative, as the front-end sends
// them). Modules are matched by (debugName, breakpadId) against the profile's libs only;
// any other module is "not found".
//
// Source files: only a file the profile itself names (a "(file:line)" in its frames) or one
// this server has returned as a frame's file may be read, and only a regular file of at most
// kMaxSourceBytes: anything else is refused (403) without touching the file. A relative name
// (DWARF of builds that record relative paths, e.g. Bazel's) is read under `source_root`,
// and refused if it has a ".." component.
//
// Thread safety: thread-safe (one mutex around lookups; the DWARF cache is shared).
#ifndef STRATA_TOOLS_STRATA_SYMBOL_SERVER_H_
#define STRATA_TOOLS_STRATA_SYMBOL_SERVER_H_

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "shared/json/shared_libraries.h"
#include "shared/symbols/dwarf_symbolizer.h"

namespace strata {
namespace cli {

class SymbolServer {
 public:
  static constexpr size_t kMaxSourceBytes = 16 * 1024 * 1024;
  static constexpr size_t kMaxAddressesPerRequest = 1000000;

  // `libs`: the profile's libraries (every process); `profile_files`: the source files the
  // profile names.
  // `source_root`: where relative source names are read ("" : the current directory).
  SymbolServer(std::vector<SharedLibrary> libs, std::set<std::string> profile_files,
               std::string source_root = "");
  ~SymbolServer();

  struct Reply {
    int status = 200;
    std::string body;  // JSON.
  };
  Reply Symbolicate(const std::string& request_body);
  Reply Source(const std::string& request_body);

  // Files that may be read now (for tests and messages).
  bool MayReadFile(const std::string& path);

 private:
  struct Module {
    SharedLibrary library;
    std::unique_ptr<DwarfSymbolizer> symbolizer;
  };
  Module* FindModule(const std::string& debug_name, const std::string& breakpad_id);

  std::mutex mutex_;
  std::shared_ptr<DwarfModuleCache> cache_;
  std::map<std::pair<std::string, std::string>, Module> modules_;
  std::set<std::string> readable_files_;
  std::string source_root_;
};

// The "(file:line)" paths in a profile's frame strings (parent and sub-processes).
std::set<std::string> SourceFilesNamedInProfile(const std::string& profile_json_text);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_SYMBOL_SERVER_H_
