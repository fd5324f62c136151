#include "shared/symbols/elf_symbolizer.h"

#include <dlfcn.h>
#include <limits.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "shared/json/shared_libraries.h"
#include "shared/symbols/elf_symbol_table.h"

// Functions of the test binary itself. It is not linked with -rdynamic, so only .symtab
// names them. Bodies differ so that identical-code folding cannot merge them.
namespace strata_symbols_test {

__attribute__((noinline)) int PlainFunction(int x) { return x * 5 + 3; }

template <typename T>
__attribute__((noinline)) T Twice(T x) {
  return x + x + 1;
}
template int Twice<int>(int);

template <typename T>
struct Box {
  static __attribute__((noinline)) T Make(T value) { return value - 11; }
};
template struct Box<int>;

// Returns its own return address (an address inside the caller).
__attribute__((noinline)) void* ReturnAddressOfCaller() {
  return __builtin_extract_return_addr(__builtin_return_address(0));
}

__attribute__((noinline)) void* CallerOfReturnAddress() {
  void* address = ReturnAddressOfCaller();
  asm volatile("" ::: "memory");  // Not a tail call.
  return address;
}

}  // namespace strata_symbols_test

namespace {
__attribute__((noinline)) int StaticInternalFunction(int x) { return x ^ 0x5a5a; }
}  // namespace

