// A C++ library that libunwind_loader_test dlopen()s after libunwind has been loaded: it
// reports which _Unwind_RaiseException its own references were bound to, and throws.
#include <unwind.h>

#include <stdexcept>

// The definition this library's relocations resolved _Unwind_RaiseException to (through the
// global scope, then the library's own dependencies), as the C++ runtime would use it.
extern "C" __attribute__((visibility("default"))) void* strata_test_bound_unwind_raise_exception() {
  return reinterpret_cast<void*>(&_Unwind_RaiseException);
}

namespace {

__attribute__((noinline)) void Thrower(int i) {
  if (i >= 0) throw std::runtime_error("thrown by libexception_target_for_testing.so");
}

}  // namespace

// Throws and catches `count` exceptions; returns how many were caught.
extern "C" __attribute__((visibility("default"))) int strata_test_throw_and_catch(int count) {
  int caught = 0;
  for (int i = 0; i < count; ++i) {
    try {
      Thrower(i);
    } catch (const std::runtime_error&) {
      ++caught;
    }
  }
  return caught;
}
