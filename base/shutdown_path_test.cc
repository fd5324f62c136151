#include "base/internal/session/shutdown_path.h"

#include <string>

#include "catch2/catch.hpp"

namespace strata {
namespace base_internal {
namespace {

TEST_CASE("A descendant's path gets %p before .json, or at the end") {
  CHECK(PerProcessShutdownPath("/tmp/p.json") == "/tmp/p.%p.json");
  CHECK(PerProcessShutdownPath("p.json") == "p.%p.json");
  CHECK(PerProcessShutdownPath("/tmp/profile") == "/tmp/profile.%p");
  CHECK(PerProcessShutdownPath("/tmp/x.json/profile") == "/tmp/x.json/profile.%p");
  CHECK(PerProcessShutdownPath(".json") == ".json.%p");
}

TEST_CASE("A path with %p, or an empty one, is kept whoever the parent is") {
  int code = 0;
  CHECK(ShutdownPathForThisProcess("/tmp/p-%p.json", &code) == "/tmp/p-%p.json");
  CHECK(ShutdownPathForThisProcess("", &code).empty());
}

TEST_CASE("Variables are found in a NUL-separated environment block as getenv finds them") {
  constexpr char kBlock[] = "A=1\0STRATA_SHUTDOWN_X=no\0STRATA_SHUTDOWN=/tmp/p.json\0STRATA_SHUTDOWN=second\0";
  const std::string block(kBlock, sizeof(kBlock) - 1);
  std::string value;
  REQUIRE(FindInEnvironmentBlock(block, "STRATA_SHUTDOWN", &value));
  CHECK(value == "/tmp/p.json");
  CHECK(FindInEnvironmentBlock(block, "A", &value));
  CHECK(value == "1");
  CHECK_FALSE(FindInEnvironmentBlock(block, "STRATA", &value));
  CHECK_FALSE(FindInEnvironmentBlock(std::string(), "A", &value));
  CHECK(FindInEnvironmentBlock(std::string("B=", 2), "B", &value));
  CHECK(value.empty());
}

TEST_CASE("The parent pid is read after the command name, whatever the name holds") {
  CHECK(ParentPidFromStat("1234 (bash) S 987 1234 1234 0 -1") == 987);
  CHECK(ParentPidFromStat("1234 (a) b) (c) R 55 1 1") == 55);
  CHECK(ParentPidFromStat("1 (init) S 0 1 1") == 0);
  CHECK(ParentPidFromStat("garbage") == -1);
  CHECK(ParentPidFromStat("12 (x) S") == -1);
}

TEST_CASE("A library is found in a maps file by device and inode, or by name") {
  const std::string maps =
      "55d0c0de0000-55d0c0de1000 r--p 00000000 fd:01 111                        /usr/bin/prog\n"
      "7f0000000000-7f0000010000 r-xp 00001000 fd:01 4242                       /opt/strata/libstrata_base.so\n"
      "7f0000010000-7f0000020000 rw-p 00000000 00:00 0 \n"
      "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n";
  const MappedFile library = FileMappedAt(maps, 0x7f0000000800ULL);
  CHECK(library.device == "fd:01");
  CHECK(library.inode == 4242);
  CHECK(library.path == "/opt/strata/libstrata_base.so");
  CHECK(FileMappedAt(maps, 0x7f0000010800ULL).inode == 0);  // Anonymous.
  CHECK(FileMappedAt(maps, 0x1000ULL).inode == 0);          // Nothing there.

  CHECK(MapsFile(maps, library));
  CHECK(MapsFile(maps, MappedFile{"fd:01", 4242, "/elsewhere/renamed.so"}));         // Same file.
  CHECK(MapsFile(maps, MappedFile{"08:02", 77, "/home/me/build/libstrata_base.so"}));  // Same name.
  CHECK_FALSE(MapsFile(maps, MappedFile{"fd:02", 4242, "/other/libother.so"}));
  CHECK_FALSE(MapsFile("", library));
}

}  // namespace
}  // namespace base_internal
}  // namespace strata
