#include "shared/symbols/dwarf_symbolizer.h"

#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <libelf.h>
#include <link.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "shared/symbols/debug_file.h"
#include "shared/symbols/demangle.h"
#include "shared/symbols/elf_symbol_table.h"

namespace strata {
namespace {

// "memcpy@@GLIBC_2.14" -> "memcpy": symbol versions are not part of the function's name
// (and would keep a mangled name from demangling).
std::string WithoutVersion(const char* name) {
  const char* at = std::strchr(name, '@');
  if (at != nullptr && std::strcmp(at, "@plt") == 0) return std::string(name);  // A PLT stub.
  return at == nullptr || at == name ? std::string(name) : std::string(name, static_cast<size_t>(at - name));
}

bool IsVdsoName(std::string_view path) {
  return path == "[vdso]" || path.rfind("linux-vdso", 0) == 0 || path.rfind("linux-gate", 0) == 0;
}

// This process's vDSO image as a file-shaped byte range (ELF header through the section
// headers), or an empty range.
std::pair<const char*, size_t> OwnVdsoImage() {
  const auto base = getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return {nullptr, 0};
  const auto* ehdr = reinterpret_cast<const ElfW(Ehdr)*>(base);
  if (std::memcmp(ehdr->e_ident, ELFMAG, SELFMAG) != 0) return {nullptr, 0};
  size_t size = ehdr->e_shoff + static_cast<size_t>(ehdr->e_shnum) * ehdr->e_shentsize;
  const auto* phdr = reinterpret_cast<const ElfW(Phdr)*>(base + ehdr->e_phoff);
  for (int i = 0; i < ehdr->e_phnum; ++i) {
    if (phdr[i].p_type == PT_LOAD) size = std::max<size_t>(size, phdr[i].p_offset + phdr[i].p_filesz);
  }
  return {reinterpret_cast<const char*>(base), size};
}

// A DIE's attribute as an unsigned number, following abstract origins and specifications.
bool UdataOf(Dwarf_Die* die, int name, Dwarf_Word* value) {
  Dwarf_Attribute attribute;
  return dwarf_attr_integrate(die, name, &attribute) != nullptr &&
         dwarf_formudata(&attribute, value) == 0;
}

}  // namespace

struct DwarfModuleCache::Impl {
  struct Frame {
    const std::string* function;
    const std::string* file;  // nullptr: unknown.
    uint64_t function_offset;
    uint32_t line;
    bool inlined;
  };
  struct Range {
    uint32_t first;
    uint32_t count;
  };
  struct File {
    std::string path;
    std::string code_id;
    Dwfl* dwfl = nullptr;
    bool usable = false;            // False: missing, wrong build-id, ...
    ElfSymbolTable table;           // Function names (ElfSymbolizer's alias rules).
    Dwfl_Module* module = nullptr;  // DWARF; nullptr when libdwfl cannot open the file.
    std::unordered_map<uint64_t, Range> addresses;
    std::vector<char> image;  // In-memory file contents (the vDSO), outlives the Dwfl.
  };

  explicit Impl(DwarfSymbolizerOptions options_in) : options(std::move(options_in)) {
    debuginfo_path = options.debug_directory.empty() ? ":.debug" : ":.debug:" + options.debug_directory;
    debuginfo_path_pointer = debuginfo_path.data();
    callbacks.find_elf = dwfl_build_id_find_elf;
    callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
    callbacks.section_address = dwfl_offline_section_address;
    callbacks.debuginfo_path = &debuginfo_path_pointer;
  }
  ~Impl() {
    for (auto& file : files) {
      if (file->dwfl != nullptr) dwfl_end(file->dwfl);
    }
  }

  const std::string* Intern(std::string_view s) { return &*strings.emplace(s).first; }

  int FileFor(const SharedLibrary& library) {
    const auto key = std::make_pair(library.path, library.code_id);
    auto it = file_index.find(key);
    if (it != file_index.end()) return it->second;
    const int index = static_cast<int>(files.size());
    file_index.emplace(key, index);
    files.push_back(std::make_unique<File>());
    File& file = *files.back();
    file.path = library.path;
    file.code_id = library.code_id;
    Open(&file);
    return index;
  }

