// A shared library that elf_symbolizer_test and elf_symbol_table_test load (dlopen) or read,
// as built and as a --strip-all copy. Exported: two extern "C" functions, address getters and
// a function template instance in a namespace; internal: one function in an anonymous
// namespace, named only by .symtab.
#include <cstdint>

namespace strata_symbols_library {

template <typename T>
__attribute__((noinline)) T Scale(T value, int factor) {
  return value * factor + 7;
}

template long Scale<long>(long, int);

}  // namespace strata_symbols_library

namespace {

__attribute__((noinline)) int InternalFunction(int x) { return x * 3 + 1; }

}  // namespace

extern "C" {

__attribute__((noinline)) int StrataSymbolsLibraryFunction(int x) {
  return InternalFunction(x) + 2;
}

void* StrataSymbolsLibraryInternalAddress() { return reinterpret_cast<void*>(&InternalFunction); }

void* StrataSymbolsLibraryTemplateAddress() {
  return reinterpret_cast<void*>(&strata_symbols_library::Scale<long>);
}

}  // extern "C"
