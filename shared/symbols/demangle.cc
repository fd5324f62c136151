#include "shared/symbols/demangle.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace strata {
namespace {

bool LooksMangled(const char* name) { return name[0] == '_' && name[1] == 'Z'; }

}  // namespace

Demangler::~Demangler() { free(buffer_); }

std::string Demangler::Demangle(const char* name) {
  if (!LooksMangled(name)) return std::string(name);
  // A PLT stub's synthetic name (elf_symbol_table.cc): the symbol demangled, then "@plt".
  const size_t length = std::strlen(name);
  constexpr std::string_view kPlt = "@plt";
  if (length > kPlt.size() && std::string_view(name + length - kPlt.size()) == kPlt) {
    return Demangle(std::string(name, length - kPlt.size()).c_str()) + "@plt";
  }
  int status = 0;
  // On success __cxa_demangle may realloc the buffer; it then returns the new one and
  // updates capacity_. On failure the buffer is left as it was.
  // The process's own __cxa_demangle (its libstdc++.so), not a static copy: a reference to
  // abi::__cxa_demangle would link libstdc++'s demangler (~36 KiB) into libstrata_base.so,
  // which carries libstdc++.a (base/BUILD.bazel). In a process without libstdc++.so (a C
  // program) names stay mangled; `strata symbolicate` demangles them.
  using DemangleFunction = char* (*)(const char*, char*, size_t*, int*);
  static const DemangleFunction demangle =
      reinterpret_cast<DemangleFunction>(dlsym(RTLD_DEFAULT, "__cxa_demangle"));
  if (demangle == nullptr) return std::string(name);
  char* result = demangle(name, buffer_, &capacity_, &status);
  if (status != 0 || result == nullptr) return std::string(name);
  buffer_ = result;
  return std::string(result);
}

std::string Demangle(const char* name) {
  Demangler demangler;
  return demangler.Demangle(name);
}

}  // namespace strata
