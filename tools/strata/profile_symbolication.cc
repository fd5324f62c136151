#include "tools/strata/profile_symbolication.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "shared/json/gecko_profile_writer.h"
#include "shared/json/location.h"
#include "shared/symbols/perf_map.h"
#include "tools/strata/profile_json.h"
#include "tools/strata/progress.h"

namespace strata {
namespace cli {

using rapidjson::SizeType;
using rapidjson::Value;
using Allocator = rapidjson::Document::AllocatorType;
using namespace profile_json;  // NOLINT: the table accessors.

bool HasRawAddresses(const Value& profile) {
  bool found = false;
  ForEachProcess(profile, [&](const Value& process) {
    for (const Value& thread : process["threads"].GetArray()) {
      if (found || !thread.IsObject() || !thread.HasMember("stringTable") || !IsTable(thread, "frameTable")) continue;
      const Value& strings = thread["stringTable"];
      const int location = Column(thread["frameTable"], "location");
      for (const Value& row : thread["frameTable"]["data"].GetArray()) {
        if (location < 0 || !row.IsArray() || static_cast<SizeType>(location) >= row.Size()) continue;
        const Value& l = row[static_cast<SizeType>(location)];
        if (l.IsUint() && l.GetUint() < strings.Size() && strings[l.GetUint()].IsString() &&
            ClassifyLocation(strings[l.GetUint()].GetString()) == LocationKind::kAddress) {
          found = true;
          break;
        }
      }
    }
  });
  return found;
}

bool HasAddressesToSymbolicate(const Value& profile) {
  if (HasRawAddresses(profile)) return true;
  bool found = false;
  ForEachProcess(profile, [&](const Value& process) {
    for (const Value& thread : process["threads"].GetArray()) {
      if (found || !thread.IsObject() || !IsTable(thread, "frameTable")) continue;
      const Value& table = thread["frameTable"];
      const int address = Column(table, "address");
      const int lib = Column(table, "lib");
      const int depth = Column(table, "inlineDepth");
      if (address < 0 || lib < 0) continue;
      for (const Value& row : table["data"].GetArray()) {
        if (!row.IsArray()) continue;
        auto cell = [&](int column) -> const Value* {
          return column >= 0 && static_cast<SizeType>(column) < row.Size() ? &row[static_cast<SizeType>(column)] : nullptr;
        };
        const Value* a = cell(address);
        const Value* l = cell(lib);
        const Value* d = cell(depth);
        if (a && a->IsUint64() && l && l->IsUint() && (d == nullptr || d->IsNull())) {
          found = true;
          break;
        }
      }
    }
  });
  return found;
}

std::vector<SharedLibrary> ReadLibs(const Value& process_profile) {
  std::vector<SharedLibrary> libs;
  if (!process_profile.HasMember("libs") || !process_profile["libs"].IsArray()) return libs;
  auto text = [](const Value& lib, const char* key) {
    return lib.HasMember(key) && lib[key].IsString() ? std::string(lib[key].GetString()) : std::string();
  };
  for (const Value& lib : process_profile["libs"].GetArray()) {
    if (!lib.IsObject() || !lib.HasMember("start") || !lib["start"].IsUint64() || !lib.HasMember("end") ||
        !lib["end"].IsUint64()) {
      continue;
    }
    SharedLibrary l;
    l.start = lib["start"].GetUint64();
    l.end = lib["end"].GetUint64();
    l.offset = lib.HasMember("offset") && lib["offset"].IsUint64() ? lib["offset"].GetUint64() : 0;
    l.name = text(lib, "name");
    l.path = text(lib, "path");
    l.debug_name = text(lib, "debugName");
    l.debug_path = text(lib, "debugPath");
    l.breakpad_id = text(lib, "breakpadId");
    l.code_id = text(lib, "codeId");
    l.arch = text(lib, "arch");
    libs.push_back(std::move(l));
  }
  return libs;
}

namespace {

// A process's `libs` entry by its index in the file (frames' "lib" column refer to it);
// `valid` false for an entry without integer start/end/offset.
struct LibRange {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t bias = 0;  // start - offset: absolute = bias + lib-relative.
  bool valid = false;
};

std::vector<LibRange> ReadLibRanges(const Value& process_profile) {
  std::vector<LibRange> ranges;
  if (!process_profile.HasMember("libs") || !process_profile["libs"].IsArray()) return ranges;
  for (const Value& lib : process_profile["libs"].GetArray()) {
    LibRange r;
    if (lib.IsObject() && lib.HasMember("start") && lib["start"].IsUint64() && lib.HasMember("end") &&
        lib["end"].IsUint64() && lib.HasMember("offset") && lib["offset"].IsUint64() &&
        lib["offset"].GetUint64() <= lib["start"].GetUint64()) {
      r.start = lib["start"].GetUint64();
      r.end = lib["end"].GetUint64();
      r.bias = r.start - lib["offset"].GetUint64();
      r.valid = true;
    }
    ranges.push_back(r);
  }
  return ranges;
}

// Finds the lib holding an address (libs in any order; the first match wins).
class LibFinder {
 public:
  explicit LibFinder(const std::vector<LibRange>& libs) : libs_(libs) {
    for (size_t i = 0; i < libs.size(); ++i) {
      if (libs[i].valid) by_start_.push_back(i);
    }
    std::stable_sort(by_start_.begin(), by_start_.end(),
                     [&](size_t a, size_t b) { return libs_[a].start < libs_[b].start; });
  }
  // The index of the lib holding `address`, or -1.
  int64_t Find(uint64_t address) const {
    auto after = std::upper_bound(by_start_.begin(), by_start_.end(), address,
                                  [&](uint64_t a, size_t i) { return a < libs_[i].start; });
    while (after != by_start_.begin()) {
      --after;
      if (address < libs_[*after].end) return static_cast<int64_t>(*after);
      if (libs_[*after].start < address) break;  // Sorted and non-overlapping in practice.
    }
    return -1;
  }

