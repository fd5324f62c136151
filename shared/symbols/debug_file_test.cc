// Separate debug files made by objcopy (BUILD.bazel: debuglink_library_for_testing): a
// stripped library whose .gnu_debuglink names its debug file in .debug/ beside it, with and
// without build-ids, and a debug file whose contents do not match the link's CRC.
#include "shared/symbols/debug_file.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "shared/json/shared_libraries.h"
#include "shared/symbols/elf_symbol_table.h"
#include "shared/symbols/elf_symbolizer.h"

namespace strata {
namespace {

std::string DataFile(const std::string& relative) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  REQUIRE(srcdir != nullptr);
  REQUIRE(workspace != nullptr);
  const std::string path =
      std::string(srcdir) + "/" + workspace + "/shared/symbols/" + relative;
  char resolved[PATH_MAX];
  // The debug file sits beside the real file, not beside a runfiles symlink.
  REQUIRE(realpath(path.c_str(), resolved) != nullptr);
  return resolved;
}

std::string TempDirectory() {
  const char* tmp = getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp");
}

void Copy(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
}

TEST_CASE("CRC-32 is zlib's (gdb's gnu_debuglink_crc32)") {
  CHECK(DebugLinkCrc32(0, "", 0) == 0);
  CHECK(DebugLinkCrc32(0, "123456789", 9) == 0xCBF43926u);  // The standard check value.
  // Continuing in pieces gives the same.
  CHECK(DebugLinkCrc32(DebugLinkCrc32(0, "12345", 5), "6789", 4) == 0xCBF43926u);
}

TEST_CASE("The .gnu_debuglink section is read: name and CRC of the debug file") {
  const std::string stripped = DataFile("debuglink/libsymbols_debuglink_for_testing.so");
  const ElfSymbolTable table = ElfSymbolTable::ReadFile(stripped);
  CHECK_FALSE(table.has_symtab());
  REQUIRE(table.debug_link().has_value());
  CHECK(table.debug_link()->file_name == "libsymbols_debuglink_for_testing.so.debug");
  const std::optional<uint32_t> crc = FileDebugLinkCrc32(
      DataFile("debuglink/.debug/libsymbols_debuglink_for_testing.so.debug"));
  REQUIRE(crc.has_value());
  CHECK(*crc == table.debug_link()->crc);
}

TEST_CASE("Candidates follow gdb's order: build-id, then the debuglink beside the module") {
  ElfSymbolTable::DebugLink link{"m.so.debug", 1};
  const std::vector<std::string> expected = {
      "/usr/lib/debug/.build-id/ab/cdef.debug",
      "/opt/x/lib/debug/.build-id/ab/cdef.debug",
      "/opt/x/lib/m.so.debug",
      "/opt/x/lib/.debug/m.so.debug",
      "/usr/lib/debug/opt/x/lib/m.so.debug",
  };
  CHECK(SeparateDebugFileCandidates("/opt/x/lib/m.so", "abcdef", link, "/usr/lib/debug") ==
        expected);
  CHECK(SeparateDebugFileCandidates("/opt/x/lib/m.so", "", std::nullopt, "/usr/lib/debug")
            .empty());
}

TEST_CASE("A stripped library's debug file is found through its .gnu_debuglink") {
  for (const char* name : {"debuglink/libsymbols_debuglink_for_testing.so",
                           "debuglink/libsymbols_debuglink_no_build_id_for_testing.so"}) {
    INFO(name);
    const std::string stripped = DataFile(name);
    const ElfSymbolTable table = ElfSymbolTable::ReadFile(stripped);
    std::string found;
    const ElfSymbolTable debug = ReadSeparateDebugSymbols(stripped, table.code_id(),
                                                          table.debug_link(), "", &found);
    CHECK(debug.has_symtab());
    CHECK(found.find("/.debug/") != std::string::npos);
  }
}

TEST_CASE("A debug file whose CRC is not the link's is refused") {
  // Both copies lack a build-id, so the CRC decides.
  const std::string directory = TempDirectory() + "/crc";
  REQUIRE(system(("rm -rf " + directory + " && mkdir -p " + directory + "/.debug").c_str()) == 0);
  const std::string module = directory + "/libsymbols_debuglink_no_build_id_for_testing.so";
  Copy(DataFile("debuglink/libsymbols_debuglink_no_build_id_for_testing.so"), module);
  const std::string debug_path =
      directory + "/.debug/libsymbols_debuglink_no_build_id_for_testing.so.debug";
  Copy(DataFile("debuglink/.debug/libsymbols_debuglink_no_build_id_for_testing.so.debug"),
       debug_path);
  const ElfSymbolTable table = ElfSymbolTable::ReadFile(module);
  REQUIRE(table.code_id().empty());
  REQUIRE(table.debug_link().has_value());
  CHECK(ReadSeparateDebugSymbols(module, "", table.debug_link(), "").has_symtab());

  // One byte of the debug file changed (in its last bytes, past what the parser reads as
  // long as the section header table is intact... or not: the CRC refuses it either way).
  {
    std::fstream f(debug_path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff size = f.tellg();
    REQUIRE(size > 64);
    f.seekg(64);
    char byte = 0;
    f.read(&byte, 1);
    byte ^= 0x5a;
    f.seekp(64);
    f.write(&byte, 1);
  }
  CHECK_FALSE(ReadSeparateDebugSymbols(module, "", table.debug_link(), "").has_symtab());
}

TEST_CASE("The symbolizer names a stripped library's internal function from its debuglink") {
  const std::string path = DataFile("debuglink/libsymbols_debuglink_for_testing.so");
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(handle != nullptr);
  using Getter = void* (*)();
  auto getter = reinterpret_cast<Getter>(dlsym(handle, "StrataSymbolsLibraryInternalAddress"));
  REQUIRE(getter != nullptr);
  const uint64_t addresses[] = {reinterpret_cast<uint64_t>(getter())};
  ElfSymbolizerOptions options;
  options.debug_directory = "";  // Only the debuglink can find it.
  ElfSymbolizer symbolizer(CollectSharedLibraries(), options);
  SymbolizeResult result;
  symbolizer.Symbolize(addresses, &result);
  CHECK(result.NameOf(0) == "(anonymous namespace)::InternalFunction(int)");
  dlclose(handle);
}

}  // namespace
}  // namespace strata
