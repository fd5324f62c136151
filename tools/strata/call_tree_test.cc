// The terminal call tree (call_tree.h) on a hand-made profile: shares, self time, folding of
// single-callee chains, pruning by share and by depth, the 80-column width and escaped names.
#include "tools/strata/call_tree.h"

#include <sstream>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tools/strata/test_profiles.h"

namespace strata {
namespace cli {
namespace {

// Thread "worker" (pid 100, tid 101), 10 samples 1 ms apart:
//   main > a > b          x6 (self in b)
//   main > a > b > d      x2
//   main > a              x1
//   main > c > e > f      x1 (c and e only on the way to f: a foldable chain)
Profile TreeProfile(const std::string& thread_name = "worker", const std::string& long_name = "") {
  testing::TestThread t;
  t.name = thread_name;
  t.tid = 101;
  t.strings = {"main", "a", "b", "c", "d", "e", "f" + long_name};
  t.frames = {{0, -1}, {1, -1}, {2, -1}, {3, -1}, {4, -1}, {5, -1}, {6, -1}};
  // 0 main, 1 main>a, 2 main>a>b, 3 main>c, 4 main>a>b>d, 5 main>c>e, 6 main>c>e>f
  t.stacks = {{-1, 0}, {0, 1}, {1, 2}, {0, 3}, {2, 4}, {3, 5}, {5, 6}};
  const int order[] = {2, 2, 2, 4, 2, 2, 1, 4, 6, 2};
  for (int i = 0; i < 10; ++i) t.samples.push_back({order[i], static_cast<double>(i), 1e6});
  testing::TestProcess p;
  p.threads = {t};
  rapidjson::Document document;
  document.Parse(testing::MakeProfileJson(p).c_str());
  REQUIRE_FALSE(document.HasParseError());
  Profile profile;
  std::string error;
  REQUIRE(LoadProfileModel(document, &profile, &error));
  return profile;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The tree's lines (after the header lines), the columns stripped of repeated spaces.
std::vector<std::string> TreeLines(const std::string& text) {
  std::vector<std::string> lines = Lines(text);
  std::vector<std::string> out;
  bool in_tree = false;
  for (const std::string& line : lines) {
    if (in_tree) out.push_back(line);
    if (line.find("function") != std::string::npos && line.find("total") != std::string::npos) in_tree = true;
  }
  return out;
}

TEST_CASE("The call tree shows total and self shares, heaviest first, single-callee chains folded") {
  CallTreeOptions options;
  options.weight = Weight::kSamples;
  const std::string text = FormatCallTree(TreeProfile(), options);
  INFO(text);
  const std::vector<std::string> lines = TreeLines(text);
  const std::vector<std::string> expected = {
      " 100.0%    0.0%        10  worker (pid 100, tid 101)",
      " 100.0%    0.0%        10  `- main",
      "  90.0%   10.0%         9    |- a",
      "  80.0%   60.0%         8    | `- b",
      "  20.0%   20.0%         2    |   `- d",
      "  10.0%   10.0%         1    `- c > e > f",
  };
  CHECK(lines == expected);
  CHECK(text.find("Call tree by samples: 10.0 samples in 1 thread(s)") == 0);

  options.fold = false;
  const std::vector<std::string> unfolded = TreeLines(FormatCallTree(TreeProfile(), options));
  REQUIRE(unfolded.size() == 8);
  CHECK(unfolded[5] == "  10.0%    0.0%         1    `- c");
  CHECK(unfolded[6] == "  10.0%    0.0%         1      `- e");
  CHECK(unfolded[7] == "  10.0%   10.0%         1        `- f");
}

TEST_CASE("Nodes under the threshold are summed, and the depth limit says what is cut") {
  CallTreeOptions options;
  options.weight = Weight::kSamples;
  options.min_percent = 15;
  std::vector<std::string> lines = TreeLines(FormatCallTree(TreeProfile(), options));
  REQUIRE(lines.size() == 6);
  CHECK(lines[5] == "  10.0%                 1    `- 1 more under 15.0%");
  CHECK(lines[2] == "  90.0%   10.0%         9    |- a");

  options.min_percent = 0;
  options.max_depth = 2;
  lines = TreeLines(FormatCallTree(TreeProfile(), options));
  REQUIRE(lines.size() == 4);
  CHECK(lines[2] == "  90.0%   10.0%         9    |- a [+1 deeper]");
  CHECK(lines[3] == "  10.0%   10.0%         1    `- c > e > f");
}

TEST_CASE("Wall and CPU weights give the thread's wall and CPU time") {
  CallTreeOptions options;
  options.weight = Weight::kWall;
  CHECK(TreeLines(FormatCallTree(TreeProfile(), options))[0] == " 100.0%    0.0%      10.0  worker (pid 100, tid 101)");
  options.weight = Weight::kCpu;  // The first sample's CPU delta is not counted.
  const std::string text = FormatCallTree(TreeProfile(), options);
  CHECK(TreeLines(text)[0] == " 100.0%    0.0%       9.0  worker (pid 100, tid 101)");
  CHECK(text.find("CPU ms") != std::string::npos);
}

TEST_CASE("Long C++ names lose their parameters before they are cut") {
  CallTreeOptions options;
  options.weight = Weight::kSamples;
  const std::string name =
      "(anonymous namespace)::render_frame(std::vector<std::pair<int, int>, std::allocator<std::pair<int, int> > > "
      "const&, double) const [clone .constprop.0]";
  const std::string text = FormatCallTree(TreeProfile("w", name), options);
  INFO(text);
  CHECK(text.find("`- c > e > frender_frame()") != std::string::npos);
}

TEST_CASE("Every line fits 80 columns, and names cannot carry escape sequences") {
  CallTreeOptions options;
  options.weight = Weight::kSamples;
  options.fold = false;
  const std::string text = FormatCallTree(TreeProfile("bad\x1b[31mred", std::string(300, 'x') + "\xC3\xA9"), options);
  INFO(text);
  for (const std::string& line : Lines(text)) {
    size_t columns = 0;
    for (unsigned char c : line) columns += (c & 0xC0) != 0x80 ? 1 : 0;
    CHECK(columns <= 80);
  }
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find("bad\\x1b[31mred") != std::string::npos);
  CHECK(text.find("fxxxx") != std::string::npos);
  CHECK(text.find("...") != std::string::npos);
  // Wider terminals get more of the name.
  options.width = 200;
  for (const std::string& line : Lines(FormatCallTree(TreeProfile("w", std::string(300, 'x')), options))) {
    CHECK(line.size() <= 200);
  }
}

TEST_CASE("Deep trees stop indenting and write the level instead") {
  testing::TestThread t;
  t.name = "deep";
  for (int i = 0; i < 30; ++i) {
    t.strings.push_back("f" + std::to_string(i));
    t.frames.push_back({i, -1});
    t.stacks.push_back({i - 1, i});
    t.samples.push_back({i, static_cast<double>(i), 1e6});  // Self at every level: no folding.
  }
  testing::TestProcess p;
  p.threads = {t};
  rapidjson::Document document;
  document.Parse(testing::MakeProfileJson(p).c_str());
  Profile profile;
  std::string error;
  REQUIRE(LoadProfileModel(document, &profile, &error));
  CallTreeOptions options;
  options.weight = Weight::kSamples;
  options.min_percent = 0;
  const std::string text = FormatCallTree(profile, options);
  INFO(text);
  CHECK(text.find("[30] f29") != std::string::npos);
  CHECK(text.find("[12] f11") == std::string::npos);
  CHECK(text.find("[13] f12") != std::string::npos);
  for (const std::string& line : Lines(text)) CHECK(line.size() <= 80);
}

}  // namespace
}  // namespace cli
}  // namespace strata
