#include "tools/strata/profile_model.h"

#include <string>

#include "catch2/catch.hpp"
#include "tools/strata/function_stats.h"
#include "tools/strata/profile_summary.h"
#include "tools/strata/test_profiles.h"

namespace strata {
namespace cli {
namespace {

using testing::MakeProfileJson;
using testing::TestProcess;
using testing::TestThread;

TEST_CASE("Location strings read as the front-end reads them") {
  ParsedLocation a = ParseLocation("ns::Foo::run(int) (in libfoo.so)");
  CHECK(a.name == "ns::Foo::run(int)");
  CHECK(a.library == "libfoo.so");
  CHECK(a.file.empty());
  ParsedLocation b = ParseLocation("kernel (in prog) (/src/k (1).h:120)");
  CHECK(b.name == "kernel");
  CHECK(b.library == "prog");
  CHECK(b.file == "/src/k (1).h");
  CHECK(b.line == 120);
  ParsedLocation c = ParseLocation("operator() (in x) + 12");
  CHECK(c.name == "operator()");
  CHECK(c.library == "x");
  ParsedLocation d = ParseLocation("0x55d0c0de1234");
  CHECK(d.is_address);
  CHECK(d.name == "0x55d0c0de1234");
  ParsedLocation e = ParseLocation("worker:12 ");  // LabelLocation's trailing space.
  CHECK(e.name == "worker:12");
  CHECK(e.library.empty());
  ParsedLocation f = ParseLocation("f (in (anonymous namespace)) (in lib)");
  CHECK(f.library == "lib");
}

std::string TwoProcessProfile() {
  TestProcess child;
  child.start_time = 1700000000100.0;
  TestThread ct;
  ct.pid = ct.tid = 20;
  ct.strings = {"main (in prog)", "child_work (in prog) (c.cc:5)", "Load"};
  ct.frames = {{0, 0}, {1, -1}};
  ct.stacks = {{-1, 0}, {0, 1}};
  ct.samples = {{1, 1.0, -1}, {1, 2.0, 2000000}, {0, 3.0, 1000000}};
  ct.markers_data = R"([[2, 1.0, 4.0, 1, 0, null], [2, 5.0, null, 0, 0, {"type":"Text","name":"x"}]])";
  child.threads = {ct};

  TestProcess parent;
  parent.start_time = 1700000000000.0;
  TestThread pt;
  pt.pid = pt.tid = 10;
  pt.strings = {"main (in prog)", "parent_work (in prog)"};
  pt.frames = {{0, 0}, {1, -1}};
  pt.stacks = {{-1, 0}, {0, 1}, {1, 1}};  // Recursion: parent_work twice.
  pt.samples = {{2, 1.0, -1}, {2, 2.0, 1000000}, {-1, 3.0, 0}};
  TestThread worker = pt;
  worker.name = "worker";
  worker.tid = 11;
  parent.threads = {pt, worker};
  return MakeProfileJson(parent, {MakeProfileJson(child)});
}

TEST_CASE("A multi-process profile becomes one model with aligned times") {
  rapidjson::Document document;
  document.Parse(TwoProcessProfile().c_str());
  REQUIRE_FALSE(document.HasParseError());
  Profile profile;
  std::string error;
  REQUIRE(LoadProfileModel(document, &profile, &error));
  REQUIRE(profile.processes.size() == 2);
  REQUIRE(profile.threads.size() == 3);
  CHECK(profile.total_samples == 9);
  CHECK(profile.processes[1].start_offset == Approx(100));
  CHECK(profile.threads[2].sample_time[0] == Approx(101));
  CHECK(profile.threads[2].markers[0].start == Approx(101));
  CHECK(profile.threads[2].markers[0].end == Approx(104));
  CHECK(profile.threads[2].markers[1].type == "Text");
  CHECK(profile.threads[2].sample_cpu_ms[1] == Approx(2.0));
  CHECK(profile.threads[2].CpuMs() == Approx(3.0));  // The first delta is ignored.
  CHECK(profile.end_time == Approx(105));
  CHECK(profile.processes[1].pid == 20);
  // "main (in prog)" is one function in both processes.
  size_t mains = 0;
  for (const Function& f : profile.functions) mains += f.name == "main";
  CHECK(mains == 1);

  const FunctionTimes times = ComputeFunctionTimes(profile);
  CHECK(times.cpu);
  CHECK(times.cpu_ms == Approx(1 + 1 + 3));
  CHECK(times.wall == Approx(9));  // 3 threads: samples 1 ms apart, the last one an interval.
  for (size_t i = 0; i < profile.functions.size(); ++i) {
    if (profile.functions[i].name == "parent_work") {
      CHECK(times.functions[i].self_cpu == Approx(2.0));   // Two threads x 1 ms.
      CHECK(times.functions[i].total_cpu == Approx(2.0));  // Recursion counted once.
      CHECK(times.functions[i].total_wall == Approx(4.0));
    }
    if (profile.functions[i].name == "main") CHECK(times.functions[i].total_cpu == Approx(5.0));
  }

  const std::string summary = SummarizeProfile(profile, 5);
  INFO(summary);
  CHECK(summary.find("2 process(es), 3 thread(s), 9 samples") != std::string::npos);
  CHECK(summary.find("child_work  [prog]") != std::string::npos);
  CHECK(summary.find("worker") != std::string::npos);
  CHECK(summary.find("Load") != std::string::npos);
}

TEST_CASE("A process without samples has its lifetime; the summary groups sampling sources") {
  TestProcess parent;
  parent.product = "make";
  TestThread main;
  main.strings = {"main (in make)"};
  main.frames = {{0, 0}};
  main.stacks = {{-1, 0}};
  main.samples = {{0, 1, 0}, {0, 2, 1e6}};
  parent.threads = {main};
  parent.extra_meta = ",\"profilingStartTime\":0,\"profilingEndTime\":2000";
  // A child that lived 800 ms (its own range) and was never sampled (waiting for its child).
  TestProcess driver;
  driver.start_time = parent.start_time + 100;
  driver.product = "gcc";
  TestThread idle;
  idle.pid = idle.tid = 300;
  driver.threads = {idle};
  driver.extra_meta = ",\"profilingStartTime\":0,\"profilingEndTime\":800";
  rapidjson::Document document;
  document.Parse(MakeProfileJson(parent, {MakeProfileJson(driver)}).c_str());
  REQUIRE_FALSE(document.HasParseError());
  Profile profile;
  std::string error;
  REQUIRE(LoadProfileModel(document, &profile, &error));
  REQUIRE(profile.processes.size() == 2);
  CHECK(profile.processes[1].start_time == Approx(100));
  CHECK(profile.processes[1].end_time - profile.processes[1].start_time == Approx(800));

  profile.sampling_sources = {"1: perf task-clock events", "2: perf task-clock events", "3: CPU-clock timers",
                              "4: perf task-clock events", "5: perf task-clock events", "6: perf task-clock events"};
  const std::string summary = SummarizeProfile(profile, 5);
  INFO(summary);
  CHECK(summary.find("Sampled by: perf task-clock events (5 processes)\n") != std::string::npos);
  CHECK(summary.find("Sampled by: CPU-clock timers (pid 3)\n") != std::string::npos);
  CHECK(summary.find("      800.0 ") != std::string::npos);  // The driver's duration column.
}

TEST_CASE("The summary repeats what profilingLog says about the sampling signal") {
  TestProcess parent;
  parent.product = "daemon";
  TestThread main;
  main.strings = {"main (in daemon)"};
  main.frames = {{0, 0}};
  main.stacks = {{-1, 0}};
  main.samples = {{0, 1, 0}};
  parent.threads = {main};
  std::string json = MakeProfileJson(parent);
  const std::string log =
      "\"profilingLog\":{\"41\":{\"samplingSource\":\"perf task-clock events\","
      "\"foreignSamplingSignals\":\"5 held while the program blocked the signal\"}},";
  json.insert(1, log);
  rapidjson::Document document;
  document.Parse(json.c_str());
  REQUIRE_FALSE(document.HasParseError());
  Profile profile;
  std::string error;
  REQUIRE(LoadProfileModel(document, &profile, &error));
  REQUIRE(profile.sampling_notes.size() == 1);
  const std::string summary = SummarizeProfile(profile, 5);
  INFO(summary);
  CHECK(summary.find("Sampling note, pid 41: foreignSamplingSignals: 5 held while the program "
                     "blocked the signal\n") != std::string::npos);
}

TEST_CASE("Malformed profiles are refused with the thread named") {
  TestProcess p;
  TestThread t;
  t.name = "broken";
  t.strings = {"main"};
  t.frames = {{0, 0}};
  t.stacks = {{-1, 3}};
  p.threads = {t};
  rapidjson::Document document;
  document.Parse(MakeProfileJson(p).c_str());
  Profile profile;
  std::string error;
  CHECK_FALSE(LoadProfileModel(document, &profile, &error));
  CHECK(error.find("thread 'broken'") != std::string::npos);
  CHECK(error.find("stack 0 refers to a frame that does not exist") != std::string::npos);
}

}  // namespace
}  // namespace cli
}  // namespace strata
