// Operator new and delete of libstrata_base.so, which links libstdc++ statically with its
// symbols hidden (base/BUILD.bazel: a C program that preloads the profiler then does not
// load libstdc++.so, docs/benchmarks.md).
//
// Memory crosses the library's boundary both ways: std::string results of the API
// (ProfilerGetProfile, error strings), the vectors and strings the full tier receives from
// base, strings the program passes in and the library assigns to. So the library must
// allocate with the same global operator new and delete as the rest of the process — a
// program may replace them (a pool, a tracking allocator) or install a new_handler through
// its libstdc++.so — as it did when it was linked with libstdc++.so, where its calls were
// bound to the first definition in the process's global lookup order.
//
// These definitions are linked into the shared library only (never into a program that
// links base_impl statically, where they would replace the program's own), and are local to
// it (the version script exports strata's API only). operator new(size_t) and
// operator delete(void*) forward to the first global definition of each (the program's
// replacement, a preloaded allocator's, or libstdc++.so's), looked up once, at the library's
// first allocation (made by its constructor at load, so never inside a loader callback,
// where dlsym could deadlock). The other forms (array, nothrow, sized) are defined on top of
// those two, as the standard's default definitions are; a program that replaces only one of
// those forms sees the library use its single-object new and delete instead. In a process
// without a C++ runtime (a C program) they use malloc and free as libstdc++'s do, and throw
// std::bad_alloc from the static copy. Over-aligned new (align_val_t) is not defined here:
// the library does not use it; should it, libstdc++.a's pair (aligned_alloc/free) would be
// used, consistent within the library.
//
// Thread safety: the lookup is a function-local static (thread-safe initialisation); the
// functions are then as thread-safe as what they forward to. Not async-signal-safe (no
// allocation is).
#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace {

using NewFunction = void* (*)(std::size_t);
using DeleteFunction = void (*)(void*);

// The process's operator new(size_t) and operator delete(void*), or null for both when it
// has no C++ runtime. Ours are local to the library, so dlsym never returns them.
struct GlobalFunctions {
  NewFunction new_single = nullptr;
  DeleteFunction delete_single = nullptr;
};

const GlobalFunctions& Global() {
  static const GlobalFunctions global = [] {
    GlobalFunctions g;
    g.new_single = reinterpret_cast<NewFunction>(dlsym(RTLD_DEFAULT, "_Znwm"));
    g.delete_single = reinterpret_cast<DeleteFunction>(dlsym(RTLD_DEFAULT, "_ZdlPv"));
    if (!g.new_single || !g.delete_single) g = GlobalFunctions();
    return g;
  }();
  return global;
}

}  // namespace

void* operator new(std::size_t size) {
  const GlobalFunctions& global = Global();
  if (global.new_single) return global.new_single(size);
  // No C++ runtime: what libstdc++'s operator new does without a new_handler.
  if (void* pointer = std::malloc(size ? size : 1)) return pointer;
  throw std::bad_alloc();
}

void operator delete(void* pointer) noexcept {
  const GlobalFunctions& global = Global();
  if (global.delete_single) {
    global.delete_single(pointer);
  } else {
    std::free(pointer);
  }
}

void* operator new[](std::size_t size) { return operator new(size); }

void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return operator new(size);
  } catch (...) {
    return nullptr;
  }
}

void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}

void operator delete[](void* pointer) noexcept { operator delete(pointer); }
void operator delete(void* pointer, std::size_t) noexcept { operator delete(pointer); }
void operator delete[](void* pointer, std::size_t) noexcept { operator delete(pointer); }
void operator delete(void* pointer, const std::nothrow_t&) noexcept { operator delete(pointer); }
void operator delete[](void* pointer, const std::nothrow_t&) noexcept {
  operator delete(pointer);
}

// The terminate handler of the library's own (static, hidden) libstdc++ copy: std::abort,
// not libstdc++'s verbose handler, which prints the active exception's demangled type and so
// links libstdc++'s whole demangler (~36 KiB of the stripped library, issue 19's 512 KiB
// budget). Only an exception escaping Strata's own code reaches it; the program's
// std::terminate (its libstdc++.so) is untouched. Defining the handler variable here keeps
// libstdc++.a's eh_term_handler.o, and with it vterminate.o, out of the link. Strata
// demangles names with the process's own __cxa_demangle (shared/symbols/demangle.cc).
#include <exception>
namespace __cxxabiv1 {
std::terminate_handler __terminate_handler = std::abort;
}  // namespace __cxxabiv1
