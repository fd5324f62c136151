// Writers for the Gecko profile format, version 36 (what profiler.firefox.com imports).
// The format as the front-end really reads it, with its traps: docs/gecko-writer.md and
// shared/design/gecko-format.md.
//
// Two ways to write a thread, both formatting every row as soon as it is given:
// * buffered (after Firefox's ProcessStreamingContext): the capture code reads its buffer
//   once and feeds every sample and marker to the GeckoThreadWriter of its thread, which
//   keeps its rows as chunked JSON; at the end the thread writers are spliced (chunks moved,
//   not copied) into the document by a GeckoProfileWriter. Memory: the rows' text.
// * streamed (GeckoProfileWriter::StartThread / EndThread): the rows go straight into the
//   document's writer (a file: written in large blocks as they fill); the thread's samples
//   must all come before its markers, and nothing else is written to the document meanwhile.
//   Memory: the thread's tables only.
// Buffered:
//
//   ProfileMeta meta = ...;                       // start times, interval, categories, ...
//   GeckoThreadWriter main_thread(ThreadDescription{...}, meta.start_time);
//   uint32_t root = main_thread.stacks().LabelFrame("main", kOtherCategory);
//   std::optional<uint32_t> stack = main_thread.stacks().Stack(std::nullopt, root);
//   stack = main_thread.stacks().Stack(stack, main_thread.stacks().AddressFrame(pc));
//   main_thread.AddSample(stack, sample_time, cpu_delta_ns);
//   main_thread.AddMarker("Load", MarkerTiming::Interval(t0, t1), kOtherCategory, "Text",
//                         [&](JsonWriter& w) { w.StringProperty("name", "config.ini"); });
//
//   GeckoProfileWriter profile(out, meta);      // writes "{" and "meta"
//   profile.WriteLibs(CollectSharedLibraries());
//   profile.AddThread(main_thread);
//   profile.Finish();                           // writes what is missing, closes "}"
//
// Streamed (same thread writer, fed between StartThread and EndThread):
//   profile.StartThread(main_thread);            // "{name..., samples: {schema, data: ["
//   main_thread.AddSample(...); ...              // rows written to `out` at once
//   main_thread.AddMarker(...); ...              // closes the samples, then marker rows
//   profile.EndThread(main_thread);              // "]}", the tables, "}"
//
// All times are TimeStamps (monotonic) and are written as milliseconds relative to
// ProfileMeta::start_time, exactly (integer nanoseconds -> decimal ms).
//
// Thread safety: none; each writer is used by one thread at a time (thread writers may be
// filled on different threads, then spliced on one). Not async-signal-safe.
#ifndef STRATA_SHARED_JSON_GECKO_PROFILE_WRITER_H_
#define STRATA_SHARED_JSON_GECKO_PROFILE_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/json/json_writer.h"
#include "shared/json/marker_timing.h"
#include "shared/json/shared_libraries.h"
#include "shared/json/unique_stacks.h"
#include "shared/json/unique_strings.h"

