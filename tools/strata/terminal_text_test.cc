#include "tools/strata/terminal_text.h"

#include <string>

#include "catch2/catch.hpp"
#include "rapidjson/document.h"
#include "tools/strata/profile_model.h"
#include "tools/strata/profile_summary.h"
#include "tools/strata/test_profiles.h"

namespace strata {
namespace cli {
namespace {

using testing::MakeProfileJson;
using testing::TestProcess;
using testing::TestThread;

// The first raw control byte a terminal would obey in `text` (C0 but newline, DEL, a C1
// control in UTF-8 or as a lone byte), as its offset, or npos.
size_t FindRawControl(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7F) return i;
    if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9F &&
        static_cast<unsigned char>(text[i + 1]) >= 0x80) {
      return i;
    }
    if (c >= 0x80 && c <= 0x9F && (i == 0 || static_cast<unsigned char>(text[i - 1]) < 0xC2)) return i;
  }
  return std::string::npos;
}

TEST_CASE("Control characters are shown as escapes, other text byte for byte") {
  CHECK(TerminalSafe("plain name (in lib.so)") == "plain name (in lib.so)");
  CHECK(TerminalSafe("\x1b]0;title\x07") == "\\x1b]0;title\\x07");
  CHECK(TerminalSafe("a\tb\rc\x7f") == "a\\x09b\\x0dc\\x7f");
  CHECK(TerminalSafe("line\nnext") == "line\\x0anext");
  CHECK(TerminalSafe("line\nnext", true) == "line\nnext");
  CHECK(TerminalSafe(std::string("nul\0x", 5)) == "nul\\x00x");
  CHECK(TerminalSafe("\xc2\x9b" "31m") == "\\u009b31m");          // C1 CSI in UTF-8.
  CHECK(TerminalSafe("\x9b" "31m") == "\\x9b31m");                // A lone C1 byte.
  CHECK(TerminalSafe("\xc3\xa9t\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x94\xa5") ==
        "\xc3\xa9t\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x94\xa5");  // été → 🔥 kept.
  CHECK(TerminalSafe("\xc2\xa0") == "\xc2\xa0");                 // U+00A0 is not a control.
  CHECK(TerminalSafe("\xc0\x9b") == "\\xc0\\x9b");              // Overlong: not UTF-8.
  CHECK(TerminalSafe("cut\xe2\x86") == "cut\\xe2\\x86");         // Truncated sequence.
  CHECK(TerminalSafe("back\\slash") == "back\\slash");
}

TEST_CASE("strata summary prints no raw control character from the profile") {
  const std::string evil = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\xc2\x9b" "1A\r\b\x7f\x01";
  TestProcess process;
  process.product = "prod" + evil;
  TestThread thread;
  thread.name = "thread" + evil;
  thread.strings = {"main (in lib\x1b[31m.so)", "func" + evil, "Marker" + evil};
  thread.frames = {{0, 0}, {1, -1}};
  thread.stacks = {{-1, 0}, {0, 1}};
  thread.samples = {{1, 1.0, 1000000}, {1, 2.0, 1000000}};
  thread.markers_data = R"([[2, 1.0, 4.0, 1, 0, null], [2, 5.0, null, 0, 0, null]])";
  process.threads = {thread};
  rapidjson::Document document;
  document.Parse(MakeProfileJson(process).c_str());
  REQUIRE_FALSE(document.HasParseError());
  Profile profile;
  std::string error;
  REQUIRE(LoadProfileModel(document, &profile, &error));
  REQUIRE(profile.threads[0].name.find('\x1b') != std::string::npos);  // The model keeps them.

  const std::string summary = SummarizeProfile(profile, 5);
  INFO(TerminalSafe(summary, true));
  CHECK(FindRawControl(summary) == std::string::npos);
  // Each name is still there, escaped.
  CHECK(summary.find("prod\\x1b]0;pwned\\x07") != std::string::npos);
  CHECK(summary.find("thread\\x1b]0;pwned") != std::string::npos);
  CHECK(summary.find("func\\x1b]0;pwned") != std::string::npos);
  CHECK(summary.find("[lib\\x1b[31m.so]") != std::string::npos);
  CHECK(summary.find("Marker\\x1b]0;pwned") != std::string::npos);
}

}  // namespace
}  // namespace cli
}  // namespace strata
