#include "shared/json/gecko_profile_writer.h"

#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstring>

namespace strata {

// ---- Helpers ------------------------------------------------------------------------------

int64_t EpochNanoseconds(TimeStamp t) {
  timespec realtime;
  ReadClock(CLOCK_REALTIME, &realtime);  // Honours a thread's PR_SET_TSC (time_stamp.h).
  TimeStamp now = TimeStamp::Now();
  int64_t epoch_now = static_cast<int64_t>(realtime.tv_sec) * 1000000000 + realtime.tv_nsec;
  return epoch_now - (now - t).ToNanoseconds();
}

std::string ChildProcessName(const std::string& program, int64_t pid) {
  const std::string suffix = " (" + std::to_string(pid) + ")";
  if (program.size() >= suffix.size() &&
      program.compare(program.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return program;
  }
  return (program.empty() ? std::string("process") : program) + suffix;
}

void FillSystemInfo(ProfileMeta& meta) {
  utsname u;
  if (uname(&u) == 0) {
    meta.platform = u.sysname;  // "Linux"
    meta.oscpu = std::string(u.sysname) + " " + u.release + " " + u.machine;
  }
  meta.abi = CurrentArchName();
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus > 0) meta.logical_cpus = static_cast<uint32_t>(cpus);
  if (FILE* f = fopen("/proc/cpuinfo", "re")) {
    char line[512];
    while (fgets(line, sizeof(line), f) != nullptr) {
      if (strncmp(line, "model name", 10) != 0) continue;
      const char* colon = strchr(line, ':');
      if (colon == nullptr) break;
      std::string name(colon + 1);
      size_t first = name.find_first_not_of(" \t");
      size_t last = name.find_last_not_of(" \t\r\n");
      if (first != std::string::npos) meta.cpu_name = name.substr(first, last - first + 1);
      break;
    }
    fclose(f);
  }
}

namespace {

void WriteNullableTime(JsonWriter& w, bool present, int64_t relative_ns) {
  if (present) {
    w.TimeMs(relative_ns);
  } else {
    w.Null();
  }
}

constexpr std::string_view kSamplesSchema =
    R"({"stack":0,"time":1,"eventDelay":2,"threadCPUDelta":3})";
constexpr std::string_view kMarkersSchema =
    R"({"name":0,"startTime":1,"endTime":2,"phase":3,"category":4,"data":5})";

}  // namespace

// ---- GeckoThreadWriter --------------------------------------------------------------------

GeckoThreadWriter::GeckoThreadWriter(ThreadDescription description, TimeStamp process_start)
    : description_(std::move(description)),
      process_start_(process_start),
      stacks_(strings_) {
  samples_.StartArray();
  markers_.StartArray();
}

void GeckoThreadWriter::Misuse(const char* what) {
  if (misuse_.empty()) misuse_ = std::string("GeckoThreadWriter: ") + what;
}

JsonWriter* GeckoThreadWriter::SampleOut() {
  switch (mode_) {
    case Mode::kBuffered:
      return &samples_;
    case Mode::kStreamSamples:
      return stream_;
    case Mode::kStreamMarkers:
      Misuse("a sample after the markers of a streamed thread (dropped)");
      return nullptr;
    case Mode::kSpent:
      break;
  }
  Misuse("a sample added to a spent thread writer (dropped)");
  return nullptr;
}

JsonWriter* GeckoThreadWriter::MarkerOut() {
  switch (mode_) {
    case Mode::kBuffered:
      return &markers_;
    case Mode::kStreamSamples:
      StartStreamedMarkers();
      return stream_;
    case Mode::kStreamMarkers:
      return stream_;
    case Mode::kSpent:
      break;
  }
  Misuse("a marker added to a spent thread writer (dropped)");
  return nullptr;
}

void GeckoThreadWriter::AddSample(std::optional<uint32_t> stack, TimeStamp time,
                                  std::optional<int64_t> cpu_delta_ns,
                                  std::optional<double> event_delay_ms) {
  JsonWriter* out = SampleOut();
  if (out == nullptr) return;
  int64_t t = Relative(time);
  if (t < last_sample_ns_) {
    t = last_sample_ns_;
    ++clamped_samples_;
  }
  last_sample_ns_ = t;
  out->StartArray();
  if (stack) {
    out->Uint(*stack);
  } else {
    out->Null();
  }
  out->TimeMs(t);
  if (event_delay_ms) {
    out->Double(*event_delay_ms);
  } else {
    out->Null();
  }
  if (cpu_delta_ns) {
    out->Int(*cpu_delta_ns);
  } else {
    out->Null();
  }
  out->EndArray();
  ++sample_count_;
}

JsonWriter& GeckoThreadWriter::BeginMarker(std::string_view name, const MarkerTiming& timing,
                                           uint32_t category) {
  JsonWriter* out = MarkerOut();
  if (out == nullptr) {
    // The row is still formatted (the caller's fields callback runs), into a writer whose
    // text is thrown away.
    if (!discard_) discard_ = std::make_unique<ChunkedJsonWriter>(4096);
    discard_->TakeOutput();
    out = discard_.get();
  }
  out->StartArray();
  out->Uint(strings_.Index(name));
  const bool has_start = timing.phase != MarkerPhase::kIntervalEnd;
  const bool has_end =
      timing.phase == MarkerPhase::kInterval || timing.phase == MarkerPhase::kIntervalEnd;
  WriteNullableTime(*out, has_start, Relative(timing.start));
  WriteNullableTime(*out, has_end, Relative(timing.end));
  out->Uint(static_cast<uint8_t>(timing.phase));
  out->Uint(category);
  return *out;
}

void GeckoThreadWriter::EndMarker(JsonWriter& out) {
  out.EndArray();
  if (&out != discard_.get()) ++marker_count_;
}

void GeckoThreadWriter::AddMarker(std::string_view name, const MarkerTiming& timing,
                                  uint32_t category) {
  JsonWriter& out = BeginMarker(name, timing, category);
  out.Null();
  EndMarker(out);
}

void GeckoThreadWriter::WriteMarkerStack(JsonWriter& w, uint32_t stack, TimeStamp time,
                                         bool minimal) {
  // A miniature thread whose single sample points into the owning thread's stack table:
  // {"name":"SyncProfile",...,"samples":{"schema":...,"data":[[stack,time,0]]}}. All but the
  // stack index and the time is the same for every backtrace of this thread: that text is
  // made once and each backtrace spliced whole (writing its ~25 keys one by one was most of
  // the save's cost per native allocation record, issue 37).
  if (!minimal && marker_stack_prefix_.empty()) {
    ChunkedJsonWriter process_type;
    process_type.String(description_.process_type);
    marker_stack_prefix_ = R"({"name":"SyncProfile","registerTime":null,"unregisterTime":null,"processType":)";
    marker_stack_prefix_ += process_type.TakeString();
    marker_stack_prefix_ += R"(,"tid":)";
    marker_stack_prefix_ += std::to_string(description_.tid.ToNumber());
    marker_stack_prefix_ += R"(,"pid":)";
    marker_stack_prefix_ += std::to_string(description_.pid.ToNumber());
    marker_stack_prefix_ += R"(,"markers":{"schema":)";
    marker_stack_prefix_ += kMarkersSchema;
    marker_stack_prefix_ += R"(,"data":[]},"samples":{"schema":{"stack":0,"time":1,"eventDelay":2},"data":[[)";
  }
  std::string& text = marker_stack_text_;  // Reused: no allocation per backtrace.
  static constexpr std::string_view kMinimalPrefix =
      R"({"samples":{"schema":{"stack":0,"time":1,"eventDelay":2},"data":[[)";
  text.assign(minimal ? kMinimalPrefix : std::string_view(marker_stack_prefix_));
  char number[JsonWriter::kMaxNumberChars];
  text.append(number, std::to_chars(number, number + sizeof(number), stack).ptr);
  text += ',';
  text.append(number, JsonWriter::FormatTimeMs(Relative(time), number));
  text += ",0]]}}";
  w.SpliceProperty("stack", text);
}

void GeckoThreadWriter::WriteHead(JsonWriter& w) {
  const ThreadDescription& d = description_;
  w.StartObject();
  w.StringProperty("name", d.name);
  w.StringProperty("processType", d.process_type);
  if (!d.process_name.empty()) w.StringProperty("processName", d.process_name);
  w.IntProperty("pid", d.pid.ToNumber());
  w.IntProperty("tid", d.tid.ToNumber());
  w.TimeMsProperty("registerTime", d.register_time.IsNull() ? 0 : Relative(d.register_time));
  w.Key("unregisterTime");  // Must be present, null or a number.
  WriteNullableTime(w, d.unregister_time.has_value(),
                    d.unregister_time ? Relative(*d.unregister_time) : 0);
}

void GeckoThreadWriter::WriteTables(JsonWriter& w) {
  w.Key("stackTable");
  stacks_.WriteStackTable(w);
  w.Key("frameTable");
  stacks_.WriteFrameTable(w);
  // Last: markers and frames above may have added strings.
  w.Key("stringTable");
  strings_.WriteArray(w);
  w.EndObject();
}

ChunkedJsonOutput GeckoThreadWriter::TakeThreadJson() {
  ChunkedJsonWriter w;
  if (mode_ != Mode::kBuffered) return w.TakeOutput();
  mode_ = Mode::kSpent;
  samples_.EndArray();
  markers_.EndArray();

  WriteHead(w);
  w.StartObjectProperty("samples");
  w.SpliceProperty("schema", kSamplesSchema);
  w.Key("data");
  w.Splice(samples_.TakeOutput());
  w.EndObject();

  w.StartObjectProperty("markers");
  w.SpliceProperty("schema", kMarkersSchema);
  w.Key("data");
  w.Splice(markers_.TakeOutput());
  w.EndObject();

  WriteTables(w);
  return w.TakeOutput();
}

void GeckoThreadWriter::StartStreaming(JsonWriter& out) {
  // The buffered writers' "[" and their memory are not needed.
  samples_.TakeOutput();
  markers_.TakeOutput();
  stream_ = &out;
  mode_ = Mode::kStreamSamples;
  WriteHead(out);
  out.StartObjectProperty("samples");
  out.SpliceProperty("schema", kSamplesSchema);
  out.StartArrayProperty("data");
}

void GeckoThreadWriter::StartStreamedMarkers() {
  JsonWriter& out = *stream_;
  out.EndArray();  // samples.data
  out.EndObject();
  out.StartObjectProperty("markers");
  out.SpliceProperty("schema", kMarkersSchema);
  out.StartArrayProperty("data");
  mode_ = Mode::kStreamMarkers;
}

void GeckoThreadWriter::EndStreaming() {
  if (mode_ == Mode::kStreamSamples) StartStreamedMarkers();
  JsonWriter& out = *stream_;
  out.EndArray();  // markers.data
  out.EndObject();
  WriteTables(out);
  stream_ = nullptr;
  mode_ = Mode::kSpent;
}

// ---- GeckoCounterWriter -------------------------------------------------------------------

GeckoCounterWriter::GeckoCounterWriter(std::string name, std::string category,
                                       std::string description, TimeStamp process_start)
    : name_(std::move(name)),
      category_(std::move(category)),
      description_(std::move(description)),
      process_start_(process_start) {
  samples_.StartArray();
}

void GeckoCounterWriter::AddSample(TimeStamp time, int64_t count,
                                   std::optional<uint64_t> number) {
  samples_.StartArray();
  samples_.TimeMs(time - process_start_);
  samples_.Int(count);
  if (number) samples_.Uint(*number);
  samples_.EndArray();
  ++sample_count_;
}

ChunkedJsonOutput GeckoCounterWriter::TakeCounterJson() {
  ChunkedJsonWriter w;
  if (taken_) return w.TakeOutput();
  taken_ = true;
  samples_.EndArray();
  w.StartObject();
  w.StringProperty("name", name_);
  w.StringProperty("category", category_);
  w.StringProperty("description", description_);
  w.StartObjectProperty("samples");
  w.SpliceProperty("schema", R"({"time":0,"count":1,"number":2})");
  w.Key("data");
  w.Splice(samples_.TakeOutput());
  w.EndObject();
  w.EndObject();
  return w.TakeOutput();
}

// ---- GeckoProfileWriter -------------------------------------------------------------------

GeckoProfileWriter::GeckoProfileWriter(JsonWriter& out, const ProfileMeta& meta, Kind kind)
    : out_(out), kind_(kind), start_time_(meta.start_time) {
  out_.StartObject();
  WriteMeta(meta);
}

const std::string& GeckoProfileWriter::error() const {
  return misuse_.empty() ? out_.error() : misuse_;
}

namespace {

// meta.profilingStartTime/EndTime (ms from meta.startTime), when both are known and ordered.
template <typename Relative>
void WriteProfilingRange(JsonWriter& w, const ProfileMeta& meta, const Relative& relative) {
  if (meta.profiling_start_time && meta.profiling_end_time &&
      *meta.profiling_end_time > *meta.profiling_start_time) {
    w.TimeMsProperty("profilingStartTime", relative(*meta.profiling_start_time));
    w.TimeMsProperty("profilingEndTime", relative(*meta.profiling_end_time));
  }
}

}  // namespace

void GeckoProfileWriter::WriteMeta(const ProfileMeta& meta) {
  JsonWriter& w = out_;
  const auto relative = [&](TimeStamp t) { return (t - meta.start_time).ToNanoseconds(); };
  w.StartObjectProperty("meta");
  w.IntProperty("version", kGeckoProfileVersion);
  w.TimeMsProperty("startTime", meta.start_time_epoch_ns);
  w.Key("shutdownTime");
  WriteNullableTime(w, meta.shutdown_time.has_value(),
                    meta.shutdown_time ? relative(*meta.shutdown_time) : 0);

  // Categories (read from the top-level meta only, but written in every process).
  w.StartArrayProperty("categories");
  bool has_grey = false;
  for (const ProfileCategory& c : meta.categories) {
    w.StartObject();
    w.StringProperty("name", c.name);
    w.StringProperty("color", c.color);
    w.StartArrayProperty("subcategories");
    if (c.subcategories.empty()) {
      w.String("Other");
    } else {
      for (const std::string& s : c.subcategories) w.String(s);
    }
    w.EndArray();
    w.EndObject();
    has_grey = has_grey || c.color == "grey";
  }
  if (!has_grey) w.Splice(R"({"name":"Other","color":"grey","subcategories":["Other"]})");
  w.EndArray();

  w.StartArrayProperty("markerSchema");
  for (const std::string& schema : meta.marker_schemas) w.Splice(schema);
  w.EndArray();

  if (kind_ == Kind::kSubProcess) {
    // The range this process's data covers, for the parent (it widens its own range to
    // cover every sub-process: full/internal/sub_process_end.h); the front-end reads only
    // the top-level one.
    WriteProfilingRange(w, meta, relative);
    w.EndObject();
    return;
  }

  w.DoubleProperty("interval", meta.interval_ms);
  w.IntProperty("processType", meta.process_type);
  if (meta.pid.IsSpecified()) w.IntProperty("pid", meta.pid.ToNumber());
  w.StringProperty("product", meta.product);
  w.IntProperty("stackwalk", meta.stackwalk ? 1 : 0);
  w.IntProperty("debug", 0);
  w.BoolProperty("presymbolicated", meta.presymbolicated);
  // Per-sample CPU deltas are integer nanoseconds ("ns" is one of the three units the
  // front-end accepts; "us" would be rejected, it must be "µs").
  w.StartObjectProperty("sampleUnits");
  w.StringProperty("time", "ms");
  w.StringProperty("eventDelay", "ms");
  w.StringProperty("threadCPUDelta", "ns");
  w.EndObject();
  WriteProfilingRange(w, meta, relative);
  if (!meta.platform.empty()) w.StringProperty("platform", meta.platform);
  if (!meta.oscpu.empty()) w.StringProperty("oscpu", meta.oscpu);
  if (!meta.abi.empty()) w.StringProperty("abi", meta.abi);
  if (!meta.cpu_name.empty()) w.StringProperty("CPUName", meta.cpu_name);
  if (meta.logical_cpus != 0) w.UintProperty("logicalCPUs", meta.logical_cpus);
  w.EndObject();
}

bool GeckoProfileWriter::EnterSection(Section next) {
  if (streaming_ != nullptr) {
    if (misuse_.empty()) misuse_ = "GeckoProfileWriter: written to while a thread is streamed";
    return false;
  }
  const bool repeatable =
      next == Section::kThreads || next == Section::kCounters || next == Section::kProcesses;
  if (section_ == Section::kDone || next < section_ ||
      (next == section_ && !repeatable)) {
    if (misuse_.empty()) misuse_ = "GeckoProfileWriter: profile section written out of order";
    return false;
  }
  if (next == section_) return true;
  if (array_open_) {
    out_.EndArray();
    array_open_ = false;
  }
  // Mandatory sections that are being skipped.
  if (next > Section::kLibs && !wrote_libs_) {
    out_.StartArrayProperty("libs");
    out_.EndArray();
    wrote_libs_ = true;
  }
  if (next > Section::kThreads && !wrote_threads_) {
    out_.StartArrayProperty("threads");
    out_.EndArray();
    wrote_threads_ = true;
  }
  if (next > Section::kProcesses && !wrote_processes_ && kind_ == Kind::kParent) {
    out_.StartArrayProperty("processes");
    out_.EndArray();
    wrote_processes_ = true;
  }
  section_ = next;
  return true;
}

void GeckoProfileWriter::WriteLibs(const std::vector<SharedLibrary>& libs) {
  if (!EnterSection(Section::kLibs)) return;
  JsonWriter& w = out_;
  w.StartArrayProperty("libs");
  for (const SharedLibrary& lib : libs) {
    w.StartObject();
    w.UintProperty("start", lib.start);
    w.UintProperty("end", lib.end);
    w.UintProperty("offset", lib.offset);
    w.StringProperty("name", lib.name);
    w.StringProperty("path", lib.path);
    w.StringProperty("debugName", lib.debug_name);
    w.StringProperty("debugPath", lib.debug_path);
    w.StringProperty("breakpadId", lib.breakpad_id);
    if (!lib.code_id.empty()) w.StringProperty("codeId", lib.code_id);
    w.StringProperty("arch", lib.arch);
    w.EndObject();
  }
  w.EndArray();
  wrote_libs_ = true;
}

void GeckoProfileWriter::AddThread(GeckoThreadWriter& thread) {
  AddThreadJson(thread.TakeThreadJson());
}

bool GeckoProfileWriter::EnterThreadsArray() {
  if (!EnterSection(Section::kThreads)) return false;
  if (!array_open_) {
    out_.StartArrayProperty("threads");
    array_open_ = true;
    wrote_threads_ = true;
  }
  return true;
}

void GeckoProfileWriter::AddThreadJson(ChunkedJsonOutput&& thread_object) {
  if (thread_object.empty()) {
    if (misuse_.empty()) misuse_ = "GeckoProfileWriter: empty thread (writer already taken?)";
    return;
  }
  if (!EnterThreadsArray()) return;
  out_.Splice(std::move(thread_object));
  ++thread_count_;
}

void GeckoProfileWriter::StartThread(GeckoThreadWriter& thread) {
  if (thread.mode_ != GeckoThreadWriter::Mode::kBuffered || thread.sample_count() != 0 ||
      thread.marker_count() != 0) {
    if (misuse_.empty()) {
      misuse_ = "GeckoProfileWriter: a streamed thread must be new (no rows, not taken)";
    }
    return;
  }
  if (!EnterThreadsArray()) return;
  thread.StartStreaming(out_);
  streaming_ = &thread;
}

void GeckoProfileWriter::EndThread(GeckoThreadWriter& thread) {
  if (streaming_ != &thread) {
    if (misuse_.empty()) misuse_ = "GeckoProfileWriter: EndThread of a thread not streamed";
    return;
  }
  thread.EndStreaming();
  streaming_ = nullptr;
  ++thread_count_;
  if (!thread.misuse().empty() && misuse_.empty()) misuse_ = thread.misuse();
}

void GeckoProfileWriter::AddCounter(GeckoCounterWriter& counter) {
  ChunkedJsonOutput json = counter.TakeCounterJson();
  if (json.empty()) {
    if (misuse_.empty()) misuse_ = "GeckoProfileWriter: empty counter (writer already taken?)";
    return;
  }
  if (!EnterSection(Section::kCounters)) return;
  if (!array_open_) {
    out_.StartArrayProperty("counters");
    array_open_ = true;
  }
  out_.Splice(std::move(json));
}

void GeckoProfileWriter::WriteProfilerOverhead(const std::vector<OverheadSample>& samples) {
  if (samples.empty() || !EnterSection(Section::kProfilerOverhead)) return;
  JsonWriter& w = out_;
  auto us = [](TimeDuration d) { return static_cast<double>(d.ToNanoseconds()) / 1e3; };
  w.StartObjectProperty("profilerOverhead");
  w.StartObjectProperty("samples");
  w.SpliceProperty("schema",
                   R"({"time":0,"locking":1,"expiredMarkerCleaning":2,"counters":3,"threads":4})");
  w.StartArrayProperty("data");
  TimeDuration total, max_locking, max_cleaning, max_counters, max_threads, max_overhead,
      sum_locking, sum_cleaning, sum_counters, sum_threads, max_interval;
  // A sampler loop's phases last microseconds; a duration outside [0, 1 h] comes from damaged
  // data (a recovered flight recorder file) and is clamped, so that the sums below cannot
  // overflow.
  const TimeDuration kLongest = TimeDuration::FromSeconds(3600);
  auto sane = [&](TimeDuration d) {
    return d < TimeDuration() ? TimeDuration() : (d > kLongest ? kLongest : d);
  };
  for (size_t i = 0; i < samples.size(); ++i) {
    OverheadSample s = samples[i];
    s.locking = sane(s.locking);
    s.marker_cleaning = sane(s.marker_cleaning);
    s.counters = sane(s.counters);
    s.threads = sane(s.threads);
    w.StartArray();
    w.Double(us(s.time - start_time_));
    w.Double(us(s.locking));
    w.Double(us(s.marker_cleaning));
    w.Double(us(s.counters));
    w.Double(us(s.threads));
    w.EndArray();
    const TimeDuration overhead = s.locking + s.marker_cleaning + s.counters + s.threads;
    total += overhead;
    sum_locking += s.locking;
    sum_cleaning += s.marker_cleaning;
    sum_counters += s.counters;
    sum_threads += s.threads;
    max_locking = std::max(max_locking, s.locking);
    max_cleaning = std::max(max_cleaning, s.marker_cleaning);
    max_counters = std::max(max_counters, s.counters);
    max_threads = std::max(max_threads, s.threads);
    max_overhead = std::max(max_overhead, overhead);
    if (i > 0) max_interval = std::max(max_interval, s.time - samples[i - 1].time);
  }
  w.EndArray();
  w.EndObject();
  const double n = static_cast<double>(samples.size());
  const TimeDuration profiled = samples.back().time - samples.front().time;
  auto ms = [](TimeDuration d) { return d.ToMilliseconds(); };
  w.StartObjectProperty("statistics");
  w.DoubleProperty("profiledDuration", ms(profiled));
  w.UintProperty("samplingCount", samples.size());
  w.DoubleProperty("overheadDurations", ms(total));
  w.DoubleProperty("overheadPercentage",
                   profiled.ToNanoseconds() > 0
                       ? static_cast<double>(total.ToNanoseconds()) / profiled.ToNanoseconds()
                       : 0.0);
  w.DoubleProperty("maxInterval", ms(max_interval));
  w.DoubleProperty("maxLockings", ms(max_locking));
  w.DoubleProperty("maxCleaning", ms(max_cleaning));
  w.DoubleProperty("maxCounter", ms(max_counters));
  w.DoubleProperty("maxThread", ms(max_threads));
  w.DoubleProperty("maxOverhead", ms(max_overhead));
  w.DoubleProperty("meanLockings", ms(sum_locking) / n);
  w.DoubleProperty("meanCleaning", ms(sum_cleaning) / n);
  w.DoubleProperty("meanCounter", ms(sum_counters) / n);
  w.DoubleProperty("meanThread", ms(sum_threads) / n);
  w.DoubleProperty("meanOverhead", ms(total) / n);
  w.DoubleProperty("meanInterval", samples.size() > 1 ? ms(profiled) / (n - 1) : 0.0);
  w.EndObject();
  w.EndObject();
}

void GeckoProfileWriter::WritePausedRanges(const std::vector<PausedRange>& ranges) {
  if (!EnterSection(Section::kPausedRanges)) return;
  JsonWriter& w = out_;
  w.StartArrayProperty("pausedRanges");
  for (const PausedRange& r : ranges) {
    w.StartObject();
    w.Key("startTime");
    WriteNullableTime(w, r.start.has_value(),
                      r.start ? (*r.start - start_time_).ToNanoseconds() : 0);
    w.Key("endTime");
    WriteNullableTime(w, r.end.has_value(), r.end ? (*r.end - start_time_).ToNanoseconds() : 0);
    w.StringProperty("reason", r.reason);
    w.EndObject();
  }
  w.EndArray();
}

void GeckoProfileWriter::AddSubProcessJson(ChunkedJsonOutput&& profile) {
  if (profile.empty()) {
    if (misuse_.empty()) misuse_ = "GeckoProfileWriter: empty sub-process profile";
    return;
  }
  if (kind_ != Kind::kParent) {
    if (misuse_.empty()) misuse_ = "GeckoProfileWriter: sub-process profiles nest one level";
    return;
  }
  if (!EnterSection(Section::kProcesses)) return;
  if (!array_open_) {
    out_.StartArrayProperty("processes");
    array_open_ = true;
    wrote_processes_ = true;
  }
  out_.Splice(std::move(profile));
}

void GeckoProfileWriter::AddSubProcessJson(std::string_view profile) {
  ChunkedJsonOutput fragment;
  std::string copy(profile);
  fragment.Consume(&copy);
  AddSubProcessJson(std::move(fragment));
}

void GeckoProfileWriter::Finish() {
  if (streaming_ != nullptr) {
    // Still a complete document: the open thread is closed first.
    if (misuse_.empty()) misuse_ = "GeckoProfileWriter: Finish() while a thread is streamed";
    GeckoThreadWriter& thread = *streaming_;
    thread.EndStreaming();
    streaming_ = nullptr;
    ++thread_count_;
  }
  if (!EnterSection(Section::kDone)) return;
  out_.EndObject();
  out_.Flush();
}

}  // namespace strata