 private:
  const std::vector<LibRange>& libs_;
  std::vector<size_t> by_start_;
};

// Symbolicates one thread of a process with `symbolizer`.
class ThreadSymbolicator {
 public:
  ThreadSymbolicator(Value& thread, Allocator& allocator, Symbolizer& symbolizer, const std::vector<LibRange>& libs,
                     const LibFinder& lib_finder, SymbolicateStats* stats)
      : thread_(thread), allocator_(allocator), symbolizer_(symbolizer), libs_(libs), lib_finder_(lib_finder),
        stats_(stats) {}

  void Run() {
    if (!thread_.IsObject() || !thread_.HasMember("stringTable") || !thread_["stringTable"].IsArray() ||
        !IsTable(thread_, "frameTable") || !IsTable(thread_, "stackTable")) {
      return;
    }
    Value& strings = thread_["stringTable"];
    Value& frame_table = thread_["frameTable"];
    Value& frames = frame_table["data"];
    location_ = Column(frame_table, "location");
    if (location_ < 0) return;

    // Which frames are to be looked up: raw addresses ("0x..."), and frames named at capture
    // that kept their address (address and lib columns, no inlineDepth: ELF names only).
    address_column_ = Column(frame_table, "address");
    lib_column_ = Column(frame_table, "lib");
    inline_column_ = Column(frame_table, "inlineDepth");
    const SizeType frame_count = frames.Size();
    std::vector<uint64_t> frame_address(frame_count, 0);
    std::vector<bool> is_address(frame_count, false);  // To be looked up.
    std::vector<bool> is_raw(frame_count, false);      // ... and written as "0x...".
    size_t address_frames = 0;
    for (SizeType i = 0; i < frame_count; ++i) {
      Value* l = Cell(frames[i], location_);
      if (l == nullptr || !l->IsUint() || l->GetUint() >= strings.Size() || !strings[l->GetUint()].IsString()) continue;
      const char* s = strings[l->GetUint()].GetString();
      if (ClassifyLocation(s) == LocationKind::kAddress) {
        char* end = nullptr;
        frame_address[i] = std::strtoull(s + 2, &end, 16);
        is_address[i] = is_raw[i] = end != s + 2;
      } else {
        const Value* relative = Cell(frames[i], address_column_);
        const Value* lib = Cell(frames[i], lib_column_);
        const Value* depth = Cell(frames[i], inline_column_);
        if (relative && relative->IsUint64() && lib && lib->IsUint() && lib->GetUint() < libs_.size() &&
            libs_[lib->GetUint()].valid && (depth == nullptr || depth->IsNull())) {
          frame_address[i] = libs_[lib->GetUint()].bias + relative->GetUint64();
          is_address[i] = true;
        }
      }
      address_frames += is_address[i];
    }
    if (address_frames == 0) return;
    // Label frames' push sites (docs/symbols.md, "Labels"): where each was pushed.
    const int push_column = Column(frame_table, "pushSite");
    std::vector<uint64_t> push_site(frame_count, 0);
    for (SizeType i = 0; push_column >= 0 && i < frame_count; ++i) {
      const Value* site = Cell(frames[i], push_column);
      if (!is_address[i] && site && site->IsUint64()) push_site[i] = site->GetUint64();
    }
    stats_->address_frames += address_frames;

    Value& stack_table = thread_["stackTable"];
    Value& stacks = stack_table["data"];
    const int prefix_column = Column(stack_table, "prefix");
    const int frame_column = Column(stack_table, "frame");
    const SizeType stack_count = stacks.Size();
    std::vector<int64_t> prefix(stack_count, -1);
    std::vector<int64_t> frame(stack_count, -1);
    std::vector<bool> caller(stack_count, false);
    std::vector<bool> leaf(stack_count, false);
    for (SizeType i = 0; i < stack_count; ++i) {
      Value* p = Cell(stacks[i], prefix_column);
      Value* f = Cell(stacks[i], frame_column);
      if (p != nullptr && p->IsUint() && p->GetUint() < i) prefix[i] = p->GetUint();
      if (f != nullptr && f->IsUint() && f->GetUint() < frame_count) frame[i] = f->GetUint();
    }
    ForEachStackReference([&](Value& cell) {
      if (cell.IsUint() && cell.GetUint() < stack_count) leaf[cell.GetUint()] = true;
    });
    // A native frame is a caller when a native frame follows it in some stack (looked up at
    // its return address - 1), a leaf when a sample's stack ends in it or in labels or script
    // frames after it (looked up at its pc; labels pushed in the leaf's own function follow
    // it); both when both. Children come after their prefix: one pass from the end.
    for (SizeType i = stack_count; i-- > 0;) {
      if (prefix[i] < 0) continue;
      const size_t p = static_cast<size_t>(prefix[i]);
      const bool native = frame[i] >= 0 && is_address[static_cast<size_t>(frame[i])];
      if (native || caller[i]) caller[p] = true;
      if (leaf[i] && frame[i] >= 0 && !native) leaf[p] = true;
    }
    for (SizeType i = 0; i < stack_count; ++i) {
      if (!caller[i]) leaf[i] = true;  // Unused or leaf-only: keep it complete.
    }

    // Look every address up once per role.
    std::vector<uint64_t> lookups;
    std::vector<bool> raw_lookup;  // Wanted by a "0x..." frame.
    std::unordered_map<uint64_t, size_t> lookup_index;
    auto want = [&](uint64_t address, bool raw) {
      auto [it, inserted] = lookup_index.emplace(address, lookups.size());
      if (inserted) {
        lookups.push_back(address);
        raw_lookup.push_back(false);
      }
      if (raw) raw_lookup[it->second] = true;
    };
    for (SizeType i = 0; i < stack_count; ++i) {
      if (frame[i] < 0 || !is_address[static_cast<size_t>(frame[i])]) continue;
      const uint64_t address = frame_address[static_cast<size_t>(frame[i])];
      const bool raw = is_raw[static_cast<size_t>(frame[i])];
      if (caller[i]) want(CallerAddress(address), raw);
      if (leaf[i]) want(address, raw);
    }
    for (SizeType i = 0; i < stack_count; ++i) {
      if (frame[i] >= 0 && push_site[static_cast<size_t>(frame[i])] != 0) {
        want(push_site[static_cast<size_t>(frame[i])], false);
      }
    }
    SymbolizeResult result;
    symbolizer_.Symbolize(lookups, &result);
    stats_->lookups += lookups.size();
    // Nothing to add (no function found, no raw address placed in a module): the thread stays
    // as it is, so that symbolicating again changes nothing.
    bool changes = false;
    for (size_t k = 0; k < lookups.size() && !changes; ++k) {
      changes = !result.FramesOf(k).empty() || (raw_lookup[k] && !result.addresses[k].module.empty());
    }
    if (!changes) return;

    // The new frame table: every non-address frame as it was, then the symbolicated ones.
    frame_columns_ = 0;
    for (auto& m : frame_table["schema"].GetObject()) {
      if (m.value.IsInt()) frame_columns_ = std::max(frame_columns_, m.value.GetInt() + 1);
    }
    // The address, lib and inlineDepth columns, added to the schema when missing.
    auto ensure_column = [&](const char* name, int* column) {
      if (*column >= 0) return;
      *column = frame_columns_++;
      frame_table["schema"].AddMember(Value(name, allocator_), Value(*column), allocator_);
    };
    ensure_column("address", &address_column_);
    ensure_column("lib", &lib_column_);
    ensure_column("inlineDepth", &inline_column_);
    line_column_ = Column(frame_table, "line");
    relevant_column_ = Column(frame_table, "relevantForJS");
    window_column_ = Column(frame_table, "innerWindowID");
    category_column_ = Column(frame_table, "category");
    subcategory_column_ = Column(frame_table, "subcategory");
    Value new_frames(rapidjson::kArrayType);
    new_frames.Reserve(frame_count, allocator_);
    std::vector<int64_t> kept_frame(frame_count, -1);
    for (SizeType i = 0; i < frame_count; ++i) {
      if (is_address[i]) continue;
      kept_frame[i] = new_frames.Size();
      new_frames.PushBack(std::move(frames[i]), allocator_);
    }
    // Chains per (lookup, category of the old frame): new frame indexes, outermost first.
    std::unordered_map<uint64_t, std::vector<uint32_t>> chains;
    auto chain_for = [&](size_t lookup, SizeType old_frame, uint64_t original) -> const std::vector<uint32_t>& {
      const uint64_t key = (static_cast<uint64_t>(old_frame) << 32) ^ lookup;
      auto it = chains.find(key);
      if (it != chains.end()) return it->second;
      std::vector<uint32_t>& chain = chains[key];
      const Value& old_row = frames[old_frame];  // Moved-from only for non-address frames.
      const SymbolizedAddress& a = result.addresses[lookup];
      const auto symbolized = result.FramesOf(lookup);
      // Where the frame was sampled: its lib and lib-relative raw address, kept on every frame
      // made for it.
      std::optional<std::pair<uint64_t, uint32_t>> native;
      if (const int64_t lib = lib_finder_.Find(a.address); lib >= 0) {
        native.emplace(original - libs_[static_cast<size_t>(lib)].bias, static_cast<uint32_t>(lib));
      }
      if (symbolized.empty() && !is_raw[old_frame]) {
        // A frame named at capture that DWARF does not improve (its file is gone, say): kept
        // as it was, address included, for a later try.
        chain.push_back(new_frames.Size());
        new_frames.PushBack(Value(old_row, allocator_), allocator_);
        return chain;
      }
      if (symbolized.empty()) {
        std::string location;
        if (a.module.empty()) {
          location = AddressLocation(original);
        } else {
          char hex[32];
          std::snprintf(hex, sizeof(hex), "+0x%llx", static_cast<unsigned long long>(a.module_offset));
          location = NativeSymbolLocation(std::string(a.module) + hex, a.module);
        }
        chain.push_back(AddFrame(new_frames, strings, location, 0, old_row, native, std::nullopt));
        return chain;
      }
      // Outermost first; inlineDepth 0 is the function the code belongs to (its ELF symbol),
      // 1, 2, ... the functions inlined into it.
      for (size_t j = symbolized.size(); j-- > 0;) {
        const SymbolizedFrame& f = symbolized[j];
        std::string location = NativeSymbolLocation(f.function, a.module.empty() ? std::string_view("?") : a.module);
        if (!f.file.empty() && f.line > 0) {
          std::string with_file = location + " (" + std::string(f.file) + ":" + std::to_string(f.line) + ")";
          if (ClassifyLocation(with_file) == LocationKind::kNative) location = std::move(with_file);
        }
        chain.push_back(AddFrame(new_frames, strings, location, f.line, old_row, native,
                                 static_cast<uint32_t>(symbolized.size() - 1 - j)));
      }
      return chain;
    };

    // The new stack table, parents first; identical (prefix, frame) pairs shared.
    Value new_stacks(rapidjson::kArrayType);
    new_stacks.Reserve(stack_count, allocator_);
    std::unordered_map<uint64_t, uint32_t> stack_ids;
    const int stack_columns = std::max(prefix_column, frame_column) + 1;
    auto push = [&](int64_t parent, uint32_t new_frame) -> int64_t {
      const uint64_t key = (static_cast<uint64_t>(parent + 1) << 32) | new_frame;
      auto [it, inserted] = stack_ids.emplace(key, new_stacks.Size());
      if (inserted) {
        Value row(rapidjson::kArrayType);
        for (int c = 0; c < stack_columns; ++c) row.PushBack(Value(), allocator_);
        if (parent >= 0) row[static_cast<SizeType>(prefix_column)].SetUint64(static_cast<uint64_t>(parent));
        row[static_cast<SizeType>(frame_column)].SetUint(new_frame);
        new_stacks.PushBack(std::move(row), allocator_);
      }
      return it->second;
    };
    // An address frame's chain is pushed when something after it needs it (materialize): a
    // label with a push site goes between the chain's frames instead, right below the
    // innermost function of the chain that holds its push site (LabelDepth), and the rest of
    // the chain follows it (docs/symbols.md, "Labels"). Each stack has a state per role of the
    // address frame above it (caller: a native frame follows; leaf: the sample ends here).
    constexpr int kCaller = 0;
    constexpr int kLeaf = 1;
    std::vector<std::array<PendingChain, 2>> pending(stack_count);
    std::vector<std::array<int64_t, 2>> made(stack_count, {kNotMade, kNotMade});
    std::vector<int64_t> as_leaf(stack_count, -1);
    auto materialize = [&](int64_t stack, int role) -> int64_t {
      if (stack < 0) return -1;
      const size_t i = static_cast<size_t>(stack);
      if (!pending[i][role].valid) role = 1 - role;
      const PendingChain& state = pending[i][role];
      if (!state.valid) return -1;
      int64_t& made_stack = made[i][role];
      if (made_stack == kNotMade) {
        int64_t s = state.base;
        if (state.chain) {
          for (size_t j = state.from; j < state.chain->size(); ++j) s = push(s, (*state.chain)[j]);
        }
        made_stack = s;
      }
      return made_stack;
    };
    for (SizeType i = 0; i < stack_count; ++i) {
      if (frame[i] < 0) continue;  // As before: what follows starts at the root.
      const size_t f = static_cast<size_t>(frame[i]);
      const int64_t p = prefix[i];
      if (is_address[f]) {
        const int64_t parent = materialize(p, kCaller);
        const uint64_t address = frame_address[f];
        if (caller[i]) {
          const size_t lookup = lookup_index[CallerAddress(address)];
          pending[i][kCaller] =
              PendingChain{parent, &chain_for(lookup, static_cast<SizeType>(f), address), 0, lookup, true};
        }
        if (leaf[i]) {
          const size_t lookup = lookup_index[address];
          pending[i][kLeaf] =
              PendingChain{parent, &chain_for(lookup, static_cast<SizeType>(f), address), 0, lookup, true};
          as_leaf[i] = materialize(i, kLeaf);
        }
        continue;
      }
      const uint32_t kept = static_cast<uint32_t>(kept_frame[f]);
      for (int role : {kCaller, kLeaf}) {
        const PendingChain* above = nullptr;
        if (p >= 0) {
          above = &pending[static_cast<size_t>(p)][role];
          if (!above->valid) above = &pending[static_cast<size_t>(p)][1 - role];
        }
        if (push_site[f] != 0 && above && above->valid && above->chain) {
          const size_t depth = std::max(
              above->from,
              LabelDepth(result, above->lookup, above->chain->size(), lookup_index[push_site[f]]));
          int64_t s = above->base;
          for (size_t j = above->from; j < depth; ++j) s = push(s, (*above->chain)[j]);
          pending[i][role] = PendingChain{push(s, kept), above->chain, depth, above->lookup, true};
        } else {
          pending[i][role] = PendingChain{push(materialize(p, role), kept), nullptr, 0, 0, true};
        }
      }
      as_leaf[i] = materialize(i, kLeaf);
    }

    ForEachStackReference([&](Value& cell) {
      if (cell.IsUint() && cell.GetUint() < stack_count && as_leaf[cell.GetUint()] >= 0) {
        cell.SetUint64(static_cast<uint64_t>(as_leaf[cell.GetUint()]));
      } else {
        cell.SetNull();
      }
    });
    frame_table["data"] = std::move(new_frames);
    stack_table["data"] = std::move(new_stacks);

    for (size_t i = 0; i < result.addresses.size(); ++i) {
      const auto f = result.FramesOf(i);
      if (f.empty()) continue;
      ++stats_->named;
      stats_->inline_frames += f.size() - 1;
      if (f[0].line > 0) ++stats_->with_line;
    }
  }