namespace strata {

inline constexpr int kGeckoProfileVersion = 36;

// One entry of meta.categories. Frame and marker categories are indexes into that list.
struct ProfileCategory {
  std::string name;
  // transparent, purple, green, orange, yellow, lightblue, blue, brown, magenta, red,
  // lightred, darkgrey, grey. The first "grey" category is the default for frames without one.
  std::string color;
  // Index 0 is the category itself, conventionally "Other". Empty is written as ["Other"].
  std::vector<std::string> subcategories;
};

struct ProfileMeta {
  // Process start (or session start): the same instant on the monotonic clock and on the
  // Unix-epoch clock (see EpochNanoseconds()). Every time in the profile is relative to it.
  TimeStamp start_time;
  int64_t start_time_epoch_ns = 0;
  double interval_ms = 1.0;  // Nominal sampling interval.
  std::string product;       // Shown as the profile name.
  int process_type = 0;      // Gecko numbering; 0 = parent process.
  ProcessId pid;             // Informational meta.pid (threads carry their own); omitted if 0.
  // Written as given, except that an empty list gets one grey "Other" category and a list
  // without any grey category gets one appended (the front-end needs a grey default).
  std::vector<ProfileCategory> categories;
  // True when every native frame is already a name ("f (in lib)"): the front-end then never
  // contacts a symbol server. Leave false when frames are raw "0x..." addresses.
  bool presymbolicated = false;
  bool stackwalk = true;  // Native stacks were walked (informational).
  std::optional<TimeStamp> shutdown_time;  // null = process still running.
  // Both set (end after start): the profile's visible root range.
  std::optional<TimeStamp> profiling_start_time;
  std::optional<TimeStamp> profiling_end_time;
  // Informational; empty / 0 values are omitted. FillSystemInfo() sets them.
  std::string platform;  // "Linux"
  std::string oscpu;     // "Linux 6.1.0 x86_64"
  std::string abi;       // "x86_64"
  std::string cpu_name;
  uint32_t logical_cpus = 0;
  // meta.markerSchema entries, each one complete JSON object in the Gecko flavour
  // ({"name":..,"display":[..],"data":[..]}; "data", not "fields"). Spliced verbatim.
  std::vector<std::string> marker_schemas;
};

// The Unix-epoch time, in nanoseconds, of a monotonic time stamp (reads both clocks now).
int64_t EpochNanoseconds(TimeStamp t);
// Fills platform, oscpu, abi, cpu_name, logical_cpus from uname(2), sysconf and
// /proc/cpuinfo.
void FillSystemInfo(ProfileMeta& meta);

// The processName of a child process in a multi-process profile: "<program> (<pid>)", so that
// children running the same program are told apart (the front-end would number them
// "(1/3)".."(3/3)"). Unchanged when `program` already ends with that suffix.
std::string ChildProcessName(const std::string& program, int64_t pid);

struct ThreadDescription {
  // "GeckoMain" marks the process's main thread for the front-end: counters attach only to
  // it, and it is never hidden. Name the primary thread of each process so.
  std::string name;
  std::string process_type = "default";  // "default" = parent process.
  std::string process_name;              // Shown as the process label; "" = omitted.
  ProcessId pid;
  ThreadId tid;
  TimeStamp register_time;                   // A null TimeStamp is written as 0 (start).
  std::optional<TimeStamp> unregister_time;  // null = still registered.
};

// One thread's samples, markers and tables.
class GeckoThreadWriter {
 public:
  GeckoThreadWriter(ThreadDescription description, TimeStamp process_start);
  GeckoThreadWriter(const GeckoThreadWriter&) = delete;
  GeckoThreadWriter& operator=(const GeckoThreadWriter&) = delete;

  const ThreadDescription& description() const { return description_; }
  UniqueStrings& strings() { return strings_; }
  UniqueStacks& stacks() { return stacks_; }

  // One sample. `stack` null = no stack (counted, not in the call tree). `cpu_delta_ns`: CPU
  // time the thread used since its previous sample (null = unknown); the front-end ignores
  // the first sample's value. `event_delay_ms`: event-loop delay, null when not measured.
  // Samples must come in time order; one earlier than its predecessor is written at the
  // predecessor's time (the front-end binary-searches) and counted in clamped_samples().
  void AddSample(std::optional<uint32_t> stack, TimeStamp time,
                 std::optional<int64_t> cpu_delta_ns = std::nullopt,
                 std::optional<double> event_delay_ms = std::nullopt);

  // A marker without payload (data null).
  void AddMarker(std::string_view name, const MarkerTiming& timing, uint32_t category);
  // A marker with payload {"type": type, ...fields}. `write_fields(JsonWriter&)` writes the
  // payload's properties (Key + value); string-table fields ("unique-string" format) use
  // strings().Index(); a backtrace uses WriteMarkerStack(). `type` selects the marker schema
  // of that name; avoid the reserved types ("JS allocation", "Native allocation", GCSlice,
  // GCMajor, IPC, Network, CompositorScreenshot).
  template <typename WriteFields>
  void AddMarker(std::string_view name, const MarkerTiming& timing, uint32_t category,
                 std::string_view type, WriteFields&& write_fields) {
    JsonWriter& out = BeginMarker(name, timing, category);
    out.StartObject();
    out.StringProperty("type", type);
    std::forward<WriteFields>(write_fields)(out);
    out.EndObject();
    EndMarker(out);
  }
  // Inside write_fields: the payload property "stack", a backtrace captured at `time` whose
  // leaf is `stack` (an index into this thread's stack table). The front-end shows it as the
  // marker's cause. `minimal`: the samples table alone,
  // {"samples":{"schema":{"stack":0,"time":1,"eventDelay":2},"data":[[stack,time,0]]}}, what
  // the front-end reads of the full "SyncProfile" form (samples.data[0] by its schema), in a
  // fifth of its bytes: for native allocation records (../shared/design/native-allocations.md,
  // section 4: the minimal form imports).
  void WriteMarkerStack(JsonWriter& payload, uint32_t stack, TimeStamp time,
                        bool minimal = false);

