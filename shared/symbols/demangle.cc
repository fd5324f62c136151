#include "shared/symbols/demangle.h"

#include <cxxabi.h>

#include <cstdlib>

namespace strata {
namespace {

bool LooksMangled(const char* name) { return name[0] == '_' && name[1] == 'Z'; }

}  // namespace

Demangler::~Demangler() { free(buffer_); }

std::string Demangler::Demangle(const char* name) {
  if (!LooksMangled(name)) return std::string(name);
  int status = 0;
  // On success __cxa_demangle may realloc the buffer; it then returns the new one and
  // updates capacity_. On failure the buffer is left as it was.
  char* result = abi::__cxa_demangle(name, buffer_, &capacity_, &status);
  if (status != 0 || result == nullptr) return std::string(name);
  buffer_ = result;
  return std::string(result);
}

std::string Demangle(const char* name) {
  Demangler demangler;
  return demangler.Demangle(name);
}

}  // namespace strata
