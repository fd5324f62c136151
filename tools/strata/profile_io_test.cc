#include "tools/strata/profile_io.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "catch2/catch.hpp"
#include "tools/strata/test_profiles.h"

namespace strata {
namespace cli {
namespace {

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

std::string ReadRaw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_CASE("Profiles round-trip plain and gzipped") {
  testing::TestProcess p;
  p.threads = {testing::TestThread()};
  const std::string json = testing::MakeProfileJson(p);
  rapidjson::Document document;
  std::string error;
  REQUIRE(ParseProfileJson("x", json, &document, &error));
  for (const std::string name : {"/io.json", "/io.json.gz"}) {
    const std::string path = TempDir() + name;
    uint64_t bytes = 0;
    REQUIRE(WriteJsonAtomically(path, document, &bytes, &error));
    CHECK(bytes == ToJson(document).size());
    const std::string raw = ReadRaw(path);
    CHECK((raw.size() >= 2 && static_cast<uint8_t>(raw[0]) == 0x1f && static_cast<uint8_t>(raw[1]) == 0x8b) ==
          WantsGzip(path));
    rapidjson::Document again;
    REQUIRE(LoadProfileDocument(path, &again, &error));
    CHECK(ToJson(again) == ToJson(document));
  }
}

TEST_CASE("Errors name the file and what is wrong") {
  std::string text, error;
  CHECK_FALSE(ReadFileContents("/nonexistent/p.json", &text, &error));
  CHECK(error == "/nonexistent/p.json: cannot open: No such file or directory");

  const std::string bad = TempDir() + "/bad.json";
  { std::ofstream(bad) << "{\"meta\": {\"version\": 36}, \"threads\": [1,,]}"; }
  rapidjson::Document document;
  CHECK_FALSE(LoadProfileDocument(bad, &document, &error));
  INFO(error);
  CHECK(error.find(bad + ": not JSON (at byte ") == 0);
  CHECK(error.find("Invalid value") != std::string::npos);

  { std::ofstream(bad) << "{\"threads\": []}"; }
  CHECK_FALSE(LoadProfileDocument(bad, &document, &error));
  CHECK(error == bad + ": not a Gecko profile (no \"meta\" object)");

  // A gzip file cut in the middle.
  const std::string gz = TempDir() + "/cut.json.gz";
  {
    OutputFile out(gz, true);
    std::string big(200000, ' ');
    out.Write("{\"meta\":{\"version\":36},\"threads\":[]" + big + "}");
    REQUIRE(out.Commit());
  }
  const std::string raw = ReadRaw(gz);
  { std::ofstream(gz, std::ios::binary) << raw.substr(0, raw.size() / 2); }
  CHECK_FALSE(ReadFileContents(gz, &text, &error));
  CHECK(error.find(gz + ": truncated gzip data") == 0);

  OutputFile nowhere("/nonexistent/dir/out.json", false);
  CHECK_FALSE(nowhere.ok());
  CHECK(nowhere.error().find("/nonexistent/dir/out.json: cannot create /nonexistent/dir/.out.json.tmp-") == 0);
}

TEST_CASE("Hostile nesting is refused before it can overflow the stack") {
  rapidjson::Document document;
  std::string error;
  // 100 000 levels: the recursive parser would overflow the stack.
  CHECK_FALSE(ParseProfileJson("deep.json", std::string(100000, '['), &document, &error));
  CHECK(error == "deep.json: not a Gecko profile (nested deeper than 1000 levels at byte 1000)");
  // Brackets inside strings do not count; a real profile's few levels pass.
  const std::string brackets_in_string = "{\"meta\":{\"version\":36,\"x\":\"" +
                                         std::string(5000, '[') + "\\\"\"},\"threads\":[[[[]]]]}";
  CHECK(ParseProfileJson("ok.json", brackets_in_string, &document, &error));
}

TEST_CASE("An uncommitted output leaves nothing behind") {
  const std::string path = TempDir() + "/never.json";
  unlink(path.c_str());
  {
    OutputFile out(path, false);
    out.Write("partial");
  }
  CHECK(access(path.c_str(), F_OK) != 0);
}

}  // namespace
}  // namespace cli
}  // namespace strata