 private:
  // An address frame's chain of new frames (outermost first) not pushed yet: `base` is the new
  // stack the frames chain[from...] go on (chain null: nothing pending, `base` is the stack).
  struct PendingChain {
    int64_t base = -1;
    const std::vector<uint32_t>* chain = nullptr;
    size_t from = 0;
    size_t lookup = 0;  // The chain's lookup (its functions are result.FramesOf(lookup)).
    bool valid = false;
  };
  static constexpr int64_t kNotMade = -2;

  // How many frames of the chain of `chain_lookup` (chain_size frames, outermost first) go
  // above a label pushed at `push_lookup`: the functions the two chains share from the
  // outermost one, in the same module (the label is in the innermost function that holds its
  // push site). All of them (the label below every inlined frame, as before push sites) when
  // the push site is in another function or unknown.
  static size_t LabelDepth(const SymbolizeResult& result, size_t chain_lookup, size_t chain_size,
                           size_t push_lookup) {
    const auto chain = result.FramesOf(chain_lookup);
    const auto pushed = result.FramesOf(push_lookup);
    if (chain.size() != chain_size || pushed.empty() ||
        result.addresses[chain_lookup].module != result.addresses[push_lookup].module) {
      return chain_size;
    }
    // FramesOf is innermost first. The push site's own inlined helpers (the innermost frames
    // of its chain) are not where the label lives: a sample taken inside the push has them in
    // its chain too, and the label goes above them, under the function that entered it.
    size_t helpers = 0;
    while (helpers < pushed.size() && IsLabelPushHelper(pushed[helpers].function)) ++helpers;
    const size_t scope = pushed.size() - helpers;
    size_t shared = 0;
    while (shared < chain.size() && shared < scope &&
           chain[chain.size() - 1 - shared].function == pushed[pushed.size() - 1 - shared].function) {
      ++shared;
    }
    return shared == 0 ? chain_size : shared;
  }

