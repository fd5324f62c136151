// Built with -O2 -g (BUILD.bazel): HotInline is inlined into OuterFunction, and the
// symbolizer must show it as a frame of its own with its file and line.
#include "shared/symbols/dwarf_symbolizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "shared/json/shared_libraries.h"
#include "shared/symbols/elf_symbolizer.h"

namespace strata_dwarf_test {

uintptr_t g_captured = 0;

// Records its return address: an address inside whatever called it (here: the inlined body
// of HotInline inside OuterFunction).
__attribute__((noinline)) void Capture() {
  g_captured = reinterpret_cast<uintptr_t>(__builtin_extract_return_addr(__builtin_return_address(0)));
  asm volatile("" ::: "memory");
}

static const int kCaptureLine = __LINE__ + 4;
static inline __attribute__((always_inline)) int HotInline(int x) {
  int y = x * 3;
  asm volatile("" : "+r"(y));
  Capture();
  asm volatile("" : "+r"(y));
  return y + 1;
}

static const int kCallLine = __LINE__ + 3;
__attribute__((noinline)) int OuterFunction(int x) {
  asm volatile("" : "+r"(x));
  int r = HotInline(x) * 7;
  asm volatile("" : "+r"(r));
  return r;
}

// Three levels (issue 34): Outer (not inlined) inlines Middle, which inlines Inner. The
// middle level was lost: dwarf_getscopes continues from the innermost inlined instance into
// its abstract definition's scopes, not into the function it was inlined into.
uintptr_t g_captured_deep = 0;

__attribute__((noinline)) void CaptureDeep() {
  g_captured_deep =
      reinterpret_cast<uintptr_t>(__builtin_extract_return_addr(__builtin_return_address(0)));
  asm volatile("" ::: "memory");
}

static const int kInnerLine = __LINE__ + 4;
static inline __attribute__((always_inline)) int InnerLevel(int x) {
  int y = x + 11;
  asm volatile("" : "+r"(y));
  CaptureDeep();
  asm volatile("" : "+r"(y));
  return y;
}

static const int kMiddleCallLine = __LINE__ + 4;
static inline __attribute__((always_inline)) int MiddleLevel(int x) {
  int y = x * 5;
  asm volatile("" : "+r"(y));
  y = InnerLevel(y) - 3;
  asm volatile("" : "+r"(y));
  return y;
}

static const int kOuterCallLine = __LINE__ + 3;
__attribute__((noinline)) int OuterLevel(int x) {
  asm volatile("" : "+r"(x));
  int r = MiddleLevel(x) * 7;
  asm volatile("" : "+r"(r));
  return r;
}

}  // namespace strata_dwarf_test

