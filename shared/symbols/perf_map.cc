#include "shared/symbols/perf_map.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace strata {
namespace {

// Parses a hex number with or without "0x" at the start of `text`; advances past it.
bool ParseHex(const char*& text, uint64_t* value) {
  if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) text += 2;
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(text, &end, 16);
  if (end == text) return false;
  *value = parsed;
  text = end;
  return true;
}

// The whole file at `path` into `data`; false if it cannot be read. POSIX reads, not
// iostreams: the base tier's capture reads these files too, and libstdc++'s streams would
// add their locale machinery to libstrata_base.so (issue 19's size budget).
bool ReadWholeFile(const std::string& path, std::string* data) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return false;
  }
  data->clear();
  data->reserve(static_cast<size_t>(st.st_size));
  char chunk[64 * 1024];
  for (;;) {
    const ssize_t got = read(fd, chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    data->append(chunk, static_cast<size_t>(got));
  }
  close(fd);
  return true;
}

}  // namespace

std::string PerfMap::ModuleNameFor(int64_t pid) {
  return access(PathFor(pid).c_str(), R_OK) == 0 ? "perf-" + std::to_string(pid) + ".map"
                                                 : "jit-" + std::to_string(pid) + ".dump";
}

std::string PerfMap::PathFor(int64_t pid) { return "/tmp/perf-" + std::to_string(pid) + ".map"; }

std::vector<std::string> PerfMap::JitDumpPathsFor(int64_t pid) {
  const std::string name = "jit-" + std::to_string(pid) + ".dump";
  std::vector<std::string> paths;
  paths.push_back("/tmp/" + name);
  paths.push_back(name);  // The current directory: where V8 writes it.
  return paths;
}

std::vector<PerfMap::Entry> PerfMap::ReadLines(const std::string& path) {
  std::vector<Entry> entries;
  std::string data;
  if (!ReadWholeFile(path, &data)) return entries;
  size_t line_start = 0;
  while (line_start < data.size()) {
    size_t line_end = data.find('\n', line_start);
    if (line_end == std::string::npos) line_end = data.size();
    const std::string line = data.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    const char* text = line.c_str();
    Entry entry;
    if (!ParseHex(text, &entry.start) || *text != ' ') continue;
    ++text;
    if (!ParseHex(text, &entry.size) || *text != ' ' || entry.size == 0) continue;
    entry.name = std::string(text + 1);
    if (entry.name.empty()) continue;
    entries.push_back(std::move(entry));
  }
  return entries;
}

namespace {

// perf's jitdump format (tools/perf/util/jitdump.h; docs/symbols.md "JIT code").
constexpr uint32_t kJitDumpMagic = 0x4A695444;         // "JiTD" as the writer's uint32.
constexpr uint32_t kJitCodeLoad = 0;
constexpr uint32_t kJitCodeMove = 1;
constexpr uint32_t kJitCodeClose = 3;
constexpr size_t kJitHeaderMinSize = 40;  // magic .. flags.
constexpr size_t kRecordPrefixSize = 16;  // id, total_size, timestamp.
constexpr size_t kCodeLoadFixedSize = kRecordPrefixSize + 40;  // pid, tid, vma, addr, size, index.
constexpr size_t kCodeMoveSize = kRecordPrefixSize + 48;

template <typename T>
T Load(const std::string& data, size_t offset) {
  T value;
  std::memcpy(&value, data.data() + offset, sizeof(T));
  return value;
}

}  // namespace

