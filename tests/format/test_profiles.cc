#include "tests/format/test_profiles.h"

#include <utility>

#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "shared/json/gecko_profile_writer.h"

namespace strata {
namespace {

constexpr uint32_t kIdle = 0;
constexpr uint32_t kOther = 1;
constexpr uint32_t kIo = 2;
constexpr uint32_t kCompute = 3;

constexpr uint64_t kDemoStart = 0x555500000000;
constexpr uint64_t kLibcStart = 0x7f0000000000;

TimeStamp At(TimeStamp start, double ms) { return start + TimeDuration::FromMilliseconds(ms); }

std::vector<ProfileCategory> Categories() {
  return {
      {"Idle", "transparent", {"Other"}},
      {"Other", "grey", {"Other"}},
      {"I/O", "lightblue", {"Other", "Read", "Write"}},
      {"Compute", "orange", {"Other", "Math"}},
  };
}

std::vector<SharedLibrary> Libs() {
  SharedLibrary demo;
  demo.start = kDemoStart;
  demo.end = kDemoStart + 0x100000;
  demo.offset = 0;
  demo.name = demo.debug_name = "strata-demo";
  demo.path = demo.debug_path = "/usr/bin/strata-demo";
  demo.breakpad_id = "0403020106050807090A0B0C0D0E0F100";
  demo.code_id = "0102030405060708090a0b0c0d0e0f1011121314";
  demo.arch = "x86_64";
  SharedLibrary libc = demo;
  libc.start = kLibcStart;
  libc.end = kLibcStart + 0x200000;
  libc.offset = 0x28000;
  libc.name = libc.debug_name = "libc.so.6";
  libc.path = libc.debug_path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  libc.breakpad_id = "A1B2C3D4E5F60718293A4B5C6D7E8F900";
  libc.code_id = "d4c3b2a1f6e51807293a4b5c6d7e8f90aabbccdd";
  return {demo, libc};
}

ThreadDescription Thread(std::string name, int64_t pid, int64_t tid, TimeStamp registered,
                         std::string process_type = "default") {
  ThreadDescription d;
  d.name = std::move(name);
  d.process_type = std::move(process_type);
  d.process_name = pid == 1000 ? "strata-demo" : "strata-child";
  d.pid = ProcessId::FromNumber(static_cast<int32_t>(pid));
  d.tid = ThreadId::FromNumber(static_cast<int32_t>(tid));
  d.register_time = registered;
  return d;
}

void FillMainThread(GeckoThreadWriter& t, TimeStamp start) {
  UniqueStacks& s = t.stacks();
  uint32_t main = s.LabelFrame("main", kOther);
  uint32_t load = s.LabelFrame("Startup::LoadConfig", kIo, 1);
  uint32_t pc_demo = s.AddressFrame(kDemoStart + 0x1230);
  uint32_t pc_libc = s.AddressFrame(kLibcStart + 0x12345);
  uint32_t compute = s.NativeSymbolFrame("Foo::compute(int)", "strata-demo", kCompute, 1u);
  uint32_t inner = s.NativeSymbolFrame("Foo::inner()", "strata-demo", std::nullopt,
                                       std::nullopt, 42u);
  uint32_t idle = s.LabelFrame("EventLoop::Wait", kIdle);

  std::optional<uint32_t> root = s.Stack(std::nullopt, main);
  std::optional<uint32_t> reading = s.Stack(s.Stack(s.Stack(root, load), pc_demo), pc_libc);
  std::optional<uint32_t> loading = s.Stack(root, load);
  std::optional<uint32_t> computing = s.Stack(s.Stack(root, compute), inner);
  std::optional<uint32_t> idling = s.Stack(root, idle);

  for (int i = 0; i < 20; ++i) {
    std::optional<uint32_t> stack = i < 6 ? reading : i < 16 ? computing : idling;
    int64_t cpu = i < 16 ? 900000 + 10000 * i : 0;
    t.AddSample(stack, At(start, 1 + i), cpu);
  }

  t.AddMarker("Startup", MarkerTiming::Instant(At(start, 0.5)), kOther);
  t.AddMarker("ReadConfig", MarkerTiming::Interval(At(start, 1.25), At(start, 6.75)), kIo,
              "FileRead", [&](JsonWriter& w) {
                w.StringProperty("path", "/etc/strata-demo.ini");
                w.IntProperty("bytes", 4096);
                w.Key("operation");
                t.strings().WriteIndex(w, "read");
                t.WriteMarkerStack(w, *loading, At(start, 1.25));
              });
  t.AddMarker("Frame", MarkerTiming::IntervalStart(At(start, 7)), kOther);
  t.AddMarker("Frame", MarkerTiming::IntervalEnd(At(start, 15.5)), kOther);
}

void FillWorker(GeckoThreadWriter& t, TimeStamp start, double first_ms, int samples) {
  UniqueStacks& s = t.stacks();
  uint32_t root = s.LabelFrame("Worker::ThreadMain", kOther);
  uint32_t run = s.NativeSymbolFrame("Work::run()", "strata-demo", kCompute, 0u, 17u);
  uint32_t math = s.NativeSymbolFrame("Work::multiply(double*, int)", "strata-demo", kCompute,
                                      1u, 88u);
  uint32_t pc = s.AddressFrame(kDemoStart + 0x4567);
  std::optional<uint32_t> r = s.Stack(std::nullopt, root);
  std::optional<uint32_t> running = s.Stack(r, run);
  std::optional<uint32_t> multiplying = s.Stack(s.Stack(running, math), pc);
  for (int i = 0; i < samples; ++i) {
    t.AddSample(i % 3 == 0 ? running : multiplying, At(start, first_ms + i), 1000000);
  }
  t.AddMarker("Job", MarkerTiming::Interval(At(start, first_ms), At(start, first_ms + 3)),
              kCompute, "Job", [](JsonWriter& w) { w.IntProperty("items", 12); });
}

std::string Serialize(const rapidjson::Document& d) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  d.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace

std::string MakeRealisticProfile() {
  const TimeStamp start = TimeStamp::FromNanoseconds(int64_t{5000} * 1000000000);
  ProfileMeta meta;
  meta.start_time = start;
  meta.start_time_epoch_ns = 1700000000000250000;
  meta.interval_ms = 1;
  meta.product = "strata frontend test";
  meta.pid = ProcessId::FromNumber(1000);
  meta.categories = Categories();
  meta.platform = "Linux";
  meta.oscpu = "Linux x86_64";
  meta.abi = "x86_64";
  meta.logical_cpus = 2;
  meta.profiling_start_time = start;
  meta.profiling_end_time = At(start, 25);
  meta.marker_schemas = {
      R"({"name":"FileRead","display":["marker-chart","marker-table","timeline-fileio"],)"
      R"("tableLabel":"{marker.data.operation} {marker.data.path}","data":[)"
      R"({"key":"path","label":"Path","format":"file-path"},)"
      R"({"key":"bytes","label":"Bytes","format":"bytes"},)"
      R"({"key":"operation","label":"Operation","format":"unique-string"}]})",
      R"({"name":"Job","display":["marker-chart","marker-table"],"data":[)"
      R"({"key":"items","label":"Items","format":"integer"}]})"};

  // The sub-process, written separately (as a child process would) and spliced in.
  ChunkedJsonWriter child_json;
  {
    ProfileMeta child_meta = meta;
    child_meta.start_time = At(start, 5);
    child_meta.start_time_epoch_ns += 5000000;
    GeckoProfileWriter child(child_json, child_meta, GeckoProfileWriter::Kind::kSubProcess);
    child.WriteLibs(Libs());
    GeckoThreadWriter t(Thread("GeckoMain", 2000, 2000, child_meta.start_time, "tab"),
                        child_meta.start_time);
    uint32_t frame = t.stacks().LabelFrame("ChildMain", kOther);
    uint32_t pc = t.stacks().AddressFrame(kDemoStart + 0x2000);
    std::optional<uint32_t> stack = t.stacks().Stack(t.stacks().Stack(std::nullopt, frame), pc);
    for (int i = 0; i < 5; ++i) t.AddSample(stack, At(child_meta.start_time, 2 + i), 500000);
    child.AddThread(t);
    child.Finish();
  }

  ChunkedJsonWriter out;
  GeckoProfileWriter profile(out, meta);
  profile.WriteLibs(Libs());

  GeckoThreadWriter main_thread(Thread("GeckoMain", 1000, 1000, start), start);
  FillMainThread(main_thread, start);
  profile.AddThread(main_thread);

  GeckoThreadWriter worker1(Thread("Worker 1", 1000, 1001, At(start, 0.5)), start);
  FillWorker(worker1, start, 2, 15);
  profile.AddThread(worker1);

  ThreadDescription w2 = Thread("Worker 2", 1000, 1002, At(start, 5));
  w2.unregister_time = At(start, 15);
  GeckoThreadWriter worker2(w2, start);
  FillWorker(worker2, start, 6, 8);
  profile.AddThread(worker2);

  GeckoCounterWriter memory("malloc", "Memory", "Bytes allocated minus bytes freed", start);
  for (int i = 0; i < 10; ++i) memory.AddSample(At(start, 1 + 2 * i), i % 4 == 3 ? -2048 : 8192, 3);
  profile.AddCounter(memory);

  profile.AddSubProcessJson(child_json.TakeOutput());
  profile.WriteProfilingLog(ProcessId::FromNumber(1000), [](JsonWriter& w) {
    w.TimeMsProperty("profilingLogBegin_TSms", 0);
    w.TimeMsProperty("profilingLogEnd_TSms", 25000000);
  });
  profile.Finish();
  return out.TakeString();
}

const std::vector<BrokenVariant>& BrokenVariants() {
  static const std::vector<BrokenVariant> variants = {
      {"frame-category-out-of-range", "frame-category", true, false,
       "a frame's category is 99 with only 4 categories"},
      {"subcategory-out-of-range", "frame-category", true, false,
       "a frame's subcategory is 7 in a category with 3"},
      {"stack-frame-out-of-range", "stack-frame", true, false,
       "a stack's frame index is past the end of the frameTable"},
      {"libs-unsorted", "libs-order", true, false, "libs listed in reverse address order"},
      {"samples-unsorted", "sample-order", true, false, "two sample times swapped"},
      {"js-looking-native-name", "js-looking-location", true, false,
       "a native frame named \"Foo::inner() (demo.cc:42)\" (read as JavaScript)"},
      {"js-looking-label", "js-looking-location", true, false,
       "a label \"worker:12\" written without the writer's protection"},
      {"no-grey-category", "category-grey", true, false, "the grey category recoloured blue"},
      {"marker-name-literal", "marker-name", true, false,
       "a marker name given as a literal string instead of a string index (loads; the name "
       "is undefined, and profiler-cli's marker listing later crashes on it)"},
      {"sample-time-string", "sample-time", true, false, "a sample time given as \"3.0\""},
      {"marker-unique-string-literal", "marker-unique-string", true, false,
       "a unique-string marker field given as a literal string"},
      {"stack-prefix-forward", "stack-prefix-order", false, true,
       "a stack whose prefix is a later stack (the call tree never finishes)"},
      {"cpu-unit-us", "sample-units", false, false,
       "meta.sampleUnits.threadCPUDelta \"us\" (must be \"\xC2\xB5s\")"},
      {"missing-event-delay-column", "table-schema", false, false,
       "samples schema without eventDelay"},
      {"missing-unregister-time", "thread-times", true, false,
       "a thread without the unregisterTime key (profiler-cli loads it; the web UI's thread "
       "views fail with \"assert failed\")"},
      {"marker-schema-fields", "marker-schema", false, false,
       "a marker schema using \"fields\" instead of \"data\""},
      {"version-37", "version", false, false, "meta.version 37"},
      {"missing-processes", "processes", false, false, "no top-level processes array"},
      {"sub-process-sample-after-end", "outside-profiling-range", true, false,
       "the parent's meta.profilingEndTime before a sub-process's last sample (the front-end "
       "drops that sample)"},
  };
  return variants;
}

std::string MakeBrokenVariant(const std::string& profile, std::string_view variant) {
  rapidjson::Document d;
  d.Parse(profile.c_str(), profile.size());
  if (d.HasParseError()) return std::string();
  auto& alloc = d.GetAllocator();
  rapidjson::Value& meta = d["meta"];
  rapidjson::Value& thread = d["threads"][0];
  const auto column = [](rapidjson::Value& table, const char* name) {
    return table["schema"][name].GetUint();
  };
  rapidjson::Value& frames = thread["frameTable"];
  rapidjson::Value& stacks = thread["stackTable"];
  rapidjson::Value& samples = thread["samples"];
  rapidjson::Value& markers = thread["markers"];
  rapidjson::Value& strings = thread["stringTable"];

  // The string-table entry used as the location of frame `frame`.
  const auto location_string = [&](rapidjson::SizeType frame) -> rapidjson::Value& {
    return strings[frames["data"][frame][column(frames, "location")].GetUint()];
  };
  const auto find_frame = [&](std::string_view prefix) -> rapidjson::SizeType {
    for (rapidjson::SizeType i = 0; i < frames["data"].Size(); ++i) {
      std::string s = location_string(i).GetString();
      if (s.compare(0, prefix.size(), prefix) == 0) return i;
    }
    return 0;
  };

  if (variant == "frame-category-out-of-range") {
    frames["data"][0][column(frames, "category")].SetUint(99);
  } else if (variant == "subcategory-out-of-range") {
    rapidjson::SizeType f = find_frame("Startup::LoadConfig");
    frames["data"][f][column(frames, "subcategory")].SetUint(7);
  } else if (variant == "stack-frame-out-of-range") {
    rapidjson::Value& data = stacks["data"];
    data[data.Size() - 1][column(stacks, "frame")].SetUint(frames["data"].Size() + 5);
  } else if (variant == "libs-unsorted") {
    rapidjson::Value& libs = d["libs"];
    libs[0].Swap(libs[1]);
  } else if (variant == "samples-unsorted") {
    rapidjson::Value& data = samples["data"];
    unsigned t = column(samples, "time");
    data[3][t].Swap(data[4][t]);
  } else if (variant == "js-looking-native-name") {
    location_string(find_frame("Foo::inner")).SetString("Foo::inner() (demo.cc:42)", alloc);
  } else if (variant == "js-looking-label") {
    location_string(find_frame("EventLoop::Wait")).SetString("worker:12", alloc);
  } else if (variant == "no-grey-category") {
    for (auto& c : meta["categories"].GetArray()) {
      if (std::string(c["color"].GetString()) == "grey") c["color"].SetString("blue");
    }
  } else if (variant == "marker-name-literal") {
    markers["data"][0][column(markers, "name")].SetString("Startup", alloc);
  } else if (variant == "sample-time-string") {
    samples["data"][2][column(samples, "time")].SetString("3.0", alloc);
  } else if (variant == "marker-unique-string-literal") {
    for (auto& m : markers["data"].GetArray()) {
      rapidjson::Value& data = m[column(markers, "data")];
      if (data.IsObject() && data.HasMember("operation")) data["operation"].SetString("read");
    }
  } else if (variant == "stack-prefix-forward") {
    stacks["data"][0][column(stacks, "prefix")].SetUint(stacks["data"].Size() - 1);
  } else if (variant == "cpu-unit-us") {
    meta["sampleUnits"]["threadCPUDelta"].SetString("us");
  } else if (variant == "missing-event-delay-column") {
    samples["schema"].RemoveMember("eventDelay");
  } else if (variant == "missing-unregister-time") {
    thread.RemoveMember("unregisterTime");
  } else if (variant == "marker-schema-fields") {
    meta["markerSchema"][0]["data"].SetArray();
    rapidjson::Value& schema = meta["markerSchema"][0];
    schema.RemoveMember("data");
    schema.AddMember("fields", rapidjson::Value(rapidjson::kArrayType), alloc);
  } else if (variant == "version-37") {
    meta["version"].SetInt(37);
  } else if (variant == "missing-processes") {
    d.RemoveMember("processes");
  } else if (variant == "sub-process-sample-after-end") {
    // The sub-process starts 5 ms after the parent and has samples up to its 6 ms.
    meta["profilingEndTime"].SetDouble(10.5);
  } else {
    return std::string();
  }
  return Serialize(d);
}

}  // namespace strata