  void Open(File* file) {
    ++stats.files;
    const bool vdso = IsVdsoName(file->path);
    if (vdso) {
      const auto [data, size] = OwnVdsoImage();
      if (data == nullptr) return;
      file->image.assign(data, data + size);
      file->table = ElfSymbolTable::ReadImage(file->image.data(), file->image.size());
    } else if (!file->path.empty() && file->path[0] == '/') {
      file->table = ElfSymbolTable::ReadFile(file->path);
    } else {
      return;
    }
    // The file on disk must be the one that was loaded.
    if (!file->code_id.empty() && !file->table.code_id().empty() &&
        file->table.code_id() != file->code_id) {
      file->table = ElfSymbolTable();
      return;
    }
    if (file->table.empty() && file->table.load_segments().empty()) return;  // Not ELF.
    file->usable = true;
    const std::string build_id = !file->code_id.empty() ? file->code_id : file->table.code_id();
    if (!vdso && !file->table.has_symtab()) {
      ElfSymbolTable debug = ReadSeparateDebugSymbols(file->path, build_id,
                                                      file->table.debug_link(),
                                                      options.debug_directory);
      if (debug.has_symtab()) {
        debug.AddPltStubsFrom(file->table);  // The debug file's .plt is empty (NOBITS).
        file->table = std::move(debug);
      }
    }

    file->dwfl = dwfl_begin(&callbacks);
    if (file->dwfl == nullptr) return;
    dwfl_report_begin(file->dwfl);
    Dwfl_Module* module = nullptr;
    if (vdso) {
      module = dwfl_report_offline_memory(file->dwfl, file->path.c_str(), file->path.c_str(),
                                          file->image.data(), file->image.size());
    } else {
      // Base 0 with add_p_vaddr: the module sits at its own file addresses (bias 0).
      module = dwfl_report_elf(file->dwfl, file->path.c_str(), file->path.c_str(), -1, 0, true);
    }
    dwfl_report_end(file->dwfl, nullptr, nullptr);
    if (module == nullptr) return;
    Dwarf_Addr bias = 0;
    if (Dwarf* dwarf = dwfl_module_getdwarf(module, &bias)) {
      ++stats.files_with_dwarf;
      file->module = module;
      // The file libdwfl found the DWARF in (the module itself, or a debug file found by
      // build-id, debuglink, or fetched from a debuginfod server when DEBUGINFOD_URLS is
      // set) also has the .symtab a stripped module lacks: the same names a local debug file
      // gives.
      Elf* debug_elf = dwarf_getelf(dwarf);
      size_t size = 0;
      const char* image = debug_elf != nullptr ? elf_rawfile(debug_elf, &size) : nullptr;
      if (!file->table.has_symtab() && image != nullptr) {
        ElfSymbolTable debug = ElfSymbolTable::ReadImage(image, size);
        if (debug.has_symtab() && (build_id.empty() || debug.code_id() == build_id)) {
          file->table = std::move(debug);
        }
      }
    }
  }

  // Symbolizes one file address of `file` (cached).
  Range Lookup(File* file, uint64_t address) {
    auto it = file->addresses.find(address);
    if (it != file->addresses.end()) return it->second;
    Range range{static_cast<uint32_t>(frames.size()), 0};
    if (file->usable) Resolve(*file, address);
    range.count = static_cast<uint32_t>(frames.size()) - range.first;
    file->addresses.emplace(address, range);
    ++stats.addresses;
    stats.frames += range.count;
    return range;
  }

