// The capture's progress and failure reporting, on a buffer filled here (the base tier's
// in-process version is tests/frontend/capture_progress_test.cc).
#include "shared/profile/profile_capture.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"
#include "rapidjson/document.h"
#include "shared/buffer/entry_kinds.h"
#include "shared/buffer/local_limit_chunk_manager.h"

namespace strata {
namespace profile {
namespace {

constexpr uint8_t kCountingTag = 2;
std::atomic<int> g_streamed{0};

// When set, the 1000th payload streamed waits (up to 10 s) until this latch has failed.
std::atomic<const FailureLatch*> g_wait_for_failure{nullptr};

// A typed marker's payload: one int64 "n".
void StreamCounting(EntryReader& reader, JsonWriter& w) {
  if (++g_streamed == 1000) {
    if (const FailureLatch* latch = g_wait_for_failure.load()) {
      const TimeStamp until = TimeStamp::Now() + TimeDuration::FromMilliseconds(10000);
      while (!latch->Failed() && TimeStamp::Now() < until) std::this_thread::yield();
    }
  }
  w.IntProperty("n", reader.ReadObject<int64_t>());
}
const MarkerTypeFunctions kCounting = {"Counting", &StreamCounting, nullptr};

// noipa: GCC -O2 otherwise treats it as const and merges calls (one return address for all).
__attribute__((noinline, noipa)) uint64_t OwnAddress() {
  return reinterpret_cast<uint64_t>(__builtin_return_address(0));
}

// A buffer with `markers` markers on 4 threads, every 10th typed, every 100th with a stack.
struct FilledBuffer {
  explicit FilledBuffer(int markers)
      : manager(/*max_total_bytes=*/256 << 20, /*chunk_min_buffer_bytes=*/64 << 10),
        buffer(ThreadSafety::kThreadSafe, manager) {
    start = TimeStamp::Now();
    for (int i = 0; i < markers; ++i) {
      MarkerHeader h;
      h.thread = ThreadId::FromNumber(1000 + i % 4);
      h.phase = MarkerPhase::kInstant;
      h.start = start + TimeDuration::FromMicroseconds(i);
      h.name = ProfilerString::Literal("tick");
      if (i % 100 == 0) h.stack = {OwnAddress(), OwnAddress()};
      if (i % 10 == 0) {
        h.payload_tag = kCountingTag;
        REQUIRE(buffer.PutObjects(EntryKind::kMarker, h, int64_t{i}));
      } else {
        REQUIRE(buffer.PutObjects(EntryKind::kMarker, h));
      }
    }
  }

  CaptureInputs Inputs() const {
    CaptureInputs inputs;
    inputs.start_time = start;
    inputs.meta.start_time = start;
    inputs.meta.product = "capture test";
    inputs.process_name = "capture test";
    inputs.marker_type = [](uint8_t tag) { return tag == kCountingTag ? &kCounting : nullptr; };
    return inputs;
  }