namespace strata {
namespace {

uint64_t AddressOf(const void* p) { return reinterpret_cast<uint64_t>(p); }
template <typename F>
uint64_t FunctionAddress(F* function) {
  return reinterpret_cast<uint64_t>(reinterpret_cast<void*>(function));
}

std::string DataFile(const char* name) {
  std::vector<std::string> candidates;
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  if (srcdir != nullptr && workspace != nullptr) {
    candidates.push_back(std::string(srcdir) + "/" + workspace + "/shared/symbols/" + name);
  }
  char exe[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (length > 0) {
    std::string directory(exe, static_cast<size_t>(length));
    directory.resize(directory.rfind('/') + 1);
    candidates.push_back(directory + name);
  }
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  FAIL("test data file not found: " << name);
  return std::string();
}

std::string ExecutableName() {
  char exe[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  REQUIRE(length > 0);
  std::string path(exe, static_cast<size_t>(length));
  return path.substr(path.rfind('/') + 1);
}

// Symbolizes one address with a fresh symbolizer over the current module list.
struct One {
  explicit One(uint64_t address) : symbolizer(CollectSharedLibraries()) {
    const uint64_t addresses[] = {address};
    symbolizer.Symbolize(addresses, &result);
    REQUIRE(result.addresses.size() == 1);
  }
  std::string function() const {
    auto frames = result.FramesOf(0);
    return frames.empty() ? std::string() : std::string(frames[0].function);
  }
  uint64_t function_offset() const { return result.FramesOf(0)[0].function_offset; }
  std::string module() const { return std::string(result.addresses[0].module); }
  std::string name() const { return result.NameOf(0); }

  ElfSymbolizer symbolizer;
  SymbolizeResult result;
};

void* OpenLibrary(const char* name) {
  void* handle = dlopen(DataFile(name).c_str(), RTLD_NOW | RTLD_LOCAL);
  INFO(dlerror());
  REQUIRE(handle != nullptr);
  return handle;
}

template <typename T>
T LibraryFunction(void* handle, const char* symbol) {
  void* address = dlsym(handle, symbol);
  REQUIRE(address != nullptr);
  return reinterpret_cast<T>(address);
}

// libc's own `write` (dlsym(RTLD_DEFAULT) would give a sanitizer's interceptor).
uint64_t LibcWrite() {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(libc != nullptr);
  void* address = dlsym(libc, "write");
  dlclose(libc);
  REQUIRE(address != nullptr);
  return AddressOf(address);
}

const SharedLibrary* FindLibrary(const std::vector<SharedLibrary>& libraries,
                                 const std::string& name) {
  for (const SharedLibrary& library : libraries) {
    if (library.name == name) return &library;
  }
  return nullptr;
}

// --- The test binary (.symtab, no -rdynamic) -------------------------------------------------

TEST_CASE("Functions of the test binary are named from its .symtab") {
  const uint64_t plain = FunctionAddress(&strata_symbols_test::PlainFunction);
  One at_start(plain);
  CHECK(at_start.function() == "strata_symbols_test::PlainFunction(int)");
  CHECK(at_start.function_offset() == 0);
  CHECK(at_start.module() == ExecutableName());
  CHECK(at_start.name() == "strata_symbols_test::PlainFunction(int)");

  One inside(plain + 3);
  CHECK(inside.function() == "strata_symbols_test::PlainFunction(int)");
  CHECK(inside.function_offset() == 3);

  One internal(FunctionAddress(&StaticInternalFunction));
  CHECK(internal.function() == "(anonymous namespace)::StaticInternalFunction(int)");
}

TEST_CASE("Templates in namespaces are demangled in full") {
  CHECK(One(FunctionAddress(&strata_symbols_test::Twice<int>)).function() ==
        "int strata_symbols_test::Twice<int>(int)");
  CHECK(One(FunctionAddress(&strata_symbols_test::Box<int>::Make)).function() ==
        "strata_symbols_test::Box<int>::Make(int)");
}

TEST_CASE("A return address minus one names the caller") {
  const uint64_t return_address = AddressOf(strata_symbols_test::CallerOfReturnAddress());
  One caller(CallerAddress(return_address));
  CHECK(caller.function() == "strata_symbols_test::CallerOfReturnAddress()");
  CHECK(caller.function_offset() > 0);
}

TEST_CASE("Functions in the symbolizer's own module are named") {
  // In a fastbuild test the libraries are shared objects of their own; either way the
  // function is found.
  using Demangle = std::string (*)(const char*);
  const Demangle demangle = &strata::Demangle;
  One own(FunctionAddress(demangle));
  CHECK(own.function() == "strata::Demangle[abi:cxx11](char const*)");
}

// --- libc, the vDSO, outside every module ---------------------------------------------------

TEST_CASE("A libc function is named from libc's .dynsym") {
  const uint64_t write_address = LibcWrite();
  One libc(write_address);
  CHECK(libc.function() == "write");  // Not its aliases __write / __libc_write.
  CHECK(libc.module().rfind("libc.so", 0) == 0);
  One inside(write_address + 8);
  CHECK(inside.function() == "write");
  CHECK(inside.function_offset() == 8);
}

TEST_CASE("vDSO functions are named from the in-memory image") {
  const uint64_t vdso_base = getauxval(AT_SYSINFO_EHDR);
  const ElfSymbolTable vdso = ElfSymbolTable::ReadVdso();
  if (vdso_base == 0 || vdso.empty()) {
    WARN("no vDSO in this process");
    return;
  }
  const std::vector<SharedLibrary> libraries = CollectSharedLibraries();
  const SharedLibrary* module = nullptr;
  for (const SharedLibrary& library : libraries) {
    if (library.start <= vdso_base && vdso_base < library.end) module = &library;
  }
  REQUIRE(module != nullptr);
  size_t clock_gettime = ElfSymbolTable::kNotFound;
  for (size_t i = 0; i < vdso.size(); ++i) {
    if (vdso.symbol(i).name == "clock_gettime") clock_gettime = i;
  }
  REQUIRE(clock_gettime != ElfSymbolTable::kNotFound);
  const uint64_t address = module->start - module->offset + vdso.symbol(clock_gettime).address;
  One one(address + 1);
  CHECK(one.function() == "clock_gettime");
  CHECK(one.module() == module->name);
}

TEST_CASE("An address outside every module has no name") {
  int on_stack = 0;
  for (uint64_t address : {uint64_t{0}, uint64_t{16}, AddressOf(&on_stack), ~uint64_t{0}}) {
    One one(address);
    CHECK(one.result.addresses[0].module.empty());
    CHECK(one.result.addresses[0].frame_count == 0);
    CHECK(one.name().empty());
  }
}

// --- A dlopen'ed library, as built and stripped ----------------------------------------------

TEST_CASE("A dlopen'ed library's functions are named, internal ones from .symtab") {
  void* handle = OpenLibrary("libsymbols_test_library_for_testing.so");
  using Getter = void* (*)();
  const auto function = LibraryFunction<int (*)(int)>(handle, "StrataSymbolsLibraryFunction");
  const auto internal = LibraryFunction<Getter>(handle, "StrataSymbolsLibraryInternalAddress")();
  const auto scale = LibraryFunction<Getter>(handle, "StrataSymbolsLibraryTemplateAddress")();

  One exported(FunctionAddress(function) + 1);
  CHECK(exported.function() == "StrataSymbolsLibraryFunction");
  CHECK(exported.module() == "libsymbols_test_library_for_testing.so");
  CHECK(One(AddressOf(internal)).function() == "(anonymous namespace)::InternalFunction(int)");
  CHECK(One(AddressOf(scale)).function() == "long strata_symbols_library::Scale<long>(long, int)");
  dlclose(handle);
}

TEST_CASE("A stripped library falls back to .dynsym; unexported code is named by its unwind-table function") {
  void* handle = OpenLibrary("libsymbols_test_library_stripped_for_testing.so");
  using Getter = void* (*)();
  const auto function = LibraryFunction<int (*)(int)>(handle, "StrataSymbolsLibraryFunction");
  const auto internal = LibraryFunction<Getter>(handle, "StrataSymbolsLibraryInternalAddress")();
  const auto scale = LibraryFunction<Getter>(handle, "StrataSymbolsLibraryTemplateAddress")();
  const std::string module_name = "libsymbols_test_library_stripped_for_testing.so";

  CHECK(One(FunctionAddress(function)).function() == "StrataSymbolsLibraryFunction");
  CHECK(One(AddressOf(scale)).function() == "long strata_symbols_library::Scale<long>(long, int)");

  // The internal function is in no symbol table of the stripped file. The size check keeps
  // it from being attributed to the exported function laid out before it; the unwind tables
  // (.eh_frame_hdr) still delimit it: every address in it gets one name, module!0xSTART.
  One unknown(AddressOf(internal) + 2);
  One start(AddressOf(internal));
  REQUIRE(unknown.result.addresses[0].frame_count == 1);
  CHECK(unknown.module() == module_name);
  // Its offset is the file address, which the unstripped file's .symtab confirms.
  const ElfSymbolTable full =
      ElfSymbolTable::ReadFile(DataFile("libsymbols_test_library_for_testing.so"));
  const size_t index = full.Find(unknown.result.addresses[0].module_offset);
  REQUIRE(index != ElfSymbolTable::kNotFound);
  CHECK(full.symbol(index).name == "_ZN12_GLOBAL__N_116InternalFunctionEi");
  CHECK(unknown.result.addresses[0].module_offset - full.symbol(index).address == 2);
  char expected[128];
  snprintf(expected, sizeof(expected), "%s!0x%llx", module_name.c_str(),
           static_cast<unsigned long long>(full.symbol(index).address));
  CHECK(unknown.name() == expected);
  CHECK(start.name() == expected);  // The same name for the function's first byte.
  CHECK(unknown.result.frames[unknown.result.addresses[0].first_frame].function_offset == 2);
  dlclose(handle);
}

TEST_CASE("A stripped library's separate debug file is found by build-id") {
  void* handle = OpenLibrary("libsymbols_test_library_stripped_for_testing.so");
  using Getter = void* (*)();
  const auto internal = LibraryFunction<Getter>(handle, "StrataSymbolsLibraryInternalAddress")();
  const std::vector<SharedLibrary> libraries = CollectSharedLibraries();
  const SharedLibrary* library =
      FindLibrary(libraries, "libsymbols_test_library_stripped_for_testing.so");
  REQUIRE(library != nullptr);
  REQUIRE(library->code_id.size() > 2);

  // <dir>/.build-id/ab/cdef....debug: here simply the unstripped library, which has the
  // same build-id and addresses (a real one comes from objcopy --only-keep-debug).
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string debug_directory = std::string(tmp != nullptr ? tmp : "/tmp") + "/debug";
  const std::string subdirectory = debug_directory + "/.build-id/" + library->code_id.substr(0, 2);
  REQUIRE(system(("mkdir -p " + subdirectory).c_str()) == 0);
  {
    std::ifstream in(DataFile("libsymbols_test_library_for_testing.so"), std::ios::binary);
    std::ofstream out(subdirectory + "/" + library->code_id.substr(2) + ".debug",
                      std::ios::binary | std::ios::trunc);
    out << in.rdbuf();
  }
  const uint64_t addresses[] = {AddressOf(internal)};
  SymbolizeResult result;
  ElfSymbolizerOptions options;
  options.debug_directory = debug_directory;
  ElfSymbolizer with(libraries, options);  // Outlives `result`'s views.
  with.Symbolize(addresses, &result);
  CHECK(result.NameOf(0) == "(anonymous namespace)::InternalFunction(int)");
  CHECK(result.addresses[0].module == "libsymbols_test_library_stripped_for_testing.so");

  options.debug_directory = "";
  ElfSymbolizer without(libraries, options);
  without.Symbolize(addresses, &result);
  // Without it: only the unwind tables' "module!0x..." name.
  CHECK(result.NameOf(0).find("libsymbols_test_library_stripped_for_testing.so!0x") == 0);
  dlclose(handle);
}

TEST_CASE("The load bias from the executable mapping in /proc/self/maps agrees") {
  void* handle = OpenLibrary("libsymbols_test_library_for_testing.so");
  const std::string path = DataFile("libsymbols_test_library_for_testing.so");
  const ElfSymbolTable table = ElfSymbolTable::ReadFile(path);
  const std::vector<SharedLibrary> libraries = CollectSharedLibraries();
  const SharedLibrary* library = FindLibrary(libraries, "libsymbols_test_library_for_testing.so");
  REQUIRE(library != nullptr);

  // The executable mapping of that library in /proc/self/maps.
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int checked = 0;
  while (std::getline(maps, line)) {
    if (line.find("libsymbols_test_library_for_testing.so") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string range, permissions, offset_hex;
    fields >> range >> permissions >> offset_hex;
    if (permissions.find('x') == std::string::npos) continue;
    const uint64_t start = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    const uint64_t offset = std::stoull(offset_hex, nullptr, 16);
    const auto bias = table.LoadBiasForMapping(start, offset);
    REQUIRE(bias.has_value());
    CHECK(*bias == library->start - library->offset);
    ++checked;
  }
  CHECK(checked == 1);  // The executable mapping.
  dlclose(handle);
}

// --- Files that are not the loaded module, or not ELF ----------------------------------------

TEST_CASE("A module whose file is another binary or garbage gets no symbols") {
  const std::vector<SharedLibrary> libraries = CollectSharedLibraries();
  const SharedLibrary* libc = nullptr;
  for (const SharedLibrary& library : libraries) {
    if (library.name.rfind("libc.so", 0) == 0) libc = &library;
  }
  REQUIRE(libc != nullptr);
  const uint64_t write_address = LibcWrite();

  // libc's mapping, but the path names the stripped test library: build-ids differ.
  SharedLibrary wrong_file = *libc;
  wrong_file.path = DataFile("libsymbols_test_library_stripped_for_testing.so");
  // And with no build-id to compare: the PT_LOAD extent does not match.
  SharedLibrary wrong_file_no_id = wrong_file;
  wrong_file_no_id.code_id.clear();
  // A garbage file.
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string garbage_path = std::string(tmp != nullptr ? tmp : "/tmp") + "/garbage.so";
  {
    std::ofstream garbage(garbage_path, std::ios::binary);
    std::mt19937 random(3);
    for (int i = 0; i < 10000; ++i) garbage.put(static_cast<char>(random()));
  }
  SharedLibrary garbage_file = *libc;
  garbage_file.path = garbage_path;

  // No debug-file lookup: it would find libc's own debug file where libc6-dbg is installed.
  ElfSymbolizerOptions options;
  options.debug_directory = "";
  for (const SharedLibrary& library : {wrong_file, wrong_file_no_id, garbage_file}) {
    ElfSymbolizer symbolizer({library}, options);
    SymbolizeResult result;
    const uint64_t addresses[] = {write_address};
    symbolizer.Symbolize(addresses, &result);
    CHECK(result.addresses[0].frame_count == 0);
    CHECK(result.NameOf(0).rfind(libc->name + "+0x", 0) == 0);
  }
}

// --- Batches ---------------------------------------------------------------------------------

TEST_CASE("A batch keeps input order and reuses cached names") {
  ElfSymbolizer symbolizer(CollectSharedLibraries());
  const uint64_t plain = FunctionAddress(&strata_symbols_test::PlainFunction);
  const uint64_t addresses[] = {plain, 16, plain + 1, LibcWrite(), plain};
  SymbolizeResult result;
  symbolizer.Symbolize(addresses, &result);
  REQUIRE(result.addresses.size() == 5);
  CHECK(result.frames.size() == 4);
  CHECK(result.NameOf(0) == "strata_symbols_test::PlainFunction(int)");
  CHECK(result.NameOf(1).empty());
  CHECK(result.NameOf(2) == result.NameOf(0));
  CHECK(result.NameOf(3) == "write");
  // One cached string per symbol: the views share storage.
  CHECK(result.FramesOf(0)[0].function.data() == result.FramesOf(4)[0].function.data());
  CHECK(result.FramesOf(0)[0].file.empty());
  CHECK(result.FramesOf(0)[0].line == 0);
  CHECK_FALSE(result.FramesOf(0)[0].inlined);

  // A second batch clears the result and the first batch's names stay valid.
  const std::string_view first = result.FramesOf(0)[0].function;
  SymbolizeResult again;
  symbolizer.Symbolize(addresses, &again);
  CHECK(again.FramesOf(0)[0].function.data() == first.data());
  symbolizer.Symbolize({}, &result);
  CHECK(result.addresses.empty());
  CHECK(result.frames.empty());

  const ElfSymbolizer::Stats stats = symbolizer.GetStats();
  CHECK(stats.modules_read == 2);  // The test binary and libc.
  CHECK(stats.demangled_names == 2);
}

TEST_CASE("Concurrent batches from two threads") {
  ElfSymbolizer symbolizer(CollectSharedLibraries());
  const uint64_t plain = FunctionAddress(&strata_symbols_test::PlainFunction);
  const uint64_t twice = FunctionAddress(&strata_symbols_test::Twice<int>);
  auto work = [&](uint64_t address, const char* expected) {
    for (int i = 0; i < 200; ++i) {
      SymbolizeResult result;
      const uint64_t addresses[] = {address, address + 1};
      symbolizer.Symbolize(addresses, &result);
      if (result.NameOf(1) != expected) std::abort();
    }
  };
  std::thread a(work, plain, "strata_symbols_test::PlainFunction(int)");
  std::thread b(work, twice, "int strata_symbols_test::Twice<int>(int)");
  a.join();
  b.join();
}

// Not a benchmark harness: timings of 10,000-address batches, printed for docs/symbols.md.
// The addresses are inside functions of every module (a random symbol of the module's
// table, a random byte of it), as a profile's frames are. "Cold" is a new symbolizer (every
// table read, every name demangled once), "warm" the same batch again; minimum of a few
// runs, since the machine is shared.
TEST_CASE("Timing: a batch of 10,000 addresses") {
  void* handle = OpenLibrary("libsymbols_test_library_for_testing.so");
  const std::vector<SharedLibrary> libraries = CollectSharedLibraries();
  using Clock = std::chrono::steady_clock;
  using Micros = std::chrono::duration<double, std::micro>;

  struct Source {
    const SharedLibrary* library;
    ElfSymbolTable table;
  };
  std::vector<Source> sources;
  for (const SharedLibrary& library : libraries) {
    const auto r0 = Clock::now();
    ElfSymbolTable table = library.path.empty() || library.path[0] != '/'
                               ? ElfSymbolTable::ReadVdso()
                               : ElfSymbolTable::ReadFile(library.path);
    const auto r1 = Clock::now();
    printf("  read %-45s %6zu symbols (%s%s) in %6.0f us, %4zu KiB\n", library.name.c_str(),
           table.size(), table.has_symtab() ? "symtab+" : "",
           table.has_dynsym() ? "dynsym" : "none", Micros(r1 - r0).count(),
           table.MemoryUsage() / 1024);
    if (!table.empty()) sources.push_back({&library, std::move(table)});
  }
  REQUIRE_FALSE(sources.empty());

  std::mt19937_64 random(1);
  std::vector<uint64_t> addresses;
  addresses.reserve(10000);
  while (addresses.size() < 10000) {
    const Source& source = sources[random() % sources.size()];
    const ElfSymbolTable::Symbol symbol = source.table.symbol(random() % source.table.size());
    const uint64_t bias = source.library->start - source.library->offset;
    addresses.push_back(bias + symbol.address + random() % symbol.size);
  }

  double cold = 1e18, warm = 1e18;
  SymbolizeResult result;
  ElfSymbolizer::Stats stats;
  for (int run = 0; run < 3; ++run) {
    ElfSymbolizer symbolizer(libraries);
    const auto t0 = Clock::now();
    symbolizer.Symbolize(addresses, &result);
    cold = std::min(cold, Micros(Clock::now() - t0).count());
    for (int again = 0; again < 5; ++again) {
      const auto t1 = Clock::now();
      symbolizer.Symbolize(addresses, &result);
      warm = std::min(warm, Micros(Clock::now() - t1).count());
    }
    stats = symbolizer.GetStats();
  }
  size_t named = 0;
  for (const SymbolizedAddress& address : result.addresses) named += address.frame_count;
  printf(
      "symbolize 10000 addresses in functions of %zu modules: cold %.0f us (%zu tables, "
      "%zu symbols, %zu names demangled), warm %.0f us (%.0f ns/address); %zu named; "
      "~%zu KiB held\n",
      sources.size(), cold, stats.modules_read, stats.symbols, stats.demangled_names, warm,
      warm * 1000 / 10000, named, stats.memory_bytes / 1024);
  CHECK(result.addresses.size() == 10000);
  CHECK(named == 10000);
  dlclose(handle);
}

}  // namespace
}  // namespace strata
