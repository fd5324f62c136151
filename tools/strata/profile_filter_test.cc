// --pid, --tid, --process, --thread and --range (profile_filter.h) on hand-made profiles: what
// is kept, the wall time across the gaps of a marker range, the same narrowing on the Gecko
// document (strata view), and the messages for values that select nothing or are malformed.
#include "tools/strata/profile_filter.h"

#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tools/strata/function_stats.h"
#include "tools/strata/test_profiles.h"

namespace strata {
namespace cli {
namespace {

// Parent pid 100: GeckoMain (tid 100) and worker-1 (101), worker-2 (102); child pid 200:
// GeckoMain (tid 200). Every thread: main > work, samples at 0..9 ms, CPU 1 ms each. worker-1
// has Frame markers over [1, 3] and [6, 8] ms and an instant "Tick" at 4 ms.
std::string TestProfileJson() {
  auto thread = [](const std::string& name, int pid, int tid) {
    testing::TestThread t;
    t.name = name;
    t.pid = pid;
    t.tid = tid;
    t.strings = {"main", "work", "Frame", "Tick"};
    t.frames = {{0, -1}, {1, -1}};
    t.stacks = {{-1, 0}, {0, 1}};
    for (int i = 0; i < 10; ++i) t.samples.push_back({1, static_cast<double>(i), 1e6});
    return t;
  };
  testing::TestProcess parent;
  parent.threads = {thread("GeckoMain", 100, 100), thread("worker-1", 100, 101), thread("worker-2", 100, 102)};
  parent.threads[1].markers_data = "[[2,1,3,1,0,null],[2,6,8,1,0,null],[3,4,null,0,0,null]]";
  testing::TestProcess child;
  child.threads = {thread("GeckoMain", 200, 200)};
  return testing::MakeProfileJson(parent, {testing::MakeProfileJson(child)});
}

Profile Load(const rapidjson::Document& document) {
  Profile profile;
  std::string error;
  REQUIRE(LoadProfileModel(document, &profile, &error));
  return profile;
}

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document document;
  document.Parse(json.c_str());
  REQUIRE_FALSE(document.HasParseError());
  return document;
}

std::vector<int64_t> Tids(const Profile& profile) {
  std::vector<int64_t> tids;
  for (const Thread& t : profile.threads) tids.push_back(t.tid);
  return tids;
}

Profile Filtered(const Profile& profile, const ProfileFilter& filter, FilterSelection* selection = nullptr) {
  FilterSelection local;
  FilterSelection* s = selection != nullptr ? selection : &local;
  std::string error;
  const bool selected = SelectWithFilter(profile, filter, s, &error);
  INFO(error);
  REQUIRE(selected);
  return ApplySelection(profile, *s);
}

std::string FilterError(const Profile& profile, const ProfileFilter& filter) {
  FilterSelection selection;
  std::string error;
  CHECK_FALSE(SelectWithFilter(profile, filter, &selection, &error));
  return error;
}

TEST_CASE("Processes and threads are selected by pid, tid and name globs") {
  const rapidjson::Document document = Parse(TestProfileJson());
  const Profile profile = Load(document);
  REQUIRE(profile.threads.size() == 4);
  REQUIRE(profile.processes.size() == 2);

  ProfileFilter by_pid;
  by_pid.pids = {200};
  Profile p = Filtered(profile, by_pid);
  CHECK(Tids(p) == std::vector<int64_t>{200});
  CHECK(p.processes.size() == 1);
  CHECK(p.processes[0].pid == 200);
  CHECK(p.threads[0].process == 0);
  CHECK(p.processes[0].threads == std::vector<size_t>{0});
  CHECK(p.total_samples == 10);

  ProfileFilter by_tid;
  by_tid.tids = {102, 200};
  CHECK(Tids(Filtered(profile, by_tid)) == std::vector<int64_t>{102, 200});

  ProfileFilter by_thread;
  by_thread.thread_globs = {"worker-*"};
  CHECK(Tids(Filtered(profile, by_thread)) == std::vector<int64_t>{101, 102});
  // A main thread is found by the program's name (as summary shows it) and by GeckoMain.
  by_thread.thread_globs = {"GeckoMain"};
  CHECK(Tids(Filtered(profile, by_thread)) == std::vector<int64_t>{100, 200});
  by_thread.thread_globs = {profile.threads[0].name};
  CHECK(Tids(Filtered(profile, by_thread)) == std::vector<int64_t>{100, 200});

  // Kinds combine with "and", values of one kind with "or".
  ProfileFilter combined;
  combined.pids = {100};
  combined.thread_globs = {"worker-2", "GeckoMain"};
  CHECK(Tids(Filtered(profile, combined)) == std::vector<int64_t>{100, 102});

  ProfileFilter by_process;
  by_process.process_globs = {"pr?g"};
  CHECK(Filtered(profile, by_process).threads.size() == 4);
}

TEST_CASE("A filter that selects no thread is refused, naming what the profile has") {
  const Profile profile = Load(Parse(TestProfileJson()));
  ProfileFilter filter;
  filter.pids = {4242};
  const std::string error = FilterError(profile, filter);
  CHECK(error.find("no thread matches pid 4242") != std::string::npos);
  CHECK(error.find("pids 100, 200") != std::string::npos);
  CHECK(error.find("worker-1") != std::string::npos);
  filter = ProfileFilter();
  filter.thread_globs = {"render*"};
  CHECK(FilterError(profile, filter).find("thread 'render*'") != std::string::npos);
}

TEST_CASE("A numeric range keeps the samples inside it") {
  const Profile profile = Load(Parse(TestProfileJson()));
  ProfileFilter filter;
  filter.tids = {101};
  filter.range_text = "2,5";
  FilterSelection selection;
  const Profile p = Filtered(profile, filter, &selection);
  REQUIRE(p.threads.size() == 1);
  CHECK(p.threads[0].sample_time == std::vector<double>{2, 3, 4, 5});
  CHECK(p.total_samples == 4);
  CHECK(ThreadWallMs(p, p.threads[0]) == Approx(4.0));
  CHECK(selection.description == "tid 101; range 2.0 to 5.0 ms");
  // The markers that overlap it: Frame [1, 3] and the Tick at 4.
  REQUIRE(p.threads[0].markers.size() == 2);
  CHECK(p.threads[0].markers[0].name == "Frame");
  CHECK(p.threads[0].markers[1].name == "Tick");

  filter.range_text = "7,";
  CHECK(Filtered(profile, filter).threads[0].sample_time == std::vector<double>{7, 8, 9});
  filter.range_text = ",1.5";
  CHECK(Filtered(profile, filter).threads[0].sample_time == std::vector<double>{0, 1});
}

TEST_CASE("A marker range keeps the samples in that marker's intervals; the gap between them is not wall time") {
  const rapidjson::Document document = Parse(TestProfileJson());
  const Profile profile = Load(document);
  ProfileFilter filter;
  filter.tids = {100};  // The markers are on worker-1; the range applies to every thread.
  filter.range_text = "Frame";
  FilterSelection selection;
  const Profile p = Filtered(profile, filter, &selection);
  REQUIRE(selection.intervals.size() == 2);
  REQUIRE(p.threads.size() == 1);
  CHECK(p.threads[0].sample_time == std::vector<double>{1, 2, 3, 6, 7, 8});
  // Five 1 ms steps inside the intervals, and the sample at 3 ms stands for one interval, not
  // the 3 ms to the next kept sample.
  CHECK(ThreadWallMs(p, p.threads[0]) == Approx(6.0));
  CHECK(ComputeFunctionTimes(p).wall == Approx(6.0));
  CHECK(selection.description == "tid 100; range 'Frame' (2 markers, 4.0 ms)");
  CHECK(FilterNote(profile, p, selection) ==
        "Filtered: tid 100; range 'Frame' (2 markers, 4.0 ms): 1 of 4 threads, 1 of 2 processes, 6 of 40 samples");
}

TEST_CASE("Malformed and unknown ranges are refused with the accepted forms") {
  const Profile profile = Load(Parse(TestProfileJson()));
  CHECK(CheckRangeText("1,2").empty());
  CHECK(CheckRangeText("1.5,").empty());
  CHECK(CheckRangeText("Frame").empty());
  CHECK(CheckRangeText("5,2").find("END must be after START") != std::string::npos);
  CHECK(CheckRangeText("-1,3").find("0 or more") != std::string::npos);
  CHECK(CheckRangeText(",").find("START, END or both") != std::string::npos);
  CHECK(CheckRangeText("12").find("give START,END") != std::string::npos);
  CHECK(CheckRangeText("1..2,3").find("not a number") != std::string::npos);
  CHECK(CheckRangeText("").find("accepted") != std::string::npos);

  ProfileFilter filter;
  filter.range_text = "Paint";
  const std::string unknown = FilterError(profile, filter);
  CHECK(unknown.find("no marker of that name") != std::string::npos);
  CHECK(unknown.find("Frame, Tick") != std::string::npos);
  filter.range_text = "Tick";
  CHECK(FilterError(profile, filter).find("instant") != std::string::npos);
  filter.range_text = "50,60";
  CHECK(FilterError(profile, filter).find("after the profile's end") != std::string::npos);
}

TEST_CASE("The document is narrowed as the model is (strata view)") {
  rapidjson::Document document = Parse(TestProfileJson());
  const Profile profile = Load(document);
  ProfileFilter filter;
  filter.thread_globs = {"worker-1", "GeckoMain"};
  filter.pids = {100};
  filter.range_text = "Frame";
  FilterSelection selection;
  const Profile expected = Filtered(profile, filter, &selection);
  ApplySelectionToDocument(profile, selection, &document);
  // The child process had no kept thread: gone.
  REQUIRE(document.HasMember("processes"));
  CHECK(document["processes"].Size() == 0);
  const Profile reloaded = Load(document);
  CHECK(Tids(reloaded) == Tids(expected));
  REQUIRE(reloaded.threads.size() == 2);
  for (size_t i = 0; i < reloaded.threads.size(); ++i) {
    CHECK(reloaded.threads[i].sample_time == expected.threads[i].sample_time);
  }
  // worker-1's Tick (an instant at 4 ms, between the intervals) is gone; both Frames stay.
  CHECK(reloaded.threads[1].markers.size() == 2);
}

TEST_CASE("No filter keeps everything") {
  const Profile profile = Load(Parse(TestProfileJson()));
  const Profile p = Filtered(profile, ProfileFilter());
  CHECK(p.threads.size() == profile.threads.size());
  CHECK(p.total_samples == profile.total_samples);
  CHECK(ComputeFunctionTimes(p).wall == Approx(ComputeFunctionTimes(profile).wall));
}

}  // namespace
}  // namespace cli
}  // namespace strata
