#include "tools/strata/convert.h"

#include <map>
#include <sstream>
#include <string>

#include "catch2/catch.hpp"
#include "rapidjson/document.h"
#include "tools/strata/pprof_decoder.h"
#include "tools/strata/report.h"
#include "tools/strata/test_profiles.h"

namespace strata {
namespace cli {
namespace {

using testing::MakeProfileJson;
using testing::TestProcess;
using testing::TestThread;

Profile TestProfile() {
  TestProcess child;
  child.start_time = 1700000000050.0;
  TestThread ct;
  ct.pid = ct.tid = 20;
  ct.strings = {"main (in prog)", "child;work (in prog) (c.cc:5)", "Load", "Tick"};
  ct.frames = {{0, 0}, {1, -1}};
  ct.stacks = {{-1, 0}, {0, 1}};
  ct.samples = {{1, 1.0, -1}, {1, 2.0, 2000000}, {0, 3.0, 1000000}, {1, 4.0, 1000000}};
  ct.markers_data =
      R"([[2, 1.0, 4.0, 1, 0, null], [3, 2.5, null, 0, 0, null], [2, 1.5, null, 2, 0, null], [2, null, 3.5, 3, 0, null]])";
  child.threads = {ct};
  TestProcess parent;
  parent.start_time = 1700000000000.0;
  parent.product = "prog";
  TestThread pt;
  pt.pid = pt.tid = 10;
  pt.strings = {"main (in prog)", "parent_work (in prog)", "label <script>"};
  pt.frames = {{0, 0}, {1, -1}, {2, 0}};
  pt.stacks = {{-1, 0}, {0, 1}, {0, 2}};
  pt.samples = {{1, 1.0, -1}, {1, 2.0, 1000000}, {2, 3.0, 500000}, {-1, 4.0, 0}, {1, 400.0, 1000000}};
  parent.threads = {pt};
  rapidjson::Document document;
  document.Parse(MakeProfileJson(parent, {MakeProfileJson(child)}).c_str());
  REQUIRE_FALSE(document.HasParseError());
  Profile profile;
  std::string error;
  REQUIRE(LoadProfileModel(document, &profile, &error));
  return profile;
}

TEST_CASE("Chrome trace: names, balanced stack slices, markers") {
  const Profile profile = TestProfile();
  const std::string json = ChromeTraceJson(profile);
  rapidjson::Document trace;
  trace.Parse(json.c_str());
  INFO(json);
  REQUIRE_FALSE(trace.HasParseError());
  REQUIRE(trace["traceEvents"].IsArray());
  std::map<std::string, int> names;
  std::map<int64_t, int> depth;  // Per tid: B minus E.
  std::map<std::string, int> phases;
  double last_ts = -1;
  for (const auto& e : trace["traceEvents"].GetArray()) {
    const std::string ph = e["ph"].GetString();
    phases[ph]++;
    if (ph == "M" && e["args"].HasMember("name")) names[std::string(e["name"].GetString()) + "=" + e["args"]["name"].GetString()]++;
    if (ph == "B") {
      depth[e["tid"].GetInt64()]++;
      CHECK(e["ts"].GetDouble() >= 0);
    }
    if (ph == "E") CHECK(--depth[e["tid"].GetInt64()] >= 0);
    if (ph == "B" || ph == "E") last_ts = e["ts"].GetDouble();
  }
  for (const auto& [tid, d] : depth) CHECK(d == 0);
  CHECK(names["process_name=prog (10)"] == 1);
  CHECK(names["process_name=prog (20)"] == 1);
  CHECK(names["thread_name=GeckoMain"] == 2);
  CHECK(phases["b"] == 2);  // The interval and the start/end pair.
  CHECK(phases["e"] == 2);
  CHECK(phases["i"] == 1);
  CHECK(json.find("\"name\":\"child;work\"") != std::string::npos);
  // The child's samples are shifted by 50 ms: its first slice begins at 51 ms.
  CHECK(json.find("\"pid\":20,\"tid\":20,\"ts\":51000.000,\"name\":\"main\"") != std::string::npos);
  CHECK(last_ts > 0);
}

TEST_CASE("Collapsed stacks sum to the sample count") {
  const Profile profile = TestProfile();
  const std::string text = CollapsedStacks(profile);
  std::istringstream in(text);
  std::string line;
  uint64_t total = 0;
  bool saw_child = false;
  while (std::getline(in, line)) {
    const size_t space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    total += std::stoull(line.substr(space + 1));
    if (line.rfind("prog (20);GeckoMain (20);main;child:work ", 0) == 0) saw_child = true;
  }
  CHECK(total == profile.total_samples);
  CHECK(saw_child);
  CHECK(text.find("prog (10);GeckoMain (10) 1\n") != std::string::npos);  // The sample without a stack.
}

TEST_CASE("pprof decodes with the profile.proto schema, same sample total") {
  const Profile profile = TestProfile();
  const std::string bytes = PprofProtobuf(profile);
  PprofProfile decoded;
  std::string error;
  REQUIRE(DecodePprof(bytes, &decoded, &error));
  CHECK(ValidatePprof(decoded) == "");
  REQUIRE(decoded.sample_types.size() == 2);
  CHECK(decoded.strings[static_cast<size_t>(decoded.sample_types[0].type)] == "samples");
  CHECK(decoded.strings[static_cast<size_t>(decoded.sample_types[1].type)] == "cpu");
  CHECK(decoded.strings[static_cast<size_t>(decoded.sample_types[1].unit)] == "nanoseconds");
  CHECK(PprofTotal(decoded, 0) == static_cast<int64_t>(profile.total_samples));
  CHECK(PprofTotal(decoded, 1) == 1000000 + 500000 + 0 + 1000000 + 2000000 + 1000000 + 1000000);
  CHECK(decoded.period == 1000000);
  bool found = false;
  for (const auto& s : decoded.samples) {
    const auto stack = PprofStack(decoded, s);
    if (!stack.empty() && stack[0] == "child;work") {
      found = true;
      CHECK(stack == std::vector<std::string>{"child;work", "main"});
      std::map<std::string, std::string> labels;
      for (const auto& l : s.labels) {
        labels[decoded.strings[static_cast<size_t>(l.key)]] =
            l.str != 0 ? decoded.strings[static_cast<size_t>(l.str)] : std::to_string(l.num);
      }
      CHECK(labels["thread"] == "GeckoMain");
      CHECK(labels["thread_id"] == "20");
      CHECK(labels["pid"] == "20");
      CHECK(labels["process"] == "prog (20)");
    }
  }
  CHECK(found);
  // File names reach the functions.
  bool file = false;
  for (const auto& f : decoded.functions) file = file || decoded.strings[static_cast<size_t>(f.filename)] == "c.cc";
  CHECK(file);

  // Gzipped, as written to files, decodes the same.
  PprofProfile garbage;
  CHECK_FALSE(DecodePprof(std::string("\x0a\xff\xff", 3), &garbage, &error));
}

TEST_CASE("The report is one self-contained page with the data") {
  const Profile profile = TestProfile();
  const std::string html = ReportHtml(profile, "p.json", ReportOptions());
  REQUIRE_FALSE(html.empty());
  CHECK(html.find("<title>strata report: p.json</title>") != std::string::npos);
  CHECK(html.find("parent_work") != std::string::npos);
  CHECK(html.find("child;work") != std::string::npos);
  CHECK(html.find("STRATA_REPORT_DATA") == std::string::npos);
  CHECK(html.find("http:") == std::string::npos);
  CHECK(html.find("https:") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  // The '<' of a function name cannot end the data's script element.
  CHECK(html.find("label <script>") == std::string::npos);
  CHECK(html.find("label \\u003cscript>") != std::string::npos);

  // Thinning keeps the weight.
  ReportOptions thin;
  thin.max_samples = 4;  // 9 samples: every 3rd kept.
  const std::string small = ReportHtml(profile, "p.json", thin);
  CHECK(small.find("\"thinned\":3") != std::string::npos);
}

}  // namespace
}  // namespace cli
}  // namespace strata
