// The small shared object that tests/signal_stress.cc dlopen()s and dlclose()s in a loop.
// It has a constructor, a destructor and a C++ static with a destructor, so that loading and
// unloading run the loader's initialisation and finalisation paths (and __cxa_atexit /
// __cxa_finalize), not just the mapping. The function's result depends on the constructor
// having run: a wrong result means the object was not initialised.
#include <string>

namespace {

int g_constructed = 0;
std::string g_with_destructor(40, 'p');  // Registered with __cxa_atexit, run by dlclose.

__attribute__((constructor)) void OnLoad() { g_constructed = 1; }
__attribute__((destructor)) void OnUnload() { g_constructed = 0; }

}  // namespace

extern "C" __attribute__((visibility("default"))) int stress_plugin_square_plus_one(int x) {
  return x * x + g_constructed + static_cast<int>(g_with_destructor.size()) - 40;
}