  // Appends the frames of `address` (innermost first) to `frames`.
  void Resolve(const File& file, uint64_t address) {
    const char* symbol_name = nullptr;
    std::string unversioned;
    uint64_t symbol_offset = 0;
    const size_t symbol_index = file.table.Find(address);
    if (symbol_index != ElfSymbolTable::kNotFound) {
      const ElfSymbolTable::Symbol symbol = file.table.symbol(symbol_index);
      unversioned = WithoutVersion(symbol.name.data());  // Names are NUL-terminated.
      symbol_name = unversioned.c_str();
      symbol_offset = address - symbol.address;
    }
    Dwfl_Module* module = file.module;
    // Stripped code: the function that the unwind tables delimit, one name per function.
    std::optional<uint64_t> unwind_start;
    if (symbol_name == nullptr) unwind_start = file.table.UnwindFunctionStart(address);
    const auto push_unwind_function = [&] {
      if (!unwind_start) return;
      const size_t slash = file.path.rfind('/');
      frames.push_back(Frame{Intern(UnwindFunctionDisplayName(
                                 slash == std::string::npos ? file.path : file.path.substr(slash + 1),
                                 *unwind_start)),
                             nullptr, address - *unwind_start, 0, false});
    };
    if (module == nullptr) {
      if (symbol_name != nullptr) {
        frames.push_back(Frame{Intern(demangler.Demangle(symbol_name)), nullptr, symbol_offset, 0, false});
      } else {
        push_unwind_function();
      }
      return;
    }

    const std::string* file_name = nullptr;
    uint32_t line = 0;
    if (Dwfl_Line* dwfl_line = dwfl_module_getsrc(module, address)) {
      int line_number = 0;
      const char* source = dwfl_lineinfo(dwfl_line, nullptr, &line_number, nullptr, nullptr, nullptr);
      if (source != nullptr && line_number > 0) {
        file_name = Intern(source);
        line = static_cast<uint32_t>(line_number);
      }
    }

    const size_t first = frames.size();
    bool have_outermost = false;
    Dwarf_Addr bias = 0;
    Dwarf_Die* cu = options.inline_frames ? dwfl_module_addrdie(module, address, &bias) : nullptr;
    // The scopes from the innermost function instance outwards, as the DIE tree nests them.
    // dwarf_getscopes finds the innermost scope at the address, but past an inlined instance it
    // continues into the scopes of that function's abstract definition, not into the function
    // it was inlined into: a middle inline level was lost (issue 34). So from the innermost
    // inlined instance the chain is read with dwarf_getscopes_die, as eu-addr2line -i does.
    Dwarf_Die* found = nullptr;
    int found_count = cu != nullptr ? dwarf_getscopes(cu, address - bias, &found) : 0;
    Dwarf_Die* scopes = found;
    int count = found_count;
    for (int i = 0; i < found_count; ++i) {
      const int tag = dwarf_tag(&found[i]);
      if (tag == DW_TAG_subprogram) break;
      if (tag != DW_TAG_inlined_subroutine) continue;
      Dwarf_Die* nested = nullptr;
      const int nested_count = dwarf_getscopes_die(&found[i], &nested);
      if (nested_count > 0) {
        scopes = nested;
        count = nested_count;
      }
      break;
    }
    Dwarf_Files* files_table = nullptr;
    for (int i = 0; i < count; ++i) {
      Dwarf_Die* scope = &scopes[i];
      const int tag = dwarf_tag(scope);
      if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
      if (tag == DW_TAG_subprogram) {
        // The function the code belongs to: prefer its ELF symbol's name (as ElfSymbolizer).
        const std::string* name =
            symbol_name != nullptr ? Intern(demangler.Demangle(symbol_name)) : NameOf(scope);
        if (name == nullptr) break;
        frames.push_back(Frame{name, file_name, symbol_name != nullptr ? symbol_offset : 0, line, false});
        have_outermost = true;
        break;
      }
      const std::string* name = NameOf(scope);
      if (name == nullptr) name = Intern("??");
      frames.push_back(Frame{name, file_name, 0, line, true});
      // The caller's position is this inlined call's site.
      Dwarf_Word call_file = 0, call_line = 0;
      file_name = nullptr;
      line = 0;
      if (UdataOf(scope, DW_AT_call_line, &call_line)) line = static_cast<uint32_t>(call_line);
      if (UdataOf(scope, DW_AT_call_file, &call_file)) {
        size_t file_count = 0;
        if (files_table == nullptr) dwarf_getsrcfiles(cu, &files_table, &file_count);
        if (files_table != nullptr) {
          if (const char* source = dwarf_filesrc(files_table, call_file, nullptr, nullptr)) {
            file_name = Intern(source);
          }
        }
      }
    }
    if (scopes != found) free(scopes);
    free(found);
    if (!have_outermost) {
      if (symbol_name != nullptr) {
        frames.push_back(Frame{Intern(demangler.Demangle(symbol_name)), file_name, symbol_offset, line, false});
      } else if (frames.size() == first) {
        push_unwind_function();
      } else if (frames.size() > first) {
        // Inlined frames without an enclosing subprogram (odd DWARF): the last is outermost.
        frames.back().inlined = false;
      }
    }
  }

