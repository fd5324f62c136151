#include "shared/json/unique_stacks.h"

#include <cassert>
#include <string>

#include "shared/json/location.h"

namespace strata {
namespace {

using json_internal::MixHash;

inline uint64_t Mix(uint64_t h, uint64_t v) { return MixHash(h ^ (v + 0x9e3779b97f4a7c15ULL)); }

uint32_t OrNull(std::optional<uint32_t> v, uint32_t null_value) {
  return v ? *v : null_value;
}

}  // namespace

uint64_t UniqueStacks::Hash(const FrameKey& k) {
  uint64_t h = MixHash(k.location);
  h = Mix(h, (uint64_t{k.line} << 32) | k.column);
  h = Mix(h, (uint64_t{k.category} << 32) | k.subcategory);
  h = Mix(h, (uint64_t{k.implementation} << 1) | (k.relevant_for_js ? 1 : 0));
  h = Mix(h, k.relative ^ (uint64_t{k.lib} << 48));
  h = Mix(h, k.push_site);
  return Mix(h, k.inner_window_id);
}

uint32_t UniqueStacks::FrameForKey(const FrameKey& key) {
  const uint32_t next = static_cast<uint32_t>(frames_.size());
  const uint32_t index =
      frame_index_.FindOrInsert(Hash(key), next, [&](uint32_t i) { return frames_[i] == key; });
  if (index == next) {
    frames_.push_back(key);
    has_native_addresses_ = has_native_addresses_ || key.lib != kNull;
    has_push_sites_ = has_push_sites_ || key.push_site != 0;
  }
  return index;
}

uint32_t UniqueStacks::Frame(const FrameInfo& frame) {
  FrameKey key;
  key.location = strings_.Index(frame.location);
  key.implementation = frame.implementation.empty() ? kNull : strings_.Index(frame.implementation);
  key.line = OrNull(frame.line, kNull);
  key.column = OrNull(frame.column, kNull);
  key.category = OrNull(frame.category, kNull);
  // A subcategory means nothing without a category.
  key.subcategory = frame.category ? OrNull(frame.subcategory, kNull) : kNull;
  key.inner_window_id = frame.inner_window_id;
  key.relevant_for_js = frame.relevant_for_js;
  key.lib = frame.native ? frame.native->lib : kNull;
  key.relative = frame.native ? frame.native->relative : 0;
  key.push_site = frame.push_site;
  return FrameForKey(key);
}

uint32_t UniqueStacks::AddressFrame(uint64_t address, std::optional<uint32_t> category,
                                    std::optional<uint32_t> subcategory) {
  const uint32_t cat = OrNull(category, kNull);
  const uint32_t sub = category ? OrNull(subcategory, kNull) : kNull;
  const uint32_t next = static_cast<uint32_t>(addresses_.size());
  const uint32_t entry = address_index_.FindOrInsert(
      Mix(MixHash(address), (uint64_t{cat} << 32) | sub), next, [&](uint32_t i) {
        const AddressEntry& e = addresses_[i];
        return e.address == address && e.category == cat && e.subcategory == sub;
      });
  if (entry != next) return addresses_[entry].frame;
  std::string location = AddressLocation(address);
  FrameInfo info;
  info.location = location;
  info.category = category;
  info.subcategory = subcategory;
  const uint32_t frame = Frame(info);
  addresses_.push_back(AddressEntry{address, cat, sub, frame});
  return frame;
}

uint32_t UniqueStacks::NativeSymbolFrame(std::string_view name, std::string_view library,
                                         std::optional<uint32_t> category,
                                         std::optional<uint32_t> subcategory,
                                         std::optional<uint32_t> line,
                                         std::optional<NativeAddress> native) {
  std::string location = NativeSymbolLocation(name, library);
  FrameInfo info;
  info.location = location;
  info.native = native;
  info.category = category;
  info.subcategory = subcategory;
  info.line = line;
  return Frame(info);
}

uint32_t UniqueStacks::LabelFrame(std::string_view label, uint32_t category,
                                  uint32_t subcategory, bool relevant_for_js,
                                  std::optional<uint32_t> line, uint64_t push_site) {
  FrameInfo info;
  info.push_site = push_site;
  std::string adjusted;
  if (ClassifyLocation(label) == LocationKind::kLabel) {
    info.location = label;
  } else {
    adjusted = LabelLocation(label);
    info.location = adjusted;
  }
  info.category = category;
  info.subcategory = subcategory;
  info.relevant_for_js = relevant_for_js;
  info.line = line;
  return Frame(info);
}

uint32_t UniqueStacks::Stack(std::optional<uint32_t> prefix, uint32_t frame) {
  assert(!prefix || *prefix < stacks_.size());
  assert(frame < frames_.size());
  uint32_t p = prefix && *prefix < stacks_.size() ? *prefix : kNull;
  // kNull + 1 wraps to 0: roots and stacks with prefix 0 stay distinct (prefix 0 -> 1).
  const uint64_t key = (uint64_t{static_cast<uint32_t>(p + 1)} << 32) | frame;
  const uint32_t next = static_cast<uint32_t>(stacks_.size());
  const uint32_t index = stack_index_.FindOrInsert(MixHash(key), next, [&](uint32_t i) {
    return stacks_[i].prefix == p && stacks_[i].frame == frame;
  });
  if (index == next) stacks_.push_back(StackEntry{p, frame});
  return index;
}

bool UniqueStacks::StackIs(uint32_t stack, const uint32_t* frames_root_first,
                           size_t count) const {
  // Leaf to root: the stack's chain must have exactly `count` links with these frames.
  for (size_t i = count; i-- > 0;) {
    if (stack == kNull || stack >= stacks_.size()) return false;
    const StackEntry& entry = stacks_[stack];
    if (entry.frame != frames_root_first[i]) return false;
    stack = entry.prefix;
  }
  return stack == kNull;
}

std::optional<uint32_t> UniqueStacks::PrefixOf(uint32_t stack) const {
  const uint32_t prefix = stacks_[stack].prefix;
  return prefix == kNull ? std::nullopt : std::optional<uint32_t>(prefix);
}

uint32_t UniqueStacks::FrameOf(uint32_t stack) const { return stacks_[stack].frame; }

std::optional<uint32_t> UniqueStacks::StackFromFrames(const uint32_t* frames_root_first,
                                                      size_t count) {
  if (count == 0) return std::nullopt;
  uint64_t hash = MixHash(count);
  for (size_t i = 0; i < count; ++i) hash = Mix(hash, frames_root_first[i]);
  const uint32_t next = static_cast<uint32_t>(paths_.size());
  const uint32_t path = path_index_.FindOrInsert(hash, next, [&](uint32_t p) {
    return paths_[p].depth == count && StackIs(paths_[p].stack, frames_root_first, count);
  });
  if (path != next) return paths_[path].stack;
  std::optional<uint32_t> stack;
  for (size_t i = 0; i < count; ++i) stack = Stack(stack, frames_root_first[i]);
  paths_.push_back(PathEntry{*stack, static_cast<uint32_t>(count)});
  return stack;
}

void UniqueStacks::WriteFrameTable(JsonWriter& w) const {
  const auto nullable = [&w](uint32_t v) {
    if (v == kNull) {
      w.Null();
    } else {
      w.Uint(v);
    }
  };
  w.StartObject();
  w.Key("schema");
  std::string schema =
      R"({"location":0,"relevantForJS":1,"innerWindowID":2,"implementation":3,"line":4,)"
      R"("column":5,"category":6,"subcategory":7)";
  if (has_native_addresses_) schema += R"(,"address":8,"lib":9)";
  if (has_push_sites_) schema += has_native_addresses_ ? R"(,"pushSite":10)" : R"(,"pushSite":8)";
  schema += "}";
  w.Splice(schema);
  w.StartArrayProperty("data");
  for (const FrameKey& f : frames_) {
    w.StartArray();
    w.Uint(f.location);
    w.Bool(f.relevant_for_js);
    w.Uint(f.inner_window_id);
    nullable(f.implementation);
    nullable(f.line);
    nullable(f.column);
    nullable(f.category);
    // A category with a null subcategory is read as subcategory 0 anyway; be explicit.
    if (f.category != kNull && f.subcategory == kNull) {
      w.Uint(0);
    } else {
      nullable(f.subcategory);
    }
    if (has_native_addresses_) {
      if (f.lib == kNull) {
        w.Null();
        w.Null();
      } else {
        w.Uint(f.relative);
        w.Uint(f.lib);
      }
    }
    if (has_push_sites_) {
      if (f.push_site == 0) {
        w.Null();
      } else {
        w.Uint(f.push_site);
      }
    }
    w.EndArray();
  }
  w.EndArray();
  w.EndObject();
}

void UniqueStacks::WriteStackTable(JsonWriter& w) const {
  w.StartObject();
  w.Key("schema");
  w.Splice(R"({"prefix":0,"frame":1})");
  w.StartArrayProperty("data");
  for (const StackEntry& s : stacks_) {
    w.StartArray();
    if (s.prefix == kNull) {
      w.Null();
    } else {
      w.Uint(s.prefix);
    }
    w.Uint(s.frame);
    w.EndArray();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace strata
