#include "shared/symbols/elf_symbol_table.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "catch2/catch.hpp"

namespace strata {
namespace {

// --- A synthetic ELF64 image builder --------------------------------------------------------

struct TestSymbol {
  std::string name;
  uint64_t address = 0;
  uint64_t size = 0;
  unsigned type = STT_FUNC;
  unsigned binding = STB_GLOBAL;
  uint16_t section = 1;  // .text
};

struct ImageOptions {
  uint32_t symbol_section_type = SHT_SYMTAB;
  bool with_build_id = true;
  uint16_t elf_type = ET_DYN;
};

template <typename T>
void Append(std::vector<uint8_t>& out, const T& value) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&value);
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

// Layout: ELF header, 2 program headers (PT_LOAD r-x at vaddr 0 / offset 0 spanning the
// .text range, PT_NOTE), the build-id note, .strtab, the symbol table, then 5 section
// headers: null, .text [0x1000, 0x2000), symbols, .strtab, .note.
constexpr uint8_t kBuildId[] = {0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04};

std::vector<uint8_t> BuildImage(const std::vector<TestSymbol>& symbols,
                                const ImageOptions& options = ImageOptions()) {
  std::vector<uint8_t> note;
  if (options.with_build_id) {
    Elf64_Nhdr nhdr{4, sizeof(kBuildId), NT_GNU_BUILD_ID};
    Append(note, nhdr);
    note.insert(note.end(), {'G', 'N', 'U', '\0'});
    note.insert(note.end(), std::begin(kBuildId), std::end(kBuildId));
  }
  std::string strtab(1, '\0');
  std::vector<Elf64_Sym> syms(1);  // Index 0 is the null symbol.
  for (const TestSymbol& s : symbols) {
    Elf64_Sym sym{};
    sym.st_name = static_cast<uint32_t>(strtab.size());
    strtab += s.name;
    strtab.push_back('\0');
    sym.st_info = ELF64_ST_INFO(s.binding, s.type);
    sym.st_shndx = s.section;
    sym.st_value = s.address;
    sym.st_size = s.size;
    syms.push_back(sym);
  }
  const uint64_t phoff = sizeof(Elf64_Ehdr);
  const uint64_t note_offset = phoff + 2 * sizeof(Elf64_Phdr);
  const uint64_t strtab_offset = note_offset + note.size();
  uint64_t symtab_offset = strtab_offset + strtab.size();
  symtab_offset = (symtab_offset + 7) & ~uint64_t{7};
  const uint64_t shoff = symtab_offset + syms.size() * sizeof(Elf64_Sym);

  Elf64_Ehdr ehdr{};
  memcpy(ehdr.e_ident, ELFMAG, SELFMAG);
  ehdr.e_ident[EI_CLASS] = ELFCLASS64;
  ehdr.e_ident[EI_DATA] = ELFDATA2LSB;
  ehdr.e_ident[EI_VERSION] = EV_CURRENT;
  ehdr.e_type = options.elf_type;
  ehdr.e_machine = EM_X86_64;
  ehdr.e_version = EV_CURRENT;
  ehdr.e_phoff = phoff;
  ehdr.e_shoff = shoff;
  ehdr.e_ehsize = sizeof(Elf64_Ehdr);
  ehdr.e_phentsize = sizeof(Elf64_Phdr);
  ehdr.e_phnum = 2;
  ehdr.e_shentsize = sizeof(Elf64_Shdr);
  ehdr.e_shnum = 5;

  std::vector<uint8_t> image;
  Append(image, ehdr);
  Elf64_Phdr load{};
  load.p_type = PT_LOAD;
  load.p_flags = PF_R | PF_X;
  load.p_offset = 0;
  load.p_vaddr = 0;
  load.p_filesz = 0x2000;
  load.p_memsz = 0x2000;
  load.p_align = 0x1000;
  Append(image, load);
  Elf64_Phdr note_header{};
  note_header.p_type = PT_NOTE;
  note_header.p_offset = note_offset;
  note_header.p_vaddr = note_offset;
  note_header.p_filesz = note.size();
  note_header.p_memsz = note.size();
  note_header.p_align = 4;
  Append(image, note_header);
  image.insert(image.end(), note.begin(), note.end());
  image.insert(image.end(), strtab.begin(), strtab.end());
  image.resize(symtab_offset, 0);
  for (const Elf64_Sym& sym : syms) Append(image, sym);

  Elf64_Shdr sections[5] = {};
  sections[1].sh_type = SHT_PROGBITS;
  sections[1].sh_flags = SHF_ALLOC | SHF_EXECINSTR;
  sections[1].sh_addr = 0x1000;
  sections[1].sh_offset = 0x1000;
  sections[1].sh_size = 0x1000;
  sections[2].sh_type = options.symbol_section_type;
  sections[2].sh_offset = symtab_offset;
  sections[2].sh_size = syms.size() * sizeof(Elf64_Sym);
  sections[2].sh_link = 3;
  sections[2].sh_entsize = sizeof(Elf64_Sym);
  sections[3].sh_type = SHT_STRTAB;
  sections[3].sh_offset = strtab_offset;
  sections[3].sh_size = strtab.size();
  sections[4].sh_type = SHT_NOTE;
  sections[4].sh_offset = note_offset;
  sections[4].sh_size = note.size();
  sections[4].sh_addralign = 4;
  for (const Elf64_Shdr& section : sections) Append(image, section);
  return image;
}

ElfSymbolTable Read(const std::vector<uint8_t>& image) {
  return ElfSymbolTable::ReadImage(image.data(), image.size());
}

std::string NameAt(const ElfSymbolTable& table, uint64_t address) {
  const size_t index = table.Find(address);
  return index == ElfSymbolTable::kNotFound ? std::string("<none>")
                                            : std::string(table.symbol(index).name);
}

// --- Files next to the test ---------------------------------------------------------------

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

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string TempPath(const std::string& name) {
  const char* dir = getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/strata_symbols_" + name;
}

void WriteBytes(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

bool HasSymbolNamed(const ElfSymbolTable& table, std::string_view name) {
  for (size_t i = 0; i < table.size(); ++i) {
    if (table.symbol(i).name == name) return true;
  }
  return false;
}

// --- Synthetic images --------------------------------------------------------------------

TEST_CASE("Sized symbols cover exactly their bytes") {
  const ElfSymbolTable table = Read(BuildImage({
      {"f", 0x1000, 0x10},
      {"g", 0x1020, 0x10},
  }));
  REQUIRE(table.size() == 2);
  CHECK(table.has_symtab());
  CHECK_FALSE(table.has_dynsym());
  CHECK(NameAt(table, 0xfff) == "<none>");
  CHECK(NameAt(table, 0x1000) == "f");
  CHECK(NameAt(table, 0x100f) == "f");
  CHECK(NameAt(table, 0x1010) == "<none>");  // Past f's end: unknown, not "f".
  CHECK(NameAt(table, 0x101f) == "<none>");
  CHECK(NameAt(table, 0x1020) == "g");
  CHECK(NameAt(table, 0x1030) == "<none>");
  CHECK(NameAt(table, UINT64_MAX) == "<none>");
  CHECK(table.symbol(0).address == 0x1000);
  CHECK(table.symbol(0).size == 0x10);
}

TEST_CASE("Only defined, named function and ifunc symbols are kept, sorted by address") {
  const ElfSymbolTable table = Read(BuildImage({
      {"later", 0x1800, 8},
      {"data", 0x1100, 8, STT_OBJECT},
      {"undefined", 0, 0, STT_FUNC, STB_GLOBAL, SHN_UNDEF},
      {"resolver", 0x1400, 8, STT_GNU_IFUNC},
      {"", 0x1500, 8},
      {"section", 0x1000, 0, STT_SECTION, STB_LOCAL},
      {"earlier", 0x1200, 8, STT_FUNC, STB_LOCAL},
  }));
  REQUIRE(table.size() == 3);
  CHECK(table.symbol(0).name == "earlier");
  CHECK(table.symbol(1).name == "resolver");
  CHECK(table.symbol(2).name == "later");
  CHECK(NameAt(table, 0x1104) == "<none>");
}

TEST_CASE("Aliases keep one name: sized, then non-local, then fewer underscores, shorter") {
  const ElfSymbolTable table = Read(BuildImage({
      {"__libc_write", 0x1000, 0x20, STT_FUNC, STB_GLOBAL},
      {"__write", 0x1000, 0x20, STT_FUNC, STB_GLOBAL},
      {"write", 0x1000, 0x20, STT_FUNC, STB_WEAK},
      {"local_alias", 0x1100, 0x20, STT_FUNC, STB_LOCAL},
      {"_global_alias", 0x1100, 0x20, STT_FUNC, STB_GLOBAL},
      {"a", 0x1200, 0, STT_FUNC, STB_GLOBAL},
      {"sized_one", 0x1200, 0x10, STT_FUNC, STB_GLOBAL},
      {"bb", 0x1300, 4},
      {"ab", 0x1300, 4},
      {"abc", 0x1300, 4},
  }));
  REQUIRE(table.size() == 4);
  CHECK(NameAt(table, 0x1000) == "write");
  CHECK(NameAt(table, 0x1100) == "_global_alias");
  CHECK(NameAt(table, 0x1200) == "sized_one");
  CHECK(NameAt(table, 0x1210) == "<none>");
  CHECK(NameAt(table, 0x1300) == "ab");
}

TEST_CASE("Symbol versions are cut from names") {
  const ElfSymbolTable table = Read(BuildImage({
      {"__libc_start_main@@GLIBC_2.34", 0x1000, 0x20},
      {"memcpy@GLIBC_2.2.5", 0x1100, 0x20},
      {"_ZN6strata3RunEv", 0x1200, 0x20},
      {"@@ONLY_A_VERSION", 0x1300, 0x20},
  }));
  CHECK(NameAt(table, 0x1000) == "__libc_start_main");
  CHECK(NameAt(table, 0x1100) == "memcpy");
  CHECK(NameAt(table, 0x1200) == "_ZN6strata3RunEv");
  CHECK(NameAt(table, 0x1300) == "<none>");  // Nothing left of the name: not kept.
  CHECK(!table.debug_link().has_value());    // The synthetic image has no .gnu_debuglink.
}

TEST_CASE("Zero-size symbols reach the next symbol or their section's end") {
  const ElfSymbolTable table = Read(BuildImage({
      {"asm_one", 0x1100, 0},
      {"next", 0x1180, 0x10},
      {"asm_last", 0x1f00, 0},
      {"absolute", 0x3000, 0, STT_FUNC, STB_GLOBAL, SHN_ABS},
      {"outside_its_section", 0x2800, 0},
  }));
  REQUIRE(table.size() == 5);
  CHECK(NameAt(table, 0x1100) == "asm_one");
  CHECK(NameAt(table, 0x117f) == "asm_one");
  CHECK(NameAt(table, 0x1180) == "next");
  CHECK(NameAt(table, 0x1f00) == "asm_last");
  CHECK(NameAt(table, 0x1fff) == "asm_last");
  CHECK(NameAt(table, 0x2000) == "<none>");  // .text ends here.
  // Section unknown: only the symbol's own address.
  CHECK(NameAt(table, 0x3000) == "absolute");
  CHECK(NameAt(table, 0x3001) == "<none>");
  CHECK(NameAt(table, 0x2800) == "outside_its_section");
  CHECK(NameAt(table, 0x2801) == "<none>");
}

TEST_CASE("A .dynsym-only image is read, with its build-id and PT_LOAD segments") {
  ImageOptions options;
  options.symbol_section_type = SHT_DYNSYM;
  const ElfSymbolTable table = Read(BuildImage({{"exported", 0x1000, 0x40}}, options));
  CHECK(table.has_dynsym());
  CHECK_FALSE(table.has_symtab());
  CHECK(NameAt(table, 0x1010) == "exported");
  CHECK(table.code_id() == "deadbeef01020304");
  REQUIRE(table.load_segments().size() == 1);
  CHECK(table.load_segments()[0].executable);
  REQUIRE(table.LoadedRange().has_value());
  CHECK(table.LoadedRange()->first == 0);
  CHECK(table.LoadedRange()->second == 0x2000);
}

TEST_CASE("No build-id note gives an empty code id") {
  ImageOptions options;
  options.with_build_id = false;
  const ElfSymbolTable table = Read(BuildImage({{"f", 0x1000, 4}}, options));
  CHECK(table.size() == 1);
  CHECK(table.code_id().empty());
}

TEST_CASE("Relocatable objects are not read (their values are section-relative)") {
  ImageOptions options;
  options.elf_type = ET_REL;
  CHECK(Read(BuildImage({{"f", 0x1000, 4}}, options)).empty());
}

TEST_CASE("Load bias from a mapping's start and file offset") {
  // The synthetic image has one PT_LOAD: vaddr 0, file offset 0, 0x2000 bytes.
  const ElfSymbolTable table = Read(BuildImage({{"f", 0x1000, 4}}));
  REQUIRE(table.LoadBiasForMapping(0x7f0000000000, 0).has_value());
  CHECK(*table.LoadBiasForMapping(0x7f0000000000, 0) == 0x7f0000000000);
  // A mapping of the segment's second page.
  CHECK(*table.LoadBiasForMapping(0x7f0000001000, 0x1000) == 0x7f0000000000);
  CHECK_FALSE(table.LoadBiasForMapping(0x7f0000003000, 0x3000).has_value());
  // The only segment is executable.
  CHECK_FALSE(table.LoadBiasForMapping(0x7f0000000000, 0, /*executable=*/false).has_value());
}

TEST_CASE("Every truncation of an image parses without a crash") {
  const std::vector<uint8_t> image = BuildImage({{"f", 0x1000, 4}, {"g", 0x1010, 4}});
  CHECK(Read(image).size() == 2);
  for (size_t length = 0; length < image.size(); ++length) {
    // A fresh heap copy of exactly `length` bytes, so that AddressSanitizer sees any
    // read past the end.
    std::vector<uint8_t> cut(image.begin(), image.begin() + static_cast<ptrdiff_t>(length));
    cut.shrink_to_fit();
    const ElfSymbolTable table = Read(cut);
    CHECK(table.size() <= 2);
  }
  CHECK(ElfSymbolTable::ReadImage(nullptr, 100).empty());
}

TEST_CASE("Random corruption of an image never crashes or reads out of bounds") {
  const std::vector<uint8_t> image =
      BuildImage({{"f", 0x1000, 4}, {"g", 0x1010, 0}, {"h", 0x1100, 0x10}});
  std::mt19937_64 random(12345);
  size_t with_symbols = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<uint8_t> copy = image;
    const int flips = 1 + static_cast<int>(random() % 8);
    for (int i = 0; i < flips; ++i) {
      copy[random() % copy.size()] = static_cast<uint8_t>(random());
    }
    const ElfSymbolTable table = Read(copy);
    for (size_t i = 0; i < table.size(); ++i) {
      const ElfSymbolTable::Symbol symbol = table.symbol(i);
      REQUIRE(symbol.size >= 1);
      REQUIRE(symbol.name.data()[symbol.name.size()] == '\0');
      REQUIRE(table.Find(symbol.address) != ElfSymbolTable::kNotFound);
    }
    if (!table.empty()) ++with_symbols;
  }
  CHECK(with_symbols > 0);  // Most flips hit nothing vital.
}

// --- Real files ------------------------------------------------------------------------------

TEST_CASE("A built shared library has .symtab and .dynsym; its stripped copy .dynsym only") {
  const ElfSymbolTable full =
      ElfSymbolTable::ReadFile(DataFile("libsymbols_test_library_for_testing.so"));
  const ElfSymbolTable stripped =
      ElfSymbolTable::ReadFile(DataFile("libsymbols_test_library_stripped_for_testing.so"));
  CHECK(full.has_symtab());
  CHECK(full.has_dynsym());
  CHECK_FALSE(stripped.has_symtab());
  CHECK(stripped.has_dynsym());
  CHECK(full.code_id() == stripped.code_id());
  CHECK_FALSE(full.code_id().empty());

  CHECK(HasSymbolNamed(full, "StrataSymbolsLibraryFunction"));
  CHECK(HasSymbolNamed(stripped, "StrataSymbolsLibraryFunction"));
  CHECK(HasSymbolNamed(stripped, "_ZN22strata_symbols_library5ScaleIlEET_S1_i"));
  // The anonymous-namespace function is local: .symtab only.
  CHECK(HasSymbolNamed(full, "_ZN12_GLOBAL__N_116InternalFunctionEi"));
  CHECK_FALSE(HasSymbolNamed(stripped, "_ZN12_GLOBAL__N_116InternalFunctionEi"));
  CHECK(stripped.size() < full.size());

  // Stripping changes no address: every stripped symbol is in the full table at the same
  // address (possibly under an alias's name).
  for (size_t i = 0; i < stripped.size(); ++i) {
    const size_t index = full.Find(stripped.symbol(i).address);
    REQUIRE(index != ElfSymbolTable::kNotFound);
    CHECK(full.symbol(index).address == stripped.symbol(i).address);
  }
}

TEST_CASE("The test binary's own .symtab is read (no -rdynamic needed)") {
  const ElfSymbolTable table = ElfSymbolTable::ReadFile("/proc/self/exe");
  CHECK(table.has_symtab());
  CHECK(HasSymbolNamed(table, "main"));
}

// objdump's "<symbol@plt>" labels of `path`: {address: name}.
std::vector<std::pair<uint64_t, std::string>> ObjdumpPltLabels(const std::string& path) {
  std::vector<std::pair<uint64_t, std::string>> labels;
  const std::string command =
      "objdump -d --no-show-raw-insn -j .plt -j .plt.sec -j .plt.got '" + path + "' 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return labels;
  char line[1024];
  while (fgets(line, sizeof(line), pipe) != nullptr) {
    unsigned long address = 0;
    char name[512];
    if (sscanf(line, "%lx <%511[^>]>:", &address, name) != 2) continue;
    const std::string label = name;
    if (label.size() > 4 && label.compare(label.size() - 4, 4, "@plt") == 0 &&
        label.find("*ABS*") == std::string::npos) {
      labels.emplace_back(address, label);
    }
  }
  pclose(pipe);
  return labels;
}

TEST_CASE("PLT stubs are named symbol@plt, as objdump names them") {
  for (const std::string& path : {std::string("/proc/self/exe"),
                                 std::string("/lib/x86_64-linux-gnu/libstdc++.so.6"),
                                 std::string("/lib/x86_64-linux-gnu/libc.so.6")}) {
    char resolved[PATH_MAX];
    REQUIRE(realpath(path.c_str(), resolved) != nullptr);
    const auto labels = ObjdumpPltLabels(resolved);
    INFO(path << ": " << labels.size() << " stubs in objdump");
    if (path == "/proc/self/exe" || path.find("libstdc++") != std::string::npos) {
      REQUIRE(labels.size() > 3);
    }
    const ElfSymbolTable table = ElfSymbolTable::ReadFile(resolved);
    size_t equal = 0;
    for (const auto& [address, name] : labels) {
      const size_t index = table.Find(address);
      REQUIRE(index != ElfSymbolTable::kNotFound);
      const ElfSymbolTable::Symbol symbol = table.symbol(index);
      INFO(std::hex << address << " objdump " << name << " ours " << symbol.name);
      CHECK(symbol.address == address);
      CHECK(symbol.name == name);
      equal += symbol.name == name;
      // A stub covers its entry (16 bytes; 8 in a .plt.got of 8-byte entries), no more.
      CHECK((symbol.size == 16 || symbol.size == 8));
      CHECK(table.Find(address + symbol.size - 1) == index);
    }
    CHECK(equal == labels.size());
  }
}

TEST_CASE("Missing, special, empty, garbage and truncated files give empty tables") {
  CHECK(ElfSymbolTable::ReadFile("/nonexistent/strata/libnothing.so").empty());
  CHECK(ElfSymbolTable::ReadFile("/").empty());
  CHECK(ElfSymbolTable::ReadFile("/dev/null").empty());
  CHECK(ElfSymbolTable::ReadFile("").empty());

  const std::string empty = TempPath("empty");
  WriteBytes(empty, nullptr, 0);
  CHECK(ElfSymbolTable::ReadFile(empty).empty());

  const uint8_t magic_only[] = {0x7f, 'E', 'L', 'F'};
  const std::string magic = TempPath("magic");
  WriteBytes(magic, magic_only, sizeof(magic_only));
  CHECK(ElfSymbolTable::ReadFile(magic).empty());

  std::mt19937_64 random(7);
  std::vector<uint8_t> noise(65536);
  for (uint8_t& byte : noise) byte = static_cast<uint8_t>(random());
  memcpy(noise.data(), magic_only, sizeof(magic_only));
  noise[EI_CLASS] = ELFCLASS64;
  noise[EI_DATA] = ELFDATA2LSB;
  const std::string garbage = TempPath("garbage");
  WriteBytes(garbage, noise.data(), noise.size());
  CHECK(ElfSymbolTable::ReadFile(garbage).size() < 100);  // No crash; likely empty.

  // The real library cut at many lengths: the section headers sit at the end, so every
  // truncated copy loses them and gives no symbols.
  const std::vector<uint8_t> library =
      ReadBytes(DataFile("libsymbols_test_library_for_testing.so"));
  REQUIRE(library.size() > 4096);
  const std::string truncated = TempPath("truncated");
  for (size_t length : {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{4096},
                        library.size() / 2, library.size() - 64, library.size() - 1}) {
    WriteBytes(truncated, library.data(), length);
    CHECK(ElfSymbolTable::ReadFile(truncated).empty());
  }
  WriteBytes(truncated, library.data(), library.size());
  CHECK_FALSE(ElfSymbolTable::ReadFile(truncated).empty());
}

TEST_CASE("Random corruption of a real library never crashes") {
  const std::vector<uint8_t> library =
      ReadBytes(DataFile("libsymbols_test_library_stripped_for_testing.so"));
  REQUIRE(Read(library).size() > 0);
  std::mt19937_64 random(99);
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> copy = library;
    for (int i = 0; i < 16; ++i) {
      // Mostly the headers (first 1 KiB and the section header table at the end).
      const size_t where =
          (random() % 2 == 0) ? random() % 1024 : copy.size() - 1 - random() % 2048;
      copy[where] = static_cast<uint8_t>(random());
    }
    const ElfSymbolTable table = Read(copy);
    for (size_t i = 0; i < table.size(); ++i) {
      REQUIRE(table.symbol(i).name.data()[table.symbol(i).name.size()] == '\0');
    }
  }
}

TEST_CASE("The vDSO is read from memory") {
  const ElfSymbolTable vdso = ElfSymbolTable::ReadVdso();
  if (vdso.empty()) {
    WARN("no vDSO symbols in this process");
    return;
  }
  CHECK(vdso.has_dynsym());
  CHECK((HasSymbolNamed(vdso, "clock_gettime") || HasSymbolNamed(vdso, "__vdso_clock_gettime")));
}

}  // namespace
}  // namespace strata