  // The functions of base/labels.h that a label's push inlines into the program's code.
  static bool IsLabelPushHelper(std::string_view function) {
    for (std::string_view helper : {"strata::AutoLabel::", "strata::ProfilingStack::"}) {
      if (function.substr(0, helper.size()) == helper) return true;
    }
    return false;
  }

  // Calls fn(cell) for every stack index in samples and marker backtraces.
  template <typename Fn>
  void ForEachStackReference(const Fn& fn) {
    if (IsTable(thread_, "samples")) {
      const int column = Column(thread_["samples"], "stack");
      for (Value& row : thread_["samples"]["data"].GetArray()) {
        if (Value* cell = Cell(row, column)) {
          if (!cell->IsNull()) fn(*cell);
        }
      }
    }
    if (IsTable(thread_, "markers")) {
      const int data = Column(thread_["markers"], "data");
      for (Value& row : thread_["markers"]["data"].GetArray()) {
        Value* payload = Cell(row, data);
        if (payload == nullptr || !payload->IsObject() || !payload->HasMember("stack")) continue;
        Value& stack = (*payload)["stack"];
        if (!stack.IsObject() || !IsTable(stack, "samples")) continue;
        const int column = Column(stack["samples"], "stack");
        for (Value& sample : stack["samples"]["data"].GetArray()) {
          if (Value* cell = Cell(sample, column)) {
            if (!cell->IsNull()) fn(*cell);
          }
        }
      }
    }
  }