  size_t sample_count() const { return sample_count_; }
  size_t marker_count() const { return marker_count_; }
  size_t clamped_samples() const { return clamped_samples_; }

  // The complete thread object as a JSON fragment, for GeckoProfileWriter::AddThreadJson()
  // or JsonWriter::Splice(). Call once; the writer is spent afterwards. Buffered mode only
  // (a streamed thread gives an empty fragment, which AddThreadJson refuses).
  ChunkedJsonOutput TakeThreadJson();

  // Misuse (a sample after the markers of a streamed thread, a row after the thread was
  // taken or ended: such rows are dropped), or "". GeckoProfileWriter::EndThread reports it.
  const std::string& misuse() const { return misuse_; }

 private:
  friend class GeckoProfileWriter;
  enum class Mode : uint8_t {
    kBuffered,          // Rows go to samples_ / markers_.
    kStreamSamples,     // Rows go to *stream_, inside the samples' "data" array.
    kStreamMarkers,     // Rows go to *stream_, inside the markers' "data" array.
    kSpent,             // Taken or ended: rows are refused.
  };
  // Streaming, called by GeckoProfileWriter: the object's head and the samples' opening, the
  // switch to the markers, the closing with the tables.
  void StartStreaming(JsonWriter& out);
  void StartStreamedMarkers();
  void EndStreaming();
  // The object's properties before "samples", and those after "markers".
  void WriteHead(JsonWriter& w);
  void WriteTables(JsonWriter& w);
  // Where the next sample row goes, or null when it must be dropped (misuse latched).
  JsonWriter* SampleOut();
  JsonWriter* MarkerOut();
  // Starts a marker row (in a writer that drops it when the row is misuse) and returns the
  // writer to continue it in.
  JsonWriter& BeginMarker(std::string_view name, const MarkerTiming& timing, uint32_t category);
  void EndMarker(JsonWriter& out);
  void Misuse(const char* what);
  int64_t Relative(TimeStamp t) const { return (t - process_start_).ToNanoseconds(); }

  ThreadDescription description_;
  TimeStamp process_start_;
  UniqueStrings strings_;
  UniqueStacks stacks_;
  ChunkedJsonWriter samples_;  // Buffered mode: "[" row, row, ...
  ChunkedJsonWriter markers_;
  JsonWriter* stream_ = nullptr;  // Streamed mode: the document's writer.
  // Receives and forgets rows that are misuse, so that callers need no checks.
  std::unique_ptr<ChunkedJsonWriter> discard_;
  Mode mode_ = Mode::kBuffered;
  size_t sample_count_ = 0;
  size_t marker_count_ = 0;
  size_t clamped_samples_ = 0;
  int64_t last_sample_ns_ = INT64_MIN;
  std::string misuse_;
  // WriteMarkerStack's text before the stack index (made at its first call), and its buffer.
  std::string marker_stack_prefix_;
  std::string marker_stack_text_;
};

// One process counter (meta-less time series), e.g. memory in use.
// `category` is a string here ("Memory", "Bandwidth", "CPU", ...), not an index; the
// front-end derives the graph from it (Memory: accumulated bytes line).
class GeckoCounterWriter {
 public:
  GeckoCounterWriter(std::string name, std::string category, std::string description,
                     TimeStamp process_start);
  // `count`: change since the previous sample; `number`: operations since then (optional).
  void AddSample(TimeStamp time, int64_t count, std::optional<uint64_t> number = std::nullopt);
  size_t sample_count() const { return sample_count_; }
  // The counter object as a JSON fragment. Call once.
  ChunkedJsonOutput TakeCounterJson();

 private:
  std::string name_, category_, description_;
  TimeStamp process_start_;
  ChunkedJsonWriter samples_;
  size_t sample_count_ = 0;
  bool taken_ = false;
};

// One sampler loop's own cost (the front-end's "profiler overhead" track).
struct OverheadSample {
  TimeStamp time;                  // Loop start.
  TimeDuration locking;            // Waiting for the registry lock.
  TimeDuration marker_cleaning;    // Expired-data cleaning (0 here: the buffer does it).
  TimeDuration counters;           // Sampling counters.
  TimeDuration threads;            // Collecting the threads' samples.
};

struct PausedRange {
  std::optional<TimeStamp> start;  // null = before the start of the buffer.
  std::optional<TimeStamp> end;    // null = still paused.
  std::string reason;              // "profiler-paused" or "collecting".
};

// The process profile document. Sections must be written in this order, each optional
// (Finish() writes the mandatory ones that are missing as empty arrays):
//   meta (constructor), libs, threads, counters, profilerOverhead, pausedRanges, processes,
//   profilingLog, profileGatheringLog.
// Out-of-order calls are ignored and latched as an error (error()).
class GeckoProfileWriter {
 public:
  enum class Kind {
    kParent,      // The top-level document: full meta, "processes" array.
    kSubProcess,  // An entry of the parent's "processes": short meta, no "processes".
  };

