#include "shared/symbols/perf_map.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
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

}  // namespace

std::string PerfMap::PathFor(int64_t pid) { return "/tmp/perf-" + std::to_string(pid) + ".map"; }

PerfMap PerfMap::Read(const std::string& path) {
  PerfMap map;
  std::ifstream in(path);
  if (!in) return map;
  // Every line in file order; a later line replaces what an earlier one said of its range.
  std::vector<std::pair<size_t, Entry>> lines;  // (line number, entry)
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    const char* text = line.c_str();
    Entry entry;
    if (!ParseHex(text, &entry.start) || *text != ' ') continue;
    ++text;
    if (!ParseHex(text, &entry.size) || *text != ' ' || entry.size == 0) continue;
    entry.name = std::string(text + 1);
    if (entry.name.empty()) continue;
    lines.emplace_back(number++, std::move(entry));
  }
  // Latest first at each start; then sweep by start, dropping what a later line overlapped.
  std::sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) {
    return a.second.start != b.second.start ? a.second.start < b.second.start : a.first > b.first;
  });
  std::vector<std::pair<size_t, Entry>> kept;
  for (auto& candidate : lines) {
    if (!kept.empty()) {
      auto& previous = kept.back();
      const uint64_t previous_end = previous.second.start + previous.second.size;
      if (candidate.second.start < previous_end) {
        if (candidate.first < previous.first) continue;  // Older, overlapped: gone.
        previous.second.size = candidate.second.start - previous.second.start;  // Newer wins.
        if (previous.second.size == 0) kept.pop_back();
      }
    }
    kept.push_back(std::move(candidate));
  }
  map.entries_.reserve(kept.size());
  for (auto& [unused, entry] : kept) map.entries_.push_back(std::move(entry));
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
