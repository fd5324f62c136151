#include "shared/symbols/demangle.h"

#include <string>

#include "catch2/catch.hpp"

namespace strata {
namespace {

TEST_CASE("Demangle turns Itanium names into C++ names") {
  CHECK(Demangle("_ZN3foo3barEv") == "foo::bar()");
  CHECK(Demangle("_ZN6strata5TwiceIiEET_S1_") == "int strata::Twice<int>(int)");
  CHECK(Demangle("_ZNK3BoxIlE3getEv") == "Box<long>::get() const");
  CHECK(Demangle("_ZN12_GLOBAL__N_18InternalEi") == "(anonymous namespace)::Internal(int)");
}

TEST_CASE("Demangle keeps clone suffixes in the demangler's spelling") {
  CHECK(Demangle("_Z3foov.cold") == "foo() [clone .cold]");
  CHECK(Demangle("_Z3fooi.constprop.0") == "foo(int) [clone .constprop.0]");
}

TEST_CASE("Demangle leaves C names and bare type codes alone") {
  // __cxa_demangle would turn "i" into "int": only "_Z" names go to it.
  CHECK(Demangle("i") == "i");
  CHECK(Demangle("f") == "f");
  CHECK(Demangle("write") == "write");
  CHECK(Demangle("main") == "main");
  CHECK(Demangle("") == "");
  CHECK(Demangle("_") == "_");
}

TEST_CASE("Demangle returns names it cannot demangle unchanged") {
  CHECK(Demangle("_Z") == "_Z");
  CHECK(Demangle("_Zxyz") == "_Zxyz");
  CHECK(Demangle("_ZN3foo") == "_ZN3foo");
}

TEST_CASE("A Demangler reuses its buffer across short, long and failed names") {
  Demangler demangler;
  std::string long_mangled = "_ZN";
  std::string long_demangled;
  for (int i = 0; i < 50; ++i) {
    long_mangled += "10namespace" + std::to_string(i % 10);
    long_demangled += "namespace" + std::to_string(i % 10) + "::";
  }
  long_mangled += "1fEv";
  long_demangled += "f()";
  for (int round = 0; round < 3; ++round) {
    CHECK(demangler.Demangle("_ZN3foo3barEv") == "foo::bar()");
    CHECK(demangler.Demangle(long_mangled.c_str()) == long_demangled);
    CHECK(demangler.Demangle("_Zxyz") == "_Zxyz");
    CHECK(demangler.Demangle("_Z1gi") == "g(int)");
  }
}

}  // namespace
}  // namespace strata