std::vector<PerfMap::Entry> PerfMap::ReadJitDumpRecords(const std::string& path) {
  std::vector<Entry> entries;
  std::string data;
  if (!ReadWholeFile(path, &data) || data.size() < kJitHeaderMinSize) return entries;
  const uint32_t magic = Load<uint32_t>(data, 0);
  if (magic != kJitDumpMagic) return entries;  // Other byte order: not this machine's runtime.
  const uint32_t header_size = Load<uint32_t>(data, 8);
  if (header_size < kJitHeaderMinSize || header_size > data.size()) return entries;
  // Where each code index was loaded, for JIT_CODE_MOVE (which carries no name).
  std::vector<std::pair<uint64_t, std::string>> names_by_index;
  auto name_of = [&](uint64_t index) -> const std::string* {
    for (auto it = names_by_index.rbegin(); it != names_by_index.rend(); ++it) {
      if (it->first == index) return &it->second;
    }
    return nullptr;
  };
  size_t offset = header_size;
  while (offset + kRecordPrefixSize <= data.size()) {
    const uint32_t id = Load<uint32_t>(data, offset);
    const uint32_t total_size = Load<uint32_t>(data, offset + 4);
    // A record cut short (the runtime still writing, or killed): the rest is unreadable.
    if (total_size < kRecordPrefixSize || total_size > data.size() - offset) break;
    if (id == kJitCodeClose) break;
    if (id == kJitCodeLoad && total_size > kCodeLoadFixedSize) {
      const uint64_t vma = Load<uint64_t>(data, offset + kRecordPrefixSize + 8);
      const uint64_t code_size = Load<uint64_t>(data, offset + kRecordPrefixSize + 24);
      const uint64_t code_index = Load<uint64_t>(data, offset + kRecordPrefixSize + 32);
      const size_t name_start = offset + kCodeLoadFixedSize;
      const size_t name_end = data.find('\0', name_start);
      if (name_end != std::string::npos && name_end < offset + total_size && code_size > 0 &&
          name_end > name_start) {
        Entry entry;
        entry.start = vma;
        entry.size = code_size;
        entry.name = data.substr(name_start, name_end - name_start);
        names_by_index.emplace_back(code_index, entry.name);
        entries.push_back(std::move(entry));
      }
    } else if (id == kJitCodeMove && total_size >= kCodeMoveSize) {
      const uint64_t new_address = Load<uint64_t>(data, offset + kRecordPrefixSize + 24);
      const uint64_t code_size = Load<uint64_t>(data, offset + kRecordPrefixSize + 32);
      const uint64_t code_index = Load<uint64_t>(data, offset + kRecordPrefixSize + 40);
      if (const std::string* name = name_of(code_index); name && code_size > 0) {
        entries.push_back(Entry{new_address, code_size, *name});
      }
    }
    offset += total_size;
  }
  return entries;
}

PerfMap PerfMap::Read(const std::string& path) { return FromEntries(ReadLines(path)); }

PerfMap PerfMap::ReadJitDump(const std::string& path) {
  return FromEntries(ReadJitDumpRecords(path));
}

PerfMap PerfMap::ForProcess(int64_t pid) {
  std::vector<Entry> entries = ReadLines(PathFor(pid));
  // The first jitdump found (JitDumpPathsFor's order: /tmp, then the current directory): the
  // same dump is not read twice.
  const std::string name = "jit-" + std::to_string(pid) + ".dump";
  std::vector<Entry> dumped = ReadJitDumpRecords("/tmp/" + name);
  if (dumped.empty()) dumped = ReadJitDumpRecords(name);
  for (Entry& entry : dumped) entries.push_back(std::move(entry));
  return FromEntries(std::move(entries));
}

PerfMap PerfMap::FromEntries(std::vector<Entry> in_order) {
  PerfMap map;
  // Every entry in order; a later one replaces what an earlier one said of its range. Sorted
  // by start, the latest first at each start (indexes sorted, not the entries: a sort of
  // entries with their strings costs the preloaded library ~1.5 KiB more code); then a sweep
  // by start drops what a later line overlapped.
  std::vector<uint32_t> order(in_order.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return in_order[a].start != in_order[b].start ? in_order[a].start < in_order[b].start : a > b;
  });
  std::vector<uint32_t> kept;
  for (const uint32_t candidate : order) {
    if (!kept.empty()) {
      Entry& previous = in_order[kept.back()];
      const uint64_t previous_end = previous.start + previous.size;
      if (in_order[candidate].start < previous_end) {
        if (candidate < kept.back()) continue;  // Older, overlapped: gone.
        previous.size = in_order[candidate].start - previous.start;  // Newer wins.
        if (previous.size == 0) kept.pop_back();
      }
    }
    kept.push_back(candidate);
  }
  map.entries_.reserve(kept.size());
  for (const uint32_t i : kept) map.entries_.push_back(std::move(in_order[i]));
  return map;
}

const PerfMap::Entry* PerfMap::Find(uint64_t address) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), address,
                             [](uint64_t a, const Entry& e) { return a < e.start; });
  if (it == entries_.begin()) return nullptr;
  --it;
  return address - it->start < it->size ? &*it : nullptr;
}

PerfMapSymbolizer::PerfMapSymbolizer(std::unique_ptr<Symbolizer> inner, PerfMap map,
                                     std::string module_name)
    : inner_(std::move(inner)), map_(std::move(map)), module_name_(std::move(module_name)) {}

void PerfMapSymbolizer::Symbolize(absl::Span<const uint64_t> addresses, SymbolizeResult* result) {
  inner_->Symbolize(addresses, result);
  for (SymbolizedAddress& a : result->addresses) {
    if (a.frame_count != 0 || !a.module.empty()) continue;
    const PerfMap::Entry* entry = map_.Find(a.address);
    if (entry == nullptr) continue;
    SymbolizedFrame frame;
    frame.function = entry->name;
    frame.function_offset = a.address - entry->start;
    a.first_frame = static_cast<uint32_t>(result->frames.size());
    a.frame_count = 1;
    a.module = module_name_;
    a.module_offset = a.address;
    result->frames.push_back(frame);
  }
}

}  // namespace strata