  // A subprogram's or inlined subroutine's name: the demangled linkage name, else DW_AT_name.
  const std::string* NameOf(Dwarf_Die* die) {
    Dwarf_Attribute attribute;
    const char* linkage = nullptr;
    if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attribute) != nullptr ||
        dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attribute) != nullptr) {
      linkage = dwarf_formstring(&attribute);
    }
    if (linkage != nullptr) return Intern(demangler.Demangle(linkage));
    const char* name = dwarf_diename(die);
    if (name == nullptr && dwarf_attr_integrate(die, DW_AT_name, &attribute) != nullptr) {
      name = dwarf_formstring(&attribute);
    }
    return name != nullptr ? Intern(name) : nullptr;
  }

  DwarfSymbolizerOptions options;
  std::string debuginfo_path;
  char* debuginfo_path_pointer = nullptr;
  Dwfl_Callbacks callbacks{};
  std::mutex mutex;
  std::vector<std::unique_ptr<File>> files;
  std::map<std::pair<std::string, std::string>, int> file_index;
  std::unordered_set<std::string> strings;  // Node-based: element addresses are stable.
  std::vector<Frame> frames;
  Demangler demangler;
  Stats stats;
};

DwarfModuleCache::DwarfModuleCache(DwarfSymbolizerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

DwarfModuleCache::~DwarfModuleCache() = default;

DwarfModuleCache::Stats DwarfModuleCache::GetStats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

DwarfSymbolizer::DwarfSymbolizer(std::vector<SharedLibrary> modules,
                                 std::shared_ptr<DwarfModuleCache> cache)
    : cache_(cache != nullptr ? std::move(cache) : std::make_shared<DwarfModuleCache>()) {
  std::sort(modules.begin(), modules.end(),
            [](const SharedLibrary& a, const SharedLibrary& b) { return a.start < b.start; });
  for (SharedLibrary& library : modules) {
    if (library.end <= library.start) continue;
    if (!modules_.empty() && library.start < modules_.back().library.end) continue;
    Module module;
    module.load_bias = library.start - library.offset;
    module.library = std::move(library);
    modules_.push_back(std::move(module));
  }
}

DwarfSymbolizer::~DwarfSymbolizer() = default;

void DwarfSymbolizer::Symbolize(absl::Span<const uint64_t> addresses, SymbolizeResult* result) {
  result->Clear();
  result->addresses.reserve(addresses.size());
  DwarfModuleCache::Impl& cache = *cache_->impl_;
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (const uint64_t address : addresses) {
    SymbolizedAddress out;
    out.address = address;
    out.first_frame = static_cast<uint32_t>(result->frames.size());
    auto it = std::upper_bound(modules_.begin(), modules_.end(), address,
                               [](uint64_t a, const Module& m) { return a < m.library.start; });
    if (it != modules_.begin() && address < std::prev(it)->library.end) {
      Module& module = *std::prev(it);
      out.module = module.library.name;
      out.module_offset = address - module.load_bias;
      if (module.file < 0) module.file = cache.FileFor(module.library);
      const DwarfModuleCache::Impl::Range range =
          cache.Lookup(cache.files[static_cast<size_t>(module.file)].get(), out.module_offset);
      for (uint32_t i = 0; i < range.count; ++i) {
        const DwarfModuleCache::Impl::Frame& f = cache.frames[range.first + i];
        SymbolizedFrame frame;
        frame.function = *f.function;
        frame.function_offset = f.function_offset;
        if (f.file != nullptr) frame.file = *f.file;
        frame.line = f.line;
        frame.inlined = f.inlined;
        result->frames.push_back(frame);
      }
      out.frame_count = range.count;
    }
    result->addresses.push_back(out);
  }
}

}  // namespace strata