  LocalLimitChunkManager manager;
  ChunkedBuffer buffer;
  TimeStamp start;
};

std::string Capture(const CaptureInputs& inputs, const ChunkedBuffer& buffer, bool* ok,
                    std::string* error) {
  ChunkedJsonWriter w;
  *ok = WriteProfile(inputs, buffer, w, error);
  return w.TakeString();
}

size_t MarkerCount(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str(), json.size());
  REQUIRE_FALSE(d.HasParseError());
  size_t n = 0;
  for (const auto& t : d["threads"].GetArray()) n += t["markers"]["data"].Size();
  return n;
}

TEST_CASE("a polled capture's progress rises monotonically from 0 to 1 through the phases") {
  const FilledBuffer filled(200000);
  SharedProgress progress;
  std::atomic<bool> done{false};
  std::atomic<bool> polling{false};
  struct Seen {
    double progress;
    std::string location;
  };
  std::vector<Seen> seen;
  std::thread poller([&] {
    auto look = [&] {
      const double p = progress.Progress().ToDouble();
      const char* l = progress.LastLocation();
      if (seen.empty() || seen.back().progress != p || seen.back().location != (l ? l : "")) {
        seen.push_back({p, l ? l : ""});
      }
    };
    look();  // 0: nothing reported yet.
    polling = true;
    while (!done.load(std::memory_order_acquire)) look();
    look();
  });
  while (!polling) std::this_thread::yield();

  CaptureInputs inputs = filled.Inputs();
  ProgressLogger logger(&progress);
  inputs.progress = &logger;
  g_streamed = 0;
  bool ok = false;
  std::string error;
  const std::string json = Capture(inputs, filled.buffer, &ok, &error);
  // Not finished by the capture: the caller's logger is at its local 1 already.
  CHECK(logger.IsActive());
  CHECK(progress.Progress().IsExactlyOne());
  done = true;
  poller.join();

  REQUIRE(ok);
  CHECK(error.empty());
  CHECK(MarkerCount(json) == 200000);
  CHECK(g_streamed == 20000);

  REQUIRE(seen.size() >= 2);
  CHECK(seen.front().progress == 0.0);
  CHECK(seen.back().progress == 1.0);
  CHECK(seen.back().location == "capture: finishing");
  std::vector<std::string> locations;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (i > 0) REQUIRE(seen[i].progress >= seen[i - 1].progress);
    if (!seen[i].location.empty() && (locations.empty() || locations.back() != seen[i].location)) {
      locations.push_back(seen[i].location);
    }
  }
  // Each phase's location, in order (a fast phase may be missed by the poller).
  const std::vector<std::string> phases = {
      "capture: collecting addresses", "capture: symbolicating", "capture: writing threads",
      "capture: finishing"};
  size_t next = 0;
  for (const std::string& l : locations) {
    while (next < phases.size() && phases[next] != l) ++next;
    REQUIRE(next < phases.size());  // Known, and not out of order.
  }
  // The two passes report many intermediate values (1/256 steps each).
  size_t intermediate = 0;
  for (const Seen& s : seen) intermediate += (s.progress > 0 && s.progress < 1);
  INFO("distinct values seen: " << seen.size());
  CHECK(intermediate >= 10);
}

TEST_CASE("progress reporting does not change the profile") {
  const FilledBuffer filled(5000);
  bool ok1 = false, ok2 = false;
  std::string error;
  const std::string plain = Capture(filled.Inputs(), filled.buffer, &ok1, &error);
  SharedProgress progress;
  ProgressLogger logger(&progress);
  FailureLatch latch;
  CaptureInputs inputs = filled.Inputs();
  inputs.progress = &logger;
  inputs.failure = &latch;
  const std::string with_progress = Capture(inputs, filled.buffer, &ok2, &error);
  REQUIRE(ok1);
  REQUIRE(ok2);
  CHECK_FALSE(latch.Failed());
  // Both captures see the same buffer, libs and meta: the documents are identical.
  CHECK(plain == with_progress);
}

// Every write fails (a closed descriptor).
class FailingOutput final : public JsonOutput {
 public:
  void Consume(std::string* chunk) override {
    ++consumed;
    chunk->clear();
    SetError("write(/nowhere/p.json): Bad file descriptor");
  }
  int consumed = 0;
};

TEST_CASE("the first writer error is latched, returned, and stops the capture early") {
  const FilledBuffer filled(20000);
  FailingOutput output;
  JsonWriter w(&output, /*chunk_size=*/64);  // The meta alone fills a chunk.
  SharedProgress progress;
  ProgressLogger logger(&progress);
  FailureLatch latch;
  CaptureInputs inputs = filled.Inputs();
  inputs.progress = &logger;
  inputs.failure = &latch;
  g_streamed = 0;
  std::string error;
  CHECK_FALSE(WriteProfile(inputs, filled.buffer, w, &error));
  CHECK(error == "write(/nowhere/p.json): Bad file descriptor");
  CHECK(latch.Failure() == error);
  CHECK(g_streamed == 0);  // Pass 2 was skipped: the output had failed before it.
  CHECK(progress.Progress().IsExactlyOne());  // Still reaches the end.
}

TEST_CASE("a latch that failed elsewhere stops the capture, and its message is returned") {
  const FilledBuffer filled(20000);
  FailureLatch source;
  FailureLatch gathering(source, "child 42: ");
  gathering.SetFailure("stalled");
  FailureLatch capture(source, "capture: ");
  CaptureInputs inputs = filled.Inputs();
  inputs.failure = &capture;
  g_streamed = 0;
  bool ok = true;
  std::string error;
  Capture(inputs, filled.buffer, &ok, &error);
  CHECK_FALSE(ok);
  CHECK(error == "child 42: stalled");
  CHECK(g_streamed == 0);
}

TEST_CASE("a latch failed from another thread during the capture stops it") {
  const FilledBuffer filled(200000);
  FailureLatch latch;
  SharedProgress progress;
  ProgressLogger logger(&progress);
  CaptureInputs inputs = filled.Inputs();
  inputs.failure = &latch;
  inputs.progress = &logger;
  g_wait_for_failure = &latch;  // Pass 2 waits for the cancel at the 1000th typed marker.
  std::thread canceller([&] {
    // Cancel while pass 2 waits at the 1000th typed marker.
    while (g_streamed < 1000) std::this_thread::yield();
    latch.SetFailure("cancelled");
  });
  g_streamed = 0;
  bool ok = true;
  std::string error;
  Capture(inputs, filled.buffer, &ok, &error);
  canceller.join();
  g_wait_for_failure = nullptr;
  CHECK_FALSE(ok);
  CHECK(error == "cancelled");
  // Stopped within 1/256 of the pass (200000 entries: ~780, ~78 of them typed).
  CHECK(g_streamed >= 1000);
  CHECK(g_streamed < 1000 + 100);
  CHECK(progress.Progress().IsExactlyOne());
}

TEST_CASE("named native frames keep their library and lib-relative address") {
  // Marker 0 has a two-frame backtrace of an address of this test program.
  FilledBuffer filled(1);
  bool ok = false;
  std::string error;
  const std::string json = Capture(filled.Inputs(), filled.buffer, &ok, &error);
  REQUIRE(ok);
  rapidjson::Document d;
  d.Parse(json.c_str(), json.size());
  REQUIRE_FALSE(d.HasParseError());
  const auto& libs = d["libs"];
  size_t checked = 0;
  for (const auto& thread : d["threads"].GetArray()) {
    const auto& frames = thread["frameTable"];
    if (!frames["schema"].HasMember("address")) continue;
    const unsigned location = frames["schema"]["location"].GetUint();
    const unsigned address_column = frames["schema"]["address"].GetUint();
    const unsigned lib_column = frames["schema"]["lib"].GetUint();
    for (const auto& row : frames["data"].GetArray()) {
      if (row[lib_column].IsNull()) continue;
      const std::string name = thread["stringTable"][row[location].GetUint()].GetString();
      INFO(name);
      // Named ("FilledBuffer::FilledBuffer(int) (in ...)"), not an address.
      CHECK(name.find("FilledBuffer") != std::string::npos);
      CHECK(name.rfind("0x", 0) != 0);
      const unsigned lib = row[lib_column].GetUint();
      REQUIRE(lib < libs.Size());
      const uint64_t bias = libs[lib]["start"].GetUint64() - libs[lib]["offset"].GetUint64();
      const uint64_t absolute = bias + row[address_column].GetUint64();
      // The raw return address the marker recorded: inside that library's mapping.
      CHECK(absolute > libs[lib]["start"].GetUint64());
      CHECK(absolute <= libs[lib]["end"].GetUint64());
      CHECK(name.find(std::string("(in ") + libs[lib]["name"].GetString() + ")") != std::string::npos);
      ++checked;
    }
  }
  CHECK(checked >= 1);
}

// A minimal_stack type (native allocation records, issue 37): its stack in the front-end's
// minimal backtrace form, indexing the thread's table as the full form does.
const MarkerTypeFunctions kTexty = {"Texty", &StreamCounting, nullptr, /*minimal_stack=*/true};
constexpr uint8_t kTextyTag = 3;

TEST_CASE("a minimal_stack type: its payload as streamed, its stack minimal in the thread's table") {
  LocalLimitChunkManager manager(/*max_total_bytes=*/16 << 20, /*chunk_min_buffer_bytes=*/64 << 10);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  const TimeStamp start = TimeStamp::Now();
  // Read once: in an optimised build the loop may be unrolled, each copy its own call site.
  const uint64_t leaf = OwnAddress();
  const uint64_t caller = OwnAddress();
  for (int i = 0; i < 4; ++i) {
    MarkerHeader h;
    h.thread = ThreadId::FromNumber(1000);
    h.start = start + TimeDuration::FromMilliseconds(i + 1);
    h.name = ProfilerString::Literal("rec");
    h.payload_tag = i < 2 ? kTextyTag : kCountingTag;  // Two minimal, two full.
    if (i != 1) h.stack = {leaf + (i == 2 ? 32 : 0), caller};  // 0 and 3 alike.
    REQUIRE(buffer.PutObjects(EntryKind::kMarker, h, int64_t{-5 - i}));
  }
  CaptureInputs inputs;
  inputs.start_time = start;
  inputs.meta.start_time = start;
  inputs.meta.product = "capture test";
  inputs.symbolicate = false;
  inputs.threads.push_back(CaptureThread{ThreadId::FromNumber(1000), "GeckoMain", start,
                                         std::nullopt, /*is_main=*/true});
  inputs.marker_type = [](uint8_t tag) -> const MarkerTypeFunctions* {
    return tag == kTextyTag ? &kTexty : tag == kCountingTag ? &kCounting : nullptr;
  };
  bool ok = false;
  std::string error;
  const std::string json = Capture(inputs, buffer, &ok, &error);
  REQUIRE(ok);
  rapidjson::Document d;
  d.Parse(json.c_str(), json.size());
  REQUIRE_FALSE(d.HasParseError());
  const auto& thread = d["threads"][0];
  const auto& markers = thread["markers"]["data"];
  REQUIRE(markers.Size() == 4);
  const auto& stacks = thread["stackTable"]["data"];
  const auto& frames = thread["frameTable"]["data"];
  const auto& strings = thread["stringTable"];
  for (rapidjson::SizeType i = 0; i < 4; ++i) {
    const auto& data = markers[i][5];
    INFO("marker " << i);
    CHECK(std::string(data["type"].GetString()) == (i < 2 ? "Texty" : "Counting"));
    CHECK(data["n"].GetInt() == -5 - static_cast<int>(i));
    if (i == 1) {
      CHECK_FALSE(data.HasMember("stack"));
      continue;
    }
    const auto& samples = data["stack"]["samples"];
    const int column = samples["schema"]["stack"].GetInt();
    const auto& row = samples["data"][0];
    // The leaf: a raw frame of the recorded first address.
    const auto& leaf = stacks[row[column].GetUint()];
    const std::string location = strings[frames[leaf[1].GetUint()][0].GetUint()].GetString();
    CHECK(location.rfind("0x", 0) == 0);
    const int time_column = samples["schema"]["time"].GetInt();
    CHECK(row[time_column].GetDouble() == Approx(markers[i][1].GetDouble()));
    if (i < 2) {
      // The minimal form: the samples table only.
      CHECK(data["stack"].MemberCount() == 1);
    } else {
      CHECK(std::string(data["stack"]["name"].GetString()) == "SyncProfile");
      // Marker 3 has marker 0's frames: the same table index in either form.
      const auto& first = markers[0][5]["stack"]["samples"];
      const uint32_t first_stack = first["data"][0][first["schema"]["stack"].GetInt()].GetUint();
      CHECK((row[column].GetUint() == first_stack) == (i == 3));
    }
  }
}

}  // namespace
}  // namespace profile
}  // namespace strata

