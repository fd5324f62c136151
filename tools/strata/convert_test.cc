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
  // Main threads are named after their program in our outputs (the file says "GeckoMain").
  CHECK(names["thread_name=prog"] == 2);
  CHECK(names["thread_name=GeckoMain"] == 0);
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
    if (line.rfind("prog (20);prog (20);main;child:work ", 0) == 0) saw_child = true;
  }
  CHECK(total == profile.total_samples);
  CHECK(saw_child);
  CHECK(text.find("prog (10);prog (10) 1\n") != std::string::npos);  // The sample without a stack.
  CHECK(text.find("GeckoMain") == std::string::npos);
}

TEST_CASE("pprof decodes with the profile.proto schema, same sample total") {
  const Profile profile = TestProfile();
  const std::string bytes = PprofProtobuf(profile);
  PprofProfile decoded;
  std::string error;
  REQUIRE(DecodePprof(bytes, &decoded, &error));
  CHECK(ValidatePprof(decoded) == "");
  REQUIRE(decoded.sample_types.size() == 3);
  CHECK(decoded.strings[static_cast<size_t>(decoded.sample_types[0].type)] == "samples");
  CHECK(decoded.strings[static_cast<size_t>(decoded.sample_types[1].type)] == "wall");
  CHECK(decoded.strings[static_cast<size_t>(decoded.sample_types[2].type)] == "cpu");
  CHECK(decoded.strings[static_cast<size_t>(decoded.sample_types[2].unit)] == "nanoseconds");
  CHECK(PprofTotal(decoded, 0) == static_cast<int64_t>(profile.total_samples));
  CHECK(PprofTotal(decoded, 2) == 1000000 + 500000 + 0 + 1000000 + 2000000 + 1000000 + 1000000);
  // Wall: the parent's samples at 1, 2, 3, 4 ms, then 396 ms later (a gap is wall time), the
  // last 1 ms; the child's 1 ms apart: 400 + 4.
  CHECK(PprofTotal(decoded, 1) == 404000000);
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
      CHECK(labels["thread"] == "prog");
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

TEST_CASE("pprof heap profile: allocated and in-use objects and bytes of the native allocations") {
  Profile profile = TestProfile();
  Thread& thread = profile.threads[0];
  REQUIRE(thread.stack_prefix.size() >= 2);
  // 0x10 allocated at stack 0, freed, then allocated again at stack 1; 0x20 never freed.
  thread.native_allocations = {{1.0, 1000, 0x10, 0}, {2.0, 500, 0x20, 1}, {3.0, -1000, 0x10, 1},
                               {4.0, 700, 0x10, 1}};
  for (const Weight weight : {Weight::kBytes, Weight::kRetained}) {
    PprofProfile decoded;
    std::string error;
    REQUIRE(DecodePprof(PprofProtobuf(profile, weight), &decoded, &error));
    CHECK(ValidatePprof(decoded) == "");
    REQUIRE(decoded.sample_types.size() == 4);
    std::vector<std::string> types;
    for (const auto& t : decoded.sample_types) {
      types.push_back(decoded.strings[static_cast<size_t>(t.type)] + "/" +
                      decoded.strings[static_cast<size_t>(t.unit)]);
    }
    CHECK(types == std::vector<std::string>{"alloc_objects/count", "alloc_space/bytes", "inuse_objects/count",
                                            "inuse_space/bytes"});
    CHECK(PprofTotal(decoded, 0) == 3);
    CHECK(PprofTotal(decoded, 1) == 2200);
    CHECK(PprofTotal(decoded, 2) == 2);
    CHECK(PprofTotal(decoded, 3) == 1200);
    CHECK(decoded.strings[static_cast<size_t>(decoded.default_sample_type)] ==
          (weight == Weight::kBytes ? "alloc_space" : "inuse_space"));
    CHECK(decoded.strings[static_cast<size_t>(decoded.period_type.type)] == "space");
    // Per stack: the freed allocation at stack 0 is allocated, not in use.
    for (const auto& sample : decoded.samples) {
      if (sample.values[1] == 1000) CHECK(sample.values[3] == 0);
      if (sample.values[1] == 1200) CHECK(sample.values[3] == 1200);
    }
  }
}

TEST_CASE("pprof: a function and the functions inlined into it are one location's lines") {
  // main > malloc > tcache_get (inlined into malloc: inlineDepth 1, as strata symbolicate
  // writes it).
  testing::TestProcess p;
  testing::TestThread t = testing::InlinedLeafThread();
  t.samples = {{2, 1.0, -1}, {1, 2.0, 1000000}};
  p.threads = {t};
  rapidjson::Document document;
  document.Parse(testing::MakeProfileJson(p).c_str());
  REQUIRE_FALSE(document.HasParseError());
  Profile profile;
  std::string error;
  REQUIRE(LoadProfileModel(document, &profile, &error));
  PprofProfile decoded;
  REQUIRE(DecodePprof(PprofProtobuf(profile), &decoded, &error));
  CHECK(ValidatePprof(decoded) == "");
  auto name_of = [&](uint64_t function_id) {
    for (const auto& f : decoded.functions) {
      if (f.id == function_id) return decoded.strings[static_cast<size_t>(f.name)];
    }
    return std::string("?");
  };
  std::map<size_t, std::vector<std::vector<std::string>>> by_depth;  // stack depth -> lines per location
  for (const auto& sample : decoded.samples) {
    std::vector<std::vector<std::string>> stack;
    for (uint64_t id : sample.location_ids) {
      std::vector<std::string> lines;
      for (const auto& l : decoded.locations[id - 1].lines) lines.push_back(name_of(l.function_id));
      stack.push_back(lines);
    }
    by_depth[stack.size()] = stack;
  }
  // Both samples are two locations deep: tcache_get does not add a location of its own.
  REQUIRE(by_depth.count(2) == 1);
  CHECK(by_depth.size() == 1);
  const auto& stacks = by_depth[2];
  CHECK(stacks[1] == std::vector<std::string>{"main"});
  CHECK((stacks[0] == std::vector<std::string>{"tcache_get", "malloc"} || stacks[0] == std::vector<std::string>{"malloc"}));
  bool inlined_location = false;
  for (const auto& location : decoded.locations) {
    std::vector<std::string> lines;
    for (const auto& l : location.lines) lines.push_back(name_of(l.function_id));
    inlined_location = inlined_location || lines == std::vector<std::string>{"tcache_get", "malloc"};
  }
  CHECK(inlined_location);
}

Profile WaitingProfile(bool cpu = true) {
  rapidjson::Document document;
  document.Parse(testing::WaitingProfileJson(cpu).c_str());
  REQUIRE_FALSE(document.HasParseError());
  Profile profile;
  std::string error;
  REQUIRE(LoadProfileModel(document, &profile, &error));
  return profile;
}

std::string TypeName(const PprofProfile& p, int64_t type) { return p.strings[static_cast<size_t>(type)]; }

TEST_CASE("pprof carries samples, wall and CPU: a blocked thread's wait is wall time only") {
  const Profile profile = WaitingProfile();
  PprofProfile decoded;
  std::string error;
  REQUIRE(DecodePprof(PprofProtobuf(profile), &decoded, &error));
  CHECK(ValidatePprof(decoded) == "");
  REQUIRE(decoded.sample_types.size() == 3);
  CHECK(TypeName(decoded, decoded.sample_types[0].type) + "/" + TypeName(decoded, decoded.sample_types[0].unit) ==
        "samples/count");
  CHECK(TypeName(decoded, decoded.sample_types[1].type) + "/" + TypeName(decoded, decoded.sample_types[1].unit) ==
        "wall/nanoseconds");
  CHECK(TypeName(decoded, decoded.sample_types[2].type) + "/" + TypeName(decoded, decoded.sample_types[2].unit) ==
        "cpu/nanoseconds");
  CHECK(TypeName(decoded, decoded.default_sample_type) == "wall");
  CHECK(TypeName(decoded, decoded.period_type.type) == "cpu");
  CHECK(PprofTotal(decoded, 0) == 68);
  CHECK(PprofTotal(decoded, 1) == 68000000);
  CHECK(PprofTotal(decoded, 2) == 15500000);
  bool poll = false, busy = false;
  for (const auto& s : decoded.samples) {
    const auto stack = PprofStack(decoded, s);
    REQUIRE(s.values.size() == 3);
    if (stack == std::vector<std::string>{"poll", "wait_here", "main"}) {
      poll = true;
      CHECK(s.values == std::vector<int64_t>{50, 50000000, 0});
    }
    if (stack == std::vector<std::string>{"busy_loop", "main"}) {
      busy = true;
      CHECK(s.values == std::vector<int64_t>{10, 10000000, 9000000});
    }
  }
  CHECK(poll);
  CHECK(busy);

  PprofProfile by_cpu, by_samples;
  REQUIRE(DecodePprof(PprofProtobuf(profile, Weight::kCpu), &by_cpu, &error));
  CHECK(TypeName(by_cpu, by_cpu.default_sample_type) == "cpu");
  REQUIRE(DecodePprof(PprofProtobuf(profile, Weight::kSamples), &by_samples, &error));
  CHECK(TypeName(by_samples, by_samples.default_sample_type) == "samples");

  // Without CPU deltas: no cpu type; cpu asked for falls back to samples.
  PprofProfile no_cpu;
  REQUIRE(DecodePprof(PprofProtobuf(WaitingProfile(false), Weight::kCpu), &no_cpu, &error));
  CHECK(ValidatePprof(no_cpu) == "");
  REQUIRE(no_cpu.sample_types.size() == 2);
  CHECK(TypeName(no_cpu, no_cpu.sample_types[1].type) == "wall");
  CHECK(TypeName(no_cpu, no_cpu.default_sample_type) == "samples");
  CHECK(TypeName(no_cpu, no_cpu.period_type.type) == "wall");
  CHECK(PprofTotal(no_cpu, 1) == 68000000);
}

TEST_CASE("Collapsed stacks: samples, or µs of wall or CPU time") {
  const Profile profile = WaitingProfile();
  const std::string samples = CollapsedStacks(profile);
  const std::string wall = CollapsedStacks(profile, Weight::kWall);
  const std::string cpu = CollapsedStacks(profile, Weight::kCpu);
  INFO(wall);
  INFO(cpu);
  CHECK(samples.find("prog (100);blocked (12);main;wait_here;poll 50\n") != std::string::npos);
  CHECK(wall.find("prog (100);blocked (12);main;wait_here;poll 50000\n") != std::string::npos);
  CHECK(wall.find("prog (100);busy (11);main;busy_loop 10000\n") != std::string::npos);
  CHECK(cpu.find("prog (100);busy (11);main;busy_loop 9000\n") != std::string::npos);
  CHECK(cpu.find("prog (100);blocked (12);main;after 4500\n") != std::string::npos);
  CHECK(cpu.find("poll") == std::string::npos);  // No CPU: no line.
}

TEST_CASE("Chrome trace with --weight cpu: samples without CPU end the slices") {
  const Profile profile = WaitingProfile();
  auto slices = [](const std::string& json, const std::string& name) {
    rapidjson::Document trace;
    trace.Parse(json.c_str());
    REQUIRE_FALSE(trace.HasParseError());
    int count = 0;
    for (const auto& e : trace["traceEvents"].GetArray()) {
      if (std::string(e["ph"].GetString()) == "B" && name == e["name"].GetString()) ++count;
    }
    return count;
  };
  const std::string wall = ChromeTraceJson(profile);
  const std::string cpu = ChromeTraceJson(profile, Weight::kCpu);
  CHECK(slices(wall, "poll") == 1);
  CHECK(slices(cpu, "poll") == 0);
  CHECK(slices(wall, "busy_loop") == 1);
  CHECK(slices(cpu, "busy_loop") == 1);
}

TEST_CASE("The report has a weight control and wall, CPU and sample weights per sample") {
  const Profile profile = WaitingProfile();
  ReportOptions options;
  options.weight = Weight::kCpu;
  const std::string html = ReportHtml(profile, "w.json", options);
  CHECK(html.find("<select id=\"weight\"") != std::string::npos);
  const std::string open = "<script type=\"application/json\" id=\"strata-data\">";
  const size_t at = html.find(open);
  REQUIRE(at != std::string::npos);
  const size_t end = html.find("</script>", at);
  rapidjson::Document data;
  data.Parse(html.substr(at + open.size(), end - at - open.size()).c_str());
  REQUIRE_FALSE(data.HasParseError());
  CHECK(std::string(data["weight"].GetString()) == "cpu");
  for (const auto& t : data["threads"].GetArray()) {
    double wall = 0, cpu = 0, n = 0;
    for (const auto& v : t["w"].GetArray()) wall += v.GetDouble();
    for (const auto& v : t["c"].GetArray()) cpu += v.GetDouble();
    for (const auto& v : t["n"].GetArray()) n += v.GetDouble();
    if (std::string(t["name"].GetString()) == "blocked") {
      CHECK(wall == Approx(58));
      CHECK(cpu == Approx(6.5));
      CHECK(n == 58);
      CHECK(t["wallMs"].GetDouble() == Approx(58));
    } else {
      CHECK(wall == Approx(10));
      CHECK(cpu == Approx(9));
      CHECK(n == 10);
    }
  }
  // Thinned (every 5th sample kept), the weights stay whole.
  ReportOptions thin;
  thin.max_samples = 14;
  const std::string small = ReportHtml(profile, "w.json", thin);
  const size_t at2 = small.find(open);
  rapidjson::Document thinned;
  thinned.Parse(small.substr(at2 + open.size(), small.find("</script>", at2) - at2 - open.size()).c_str());
  REQUIRE_FALSE(thinned.HasParseError());
  CHECK(std::string(thinned["weight"].GetString()) == "wall");
  for (const auto& t : thinned["threads"].GetArray()) {
    CHECK(t["thinned"].GetUint() == 5);
    double wall = 0, n = 0;
    for (const auto& v : t["w"].GetArray()) wall += v.GetDouble();
    for (const auto& v : t["n"].GetArray()) n += v.GetDouble();
    const bool blocked = std::string(t["name"].GetString()) == "blocked";
    CHECK(wall == Approx(blocked ? 58 : 10));
    CHECK(n == (blocked ? 58 : 10));
  }
}

TEST_CASE("The report weighs native allocations by bytes allocated and retained") {
  Profile profile = TestProfile();
  Thread& thread = profile.threads[0];
  REQUIRE(thread.stack_prefix.size() >= 2);
  // 0x10 allocated at stack 0 and freed, then again at stack 1; 0x20 never freed.
  thread.native_allocations = {{1.0, 1000, 0x10, 0}, {2.0, 500, 0x20, 1}, {3.0, -1000, 0x10, 1},
                               {4.0, 700, 0x10, 1}};
  ReportOptions options;
  options.weight = Weight::kBytes;
  const std::string html = ReportHtml(profile, "a.json", options);
  const std::string open = "<script type=\"application/json\" id=\"strata-data\">";
  const size_t at = html.find(open);
  REQUIRE(at != std::string::npos);
  rapidjson::Document data;
  data.Parse(html.substr(at + open.size(), html.find("</script>", at) - at - open.size()).c_str());
  REQUIRE_FALSE(data.HasParseError());
  CHECK(data["allocations"].GetBool());
  CHECK(std::string(data["weight"].GetString()) == "bytes");
  const auto& t = data["threads"][0];
  REQUIRE(t.HasMember("ab"));
  REQUIRE(t["at"].Size() == 3);  // The allocations, not the free.
  int64_t allocated = 0, retained = 0;
  for (const auto& v : t["ab"].GetArray()) allocated += v.GetInt64();
  for (const auto& v : t["ar"].GetArray()) retained += v.GetInt64();
  CHECK(allocated == 2200);
  CHECK(retained == 1200);
  for (const auto& s : t["as"].GetArray()) {
    CHECK(s.GetInt() >= 0);
    CHECK(s.GetInt() < static_cast<int>(t["sp"].Size()));  // Their stacks are in the table.
  }
  // A profile without allocations offers no bytes.
  const std::string plain = ReportHtml(TestProfile(), "p.json", ReportOptions());
  CHECK(plain.find("\"allocations\":false") != std::string::npos);
  CHECK(plain.find("\"ab\"") == std::string::npos);
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