namespace strata {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

TEST_CASE("An inlined function is a frame of its own, with file and line") {
  strata_dwarf_test::OuterFunction(5);
  REQUIRE(strata_dwarf_test::g_captured != 0);
  DwarfSymbolizer symbolizer(CollectSharedLibraries());
  SymbolizeResult result;
  const uint64_t address = CallerAddress(strata_dwarf_test::g_captured);
  symbolizer.Symbolize({address}, &result);
  REQUIRE(result.addresses.size() == 1);
  const auto frames = result.FramesOf(0);
  REQUIRE(frames.size() == 2);
  INFO(frames[0].function << " " << frames[0].file << ":" << frames[0].line << " / "
                          << frames[1].function << " " << frames[1].file << ":" << frames[1].line);
  CHECK(frames[0].function.find("HotInline") != std::string_view::npos);
  CHECK(frames[0].inlined);
  CHECK(EndsWith(frames[0].file, "shared/symbols/dwarf_symbolizer_test.cc"));
  CHECK(frames[0].line == static_cast<uint32_t>(strata_dwarf_test::kCaptureLine));
  CHECK(frames[1].function == "strata_dwarf_test::OuterFunction(int)");
  CHECK_FALSE(frames[1].inlined);
  CHECK(EndsWith(frames[1].file, "shared/symbols/dwarf_symbolizer_test.cc"));
  CHECK(frames[1].line == static_cast<uint32_t>(strata_dwarf_test::kCallLine));
  CHECK(result.NameOf(0) == "strata_dwarf_test::OuterFunction(int)");
  CHECK(result.addresses[0].module.find("dwarf_symbolizer_test") != std::string_view::npos);

  // Without inline frames: the outer function only, at the line-table position.
  DwarfSymbolizerOptions options;
  options.inline_frames = false;
  DwarfSymbolizer flat(CollectSharedLibraries(), std::make_shared<DwarfModuleCache>(options));
  flat.Symbolize({address}, &result);
  REQUIRE(result.FramesOf(0).size() == 1);
  CHECK(result.FramesOf(0)[0].function == "strata_dwarf_test::OuterFunction(int)");
  CHECK(result.FramesOf(0)[0].line == static_cast<uint32_t>(strata_dwarf_test::kCaptureLine));
}

TEST_CASE("Every inline level is a frame: inner, middle, outer, each at its call site") {
  strata_dwarf_test::OuterLevel(5);
  REQUIRE(strata_dwarf_test::g_captured_deep != 0);
  DwarfSymbolizer symbolizer(CollectSharedLibraries());
  SymbolizeResult result;
  symbolizer.Symbolize({CallerAddress(strata_dwarf_test::g_captured_deep)}, &result);
  const auto frames = result.FramesOf(0);
  std::string chain;
  for (const auto& f : frames) {
    chain += std::string(f.function) + " " + std::string(f.file) + ":" + std::to_string(f.line) +
             (f.inlined ? " (inlined)" : "") + " / ";
  }
  INFO(chain);
  REQUIRE(frames.size() == 3);
  CHECK(frames[0].function.find("InnerLevel") != std::string_view::npos);
  CHECK(frames[0].inlined);
  CHECK(frames[0].line == static_cast<uint32_t>(strata_dwarf_test::kInnerLine));
  CHECK(frames[1].function.find("MiddleLevel") != std::string_view::npos);
  CHECK(frames[1].inlined);
  CHECK(frames[1].line == static_cast<uint32_t>(strata_dwarf_test::kMiddleCallLine));
  CHECK(frames[2].function == "strata_dwarf_test::OuterLevel(int)");
  CHECK_FALSE(frames[2].inlined);
  CHECK(frames[2].line == static_cast<uint32_t>(strata_dwarf_test::kOuterCallLine));
}

TEST_CASE("Outermost names agree with the ELF symbolizer, libc included") {
  void* write_address = dlsym(RTLD_DEFAULT, "write");
  REQUIRE(write_address != nullptr);
  const std::vector<uint64_t> addresses = {
      reinterpret_cast<uint64_t>(write_address) + 1,
      reinterpret_cast<uint64_t>(&strata_dwarf_test::Capture) + 2,
      CallerAddress(strata_dwarf_test::g_captured),
  };
  DwarfSymbolizer dwarf(CollectSharedLibraries());
  ElfSymbolizer elf(CollectSharedLibraries());
  SymbolizeResult a, b;
  dwarf.Symbolize(addresses, &a);
  elf.Symbolize(addresses, &b);
  for (size_t i = 0; i < addresses.size(); ++i) {
    INFO(i);
    CHECK(a.NameOf(i) == b.NameOf(i));
    CHECK(a.addresses[i].module == b.addresses[i].module);
    CHECK(a.addresses[i].module_offset == b.addresses[i].module_offset);
  }
  CHECK(a.NameOf(0) == "write");
}

TEST_CASE("Outside every module, wrong files and missing files give no frames") {
  std::vector<SharedLibrary> modules = CollectSharedLibraries();
  SharedLibrary* self = nullptr;
  for (SharedLibrary& m : modules) {
    const uint64_t a = strata_dwarf_test::g_captured;
    if (a >= m.start && a < m.end) self = &m;
  }
  REQUIRE(self != nullptr);
  const uint64_t address = CallerAddress(strata_dwarf_test::g_captured);
  SymbolizeResult result;

  SECTION("address in no module") {
    DwarfSymbolizer symbolizer(modules);
    symbolizer.Symbolize({8}, &result);
    CHECK(result.FramesOf(0).empty());
    CHECK(result.NameOf(0).empty());
  }
  SECTION("build-id mismatch") {
    self->code_id = "00112233445566778899aabbccddeeff00112233";
    DwarfSymbolizer symbolizer(modules);
    symbolizer.Symbolize({address}, &result);
    CHECK(result.FramesOf(0).empty());
    CHECK(result.NameOf(0).rfind(self->name + "+0x", 0) == 0);
  }
  SECTION("missing file") {
    self->path = "/nonexistent/strata/binary";
    DwarfSymbolizer symbolizer(modules);
    symbolizer.Symbolize({address}, &result);
    CHECK(result.FramesOf(0).empty());
  }
}

TEST_CASE("One cache serves several processes' module lists") {
  // The same file loaded at another address (as in a second process).
  std::vector<SharedLibrary> here = CollectSharedLibraries();
  std::vector<SharedLibrary> moved;
  const uint64_t address = CallerAddress(strata_dwarf_test::g_captured);
  uint64_t moved_address = 0;
  for (const SharedLibrary& m : here) {
    if (address >= m.start && address < m.end) {
      SharedLibrary copy = m;
      const uint64_t shift = 0x100000000000ull;
      copy.start += shift;
      copy.end += shift;
      moved.push_back(copy);
      moved_address = address + shift;
    }
  }
  REQUIRE(moved_address != 0);
  auto cache = std::make_shared<DwarfModuleCache>();
  DwarfSymbolizer first(here, cache);
  DwarfSymbolizer second(moved, cache);
  SymbolizeResult a, b;
  first.Symbolize({address}, &a);
  const DwarfModuleCache::Stats after_first = cache->GetStats();
  second.Symbolize({moved_address}, &b);
  const DwarfModuleCache::Stats after_second = cache->GetStats();
  REQUIRE(a.FramesOf(0).size() == 2);
  REQUIRE(b.FramesOf(0).size() == 2);
  CHECK(a.FramesOf(0)[0].function == b.FramesOf(0)[0].function);
  CHECK(a.addresses[0].module_offset == b.addresses[0].module_offset);
  CHECK(after_second.files == after_first.files);
  CHECK(after_second.addresses == after_first.addresses);
  CHECK(after_first.files_with_dwarf >= 1);
}

TEST_CASE("The vDSO is read from this process's own image") {
  for (const SharedLibrary& m : CollectSharedLibraries()) {
    if (m.name.rfind("linux-vdso", 0) != 0) continue;
    DwarfSymbolizer dwarf({m});
    ElfSymbolizer elf({m});
    std::vector<uint64_t> addresses;
    for (uint64_t a = m.start; a < m.end; a += 16) addresses.push_back(a);
    SymbolizeResult a, b;
    dwarf.Symbolize(addresses, &a);
    elf.Symbolize(addresses, &b);
    size_t named = 0;
    for (size_t i = 0; i < addresses.size(); ++i) {
      if (!a.FramesOf(i).empty()) ++named;
    }
    CHECK(named > 0);
    return;
  }
  WARN("no vDSO in this process");
}

TEST_CASE("Timing: a batch of addresses, cold and warm") {
  std::vector<uint64_t> addresses;
  for (const SharedLibrary& m : CollectSharedLibraries()) {
    if (m.name.rfind("libc.so", 0) != 0 && m.name.rfind("libstdc++", 0) != 0) continue;
    for (int i = 0; i < 2000; ++i) addresses.push_back(m.start + (m.end - m.start) / 2000 * i);
  }
  addresses.push_back(CallerAddress(strata_dwarf_test::g_captured));
  auto cache = std::make_shared<DwarfModuleCache>();
  DwarfSymbolizer symbolizer(CollectSharedLibraries(), cache);
  SymbolizeResult result;
  auto t0 = std::chrono::steady_clock::now();
  symbolizer.Symbolize(addresses, &result);
  auto t1 = std::chrono::steady_clock::now();
  symbolizer.Symbolize(addresses, &result);
  auto t2 = std::chrono::steady_clock::now();
  const auto us = [](auto d) { return std::chrono::duration<double, std::micro>(d).count(); };
  std::printf("dwarf symbolizer: %zu addresses: cold %.1f ms, warm %.0f ns/address; %zu files\n",
              addresses.size(), us(t1 - t0) / 1000, 1000 * us(t2 - t1) / addresses.size(),
              cache->GetStats().files);
  CHECK(result.addresses.size() == addresses.size());
}

}  // namespace
}  // namespace strata
