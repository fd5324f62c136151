// UniqueStrings: a thread's string table. Each distinct string gets the next index, in order
// of first use; the table is written as the thread's "stringTable" array.
//
// Thread safety: none (one per thread writer). Not async-signal-safe.
#ifndef STRATA_SHARED_JSON_UNIQUE_STRINGS_H_
#define STRATA_SHARED_JSON_UNIQUE_STRINGS_H_

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "shared/json/index_table.h"
#include "shared/json/json_writer.h"

namespace strata {

class UniqueStrings {
 public:
  UniqueStrings() = default;
  UniqueStrings(const UniqueStrings&) = delete;
  UniqueStrings& operator=(const UniqueStrings&) = delete;

  // The index of `s`, added at the end if new. No allocation when `s` is already known.
  uint32_t Index(std::string_view s);
  // Index(s) written as a JSON integer.
  void WriteIndex(JsonWriter& writer, std::string_view s) { writer.Uint(Index(s)); }

  size_t size() const { return strings_.size(); }
  // The string at `index` (< size()).
  std::string_view Get(uint32_t index) const { return strings_[index]; }

  // Writes the JSON array of all strings, in index order.
  void WriteArray(JsonWriter& writer) const;

 private:
  std::deque<std::string> strings_;
  json_internal::IndexTable index_;
};

}  // namespace strata

#endif  // STRATA_SHARED_JSON_UNIQUE_STRINGS_H_