  uint32_t StringIndex(Value& strings, const std::string& s) {
    auto [it, inserted] = string_ids_.emplace(s, strings.Size());
    if (inserted) strings.PushBack(Value(s.c_str(), static_cast<SizeType>(s.size()), allocator_), allocator_);
    return it->second;
  }

  uint32_t AddFrame(Value& new_frames, Value& strings, const std::string& location, uint32_t line,
                    const Value& old_row, const std::optional<std::pair<uint64_t, uint32_t>>& native,
                    std::optional<uint32_t> inline_depth) {
    Value row(rapidjson::kArrayType);
    for (int c = 0; c < frame_columns_; ++c) row.PushBack(Value(), allocator_);
    auto set = [&](int column, Value value) {
      if (column >= 0) row[static_cast<SizeType>(column)] = std::move(value);
    };
    auto copy = [&](int column) {
      if (column >= 0 && old_row.IsArray() && static_cast<SizeType>(column) < old_row.Size()) {
        row[static_cast<SizeType>(column)] = Value(old_row[static_cast<SizeType>(column)], allocator_);
      }
    };
    set(location_, Value(StringIndex(strings, location)));
    set(relevant_column_, Value(false));
    set(window_column_, Value(0));
    if (line > 0) set(line_column_, Value(line));
    if (native) {
      set(address_column_, Value(static_cast<uint64_t>(native->first)));
      set(lib_column_, Value(native->second));
    }
    if (inline_depth) set(inline_column_, Value(*inline_depth));
    copy(category_column_);
    copy(subcategory_column_);
    const uint32_t index = new_frames.Size();
    new_frames.PushBack(std::move(row), allocator_);
    return index;
  }