  // Writes "{" and "meta". `out` must outlive this object.
  GeckoProfileWriter(JsonWriter& out, const ProfileMeta& meta, Kind kind = Kind::kParent);

  void WriteLibs(const std::vector<SharedLibrary>& libs);
  // Splices the thread in (its chunks are moved). The thread writer is spent afterwards;
  // adding a spent writer (an empty fragment) is refused as misuse.
  void AddThread(GeckoThreadWriter& thread);
  void AddThreadJson(ChunkedJsonOutput&& thread_object);
  // Streams `thread` into the document: writes the head of its object, after which its
  // samples, then its markers, are written straight to the output as they are added.
  // `thread` must have no rows yet. Until EndThread(thread), nothing else may be written to
  // this profile (refused as misuse). Memory: the thread's tables, not its rows.
  void StartThread(GeckoThreadWriter& thread);
  // Closes the streamed thread: its tables and the end of its object. The thread writer is
  // spent afterwards. Its misuse, if any, becomes this profile's error.
  void EndThread(GeckoThreadWriter& thread);
  void AddCounter(GeckoCounterWriter& counter);
  // "profilerOverhead": the samples table (times and durations in microseconds, as the
  // front-end expects) and summary statistics (milliseconds).
  void WriteProfilerOverhead(const std::vector<OverheadSample>& samples);
  void WritePausedRanges(const std::vector<PausedRange>& ranges);
  // A complete sub-process profile (written by a Kind::kSubProcess writer, possibly in
  // another process and sent over; times relative to its own meta.startTime).
  void AddSubProcessJson(ChunkedJsonOutput&& profile);
  void AddSubProcessJson(std::string_view profile);
  // "profilingLog": {"<pid>": {...}}; `write_fields(JsonWriter&)` writes the properties of
  // the per-process object (free-form diagnostics; the front-end only copies them).
  template <typename WriteFields>
  void WriteProfilingLog(ProcessId pid, WriteFields&& write_fields) {
    if (!EnterSection(Section::kProfilingLog)) return;
    out_.StartObjectProperty("profilingLog");
    out_.StartObjectProperty(std::to_string(pid.ToNumber()));
    std::forward<WriteFields>(write_fields)(out_);
    out_.EndObject();
    out_.EndObject();
  }
  // "profileGatheringLog" (parent only, after profilingLog): what happened to each
  // sub-process while its profile was gathered; free-form, after Firefox's.
  // `write_fields(JsonWriter&)` writes the object's properties.
  template <typename WriteFields>
  void WriteProfileGatheringLog(WriteFields&& write_fields) {
    if (kind_ != Kind::kParent || !EnterSection(Section::kProfileGatheringLog)) return;
    out_.StartObjectProperty("profileGatheringLog");
    std::forward<WriteFields>(write_fields)(out_);
    out_.EndObject();
  }

  // Writes the missing mandatory sections and the closing "}". Flushes the JsonWriter.
  void Finish();

  size_t thread_count() const { return thread_count_; }
  // First misuse (out-of-order section, use after Finish) or the JsonWriter's error; "" if ok.
  const std::string& error() const;
  bool ok() const { return error().empty(); }

 private:
  enum class Section {
    kMeta,
    kLibs,
    kThreads,
    kCounters,
    kProfilerOverhead,
    kPausedRanges,
    kProcesses,
    kProfilingLog,
    kProfileGatheringLog,
    kDone,
  };
  // Closes the open array section, writes skipped mandatory ones; false if out of order.
  bool EnterSection(Section next);
  // EnterSection(kThreads), then opens the "threads" array unless it is open.
  bool EnterThreadsArray();
  void WriteMeta(const ProfileMeta& meta);

  JsonWriter& out_;
  GeckoThreadWriter* streaming_ = nullptr;  // Between StartThread and EndThread.
  Kind kind_;
  TimeStamp start_time_;
  Section section_ = Section::kMeta;
  bool array_open_ = false;
  bool wrote_libs_ = false;
  bool wrote_threads_ = false;
  bool wrote_processes_ = false;
  size_t thread_count_ = 0;
  std::string misuse_;
};

}  // namespace strata

#endif  // STRATA_SHARED_JSON_GECKO_PROFILE_WRITER_H_
