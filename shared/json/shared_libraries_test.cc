#include "shared/json/shared_libraries.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdint>
#include <string>

#include "catch2/catch.hpp"

namespace strata {
namespace {

int LocalFunction() { return 42; }

TEST_CASE("breakpad id and code id from a build-id") {
  // 20-byte SHA-1 build-id.
  const uint8_t id[20] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a,
                          0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14};
  CHECK(BreakpadIdFromBuildId(id, sizeof(id)) == "0403020106050807090A0B0C0D0E0F100");
  CHECK(CodeIdFromBuildId(id, sizeof(id)) == "0102030405060708090a0b0c0d0e0f1011121314");
  // Short build-ids are zero-padded to a GUID.
  const uint8_t short_id[8] = {0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x11, 0x22};
  CHECK(BreakpadIdFromBuildId(short_id, sizeof(short_id)) ==
        "DDCCBBAAFFEE22110000000000000000" "0");
}

TEST_CASE("CollectSharedLibraries lists this program and libc, sorted, with ids") {
  std::vector<SharedLibrary> libs = CollectSharedLibraries();
  REQUIRE(libs.size() >= 2);
  for (size_t i = 0; i < libs.size(); ++i) {
    INFO(libs[i].path);
    CHECK(libs[i].start < libs[i].end);
    CHECK(libs[i].offset <= libs[i].start);
    CHECK(libs[i].arch == CurrentArchName());
    if (i > 0) CHECK(libs[i - 1].end <= libs[i].start);
    if (!libs[i].breakpad_id.empty()) {
      CHECK(libs[i].breakpad_id.size() == 33);
      CHECK(libs[i].code_id.size() >= 16);
    }
  }

  // The library holding this function: the test binary, with a GNU build-id (Bazel links
  // with --build-id=md5 or the toolchain default; Debian's gcc passes --build-id).
  const auto address = reinterpret_cast<uintptr_t>(&LocalFunction);
  const SharedLibrary* self = nullptr;
  for (const SharedLibrary& lib : libs) {
    if (lib.start <= address && address < lib.end) self = &lib;
  }
  REQUIRE(self != nullptr);
  CHECK(self->name == "shared_libraries_test");
  CHECK(self->path.find("/shared_libraries_test") != std::string::npos);
  CHECK(self->debug_name == self->name);
  CHECK_FALSE(self->breakpad_id.empty());

  // start - offset is the load bias, so the front-end's relative address (address -
  // (start - offset)) is the address in the ELF file, as symbol files use it.
  Dl_info info;
  link_map* map = nullptr;
  REQUIRE(dladdr1(reinterpret_cast<void*>(&LocalFunction), &info,
                  reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) != 0);
  REQUIRE(map != nullptr);
  CHECK(self->start - self->offset == map->l_addr);
  uint64_t relative = address - (self->start - self->offset);
  CHECK(relative < self->end - self->start + self->offset);

  bool found_libc = false;
  for (const SharedLibrary& lib : libs) {
    if (lib.name.rfind("libc.so", 0) == 0) {
      found_libc = true;
      CHECK(lib.path.front() == '/');
      CHECK(lib.breakpad_id.size() == 33);
    }
  }
  CHECK(found_libc);
}

}  // namespace
}  // namespace strata
