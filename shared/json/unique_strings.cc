#include "shared/json/unique_strings.h"

#include <cstring>

namespace strata {


uint32_t UniqueStrings::Index(std::string_view s) {
  const uint32_t next = static_cast<uint32_t>(strings_.size());
  const uint32_t index =
      index_.FindOrInsert(json_internal::HashBytes(s.data(), s.size()), next,
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