namespace strata {
namespace profile {
namespace {

// Sampling goes on while a capture is prepared: samples stamped after the caller's
// profiling end time must move the end past them, or the front-end drops them.
TEST_CASE("profilingEndTime covers the latest sample in the buffer") {
  FilledBuffer filled(10);
  CaptureInputs inputs = filled.Inputs();
  inputs.meta.profiling_start_time = filled.start;
  inputs.meta.profiling_end_time = filled.start + TimeDuration::FromMilliseconds(5);
  inputs.meta.interval_ms = 0.5;
  const TimeStamp late = filled.start + TimeDuration::FromMilliseconds(7);
  REQUIRE(filled.buffer.PutObjects(EntryKind::kSameSample, ThreadId::FromNumber(1000), late,
                                   int64_t{0}));
  bool ok = false;
  std::string error;
  const std::string json = Capture(inputs, filled.buffer, &ok, &error);
  REQUIRE(ok);
  rapidjson::Document d;
  d.Parse(json.c_str(), json.size());
  REQUIRE_FALSE(d.HasParseError());
  // One interval past the late sample: the front-end keeps samples strictly before the end.
  REQUIRE(d["meta"]["profilingEndTime"].GetDouble() == Approx(7.5));

  // Without a later sample the caller's end time stands.
  FilledBuffer quiet(10);
  CaptureInputs quiet_inputs = quiet.Inputs();
  quiet_inputs.meta.profiling_start_time = quiet.start;
  quiet_inputs.meta.profiling_end_time = quiet.start + TimeDuration::FromMilliseconds(5);
  const std::string quiet_json = Capture(quiet_inputs, quiet.buffer, &ok, &error);
  REQUIRE(ok);
  d.Parse(quiet_json.c_str(), quiet_json.size());
  REQUIRE(d["meta"]["profilingEndTime"].GetDouble() == Approx(5.0));
}

}  // namespace
}  // namespace profile
}  // namespace strata

