#include "shared/symbols/elf_symbolizer.h"

#include <limits.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "shared/symbols/debug_file.h"

namespace strata {

ElfSymbolizer::ElfSymbolizer(std::vector<SharedLibrary> modules)
    : ElfSymbolizer(std::move(modules), ElfSymbolizerOptions()) {}

ElfSymbolizer::ElfSymbolizer(std::vector<SharedLibrary> modules, ElfSymbolizerOptions options)
    : options_(std::move(options)), vdso_address_(getauxval(AT_SYSINFO_EHDR)) {
  std::sort(modules.begin(), modules.end(),
            [](const SharedLibrary& a, const SharedLibrary& b) { return a.start < b.start; });
  modules_.reserve(modules.size());
  for (SharedLibrary& library : modules) {
    if (library.start >= library.end) continue;
    if (!modules_.empty() && library.start < modules_.back()->library.end) continue;
    auto module = std::make_unique<Module>();
    module->load_bias = library.start - library.offset;
    module->library = std::move(library);
    modules_.push_back(std::move(module));
  }
}

ElfSymbolizer::~ElfSymbolizer() = default;

ElfSymbolizer::Module* ElfSymbolizer::FindModule(uint64_t address) {
  auto it = std::upper_bound(
      modules_.begin(), modules_.end(), address,
      [](uint64_t a, const std::unique_ptr<Module>& module) { return a < module->library.start; });
  if (it == modules_.begin()) return nullptr;
  Module* module = (--it)->get();
  return address < module->library.end ? module : nullptr;
}

namespace {

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string ExecutablePath() {
  char path[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return length > 0 ? std::string(path, static_cast<size_t>(length)) : std::string();
}

// Is `table` read from the file that is loaded as `library`? Build-ids decide when both
// are known; otherwise the file's PT_LOAD extent must be the mapped one (up to page
// rounding, for module lists made from mappings).
bool IsLoadedFile(const SharedLibrary& library, uint64_t load_bias, const ElfSymbolTable& table) {
  if (!library.code_id.empty() && !table.code_id().empty()) {
    return library.code_id == table.code_id();
  }
  const auto range = table.LoadedRange();
  if (!range) return false;
  constexpr uint64_t kPage = 4096;
  auto down = [](uint64_t a) { return a & ~(kPage - 1); };
  auto up = [](uint64_t a) { return (a + kPage - 1) & ~(kPage - 1); };
  return down(range->first + load_bias) == down(library.start) &&
         up(range->second + load_bias) == up(library.end);
}

}  // namespace

void ElfSymbolizer::ReadTable(Module& module) {
  module.read = true;
  const SharedLibrary& library = module.library;
  const bool is_vdso =
      vdso_address_ != 0 && library.start <= vdso_address_ && vdso_address_ < library.end;
  ElfSymbolTable table;
  if (is_vdso) {
    table = ElfSymbolTable::ReadVdso();
  } else if (!library.path.empty() && library.path[0] == '/') {
    table = ElfSymbolTable::ReadFile(library.path);
    // A deleted or replaced main executable is still readable through /proc/self/exe.
    if (table.empty() && EndsWith(library.path, " (deleted)") && library.path == ExecutablePath()) {
      table = ElfSymbolTable::ReadFile("/proc/self/exe");
    }
  }
  if (!table.empty() && !IsLoadedFile(library, module.load_bias, table)) {
    table = ElfSymbolTable();
  }
  // Without a .symtab, a separate debug file (by build-id or .gnu_debuglink) may have one.
  const std::string& build_id = !library.code_id.empty() ? library.code_id : table.code_id();
  if (!is_vdso && !table.has_symtab() && !library.path.empty() && library.path[0] == '/' &&
      !table.load_segments().empty()) {
    ElfSymbolTable debug = ReadSeparateDebugSymbols(library.path, build_id, table.debug_link(),
                                                    options_.debug_directory);
    if (debug.has_symtab() && IsLoadedFile(library, module.load_bias, debug)) {
      debug.AddPltStubsFrom(table);
      table = std::move(debug);
    }
  }
  module.table = std::move(table);
}

std::string_view ElfSymbolizer::UnwindFunctionName(Module& module, uint64_t start) {
  auto [it, inserted] = module.unwind_names.try_emplace(start);
  if (inserted) it->second = UnwindFunctionDisplayName(module.library.name, start);
  return it->second;
}

std::string_view ElfSymbolizer::DemangledName(Module& module, size_t symbol_index) {
  auto [it, inserted] = module.demangled.try_emplace(static_cast<uint32_t>(symbol_index));
  if (inserted) {
    // Names in the table are NUL-terminated.
    it->second = demangler_.Demangle(module.table.symbol(symbol_index).name.data());
  }
  return it->second;
}

void ElfSymbolizer::Symbolize(absl::Span<const uint64_t> addresses, SymbolizeResult* result) {
  result->Clear();
  result->addresses.reserve(addresses.size());
  result->frames.reserve(addresses.size());
  AutoLock lock(mutex_);
  // Batches from one stack or one thread come in runs within one module: remember it.
  Module* last = nullptr;
  for (const uint64_t address : addresses) {
    SymbolizedAddress out;
    out.address = address;
    out.first_frame = static_cast<uint32_t>(result->frames.size());
    Module* module =
        last != nullptr && last->library.start <= address && address < last->library.end
            ? last
            : FindModule(address);
    if (module != nullptr) {
      last = module;
      if (!module->read) ReadTable(*module);
      out.module = module->library.name;
      out.module_offset = address - module->load_bias;
      const size_t index = module->table.Find(out.module_offset);
      if (index != ElfSymbolTable::kNotFound) {
        SymbolizedFrame frame;
        frame.function = DemangledName(*module, index);
        frame.function_offset = out.module_offset - module->table.symbol(index).address;
        result->frames.push_back(frame);
        out.frame_count = 1;
      } else if (const auto start = module->table.UnwindFunctionStart(out.module_offset)) {
        // Stripped code: one name per function of the unwind tables, not per address.
        SymbolizedFrame frame;
        frame.function = UnwindFunctionName(*module, *start);
        frame.function_offset = out.module_offset - *start;
        result->frames.push_back(frame);
        out.frame_count = 1;
      }
    }
    result->addresses.push_back(out);
  }
}

ElfSymbolizer::Stats ElfSymbolizer::GetStats() const {
  AutoLock lock(mutex_);
  Stats stats;
  stats.modules = modules_.size();
  stats.memory_bytes = modules_.capacity() * sizeof(modules_[0]);
  for (const auto& module : modules_) {
    stats.memory_bytes += sizeof(Module);
    if (!module->read) continue;
    ++stats.modules_read;
    stats.symbols += module->table.size();
    stats.demangled_names += module->demangled.size();
    stats.memory_bytes += module->table.MemoryUsage();
    for (const auto& entry : module->demangled) {
      // Node, key and string (heap part when longer than the small-string buffer).
      stats.memory_bytes += sizeof(entry) + 2 * sizeof(void*) + entry.second.capacity() + 1;
    }
  }
  return stats;
}

}  // namespace strata
