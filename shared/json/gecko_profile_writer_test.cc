#include "shared/json/gecko_profile_writer.h"

#include <string>

#include "catch2/catch.hpp"
#include "rapidjson/document.h"
#include "shared/json/location.h"

namespace strata {
namespace {

using rapidjson::Value;

constexpr uint32_t kIdle = 0;
constexpr uint32_t kOther = 1;
constexpr uint32_t kIo = 2;

ProfileMeta TestMeta(TimeStamp start) {
  ProfileMeta meta;
  meta.start_time = start;
  meta.start_time_epoch_ns = 1700000000123456789;
  meta.interval_ms = 1;
  meta.product = "strata test";
  meta.categories = {
      {"Idle", "transparent", {"Other"}},
      {"Other", "grey", {"Other"}},
      {"I/O", "lightblue", {"Other", "Read", "Write"}},
  };
  meta.marker_schemas = {
      R"({"name":"FileRead","display":["marker-chart","marker-table"],)"
      R"("data":[{"key":"path","label":"Path","format":"file-path"},)"
      R"({"key":"bytes","label":"Bytes","format":"bytes"}]})"};
  return meta;
}

rapidjson::Document Parse(const std::string& text) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseFullPrecisionFlag>(
      text.c_str(), text.size());
  INFO(text.substr(0, 2000));
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

// Column `name` of row `row` of a {schema, data} table.
const Value& Cell(const Value& table, size_t row, const char* name) {
  return table["data"][static_cast<rapidjson::SizeType>(row)][table["schema"][name].GetUint()];
}

std::string StringAt(const Value& thread, const Value& index) {
  return thread["stringTable"][index.GetUint()].GetString();
}

TEST_CASE("a full small profile, parsed back field by field") {
  const TimeStamp t0 = TimeStamp::FromNanoseconds(1000000000000);
  const auto at = [&](int64_t ns) { return t0 + TimeDuration::FromNanoseconds(ns); };
  ProfileMeta meta = TestMeta(t0);
  meta.shutdown_time = at(50000000);
  meta.profiling_start_time = at(0);
  meta.profiling_end_time = at(40000000);
  meta.pid = ProcessId::FromNumber(4242);
  FillSystemInfo(meta);

  ThreadDescription main_desc;
  main_desc.name = "GeckoMain";
  main_desc.process_name = "demo";
  main_desc.pid = ProcessId::FromNumber(4242);
  main_desc.tid = ThreadId::FromNumber(4242);
  main_desc.register_time = at(-1000);  // Registered before the session started.
  GeckoThreadWriter main_thread(main_desc, t0);

  UniqueStacks& st = main_thread.stacks();
  uint32_t f_main = st.LabelFrame("main", kOther);
  uint32_t f_read = st.LabelFrame("ReadConfig", kIo, 1);
  uint32_t f_pc1 = st.AddressFrame(0x55d0c0de1234);
  uint32_t f_pc2 = st.AddressFrame(0x7f0000001000);
  std::optional<uint32_t> s_main = st.Stack(std::nullopt, f_main);
  std::optional<uint32_t> s_read = st.Stack(s_main, f_read);
  std::optional<uint32_t> s_leaf = st.Stack(st.Stack(s_read, f_pc1), f_pc2);

  main_thread.AddSample(s_main, at(1000000), 0);
  main_thread.AddSample(s_leaf, at(2000001), 900000);
  main_thread.AddSample(s_leaf, at(3000000), 1000000, 0.5);
  main_thread.AddSample(std::nullopt, at(2500000));  // Out of order: clamped to 3 ms.
  CHECK(main_thread.clamped_samples() == 1);

  main_thread.AddMarker("Startup", MarkerTiming::Instant(at(500)), kOther);
  main_thread.AddMarker("ReadConfig", MarkerTiming::Interval(at(1500000), at(2500000)), kIo,
                        "FileRead", [&](JsonWriter& w) {
                          w.StringProperty("path", "/etc/demo.ini");
                          w.IntProperty("bytes", 1234);
                          main_thread.WriteMarkerStack(w, *s_read, at(2500000));
                        });
  main_thread.AddMarker("Phase", MarkerTiming::IntervalStart(at(100)), kOther);
  main_thread.AddMarker("Phase", MarkerTiming::IntervalEnd(at(200)), kOther);
  CHECK(main_thread.sample_count() == 4);
  CHECK(main_thread.marker_count() == 4);

  ThreadDescription worker_desc;
  worker_desc.name = "Worker \xE4\xB8";  // Cut UTF-8: repaired.
  worker_desc.pid = ProcessId::FromNumber(4242);
  worker_desc.tid = ThreadId::FromNumber(4243);
  worker_desc.register_time = at(100);
  worker_desc.unregister_time = at(30000000);
  GeckoThreadWriter worker(worker_desc, t0);
  uint32_t w_root = worker.stacks().NativeSymbolFrame("worker_main", "libdemo.so");
  uint32_t w_label = worker.stacks().LabelFrame("tick:12", kOther);
  worker.AddSample(worker.stacks().Stack(worker.stacks().Stack(std::nullopt, w_root), w_label),
                   at(5000000), 250000);

  GeckoCounterWriter memory("malloc", "Memory", "Heap bytes", t0);
  memory.AddSample(at(1000000), 4096, 2);
  memory.AddSample(at(2000000), -1024);

  SharedLibrary lib;
  lib.start = 0x55d0c0de0000;
  lib.end = 0x55d0c0df0000;
  lib.offset = 0;
  lib.name = lib.debug_name = "demo";
  lib.path = lib.debug_path = "/usr/bin/demo";
  lib.breakpad_id = "0403020106050807090A0B0C0D0E0F100";
  lib.code_id = "0102030405060708090a0b0c0d0e0f1011121314";
  lib.arch = "x86_64";

  ChunkedJsonWriter out(64);  // Small chunks: exercises splicing across chunk boundaries.
  GeckoProfileWriter profile(out, meta);
  profile.WriteLibs({lib});
  profile.AddThread(main_thread);
  profile.AddThread(worker);
  profile.AddCounter(memory);
  profile.WritePausedRanges({{at(10000000), at(11000000), "profiler-paused"}});
  profile.WriteProfilingLog(ProcessId::FromNumber(4242), [](JsonWriter& w) {
    w.TimeMsProperty("profilingLogBegin_TSms", 0);
    w.StringProperty("note", "test");
  });
  profile.Finish();
  REQUIRE(profile.ok());
  CHECK(profile.thread_count() == 2);
  CHECK(out.depth() == 0);
  const std::string text = out.TakeString();
  rapidjson::Document d = Parse(text);

  SECTION("meta") {
    const Value& m = d["meta"];
    CHECK(m["version"].GetInt() == 36);
    CHECK(m["startTime"].GetDouble() == Approx(1700000000123.456789));
    CHECK(text.find(R"("startTime":1700000000123.456789)") != std::string::npos);
    CHECK(m["shutdownTime"].GetDouble() == 50);
    CHECK(m["interval"].GetDouble() == 1);
    CHECK(m["processType"].GetInt() == 0);
    CHECK(m["pid"].GetInt() == 4242);
    CHECK(std::string(m["product"].GetString()) == "strata test");
    CHECK(m["presymbolicated"].GetBool() == false);
    CHECK(m["stackwalk"].GetInt() == 1);
    CHECK(std::string(m["sampleUnits"]["threadCPUDelta"].GetString()) == "ns");
    CHECK(std::string(m["sampleUnits"]["time"].GetString()) == "ms");
    CHECK(m["profilingStartTime"].GetDouble() == 0);
    CHECK(m["profilingEndTime"].GetDouble() == 40);
    CHECK(std::string(m["platform"].GetString()) == "Linux");
    CHECK(m["logicalCPUs"].GetUint() >= 1);
    REQUIRE(m["categories"].Size() == 3);  // Has a grey one: nothing appended.
    CHECK(std::string(m["categories"][2]["name"].GetString()) == "I/O");
    CHECK(m["categories"][2]["subcategories"].Size() == 3);
    REQUIRE(m["markerSchema"].Size() == 1);
    CHECK(std::string(m["markerSchema"][0]["name"].GetString()) == "FileRead");
    CHECK(m["markerSchema"][0]["data"].IsArray());
  }

  SECTION("top level") {
    CHECK(d["processes"].IsArray());
    CHECK(d["processes"].Size() == 0);
    REQUIRE(d["libs"].Size() == 1);
    const Value& l = d["libs"][0];
    CHECK(l["start"].GetUint64() == 0x55d0c0de0000);
    CHECK(l["end"].GetUint64() == 0x55d0c0df0000);
    CHECK(l["offset"].GetUint64() == 0);
    CHECK(std::string(l["debugName"].GetString()) == "demo");
    CHECK(std::string(l["breakpadId"].GetString()) == lib.breakpad_id);
    CHECK(std::string(l["codeId"].GetString()) == lib.code_id);
    CHECK(std::string(l["arch"].GetString()) == "x86_64");
    REQUIRE(d["counters"].Size() == 1);
    const Value& c = d["counters"][0];
    CHECK(std::string(c["category"].GetString()) == "Memory");
    CHECK(Cell(c["samples"], 0, "count").GetInt() == 4096);
    CHECK(Cell(c["samples"], 0, "number").GetInt() == 2);
    CHECK(Cell(c["samples"], 1, "time").GetDouble() == 2);
    CHECK(Cell(c["samples"], 1, "count").GetInt() == -1024);
    REQUIRE(d["pausedRanges"].Size() == 1);
    CHECK(d["pausedRanges"][0]["startTime"].GetDouble() == 10);
    CHECK(std::string(d["pausedRanges"][0]["reason"].GetString()) == "profiler-paused");
    CHECK(std::string(d["profilingLog"]["4242"]["note"].GetString()) == "test");
  }

  SECTION("main thread") {
    REQUIRE(d["threads"].Size() == 2);
    const Value& t = d["threads"][0];
    CHECK(std::string(t["name"].GetString()) == "GeckoMain");
    CHECK(std::string(t["processType"].GetString()) == "default");
    CHECK(std::string(t["processName"].GetString()) == "demo");
    CHECK(t["pid"].IsNumber());
    CHECK(t["pid"].GetInt() == 4242);
    CHECK(t["tid"].GetInt() == 4242);
    CHECK(t["registerTime"].GetDouble() == -0.001);
    CHECK(t.HasMember("unregisterTime"));
    CHECK(t["unregisterTime"].IsNull());

    const Value& samples = t["samples"];
    for (const char* column : {"stack", "time", "eventDelay", "threadCPUDelta"}) {
      CHECK(samples["schema"].HasMember(column));
    }
    REQUIRE(samples["data"].Size() == 4);
    CHECK(Cell(samples, 0, "stack").GetUint() == *s_main);
    CHECK(Cell(samples, 0, "time").GetDouble() == 1);
    CHECK(Cell(samples, 1, "time").GetDouble() == 2.000001);
    CHECK(text.find("2.000001,") != std::string::npos);
    CHECK(Cell(samples, 1, "threadCPUDelta").GetInt() == 900000);
    CHECK(Cell(samples, 1, "eventDelay").IsNull());
    CHECK(Cell(samples, 2, "eventDelay").GetDouble() == 0.5);
    CHECK(Cell(samples, 3, "stack").IsNull());
    CHECK(Cell(samples, 3, "time").GetDouble() == 3);  // Clamped.
    CHECK(Cell(samples, 3, "threadCPUDelta").IsNull());

    // Stack 3 (leaf) -> 2 (pc1) -> 1 (ReadConfig) -> 0 (main): prefix < index everywhere.
    const Value& stacks = t["stackTable"];
    REQUIRE(stacks["data"].Size() == 4);
    for (rapidjson::SizeType i = 0; i < stacks["data"].Size(); ++i) {
      const Value& prefix = Cell(stacks, i, "prefix");
      if (!prefix.IsNull()) CHECK(prefix.GetUint() < i);
    }
    CHECK(Cell(stacks, 0, "prefix").IsNull());
    CHECK(Cell(stacks, *s_leaf, "prefix").GetUint() == 2);

    const Value& frames = t["frameTable"];
    REQUIRE(frames["data"].Size() == 4);
    CHECK(StringAt(t, Cell(frames, f_main, "location")) == "main");
    CHECK(StringAt(t, Cell(frames, f_pc1, "location")) == "0x55d0c0de1234");
    CHECK(StringAt(t, Cell(frames, f_pc2, "location")) == "0x7f0000001000");
    CHECK(Cell(frames, f_read, "category").GetUint() == kIo);
    CHECK(Cell(frames, f_read, "subcategory").GetUint() == 1);
    CHECK(Cell(frames, f_pc1, "category").IsNull());
    CHECK(Cell(frames, f_main, "relevantForJS").GetBool() == false);

    const Value& markers = t["markers"];
    for (const char* column : {"name", "startTime", "endTime", "phase", "category", "data"}) {
      CHECK(markers["schema"].HasMember(column));
    }
    REQUIRE(markers["data"].Size() == 4);
    CHECK(StringAt(t, Cell(markers, 0, "name")) == "Startup");
    CHECK(Cell(markers, 0, "startTime").GetDouble() == 0.0005);
    CHECK(Cell(markers, 0, "endTime").IsNull());
    CHECK(Cell(markers, 0, "phase").GetInt() == 0);
    CHECK(Cell(markers, 0, "data").IsNull());
    CHECK(StringAt(t, Cell(markers, 1, "name")) == "ReadConfig");
    CHECK(Cell(markers, 1, "startTime").GetDouble() == 1.5);
    CHECK(Cell(markers, 1, "endTime").GetDouble() == 2.5);
    CHECK(Cell(markers, 1, "phase").GetInt() == 1);
    CHECK(Cell(markers, 1, "category").GetUint() == kIo);
    const Value& data = Cell(markers, 1, "data");
    CHECK(std::string(data["type"].GetString()) == "FileRead");
    CHECK(std::string(data["path"].GetString()) == "/etc/demo.ini");
    CHECK(data["bytes"].GetInt() == 1234);
    const Value& cause = data["stack"];
    CHECK(std::string(cause["name"].GetString()) == "SyncProfile");
    CHECK(cause["registerTime"].IsNull());
    CHECK(cause["unregisterTime"].IsNull());
    // The backtrace's constant text is made once per thread (WriteMarkerStack): its thread's.
    CHECK(std::string(cause["processType"].GetString()) == t["processType"].GetString());
    CHECK(cause["tid"].GetInt64() == t["tid"].GetInt64());
    CHECK(cause["pid"].GetInt64() == t["pid"].GetInt64());
    CHECK(cause["markers"]["schema"]["data"].GetInt() == 5);
    CHECK(cause["markers"]["data"].Size() == 0);
    CHECK(cause["samples"]["data"].Size() == 1);
    CHECK(Cell(cause["samples"], 0, "stack").GetUint() == *s_read);
    CHECK(Cell(cause["samples"], 0, "time").GetDouble() == 2.5);
    CHECK(Cell(cause["samples"], 0, "eventDelay").GetInt() == 0);
    CHECK(Cell(markers, 2, "phase").GetInt() == 2);
    CHECK(Cell(markers, 2, "endTime").IsNull());
    CHECK(Cell(markers, 3, "phase").GetInt() == 3);
    CHECK(Cell(markers, 3, "startTime").IsNull());
    CHECK(Cell(markers, 3, "endTime").GetDouble() == 0.0002);
  }

  SECTION("worker thread") {
    const Value& t = d["threads"][1];
    CHECK(std::string(t["name"].GetString()) == "Worker \xEF\xBF\xBD\xEF\xBF\xBD");
    CHECK_FALSE(t.HasMember("processName"));
    CHECK(t["unregisterTime"].GetDouble() == 30);
    // Its own string table: indexes restart at 0.
    const Value& frames = t["frameTable"];
    CHECK(StringAt(t, Cell(frames, w_root, "location")) == "worker_main (in libdemo.so)");
    std::string label = StringAt(t, Cell(frames, w_label, "location"));
    CHECK(label == "tick:12 ");
    CHECK(ClassifyLocation(label) == LocationKind::kLabel);
  }
}

TEST_CASE("an empty profile still has every mandatory container") {
  ChunkedJsonWriter out;
  ProfileMeta meta;
  meta.start_time = TimeStamp::FromNanoseconds(5);
  GeckoProfileWriter profile(out, meta);
  profile.Finish();
  REQUIRE(profile.ok());
  rapidjson::Document d = Parse(out.TakeString());
  CHECK(d["libs"].IsArray());
  CHECK(d["threads"].IsArray());
  CHECK(d["processes"].IsArray());
  CHECK(d["meta"]["markerSchema"].IsArray());
  CHECK(d["meta"]["shutdownTime"].IsNull());
  CHECK_FALSE(d["meta"].HasMember("profilingStartTime"));
  // No categories given: a grey default is written.
  REQUIRE(d["meta"]["categories"].Size() == 1);
  CHECK(std::string(d["meta"]["categories"][0]["color"].GetString()) == "grey");
}

TEST_CASE("a category list without grey gets a grey default appended") {
  ChunkedJsonWriter out;
  ProfileMeta meta;
  meta.categories = {{"JS", "yellow", {}}};
  GeckoProfileWriter profile(out, meta);
  profile.Finish();
  rapidjson::Document d = Parse(out.TakeString());
  REQUIRE(d["meta"]["categories"].Size() == 2);
  CHECK(d["meta"]["categories"][0]["subcategories"].Size() == 1);  // [] -> ["Other"].
  CHECK(std::string(d["meta"]["categories"][1]["color"].GetString()) == "grey");
}

TEST_CASE("sub-process profiles: short meta, spliced into the parent's processes") {
  const TimeStamp t0 = TimeStamp::FromNanoseconds(1000000000);
  ChunkedJsonWriter child_out;
  {
    ProfileMeta child_meta = TestMeta(t0 + TimeDuration::FromMilliseconds(5));
    child_meta.start_time_epoch_ns += 5000000;
    GeckoProfileWriter child(child_out, child_meta, GeckoProfileWriter::Kind::kSubProcess);
    ThreadDescription desc;
    desc.name = "GeckoMain";
    desc.process_type = "tab";
    desc.pid = ProcessId::FromNumber(7);
    desc.tid = ThreadId::FromNumber(7);
    desc.register_time = child_meta.start_time;
    GeckoThreadWriter thread(desc, child_meta.start_time);
    thread.AddSample(thread.stacks().Stack(std::nullopt, thread.stacks().LabelFrame("child", 1)),
                     child_meta.start_time + TimeDuration::FromMilliseconds(2));
    child.AddThread(thread);
    child.Finish();
    REQUIRE(child.ok());
  }
  ChunkedJsonWriter out;
  GeckoProfileWriter parent(out, TestMeta(t0));
  parent.AddSubProcessJson(child_out.TakeOutput());
  parent.Finish();
  REQUIRE(parent.ok());
  rapidjson::Document d = Parse(out.TakeString());
  REQUIRE(d["processes"].Size() == 1);
  const Value& child = d["processes"][0];
  CHECK(child["meta"]["startTime"].GetDouble() == Approx(1700000000128.456789));
  CHECK_FALSE(child["meta"].HasMember("interval"));
  CHECK(child["meta"]["markerSchema"].IsArray());
  CHECK_FALSE(child.HasMember("processes"));
  CHECK(child["libs"].IsArray());
  CHECK(std::string(child["threads"][0]["processType"].GetString()) == "tab");
}

TEST_CASE("sections out of order are refused, and reported") {
  ChunkedJsonWriter out;
  GeckoProfileWriter profile(out, ProfileMeta());
  ThreadDescription desc;
  GeckoThreadWriter thread(desc, TimeStamp());
  profile.AddThread(thread);
  CHECK(profile.ok());
  profile.WriteLibs({});  // Too late: libs come before threads.
  CHECK_FALSE(profile.ok());
  CHECK(profile.error().find("out of order") != std::string::npos);
  profile.Finish();
  // The document is still well-formed.
  rapidjson::Document d = Parse(out.TakeString());
  CHECK(d["threads"].Size() == 1);
  CHECK(d["libs"].Size() == 0);
  CHECK(d["threads"][0]["registerTime"].GetDouble() == 0);  // Null TimeStamp: process start.
}

TEST_CASE("a spent thread writer is refused, not spliced as nothing") {
  ChunkedJsonWriter out;
  GeckoProfileWriter profile(out, ProfileMeta());
  GeckoThreadWriter thread{ThreadDescription(), TimeStamp()};
  profile.AddThread(thread);
  profile.AddThread(thread);
  CHECK(profile.error().find("already taken") != std::string::npos);
  CHECK(profile.thread_count() == 1);
  profile.Finish();
  rapidjson::Document d = Parse(out.TakeString());
  CHECK(d["threads"].Size() == 1);
}

// Fills `thread` with samples, then markers (with a payload, a backtrace and a string-table
// field): the same rows whichever way the thread is written.
void FillRows(GeckoThreadWriter& thread, TimeStamp t0) {
  const auto at = [&](int64_t ns) { return t0 + TimeDuration::FromNanoseconds(ns); };
  UniqueStacks& st = thread.stacks();
  std::optional<uint32_t> stack;
  for (int i = 0; i < 3000; ++i) {
    if (i % 100 == 0) stack = st.Stack(std::nullopt, st.LabelFrame("root", kOther));
    stack = st.Stack(stack, st.AddressFrame(0x1000 + static_cast<uint64_t>(i % 37)));
    thread.AddSample(i % 50 == 0 ? std::nullopt : stack, at(int64_t{i} * 1000001),
                     i % 3 == 0 ? std::nullopt : std::optional<int64_t>(i * 17));
  }
  for (int i = 0; i < 2000; ++i) {
    if (i % 2 == 0) {
      thread.AddMarker("plain \"" + std::to_string(i % 9) + "\"",
                       MarkerTiming::Instant(at(i * 999)), kOther);
    } else {
      thread.AddMarker("Read", MarkerTiming::Interval(at(i * 999), at(i * 1999)), kIo,
                       "FileRead", [&](JsonWriter& w) {
                         w.StringProperty("path", "/tmp/é/" + std::to_string(i));
                         w.Key("bytes");
                         thread.strings().WriteIndex(w, "unique " + std::to_string(i % 5));
                         thread.WriteMarkerStack(w, *stack, at(i * 999));
                       });
    }
  }
}

ThreadDescription RowsThread(int tid) {
  ThreadDescription d;
  d.name = "Worker " + std::to_string(tid);
  d.pid = ProcessId::FromNumber(7);
  d.tid = ThreadId::FromNumber(tid);
  return d;
}

TEST_CASE("a streamed thread is written exactly as the same thread buffered") {
  const TimeStamp t0 = TimeStamp::FromNanoseconds(5000000000);
  const ProfileMeta meta = TestMeta(t0);
  // Three threads; the middle one streamed (or not), between two buffered ones.
  auto write = [&](bool stream_middle, size_t chunk_size) {
    ChunkedJsonWriter out(chunk_size);
    GeckoProfileWriter profile(out, meta);
    GeckoThreadWriter first(RowsThread(1), t0), middle(RowsThread(2), t0), last(RowsThread(3), t0);
    FillRows(first, t0);
    FillRows(last, t0);
    profile.AddThread(first);
    if (stream_middle) {
      profile.StartThread(middle);
      FillRows(middle, t0);
      profile.EndThread(middle);
    } else {
      FillRows(middle, t0);
      profile.AddThread(middle);
    }
    profile.AddThread(last);
    profile.Finish();
    REQUIRE(profile.ok());
    CHECK(profile.thread_count() == 3);
    return out.TakeString();
  };
  const std::string buffered = write(false, JsonWriter::kDefaultChunkSize);
  CHECK(write(true, JsonWriter::kDefaultChunkSize) == buffered);
  CHECK(write(true, 100) == buffered);
  const rapidjson::Document d = Parse(buffered);
  REQUIRE(d["threads"].Size() == 3);
  CHECK(d["threads"][1]["samples"]["data"].Size() == 3000);
  CHECK(d["threads"][1]["markers"]["data"].Size() == 2000);
  CHECK(std::string(d["threads"][1]["name"].GetString()) == "Worker 2");
}

TEST_CASE("a streamed thread: a thread with no rows, and misuse reported, document kept whole") {
  const TimeStamp t0 = TimeStamp::FromNanoseconds(5000000000);
  const ProfileMeta meta = TestMeta(t0);
  SECTION("no rows at all: empty tables") {
    ChunkedJsonWriter out;
    GeckoProfileWriter profile(out, meta);
    GeckoThreadWriter idle(RowsThread(1), t0);
    profile.StartThread(idle);
    profile.EndThread(idle);
    profile.Finish();
    REQUIRE(profile.ok());
    const rapidjson::Document d = Parse(out.TakeString());
    CHECK(d["threads"][0]["samples"]["data"].Size() == 0);
    CHECK(d["threads"][0]["markers"]["data"].Size() == 0);
    CHECK(d["threads"][0]["stackTable"]["data"].Size() == 0);
  }
  SECTION("a sample after the markers is dropped and reported") {
    ChunkedJsonWriter out;
    GeckoProfileWriter profile(out, meta);
    GeckoThreadWriter thread(RowsThread(1), t0);
    profile.StartThread(thread);
    thread.AddSample(std::nullopt, t0);
    thread.AddMarker("m", MarkerTiming::Instant(t0), kOther);
    thread.AddSample(std::nullopt, t0);
    profile.EndThread(thread);
    profile.Finish();
    CHECK(profile.error().find("a sample after the markers") != std::string::npos);
    const rapidjson::Document d = Parse(out.TakeString());
    CHECK(d["threads"][0]["samples"]["data"].Size() == 1);
    CHECK(d["threads"][0]["markers"]["data"].Size() == 1);
  }
  SECTION("other sections are refused while a thread streams; Finish closes it") {
    ChunkedJsonWriter out;
    GeckoProfileWriter profile(out, meta);
    GeckoThreadWriter streamed(RowsThread(1), t0), other(RowsThread(2), t0);
    other.AddSample(std::nullopt, t0);
    profile.StartThread(streamed);
    streamed.AddSample(std::nullopt, t0);
    profile.AddThread(other);           // Refused: would land inside the streamed thread.
    profile.WritePausedRanges({});      // Refused too.
    profile.Finish();                   // Closes the streamed thread, then the document.
    CHECK(profile.error().find("while a thread is streamed") != std::string::npos);
    const rapidjson::Document d = Parse(out.TakeString());
    REQUIRE(d["threads"].Size() == 1);
    CHECK(d["threads"][0]["samples"]["data"].Size() == 1);
  }
  SECTION("a thread with rows already cannot be streamed; a streamed one cannot be spliced") {
    ChunkedJsonWriter out;
    GeckoProfileWriter profile(out, meta);
    GeckoThreadWriter used(RowsThread(1), t0);
    used.AddSample(std::nullopt, t0);
    profile.StartThread(used);
    CHECK(profile.error().find("must be new") != std::string::npos);
    GeckoThreadWriter streamed(RowsThread(2), t0);
    profile.StartThread(streamed);
    profile.EndThread(streamed);
    CHECK(streamed.TakeThreadJson().empty());
    profile.Finish();
    CHECK(profile.thread_count() == 1);
    CHECK(Parse(out.TakeString())["threads"].Size() == 1);
  }
}

TEST_CASE("EpochNanoseconds maps the monotonic clock onto the epoch") {
  TimeStamp now = TimeStamp::Now();
  int64_t epoch = EpochNanoseconds(now);
  int64_t earlier = EpochNanoseconds(now - TimeDuration::FromSeconds(1));
  CHECK(epoch > 1600000000LL * 1000000000LL);
  CHECK(epoch - earlier == Approx(1e9).margin(1e6));
}

}  // namespace
}  // namespace strata