namespace strata {
namespace profile {
namespace {

// Big threads are streamed into the document by passes of their own, small ones buffered and
// spliced (ChooseStreamedThreads): whichever way, every thread must get exactly its own rows,
// in order, with its own stacks, and the document order stays main first, then by thread id.
TEST_CASE("streamed and buffered threads: each gets exactly its samples, markers and stacks") {
  LocalLimitChunkManager manager(/*max_total_bytes=*/64 << 20, /*chunk_min_buffer_bytes=*/64 << 10);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  const TimeStamp start = TimeStamp::Now();
  // tid -> (samples, markers). 1000 is the main thread; with 1/8 of the entries needed to be
  // streamed, 1000, 1001 and 1003 are streamed, 1002 (80 entries) is buffered.
  struct Plan {
    int tid, samples, markers;
  };
  const std::vector<Plan> plans = {{1001, 15000, 0}, {1003, 0, 8000}, {1002, 50, 30},
                                   {1000, 20000, 10000}};
  std::vector<int> written_samples(plans.size()), written_markers(plans.size());
  // Round robin over the threads, samples and markers interleaved.
  for (int step = 0;; ++step) {
    bool any = false;
    for (size_t p = 0; p < plans.size(); ++p) {
      const Plan& plan = plans[p];
      const ThreadId tid = ThreadId::FromNumber(plan.tid);
      const TimeStamp time = start + TimeDuration::FromMicroseconds(step * 10 + p);
      if (written_samples[p] < plan.samples) {
        const int i = written_samples[p]++;
        // Two native frames whose addresses name the thread and the sample.
        REQUIRE(buffer.PutObjects(EntryKind::kSample, tid, time, int64_t{i}, int32_t{0},
                                  uint8_t{2}, uint8_t{0}, uint64_t(plan.tid) << 20, uint8_t{0},
                                  (uint64_t(plan.tid) << 20) + 1 + i % 7));
        any = true;
      }
      if (written_markers[p] < plan.markers) {
        const int i = written_markers[p]++;
        MarkerHeader h;
        h.thread = tid;
        h.start = time;
        h.name = i % 2 == 0 ? ProfilerString::Literal("even") : ProfilerString::Literal("odd");
        REQUIRE(buffer.PutObjects(EntryKind::kMarker, h));
        any = true;
      }
    }
    if (step == 3) {
      REQUIRE(buffer.PutObjects(EntryKind::kCounterSample, uint32_t{0}, start, int64_t{4096},
                                uint64_t{1}));
      REQUIRE(buffer.PutObjects(EntryKind::kProfilerOverhead, start, TimeDuration(),
                                TimeDuration::FromMicroseconds(3), TimeDuration(), TimeDuration()));
    }
    if (!any) break;
  }

  CaptureInputs inputs;
  inputs.start_time = start;
  inputs.meta.start_time = start;
  inputs.meta.product = "capture test";
  inputs.symbolicate = false;  // Raw "0x..." frames: the addresses are checked below.
  inputs.threads.push_back(CaptureThread{ThreadId::FromNumber(1000), "GeckoMain", start,
                                         std::nullopt, /*is_main=*/true});
  inputs.counters.push_back(CaptureCounter{"Memory", "Memory", "bytes"});
  SharedProgress progress;
  ProgressLogger logger(&progress);
  inputs.progress = &logger;
  bool ok = false;
  std::string error;
  const std::string json = Capture(inputs, buffer, &ok, &error);
  REQUIRE(ok);
  CHECK(progress.Progress().IsExactlyOne());
  rapidjson::Document d;
  d.Parse(json.c_str(), json.size());
  REQUIRE_FALSE(d.HasParseError());

  const auto& threads = d["threads"];
  REQUIRE(threads.Size() == 4);
  const int expected_order[] = {1000, 1001, 1002, 1003};
  for (rapidjson::SizeType t = 0; t < 4; ++t) {
    const auto& thread = threads[t];
    const int tid = thread["tid"].GetInt();
    CHECK(tid == expected_order[t]);
    const Plan& plan = *std::find_if(plans.begin(), plans.end(),
                                     [&](const Plan& p) { return p.tid == tid; });
    INFO("thread " << tid);
    const auto& samples = thread["samples"]["data"];
    const auto& markers = thread["markers"]["data"];
    REQUIRE(samples.Size() == static_cast<rapidjson::SizeType>(plan.samples));
    REQUIRE(markers.Size() == static_cast<rapidjson::SizeType>(plan.markers));
    const auto& stacks = thread["stackTable"]["data"];
    const auto& frames = thread["frameTable"]["data"];
    const auto& strings = thread["stringTable"];
    for (rapidjson::SizeType i = 0; i < samples.Size(); ++i) {
      // [stack, time, eventDelay, threadCPUDelta]; the leaf frame's address names the row.
      REQUIRE(samples[i][3].GetInt() == static_cast<int>(i));
      const auto& leaf = stacks[samples[i][0].GetUint()];
      const std::string location = strings[frames[leaf[1].GetUint()][0].GetUint()].GetString();
      char expected[32];
      snprintf(expected, sizeof(expected), "0x%llx",
               static_cast<unsigned long long>((uint64_t(tid) << 20) + 1 + i % 7));
      REQUIRE(location == expected);
      if (i > 0) REQUIRE(samples[i][1].GetDouble() > samples[i - 1][1].GetDouble());
    }
    for (rapidjson::SizeType i = 0; i < markers.Size(); ++i) {
      REQUIRE(std::string(strings[markers[i][0].GetUint()].GetString()) ==
              (i % 2 == 0 ? "even" : "odd"));
    }
  }
  REQUIRE(d["counters"].Size() == 1);
  CHECK(d["counters"][0]["samples"]["data"].Size() == 1);
  CHECK(d["profilerOverhead"]["samples"]["data"].Size() == 1);
}

}  // namespace
}  // namespace profile
}  // namespace strata
