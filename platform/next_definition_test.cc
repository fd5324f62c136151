// NextDefinition: the next definition in the loader's order, versioned where the object that
// has it is libc, and never past an interposer that defines the function without a version.
#include "platform/next_definition.h"

#include <dlfcn.h>

#include <cstring>

#include "catch2/catch.hpp"

namespace strata {
namespace {

const char* ObjectOf(void* address) {
  Dl_info info;
  return address != nullptr && dladdr(address, &info) && info.dli_fname ? info.dli_fname : "";
}

TEST_CASE("NextDefinition: a versioned libc function", "[platform]") {
  void* const found = NextDefinition("pthread_cond_wait", "GLIBC_2.3.2");
  REQUIRE(found != nullptr);
#if defined(__SANITIZE_THREAD__)
  // libtsan comes before libc and defines pthread_cond_wait without a version: its
  // interceptor, not libc's function (dlvsym alone skipped it: sleeper_test's "double lock").
  CHECK(std::strstr(ObjectOf(found), "libtsan") != nullptr);
#else
  // No interposer here: libc's current version (not the GLIBC_2.2.5 compatibility one).
  CHECK(found == dlvsym(RTLD_NEXT, "pthread_cond_wait", "GLIBC_2.3.2"));
  CHECK(std::strstr(ObjectOf(found), "libc.so") != nullptr);
#endif
}

TEST_CASE("NextDefinition: an unversioned lookup and a missing name", "[platform]") {
  void* const found = NextDefinition("nanosleep");
  REQUIRE(found != nullptr);
  CHECK(found == dlsym(RTLD_NEXT, "nanosleep"));
  CHECK(NextDefinition("strata_no_such_function_anywhere") == nullptr);
  CHECK(NextDefinition("strata_no_such_function_anywhere", "GLIBC_2.3.2") == nullptr);
}

}  // namespace
}  // namespace strata
