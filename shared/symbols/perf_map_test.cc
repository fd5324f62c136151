#include "shared/symbols/perf_map.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "catch2/catch.hpp"

namespace strata {
namespace {

std::string WriteMap(const std::string& text) {
  char path[] = "/tmp/strata-perf-map-test.XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

// A symbolizer that knows nothing: every address outside every module.
class Nothing : public Symbolizer {
 public:
  void Symbolize(absl::Span<const uint64_t> addresses, SymbolizeResult* result) override {
    result->Clear();
    for (uint64_t a : addresses) {
      SymbolizedAddress out;
      out.address = a;
      result->addresses.push_back(out);
    }
  }
};

TEST_CASE("A perf map names code by range; later lines win; malformed lines are skipped") {
  const std::string path = WriteMap(
      "7f0000001000 100 JS:*first /app/a.js:1\n"
      "0x7f0000002000 0x40 LazyCompile:second /app/a.js:9\n"
      "garbage line\n"
      "7f0000003000 0 zero-sized\n"
      "7f0000001080 20 JS:*recompiled /app/a.js:1\n");
  const PerfMap map = PerfMap::Read(path);
  unlink(path.c_str());
  REQUIRE(map.size() == 3);
  REQUIRE(map.Find(0x7f0000001000) != nullptr);
  CHECK(map.Find(0x7f0000001000)->name == "JS:*first /app/a.js:1");
  // The newer line took [0x1080, 0x10a0) from the older one.
  CHECK(map.Find(0x7f0000001090)->name == "JS:*recompiled /app/a.js:1");
  CHECK(map.Find(0x7f00000010c0) == nullptr);
  CHECK(map.Find(0x7f000000203f)->name == "LazyCompile:second /app/a.js:9");
  CHECK(map.Find(0x7f0000002040) == nullptr);
  CHECK(map.Find(0x7f0000003000) == nullptr);
  CHECK(PerfMap::Read("/nonexistent/perf-1.map").empty());
}

TEST_CASE("PerfMapSymbolizer names only what the inner symbolizer left outside every module") {
  const std::string path = WriteMap("7f0000001000 100 JS:*hot /app/a.js:3\n");
  PerfMapSymbolizer symbolizer(std::make_unique<Nothing>(), PerfMap::Read(path), "perf-7.map");
  unlink(path.c_str());
  SymbolizeResult result;
  symbolizer.Symbolize({0x7f0000001010, 0x1234}, &result);
  REQUIRE(result.addresses.size() == 2);
  REQUIRE(result.FramesOf(0).size() == 1);
  CHECK(result.FramesOf(0)[0].function == "JS:*hot /app/a.js:3");
  CHECK(result.FramesOf(0)[0].function_offset == 0x10);
  CHECK(result.addresses[0].module == "perf-7.map");
  CHECK(result.FramesOf(1).empty());
  CHECK(PerfMap::PathFor(42) == "/tmp/perf-42.map");
}

}  // namespace
}  // namespace strata
