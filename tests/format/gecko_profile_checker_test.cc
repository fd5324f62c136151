#include "tests/format/gecko_profile_checker.h"

#include <string>

#include "catch2/catch.hpp"
#include "tests/format/test_profiles.h"

namespace strata {
namespace {

TEST_CASE("the realistic profile written by our writer is valid, without warnings") {
  std::string profile = MakeRealisticProfile();
  CheckReport report = CheckGeckoProfile(profile);
  INFO(report.ToString());
  CHECK(report.ok());
  CHECK(report.warnings.empty());
  CHECK(report.processes == 2);
  CHECK(report.threads == 4);
  CHECK(report.samples == 20 + 15 + 8 + 5);
  CHECK(report.markers == 4 + 1 + 1);
}

TEST_CASE("every broken variant is rejected with its code") {
  const std::string profile = MakeRealisticProfile();
  for (const BrokenVariant& v : BrokenVariants()) {
    INFO(v.name << ": " << v.description);
    std::string broken = MakeBrokenVariant(profile, v.name);
    REQUIRE_FALSE(broken.empty());
    CheckReport report = CheckGeckoProfile(broken);
    INFO(report.ToString());
    CHECK_FALSE(report.ok());
    CHECK(report.HasError(v.checker_code));
  }
  CHECK(MakeBrokenVariant(profile, "no-such-variant").empty());
}

TEST_CASE("messages carry the JSON path and the code") {
  std::string broken = MakeBrokenVariant(MakeRealisticProfile(), "stack-prefix-forward");
  CheckReport report = CheckGeckoProfile(broken);
  REQUIRE(report.HasError("stack-prefix-order"));
  CHECK(report.ToString().find("error: threads[0].stackTable.data[0]: prefix ") !=
        std::string::npos);
}

TEST_CASE("not JSON, gzip, NaN and invalid UTF-8 are errors") {
  CHECK(CheckGeckoProfile("{").HasError("not-json"));
  CHECK(CheckGeckoProfile("\x1f\x8b\x08").HasError("not-json"));
  CHECK(CheckGeckoProfile(R"({"meta":{"interval":NaN}})").HasError("not-json"));
  CHECK(CheckGeckoProfile("{\"meta\":{\"product\":\"\xff\"}}").HasError("not-json"));
  CHECK(CheckGeckoProfile("[]").HasError("top-level"));
  CHECK(CheckGeckoProfile("{}").HasError("meta"));
}

// A minimal valid profile to vary by hand.
std::string Minimal(const std::string& thread_extra = "", const std::string& libs = "[]",
                    const std::string& frames = "[[0,false,0,null,null,null,0,0]]",
                    const std::string& counters = "[]") {
  return std::string(R"({"meta":{"version":36,"startTime":1700000000000,"interval":1,)") +
         R"("markerSchema":[],"categories":[{"name":"Other","color":"grey",)" +
         R"("subcategories":["Other"]}]},"libs":)" + libs + R"(,"processes":[],"counters":)" +
         counters + R"(,"threads":[{"name":"T","processType":"default","pid":1,"tid":2,)" +
         R"("registerTime":0,"unregisterTime":null,)" + thread_extra +
         R"("samples":{"schema":{"stack":0,"time":1,"eventDelay":2},"data":[[0,1,null]]},)" +
         R"("markers":{"schema":{"name":0,"startTime":1,"endTime":2,"phase":3,"category":4,)" +
         R"("data":5},"data":[]},"stackTable":{"schema":{"prefix":0,"frame":1},)" +
         R"("data":[[null,0]]},"frameTable":{"schema":{"location":0,"relevantForJS":1,)" +
         R"("innerWindowID":2,"implementation":3,"line":4,"column":5,"category":6,)" +
         R"("subcategory":7},"data":)" + frames + R"(},"stringTable":["main","0x1234"]}]})";
}

TEST_CASE("a minimal hand-written profile is valid") {
  CheckReport report = CheckGeckoProfile(Minimal());
  INFO(report.ToString());
  CHECK(report.ok());
  CHECK(report.warnings.empty());
  // Wrapped form: a warning only.
  CheckReport wrapped = CheckGeckoProfile("{\"profile\":" + Minimal() + "}");
  CHECK(wrapped.ok());
  CHECK(wrapped.HasWarning("wrapped"));
}

TEST_CASE("warnings: address outside every lib, counters without GeckoMain") {
  CheckReport report =
      CheckGeckoProfile(Minimal("", R"([{"start":8192,"end":12288,"offset":0,"name":"a",)"
                                    R"("path":"/a","debugName":"a","debugPath":"/a",)"
                                    R"("breakpadId":"","arch":"x86_64"}])",
                                "[[1,false,0,null,null,null,null,null]]",
                                R"([{"name":"m","category":"Memory","description":"",)"
                                R"("samples":{"schema":{"time":0,"count":1},"data":[[1,5]]}}])"));
  INFO(report.ToString());
  CHECK(report.ok());
  CHECK(report.HasWarning("address-no-lib"));
  CHECK(report.HasWarning("lib-breakpad-id"));
  CHECK(report.HasWarning("counter-no-geckomain"));
}

TEST_CASE("library addresses must be integers, sorted, non-overlapping") {
  const std::string lib_a = R"({"start":4096.5,"end":8192,"offset":0,"name":"a","path":"/a",)"
                            R"("debugName":"a","debugPath":"/a","breakpadId":"","arch":"x"})";
  CHECK(CheckGeckoProfile(Minimal("", "[" + lib_a + "]")).HasError("lib-address"));
  const std::string lib_b = R"({"start":4096,"end":8192,"name":"a","path":"/a",)"
                            R"("debugName":"a","debugPath":"/a","breakpadId":"","arch":"x"})";
  CHECK(CheckGeckoProfile(Minimal("", "[" + lib_b + "]")).HasError("lib-address"));
  const std::string l1 = R"({"start":4096,"end":8192,"offset":0})";
  const std::string l2 = R"({"start":8000,"end":9000,"offset":0})";
  CHECK(CheckGeckoProfile(Minimal("", "[" + l1 + "," + l2 + "]")).HasError("libs-order"));
}

TEST_CASE("JS locations: accepted with a script URL or --allow-js, sources needed for [n]") {
  auto with_location = [](const std::string& location) {
    std::string p = Minimal();
    size_t at = p.find("\"stringTable\":[\"main\"");
    return p.replace(at, 21, "\"stringTable\":[\"" + location + "\"");
  };
  CHECK(CheckGeckoProfile(with_location("onLoad (https://x/app.js:1:2)")).ok());
  CHECK(CheckGeckoProfile(with_location("worker:12")).HasError("js-looking-location"));
  CheckOptions allow;
  allow.allow_js_looking_locations = true;
  CHECK(CheckGeckoProfile(with_location("worker:12"), allow).ok());
  CHECK(CheckGeckoProfile(with_location("f (a.js:1)[0]")).HasError("sources"));
}

TEST_CASE("messages are capped per code") {
  std::string frames = "[";
  for (int i = 0; i < 30; ++i) {
    frames += std::string(i ? "," : "") + "[0,false,0,null,null,null,7,0]";
  }
  frames += "]";
  CheckOptions options;
  options.max_messages_per_code = 5;
  CheckReport report = CheckGeckoProfile(Minimal("", "[]", frames), options);
  CHECK(report.errors.size() == 6);
  CHECK(report.errors.back().text == "... and 25 more [frame-category]");
}

}  // namespace
}  // namespace strata
