// Small hand-made Gecko profiles for the unit tests of the `strata` command's pieces.
#ifndef STRATA_TOOLS_STRATA_TEST_PROFILES_H_
#define STRATA_TOOLS_STRATA_TEST_PROFILES_H_

#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace strata {
namespace cli {
namespace testing {

struct TestSample {
  int stack;  // -1: null.
  double time;
  double cpu_ns;  // < 0: null.
};

struct TestThread {
  std::string name = "GeckoMain";
  int pid = 100;
  int tid = 100;
  double register_time = 0;
  std::vector<std::string> strings;             // The string table.
  std::vector<std::pair<int, int>> frames;      // (location string, category; -1 = null).
  std::vector<std::pair<int, int>> stacks;      // (prefix or -1, frame).
  std::vector<TestSample> samples;
  std::string markers_data = "[]";              // Rows of {name,startTime,endTime,phase,category,data}.
};

struct TestProcess {
  double start_time = 1700000000000.0;  // meta.startTime, epoch ms.
  std::string product = "test";
  std::vector<TestThread> threads;
  std::string libs = "[]";
  std::string categories =
      R"([{"name":"Other","color":"grey","subcategories":["Other"]},)"
      R"({"name":"Idle","color":"transparent","subcategories":["Other"]}])";
  std::string marker_schema = "[]";
  std::string extra_meta;  // ",\"profilingStartTime\":0,..." appended to meta.
};

// The profile's JSON text; `subprocesses` go under "processes" as they are.
std::string MakeProfileJson(const TestProcess& process, const std::vector<std::string>& subprocesses = {});

}  // namespace testing
}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_TEST_PROFILES_H_
