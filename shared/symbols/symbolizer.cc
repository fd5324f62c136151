#include "shared/symbols/symbolizer.h"

#include <cstdio>

namespace strata {

std::string UnwindFunctionDisplayName(std::string_view module, uint64_t start) {
  char hex[24];
  snprintf(hex, sizeof(hex), "!0x%llx", static_cast<unsigned long long>(start));
  return std::string(module.empty() ? std::string_view("?") : module) + hex;
}

std::string SymbolizeResult::NameOf(size_t index) const {
  const SymbolizedAddress& a = addresses[index];
  if (a.frame_count > 0) {
    const std::string_view function = frames[a.first_frame + a.frame_count - 1].function;
    return std::string(function);
  }
  if (a.module.empty()) return std::string();
  std::string name(a.module);
  name += "+0x";
  char hex[17];
  int at = 16;
  hex[at] = '\0';
  uint64_t value = a.module_offset;
  do {
    hex[--at] = "0123456789abcdef"[value & 0xF];
    value >>= 4;
  } while (value != 0);
  name += &hex[at];
  return name;
}

}  // namespace strata
