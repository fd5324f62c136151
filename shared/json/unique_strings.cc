#include "shared/json/unique_strings.h"

#include <cstring>

namespace strata {

namespace {

// Most strings looked up are short (marker names, payload keys, types): a word at a time,
// inline, instead of std::hash's out-of-line Murmur.
inline uint64_t StringHash(std::string_view s) {
  const char* data = s.data();
  const size_t size = s.size();
  uint64_t h = json_internal::MixHash(size + 0x9e3779b97f4a7c15ULL);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    h = (h ^ word) * 0xff51afd7ed558ccdULL;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  if (size > i) std::memcpy(&tail, data + i, size - i);  // data may be null when empty.
  return json_internal::MixHash(h ^ tail);
}

}  // namespace

uint32_t UniqueStrings::Index(std::string_view s) {
  const uint32_t next = static_cast<uint32_t>(strings_.size());
  const uint32_t index =
      index_.FindOrInsert(StringHash(s), next,
                          [&](uint32_t i) { return std::string_view(strings_[i]) == s; });
  if (index == next) strings_.emplace_back(s);
  return index;
}

void UniqueStrings::WriteArray(JsonWriter& writer) const {
  writer.StartArray();
  for (const std::string& s : strings_) writer.String(s);
  writer.EndArray();
}

}  // namespace strata
