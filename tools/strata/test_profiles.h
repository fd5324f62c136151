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
  // Non-empty: one per frame, written as the frameTable's `inlineDepth` column (0: the
  // function the code belongs to; 1, 2, ...: functions inlined into it), as `strata
  // symbolicate` writes it.
  std::vector<int> inline_depths;
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
  std::string paused_ranges = "[]";  // The process's pausedRanges.
};

// One thread main > malloc > tcache_get, tcache_get inlined into malloc (inlineDepth 1, as
// `strata symbolicate` writes it); stack 1 ends in malloc's own code, stack 2 in tcache_get's.
// The caller adds the samples.
TestThread InlinedLeafThread();

// The profile's JSON text; `subprocesses` go under "processes" as they are.
std::string MakeProfileJson(const TestProcess& process, const std::vector<std::string>& subprocesses = {});

// One process (pid 100, interval 1 ms) with a busy and a blocked thread, for the weight
// tests (function_stats.h); every number below is exact.
// * "busy" (tid 11): samples at 0..9 ms in main > busy_loop, CPU delta 1 ms each (the first
//   ignored): wall 10 ms, CPU 9 ms, 10 samples.
// * "blocked" (tid 12): main > prepare at 0, 1, 2 ms (CPU 1 ms each, the first ignored);
//   main > wait_here > poll at 3..52 ms with CPU delta 0 (50 samples); then no sample until
//   300 ms (the profiler paused from 60 to 290 ms: the sample at 52 stands for 1 ms); main >
//   after at 300, 301, 302 (CPU 0.5, 1, 1 ms) and, after a paused range 302.5-310 ms, at 311
//   and 312 (CPU 1 ms each; the sample at 302 stands for 1 ms). Wall: prepare 3, poll 50, after 5 =
//   58 ms; CPU: prepare 2, poll 0, after 4.5 = 6.5 ms; 58 samples.
// With `cpu` false every CPU delta is null.
std::string WaitingProfileJson(bool cpu = true);

}  // namespace testing
}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_TEST_PROFILES_H_
