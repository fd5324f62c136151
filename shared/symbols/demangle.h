// C++ (Itanium ABI) symbol demangling with abi::__cxa_demangle.
//
// Only names that start with "_Z" are passed to the demangler: __cxa_demangle also accepts
// bare type encodings, so "i" would otherwise come back as "int" and "f" as "float". Clone
// suffixes are kept in the demangler's own spelling ("foo() [clone .cold]").
//
// Thread safety: Demangle() is thread-safe. A Demangler is thread-compatible (one thread at
// a time). Neither is async-signal-safe (they allocate).
#ifndef STRATA_SHARED_SYMBOLS_DEMANGLE_H_
#define STRATA_SHARED_SYMBOLS_DEMANGLE_H_

#include <cstddef>
#include <string>

namespace strata {

// Demangles many names, reusing one malloc'ed output buffer between calls (the buffer
// __cxa_demangle grows with realloc and this class frees).
class Demangler {
 public:
  Demangler() = default;
  ~Demangler();
  Demangler(const Demangler&) = delete;
  Demangler& operator=(const Demangler&) = delete;

  // The demangled form of `name` (NUL-terminated), or `name` unchanged when it is not a
  // mangled C++ name or the demangler rejects it.
  std::string Demangle(const char* name);

 private:
  char* buffer_ = nullptr;  // Owned; malloc'ed by __cxa_demangle.
  size_t capacity_ = 0;
};

// One-off form of Demangler::Demangle (allocates and frees its own buffer).
std::string Demangle(const char* name);

}  // namespace strata

#endif  // STRATA_SHARED_SYMBOLS_DEMANGLE_H_
