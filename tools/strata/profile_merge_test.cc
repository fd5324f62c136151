#include "tools/strata/profile_merge.h"
#include "tools/strata/profile_symbolication.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/format/gecko_profile_checker.h"
#include "tools/strata/profile_io.h"
#include "tools/strata/profile_model.h"
#include "tools/strata/test_profiles.h"

namespace strata {
namespace cli {
namespace {

using testing::MakeProfileJson;
using testing::TestProcess;
using testing::TestThread;

rapidjson::Document Parse(const std::string& json, rapidjson::Document::AllocatorType* allocator = nullptr) {
  rapidjson::Document d(allocator);
  d.Parse(json.c_str());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

void RequireValid(const rapidjson::Value& profile) {
  const CheckReport report = CheckGeckoProfile(ToJson(profile));
  INFO(report.ToString());
  REQUIRE(report.ok());
}

TestThread SimpleThread(int pid, const std::string& function) {
  TestThread t;
  t.pid = t.tid = pid;
  t.strings = {"main (in prog)", function + " (in prog)"};
  t.frames = {{0, 0}, {1, -1}};
  t.stacks = {{-1, 0}, {0, 1}};
  t.samples = {{1, 1.0, -1}, {1, 2.0, 1000000}, {1, 3.0, 1000000}};
  return t;
}

TEST_CASE("Children go under processes, ordered by start time, flattened, times kept") {
  rapidjson::MemoryPoolAllocator<> allocator;
  TestProcess parent;
  parent.start_time = 1000;
  parent.threads = {SimpleThread(1, "parent_work")};
  parent.extra_meta = ",\"profilingStartTime\":0,\"profilingEndTime\":5";
  TestProcess late;
  late.start_time = 1030;
  late.threads = {SimpleThread(3, "late_work")};
  late.extra_meta = ",\"profilingStartTime\":0,\"profilingEndTime\":50";
  TestProcess early;
  early.start_time = 1010;
  early.threads = {SimpleThread(2, "early_work")};
  TestProcess grandchild;
  grandchild.start_time = 1020;
  grandchild.threads = {SimpleThread(4, "grandchild_work")};

  rapidjson::Document root = Parse(MakeProfileJson(parent), &allocator);
  std::vector<rapidjson::Document> children;
  children.push_back(Parse(MakeProfileJson(late), &allocator));
  children.push_back(Parse(MakeProfileJson(early, {MakeProfileJson(grandchild)}), &allocator));
  MergeProfiles(&root, &children);
  RequireValid(root);

  const rapidjson::Value& processes = root["processes"];
  REQUIRE(processes.Size() == 3);
  CHECK(processes[0]["threads"][0]["pid"].GetInt() == 2);
  CHECK(processes[1]["threads"][0]["pid"].GetInt() == 4);
  CHECK(processes[2]["threads"][0]["pid"].GetInt() == 3);
  for (const auto& p : processes.GetArray()) CHECK(p["processes"].Size() == 0);
  // The parent's range covers the late child: 30 ms later, 50 ms long.
  CHECK(root["meta"]["profilingEndTime"].GetDouble() == Approx(80));
  CHECK(root["meta"]["profilingStartTime"].GetDouble() == 0);

  // Times stay relative to each process's own start; the model aligns them.
  Profile model;
  std::string error;
  REQUIRE(LoadProfileModel(root, &model, &error));
  REQUIRE(model.processes.size() == 4);
  CHECK(model.processes[1].start_offset == Approx(10));
  CHECK(model.threads[1].sample_time[0] == Approx(11));
  CHECK(model.threads[3].sample_time[2] == Approx(33));
  CHECK(model.end_time == Approx(33));
  CHECK(model.total_samples == 12);
}

TEST_CASE("Category lists are unified by name and indexes remapped") {
  TestProcess parent;
  parent.threads = {SimpleThread(1, "a")};
  TestProcess child;
  child.categories =
      R"([{"name":"Idle","color":"transparent","subcategories":["Other"]},)"
      R"({"name":"JIT","color":"yellow","subcategories":["Other"]},)"
      R"({"name":"Other","color":"grey","subcategories":["Other"]}])";
  TestThread t = SimpleThread(2, "b");
  t.frames = {{0, 2}, {1, 1}};  // Other, JIT.
  t.markers_data = R"([[0, 1.0, null, 0, 0, null]])";  // Idle.
  child.threads = {t};
  child.marker_schema = R"([{"name":"ChildMarker","display":["marker-chart"],"data":[]}])";

  rapidjson::Document root = Parse(MakeProfileJson(parent));
  std::vector<rapidjson::Document> children;
  children.push_back(Parse(MakeProfileJson(child)));
  MergeProfiles(&root, &children);
  RequireValid(root);

  const rapidjson::Value& categories = root["meta"]["categories"];
  REQUIRE(categories.Size() == 3);
  CHECK(std::string(categories[2]["name"].GetString()) == "JIT");
  const rapidjson::Value& frames = root["processes"][0]["threads"][0]["frameTable"]["data"];
  CHECK(frames[0][6].GetInt() == 0);  // Other
  CHECK(frames[1][6].GetInt() == 2);  // JIT
  CHECK(root["processes"][0]["threads"][0]["markers"]["data"][0][4].GetInt() == 1);  // Idle
  CHECK(root["processes"][0]["meta"]["categories"].Size() == 3);
  CHECK(root["meta"]["markerSchema"].Size() == 1);
}

// Answers from a table: module "prog" spans [0x1000, 0x2000) with load bias 0x1000.
class FakeSymbolizer : public Symbolizer {
 public:
  std::map<uint64_t, std::vector<SymbolizedFrame>> table;
  std::vector<uint64_t>* asked = nullptr;  // Every address looked up (outlives the symbolizer).

  void Symbolize(absl::Span<const uint64_t> addresses, SymbolizeResult* result) override {
    result->Clear();
    for (uint64_t a : addresses) {
      if (asked != nullptr) asked->push_back(a);
      SymbolizedAddress out;
      out.address = a;
      out.first_frame = static_cast<uint32_t>(result->frames.size());
      if (a >= 0x1000 && a < 0x2000) {
        out.module = "prog";
        out.module_offset = a - 0x1000;
        auto it = table.find(a);
        if (it != table.end()) {
          for (const auto& f : it->second) result->frames.push_back(f);
          out.frame_count = static_cast<uint32_t>(it->second.size());
        }
      }
      result->addresses.push_back(out);
    }
  }
};

TEST_CASE("Symbolication: inline frames, caller addresses minus one, unknowns, remapped stacks") {
  TestProcess p;
  p.libs = R"([{"start":4096,"end":8192,"offset":0,"name":"prog","path":"/nonexistent/prog",)"
           R"("debugName":"prog","debugPath":"/nonexistent/prog","breakpadId":"","codeId":"","arch":"x86_64"}])";
  TestThread t;
  t.pid = t.tid = 7;
  t.strings = {"0x1200", "0x1100", "0x3000", "0x1500", "Startup::Label"};
  t.frames = {{0, -1}, {1, -1}, {2, -1}, {3, -1}, {4, 0}};
  t.stacks = {{-1, 4}, {0, 0}, {1, 1}, {2, 2}, {1, 3}};
  t.samples = {{2, 1.0, -1}, {3, 2.0, 5}, {4, 3.0, 5}, {-1, 4.0, 5}};
  t.markers_data =
      R"([[4, 1.5, null, 0, 0, {"type":"Text","name":"x","stack":{"name":"SyncProfile","registerTime":null,)"
      R"("unregisterTime":null,"processType":"default","tid":7,"pid":7,)"
      R"("markers":{"schema":{"name":0,"startTime":1,"endTime":2,"phase":3,"category":4,"data":5},"data":[]},)"
      R"("samples":{"schema":{"stack":0,"time":1,"eventDelay":2},"data":[[2,1.5,0]]}}}]])";
  p.threads = {t};
  rapidjson::Document profile = Parse(MakeProfileJson(p));
  REQUIRE(HasRawAddresses(profile));

  std::vector<uint64_t> asked;
  auto factory = [&](std::vector<SharedLibrary> libs) -> std::unique_ptr<Symbolizer> {
    REQUIRE(libs.size() == 1);
    CHECK(libs[0].start == 0x1000);
    auto s = std::make_unique<FakeSymbolizer>();
    s->table[0x11ff] = {{"main", 0, "a.cc", 30, false}};
    s->table[0x1100] = {{"kernel", 0, "k.h", 10, true}, {"work", 0, "a.cc", 20, false}};
    s->table[0x10ff] = {{"work_caller_role", 0, "a.cc", 21, false}};
    s->asked = &asked;
    return s;
  };
  SymbolicateStats stats;
  SymbolicateProfile(&profile, factory, &stats);
  RequireValid(profile);
  CHECK(HasRawAddresses(profile));  // 0x3000 is in no module: it stays raw.
  CHECK(profile["meta"]["presymbolicated"].GetBool());
  CHECK(stats.address_frames == 4);
  CHECK(stats.inline_frames == 1);

  Profile model;
  std::string error;
  REQUIRE(LoadProfileModel(profile, &model, &error));
  const Thread& thread = model.threads[0];
  auto names = [&](int32_t stack) {
    std::vector<std::string> out;
    for (uint32_t f : thread.StackFunctions(stack)) out.push_back(model.functions[f].name);
    return out;
  };
  CHECK(names(thread.sample_stack[0]) == std::vector<std::string>{"Startup::Label", "main", "work", "kernel"});
  CHECK(names(thread.sample_stack[1]) == std::vector<std::string>{"Startup::Label", "main", "work_caller_role", "0x3000"});
  CHECK(names(thread.sample_stack[2]) == std::vector<std::string>{"Startup::Label", "main", "prog+0x500"});
  CHECK(thread.sample_stack[3] == -1);
  // file:line from the location string and the line column.
  const int32_t leaf = thread.sample_stack[0];
  const Frame& kernel = thread.frames[thread.stack_frame[static_cast<size_t>(leaf)]];
  CHECK(model.functions[kernel.function].file == "k.h");
  CHECK(model.functions[kernel.function].library == "prog");
  CHECK(kernel.line == 10);
  // Categories carried over: label frame keeps Other (0).
  CHECK(thread.stack_category[static_cast<size_t>(leaf)] == 0);
  // The marker's backtrace points at the leaf-role stack of sample 0.
  const rapidjson::Value& marker_stack =
      profile["threads"][0]["markers"]["data"][0][5]["stack"]["samples"]["data"][0][0];
  CHECK(marker_stack.GetInt() == thread.sample_stack[0]);
  // Each address looked up once per role: 0x1200 as caller, 0x1100 as both, 0x3000 and
  // 0x1500 as leaves.
  std::sort(asked.begin(), asked.end());
  CHECK(asked == std::vector<uint64_t>{0x10ff, 0x1100, 0x11ff, 0x1500, 0x3000});
}

// Adds the capture's "address" and "lib" columns to every thread's frameTable: frame i of
// thread 0 gets `native[i]` (lib-relative address, lib index), or nulls when it is -1.
void AddNativeAddresses(rapidjson::Document* profile, const std::vector<std::pair<int64_t, int>>& native) {
  auto& allocator = profile->GetAllocator();
  rapidjson::Value& table = (*profile)["threads"][0]["frameTable"];
  table["schema"].AddMember("address", 8, allocator);
  table["schema"].AddMember("lib", 9, allocator);
  rapidjson::Value& rows = table["data"];
  REQUIRE(rows.Size() == native.size());
  for (rapidjson::SizeType i = 0; i < rows.Size(); ++i) {
    while (rows[i].Size() < 8) rows[i].PushBack(rapidjson::Value(), allocator);
    if (native[i].first < 0) {
      rows[i].PushBack(rapidjson::Value(), allocator).PushBack(rapidjson::Value(), allocator);
    } else {
      rows[i].PushBack(static_cast<uint64_t>(native[i].first), allocator).PushBack(native[i].second, allocator);
    }
  }
}

std::vector<std::vector<std::string>> SampleNames(const rapidjson::Value& profile) {
  Profile model;
  std::string error;
  REQUIRE(LoadProfileModel(profile, &model, &error));
  std::vector<std::vector<std::string>> out;
  const Thread& thread = model.threads[0];
  for (int32_t stack : thread.sample_stack) {
    std::vector<std::string> names;
    for (uint32_t f : thread.StackFunctions(stack)) names.push_back(model.functions[f].name);
    out.push_back(names);
  }
  return out;
}

TEST_CASE("Names saved with their addresses are symbolicated as raw addresses are, once") {
  // The same samples twice: as raw addresses (rawaddresses, `strata record`), and as the
  // capture's ELF names with their addresses (the preload recipe). prog is mapped at 0x1000
  // (offset 0): lib-relative 0x200 is 0x1200.
  const std::string libs =
      R"([{"start":4096,"end":8192,"offset":0,"name":"prog","path":"/nonexistent/prog",)"
      R"("debugName":"prog","debugPath":"/nonexistent/prog","breakpadId":"","codeId":"","arch":"x86_64"}])";
  TestProcess raw;
  raw.libs = libs;
  TestThread t;
  t.pid = t.tid = 7;
  t.strings = {"0x1200", "0x1100", "0x1700", "Startup::Label"};
  t.frames = {{0, -1}, {1, -1}, {2, -1}, {3, 0}};
  t.stacks = {{-1, 3}, {0, 0}, {1, 1}, {1, 2}};
  t.samples = {{2, 1.0, -1}, {3, 2.0, 5}};
  raw.threads = {t};
  TestProcess named = raw;
  named.threads[0].strings = {"main (in prog)", "work (in prog)", "mystery (in prog)", "Startup::Label"};

  auto factory = [&](std::vector<SharedLibrary>) -> std::unique_ptr<Symbolizer> {
    auto s = std::make_unique<FakeSymbolizer>();
    s->table[0x11ff] = {{"main", 0, "a.cc", 30, false}};
    s->table[0x1100] = {{"kernel", 0, "k.h", 10, true}, {"work", 0, "a.cc", 20, false}};
    // 0x1700: in prog but no function (its debug file is gone, say).
    return s;
  };

  rapidjson::Document from_raw = Parse(MakeProfileJson(raw));
  rapidjson::Document from_names = Parse(MakeProfileJson(named));
  // Before: without addresses a named profile has nothing to symbolicate.
  CHECK_FALSE(HasAddressesToSymbolicate(from_names));
  AddNativeAddresses(&from_names, {{0x200, 0}, {0x100, 0}, {0x700, 0}, {-1, 0}});
  RequireValid(from_names);
  CHECK_FALSE(HasRawAddresses(from_names));
  CHECK(HasAddressesToSymbolicate(from_names));

  SymbolicateStats raw_stats, named_stats;
  SymbolicateProfile(&from_raw, factory, &raw_stats);
  SymbolicateProfile(&from_names, factory, &named_stats);
  RequireValid(from_names);
  CHECK(named_stats.address_frames == 3);
  CHECK(named_stats.inline_frames == 1);
  const auto named_stacks = SampleNames(from_names);
  // Inline frame and file:line added; main and work as the capture named them.
  CHECK(named_stacks[0] == std::vector<std::string>{"Startup::Label", "main", "work", "kernel"});
  // The capture's name stays where DWARF finds no function (the raw profile can only say
  // prog+0x700 there).
  CHECK(named_stacks[1] == std::vector<std::string>{"Startup::Label", "main", "mystery"});
  CHECK(SampleNames(from_raw)[0] == named_stacks[0]);
  CHECK(SampleNames(from_raw)[1] == std::vector<std::string>{"Startup::Label", "main", "prog+0x700"});

  // Every frame made for an address keeps it and says its inline depth.
  const rapidjson::Value& thread = from_names["threads"][0];
  const rapidjson::Value& schema = thread["frameTable"]["schema"];
  REQUIRE(schema.HasMember("inlineDepth"));
  std::map<std::string, std::vector<int64_t>> columns;  // location -> {address, lib, depth}
  for (const auto& row : thread["frameTable"]["data"].GetArray()) {
    auto value = [&](const char* name) -> int64_t {
      const unsigned c = schema[name].GetUint();
      return c < row.Size() && row[c].IsInt64() ? row[c].GetInt64() : -1;
    };
    columns[thread["stringTable"][row[schema["location"].GetUint()].GetUint()].GetString()] = {
        value("address"), value("lib"), value("inlineDepth")};
  }
  CHECK(columns["kernel (in prog) (k.h:10)"] == std::vector<int64_t>{0x100, 0, 1});
  CHECK(columns["work (in prog) (a.cc:20)"] == std::vector<int64_t>{0x100, 0, 0});
  CHECK(columns["main (in prog) (a.cc:30)"] == std::vector<int64_t>{0x200, 0, 0});
  CHECK(columns["mystery (in prog)"] == std::vector<int64_t>{0x700, 0, -1});  // Left for a later try.
  // The raw profile's frames carry the same columns.
  CHECK(from_raw["threads"][0]["frameTable"]["schema"].HasMember("inlineDepth"));

  // Again: nothing changes.
  const std::string once = ToJson(from_names);
  SymbolicateStats again;
  SymbolicateProfile(&from_names, factory, &again);
  CHECK(ToJson(from_names) == once);
  CHECK(again.named == 0);
  const std::string raw_once = ToJson(from_raw);
  SymbolicateProfile(&from_raw, factory, &again);
  CHECK(ToJson(from_raw) == raw_once);
}

// Adds a "pushSite" column to thread 0's frameTable: frame i gets `sites[i]` (0: null).
void AddPushSites(rapidjson::Document* profile, const std::vector<uint64_t>& sites) {
  auto& allocator = profile->GetAllocator();
  rapidjson::Value& table = (*profile)["threads"][0]["frameTable"];
  table["schema"].AddMember("pushSite", 8, allocator);
  rapidjson::Value& rows = table["data"];
  REQUIRE(rows.Size() == sites.size());
  for (rapidjson::SizeType i = 0; i < rows.Size(); ++i) {
    while (rows[i].Size() < 8) rows[i].PushBack(rapidjson::Value(), allocator);
    if (sites[i] == 0) {
      rows[i].PushBack(rapidjson::Value(), allocator);
    } else {
      rows[i].PushBack(sites[i], allocator);
    }
  }
}

TEST_CASE("Labels go right below the inlined function that pushed them (their push site)") {
  TestProcess p;
  p.libs = R"([{"start":4096,"end":8192,"offset":0,"name":"prog","path":"/nonexistent/prog",)"
           R"("debugName":"prog","debugPath":"/nonexistent/prog","breakpadId":"","codeId":"","arch":"x86_64"}])";
  TestThread t;
  t.pid = t.tid = 7;
  // Worker (return address 0x1100: Crunch and std::sin inlined into it) with "Handle
  // requests" pushed in Worker itself, then libm's sin (0x1500). OuterLevel's own code as the
  // leaf (pc 0x1300: MiddleLevel and InnerLevel inlined) with "Middle step" pushed in
  // MiddleLevel. Labels without a push site, or pushed in another function, stay below every
  // inlined frame.
  // A sample taken inside the push itself (pc 0x1340, the push site: the push's inlined helper
  // is in the leaf's chain) still has the label right below MiddleLevel, the helper after it.
  t.strings = {"0x1100", "0x1500", "Handle requests", "0x1300", "Middle step", "No site", "Elsewhere",
               "0x1340"};
  t.frames = {{0, -1}, {1, -1}, {2, 0}, {3, -1}, {4, 0}, {5, 0}, {6, 0}, {7, -1}, {4, 0}};
  t.stacks = {{-1, 0}, {0, 2}, {1, 1},   // Worker;Handle requests;sin
              {-1, 3}, {3, 4},           // OuterLevel (leaf);Middle step
              {0, 5}, {5, 1},            // Worker;No site;sin
              {0, 6}, {7, 1},            // Worker;Elsewhere;sin
              {-1, 7}, {9, 8}};          // OuterLevel (leaf, inside the push);Middle step
  t.samples = {{2, 1.0, 5}, {4, 2.0, 5}, {6, 3.0, 5}, {8, 4.0, 5}, {10, 5.0, 5}};
  p.threads = {t};
  rapidjson::Document profile = Parse(MakeProfileJson(p));
  AddPushSites(&profile, {0, 0, 0x1040, 0, 0x1340, 0, 0x1600, 0, 0x1340});

  std::vector<uint64_t> asked;
  auto factory = [&](std::vector<SharedLibrary>) -> std::unique_ptr<Symbolizer> {
    auto s = std::make_unique<FakeSymbolizer>();
    s->table[0x10ff] = {{"std::sin<int>", 0, "cmath", 1, true}, {"Crunch", 0, "a.cc", 2, true},
                        {"Worker", 0, "a.cc", 3, false}};
    s->table[0x1500] = {{"sin", 0, "", 0, false}};
    s->table[0x1040] = {{"strata::AutoLabel::AutoLabel", 0, "labels.h", 1, true},
                        {"Worker", 0, "a.cc", 4, false}};
    s->table[0x1300] = {{"InnerLevel", 0, "a.cc", 5, true}, {"MiddleLevel", 0, "a.cc", 6, true},
                        {"OuterLevel", 0, "a.cc", 7, false}};
    s->table[0x1340] = {{"strata::AutoLabel::AutoLabel", 0, "labels.h", 1, true},
                        {"MiddleLevel", 0, "a.cc", 8, true}, {"OuterLevel", 0, "a.cc", 9, false}};
    s->table[0x1600] = {{"Other", 0, "b.cc", 1, false}};
    s->asked = &asked;
    return s;
  };
  SymbolicateStats stats;
  SymbolicateProfile(&profile, factory, &stats);
  RequireValid(profile);
  const auto stacks = SampleNames(profile);
  CHECK(stacks[0] == std::vector<std::string>{"Worker", "Handle requests", "Crunch", "std::sin<int>", "sin"});
  // A native frame followed only by labels is the sample's leaf: looked up at its pc.
  CHECK(stacks[1] == std::vector<std::string>{"OuterLevel", "MiddleLevel", "Middle step", "InnerLevel"});
  CHECK(stacks[2] == std::vector<std::string>{"Worker", "Crunch", "std::sin<int>", "No site", "sin"});
  CHECK(stacks[3] == std::vector<std::string>{"Worker", "Crunch", "std::sin<int>", "Elsewhere", "sin"});
  CHECK(stacks[4] == std::vector<std::string>{"OuterLevel", "MiddleLevel", "Middle step",
                                              "strata::AutoLabel::AutoLabel"});
  CHECK(std::find(asked.begin(), asked.end(), 0x12ff) == asked.end());

  // Self time still goes to the function the code belongs to, across the label.
  Profile model;
  std::string error;
  REQUIRE(LoadProfileModel(profile, &model, &error));
  const Thread& thread = model.threads[0];
  CHECK(model.functions[thread.SelfFunction(thread.sample_stack[1])].name == "OuterLevel");

  // Again: nothing changes.
  const std::string once = ToJson(profile);
  SymbolicateStats again;
  SymbolicateProfile(&profile, factory, &again);
  CHECK(ToJson(profile) == once);
}

TEST_CASE("Libs are read with their build-ids") {
  TestProcess p;
  p.libs = R"([{"start":4096,"end":8192,"offset":16,"name":"prog","path":"/bin/prog","debugName":"prog",)"
           R"("debugPath":"/bin/prog","breakpadId":"AB0","codeId":"ab","arch":"x86_64"},{"start":1.5}])";
  const auto libs = ReadLibs(Parse(MakeProfileJson(p)));
  REQUIRE(libs.size() == 1);
  CHECK(libs[0].offset == 16);
  CHECK(libs[0].path == "/bin/prog");
  CHECK(libs[0].code_id == "ab");
}

}  // namespace
}  // namespace cli
}  // namespace strata
