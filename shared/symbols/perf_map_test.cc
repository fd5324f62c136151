#include "shared/symbols/perf_map.h"

#include <unistd.h>

#include <cstdint>

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


// A jitdump as perf's format has it (tools/perf/util/jitdump.h), built byte by byte.
class JitDumpWriter {
 public:
  JitDumpWriter() {
    Put32(0x4A695444);  // magic
    Put32(1);           // version
    Put32(40);          // header size
    Put32(62);          // EM_X86_64
    Put32(0);           // pad
    Put32(4242);        // pid
    Put64(1);           // timestamp
    Put64(0);           // flags
  }
  void Load(uint64_t address, uint64_t size, uint64_t index, const std::string& name) {
    const uint32_t total = 16 + 40 + static_cast<uint32_t>(name.size() + 1) + static_cast<uint32_t>(size);
    Put32(0);
    Put32(total);
    Put64(2);
    Put32(4242);
    Put32(4242);
    Put64(address);  // vma
    Put64(address);  // code_addr
    Put64(size);
    Put64(index);
    bytes_ += name;
    bytes_.push_back('\0');
    bytes_.append(size, '\xcc');  // The code.
  }
  void Move(uint64_t old_address, uint64_t new_address, uint64_t size, uint64_t index) {
    Put32(1);
    Put32(16 + 48);
    Put64(3);
    Put32(4242);
    Put32(4242);
    Put64(new_address);  // vma
    Put64(old_address);
    Put64(new_address);
    Put64(size);
    Put64(index);
  }
  void Other() {  // A JIT_CODE_DEBUG_INFO record, skipped.
    Put32(2);
    Put32(16 + 8);
    Put64(4);
    Put64(0);
  }
  std::string Write(size_t cut = 0) const {
    char path[] = "/tmp/strata-jitdump-test.XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    std::ofstream(path, std::ios::binary) << bytes_.substr(0, bytes_.size() - cut);
    return path;
  }

 private:
  void Put32(uint32_t v) { bytes_.append(reinterpret_cast<const char*>(&v), 4); }
  void Put64(uint64_t v) { bytes_.append(reinterpret_cast<const char*>(&v), 8); }
  std::string bytes_;
};

TEST_CASE("A jitdump names code loads and moves; other records are skipped; a cut record ends it") {
  JitDumpWriter dump;
  dump.Load(0x7f0000001000, 0x40, 1, "JS:*first /app/a.js:1");
  dump.Other();
  dump.Load(0x7f0000002000, 0x20, 2, "JS:*second /app/a.js:9");
  dump.Move(0x7f0000002000, 0x7f0000005000, 0x20, 2);
  dump.Load(0x7f0000006000, 0x10, 3, "JS:*cut");
  const std::string whole = dump.Write();
  PerfMap map = PerfMap::ReadJitDump(whole);
  unlink(whole.c_str());
  REQUIRE(map.size() == 4);
  CHECK(map.Find(0x7f000000103f)->name == "JS:*first /app/a.js:1");
  CHECK(map.Find(0x7f0000001040) == nullptr);
  CHECK(map.Find(0x7f0000002010)->name == "JS:*second /app/a.js:9");
  CHECK(map.Find(0x7f0000005010)->name == "JS:*second /app/a.js:9");
  CHECK(map.Find(0x7f0000006000)->name == "JS:*cut");

  // The last load cut in the middle of its code: the records before it are kept.
  const std::string cut = dump.Write(8);
  map = PerfMap::ReadJitDump(cut);
  unlink(cut.c_str());
  CHECK(map.size() == 3);
  CHECK(map.Find(0x7f0000006000) == nullptr);

  // Not a jitdump, or no file: empty.
  const std::string text = WriteMap("7f0000001000 100 JS:*first\n");
  CHECK(PerfMap::ReadJitDump(text).empty());
  unlink(text.c_str());
  CHECK(PerfMap::ReadJitDump("/nonexistent/jit-1.dump").empty());
  CHECK(PerfMap::JitDumpPathsFor(42).back() == "jit-42.dump");
}

TEST_CASE("ForProcess reads the perf map and the jitdump of a pid together") {
  const int64_t pid = 2000000000 + getpid() % 1000000;  // No real process's.
  std::ofstream(PerfMap::PathFor(pid)) << "7f0000001000 100 JS:*from_map\n";
  JitDumpWriter dump;
  dump.Load(0x7f0000009000, 0x10, 1, "JS:*from_dump");
  const std::string written = dump.Write();
  const std::string dump_path = "/tmp/jit-" + std::to_string(pid) + ".dump";
  REQUIRE(rename(written.c_str(), dump_path.c_str()) == 0);
  const PerfMap map = PerfMap::ForProcess(pid);
  unlink(PerfMap::PathFor(pid).c_str());
  unlink(dump_path.c_str());
  REQUIRE(map.size() == 2);
  CHECK(map.Find(0x7f0000001000)->name == "JS:*from_map");
  CHECK(map.Find(0x7f0000009000)->name == "JS:*from_dump");
}

}  // namespace
}  // namespace strata
