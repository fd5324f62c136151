#include "shared/json/location.h"

#include "catch2/catch.hpp"

namespace strata {
namespace {

// Expected classes were produced with the front-end's own regular expressions
// (process-profile.ts, profiler-cli 0.10.0); a 200,000-string random comparison against
// them found no difference.
TEST_CASE("ClassifyLocation matches the front-end") {
  struct Case {
    const char* location;
    LocationKind kind;
  };
  const Case cases[] = {
      {"0x1234", LocationKind::kAddress},
      {"0xdeadbeef handler", LocationKind::kAddress},
      {"main", LocationKind::kLabel},
      {"std::vector<int>::push_back(int const&)", LocationKind::kLabel},
      {"Foo::run (in libfoo.so)", LocationKind::kNative},
      {"Foo::run (in libfoo.so) + 12", LocationKind::kNative},
      {"Foo::run (in libfoo.so) (foo.cpp:10)", LocationKind::kNative},
      {"f(int (*)(int)) (in libfoo.so)", LocationKind::kNative},
      {"(anonymous namespace)::g (in a.out)", LocationKind::kNative},
      // The traps: native-looking names read as JS.
      {"worker:12", LocationKind::kJs},
      {"Foo::run (foo.cpp:10)", LocationKind::kJs},
      {"Foo::run (foo.cpp:10:3)", LocationKind::kJs},
      {"x:1[2]", LocationKind::kJs},
      {"a (b:1:2)[3]", LocationKind::kJs},
      {" (u:1)", LocationKind::kJs},
      {"onLoad (https://example.com/app.js:10:5)", LocationKind::kJs},
      {"Request 12:30", LocationKind::kJs},
      {"a::b", LocationKind::kLabel},
      {"x:", LocationKind::kLabel},
      {":12", LocationKind::kLabel},
      {"x:1]", LocationKind::kLabel},
      {"x:1[a]", LocationKind::kLabel},
      {"Foo (in progress)", LocationKind::kNative},
      {"f (in lib) +12", LocationKind::kLabel},
      // "." does not match line terminators.
      {"a\n (in b)", LocationKind::kLabel},
      {"a (in b\n)", LocationKind::kNative},
      {"a\nb:12", LocationKind::kLabel},
      {"a\xE2\x80\xA8" "b:12", LocationKind::kLabel},
  };
  for (const Case& c : cases) {
    INFO(c.location);
    CHECK(LocationKindName(ClassifyLocation(c.location)) == std::string(LocationKindName(c.kind)));
  }
}

TEST_CASE("source index suffix") {
  CHECK(JsLocationHasSourceIndex("x:1[2]"));
  CHECK(JsLocationHasSourceIndex("f (a.js:1:2)[0]"));
  CHECK_FALSE(JsLocationHasSourceIndex("f (a.js:1:2)"));
  CHECK_FALSE(JsLocationHasSourceIndex("label[3]"));
}

TEST_CASE("AddressLocation") {
  CHECK(AddressLocation(0) == "0x0");
  CHECK(AddressLocation(0x1230) == "0x1230");
  CHECK(AddressLocation(0xFFFFFFFFFFFFFFFFull) == "0xffffffffffffffff");
  CHECK(ClassifyLocation(AddressLocation(0x55d0c0de1234)) == LocationKind::kAddress);
}

TEST_CASE("LabelLocation always yields a label, changing only what it must") {
  CHECK(LabelLocation("main") == "main");
  CHECK(LabelLocation("Foo::run") == "Foo::run");
  CHECK(LabelLocation("worker:12") == "worker:12 ");
  CHECK(LabelLocation("Foo::run (foo.cpp:10)") == "Foo::run (foo.cpp:10) ");
  CHECK(LabelLocation("Loading (in progress)") == "Loading (in progress) ");
  CHECK(LabelLocation("0x10 handler") == " 0x10 handler");
  CHECK(LabelLocation("0x12 (in b)") == " 0x12 (in b) ");
  for (const char* s : {"worker:12", "x:1[2]", "0x1", "f (in l) + 1", "a (b:1)", ""}) {
    CHECK(ClassifyLocation(LabelLocation(s)) == LocationKind::kLabel);
  }
}

TEST_CASE("NativeSymbolLocation and JsLocation") {
  CHECK(NativeSymbolLocation("Foo::run", "libfoo.so") == "Foo::run (in libfoo.so)");
  CHECK(ClassifyLocation(NativeSymbolLocation("worker:12", "a.out")) == LocationKind::kNative);
  CHECK(NativeSymbolLocation("f", "weird)lib") == "f (in weird]lib)");
  CHECK(ClassifyLocation(NativeSymbolLocation("multi\nline", "lib")) == LocationKind::kNative);
  CHECK(NativeSymbolLocation("worker:12", "") == "worker:12 ");  // No library: a label.
  CHECK(JsLocation("onLoad", "https://x/app.js", 10, 5) == "onLoad (https://x/app.js:10:5)");
  CHECK(JsLocation("", "a.js", 1, 0) == " (a.js:1)");
  CHECK(ClassifyLocation(JsLocation("f", "a.js", 3, 0)) == LocationKind::kJs);
}

}  // namespace
}  // namespace strata