  Value& thread_;
  Allocator& allocator_;
  Symbolizer& symbolizer_;
  const std::vector<LibRange>& libs_;
  const LibFinder& lib_finder_;
  SymbolicateStats* stats_;
  int location_ = -1;
  int address_column_ = -1;
  int lib_column_ = -1;
  int inline_column_ = -1;
  int frame_columns_ = 0;
  int line_column_ = -1;
  int relevant_column_ = -1;
  int window_column_ = -1;
  int category_column_ = -1;
  int subcategory_column_ = -1;
  std::unordered_map<std::string, uint32_t> string_ids_;
};

}  // namespace

void SymbolicateProfile(rapidjson::Document* profile, const SymbolizerFactory& make_symbolizer,
                        SymbolicateStats* stats) {
  Allocator& allocator = profile->GetAllocator();
  size_t thread_total = 0;
  ForEachProcess(static_cast<Value&>(*profile), [&](Value& process) { thread_total += process["threads"].Size(); });
  Progress progress("symbolicate", thread_total);
  ForEachProcess(static_cast<Value&>(*profile), [&](Value& process) {
    std::unique_ptr<Symbolizer> symbolizer;
    const size_t before = stats->address_frames;
    const std::vector<LibRange> libs = ReadLibRanges(process);
    const LibFinder lib_finder(libs);
    for (Value& thread : process["threads"].GetArray()) {
      if (!symbolizer) {
        symbolizer = make_symbolizer(ReadLibs(process));
        // JIT-compiled code the process's runtime named in its perf map (docs/symbols.md).
        if (thread.IsObject() && thread.HasMember("pid") && thread["pid"].IsInt64()) {
          const int64_t pid = thread["pid"].GetInt64();
          // And its jitdump (jit-<pid>.dump), where the runtime wrote one.
          PerfMap map = PerfMap::ForProcess(pid);
          if (!map.empty()) {
            symbolizer = std::make_unique<PerfMapSymbolizer>(std::move(symbolizer), std::move(map),
                                                             PerfMap::ModuleNameFor(pid));
          }
        }
      }
      ThreadSymbolicator(thread, allocator, *symbolizer, libs, lib_finder, stats).Run();
      progress.Advance(1);
    }
    if (stats->address_frames > before) ++stats->processes;
    Value& meta = process["meta"];
    if (meta.HasMember("presymbolicated")) {
      meta["presymbolicated"].SetBool(true);
    } else {
      meta.AddMember("presymbolicated", true, allocator);
    }
  });
}

}  // namespace cli
}  // namespace strata
