// A read-only, flattened view of a Gecko profile for the `strata` commands that analyse
// profiles (summary, convert, report): every process (the parent and its "processes",
// nested ones flattened) with its threads, all times in milliseconds relative to the parent's
// meta.startTime (each sub-process is shifted by the difference of the start times, as the
// front-end does), and frames resolved to functions shared by the whole profile.
//
// A function is a (name, library) pair taken from the frame's location string, parsed the
// way the front-end classifies it (shared/json/location.h): "name (in lib)" and
// "name (in lib) (file:line)" are native functions (file kept), "0x..." is an unsymbolicated
// address (named by the address), anything else (labels, JS) is named by the whole string.
//
// Thread safety: immutable after LoadProfileModel().
#ifndef STRATA_TOOLS_STRATA_PROFILE_MODEL_H_
#define STRATA_TOOLS_STRATA_PROFILE_MODEL_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rapidjson/document.h"

namespace strata {
namespace cli {

struct Function {
  std::string name;     // "ns::Foo::run(int)", "0x55d0c0de1234", "my label".
  std::string library;  // "libfoo.so"; "" for labels, JS and unknown addresses.
  std::string file;     // Source file when the location string had one.
  bool is_address = false;  // An unsymbolicated "0x..." frame.
};

struct Frame {
  uint32_t function = 0;  // Index into Profile::functions.
  uint32_t line = 0;      // 0: unknown.
  int32_t category = -1;  // Index into Profile::categories; -1: inherited / none.
  // The frameTable's inlineDepth (written by `strata symbolicate`): 0 for the function the
  // code belongs to (its ELF symbol), k > 0 for a function inlined k levels into it. 0 when
  // the column is absent.
  uint32_t inline_depth = 0;
  // The frameTable's lib (index into the thread's Process::libs) and address (relative to
  // the library: absolute - (start - offset)); -1 and 0 when the frame has none (labels, JS,
  // a profile written without them).
  int32_t lib = -1;
  uint64_t address = 0;
  bool is_label = false;  // A label frame (its location reads as a label, location.h).
};

// One entry of a process's `libs`.
struct Library {
  uint64_t start = 0;   // First mapped address.
  uint64_t end = 0;     // One past the last.
  uint64_t offset = 0;  // start - load bias.
  std::string name;
  std::string path;
  std::string code_id;  // GNU build-id in hex ("codeId"), "" when unknown.
};

struct Marker {
  std::string name;
  std::string type;  // data.type, "" without a payload.
  double start = NAN;  // ms, NaN when the phase has none.
  double end = NAN;
  int phase = 0;  // 0 instant, 1 interval, 2 interval start, 3 interval end.
  int32_t category = -1;
};

// A "Native allocation" marker (docs/memory.md): an allocation (bytes > 0, the estimate of
// the bytes its sample stands for) or the free of one (bytes < 0), as the front-end reads it.
// These markers are kept out of Thread::markers, as the front-end takes them out of its list.
struct NativeAllocation {
  double time = 0;      // ms
  int64_t bytes = 0;
  uint64_t address = 0;
  int32_t stack = -1;   // Into the thread's stack table; -1: none.
};

struct Thread {
  // The thread's name; a non-Firefox program's main thread (written "GeckoMain", which the
  // front-end needs) is named after its program ("python3"), `is_main` set.
  std::string name;
  bool is_main = false;
  std::string process_name;
  int64_t pid = 0;
  int64_t tid = 0;
  size_t process = 0;  // Index into Profile::processes.
  double register_time = 0;
  double unregister_time = NAN;  // NaN: still registered at the end.

  std::vector<Frame> frames;
  std::vector<int32_t> stack_prefix;   // -1 for a root.
  std::vector<uint32_t> stack_frame;   // Index into frames.
  std::vector<int32_t> stack_category;  // Category of the stack (inherited when the frame has none).

  std::vector<double> sample_time;       // ms, ascending.
  std::vector<int32_t> sample_stack;     // -1: no stack.
  std::vector<double> sample_cpu_ms;     // CPU time since the previous sample; NaN: unknown.
  std::vector<Marker> markers;
  std::vector<NativeAllocation> native_allocations;  // In the table's (time) order.

  size_t sample_count() const { return sample_time.size(); }
  // Functions of a stack, root first.
  std::vector<uint32_t> StackFunctions(int32_t stack) const;
  // The function a sample with this stack spends its self time in: the leaf frame's, or,
  // when the leaf is an inlined function, the function it was inlined into (the stack's
  // nearest frame with inline depth 0; docs/symbols.md, "Self time"). So a function is the
  // same in a profile named at capture (ELF symbols, no inline frames) and one symbolicated
  // with DWARF, and the same as perf's (`perf report --no-inline`).
  uint32_t SelfFunction(int32_t stack) const;
  // Total CPU ms over the samples with a known delta (the first sample's delta is ignored,
  // as the front-end does).
  double CpuMs() const;
  bool has_cpu() const;
};

struct Process {
  int64_t pid = 0;
  std::string name;         // The main thread's processName, or the product.
  double start_offset = 0;  // This process's meta.startTime minus the parent's, ms.
  double start_time = 0;    // ms: first registration or sample.
  double end_time = 0;      // ms: last sample, marker or unregistration.
  std::vector<size_t> threads;  // Indexes into Profile::threads.
  // The process's pausedRanges (profiler paused: no sample is taken), ms, in file order; an
  // end still paused at the save is +infinity.
  std::vector<std::pair<double, double>> paused_ranges;
  std::vector<Library> libs;  // The process's `libs`, as written (sorted by start).
};

struct Category {
  std::string name;
  std::string color;
};

struct Profile {
  double start_epoch_ms = 0;  // The parent's meta.startTime.
  double interval_ms = 1;
  std::string product;
  std::string cpu_unit;  // meta.sampleUnits.threadCPUDelta, "" when absent.
  // What sent each process's sampling signals and why (profilingLog.<pid>.samplingSource),
  // "<pid>: <source>", in the file's order; empty when the profile does not say.
  std::vector<std::string> sampling_sources;
  // What the profiler says about the sampling signal, per process: why sampling stopped
  // (profilingLog.<pid>.samplingStopped) and the foreign instances of the sampling signal
  // (profilingLog.<pid>.foreignSamplingSignals; docs/host-contract.md, "Signals"), each
  // "<pid>: <key>: <text>", in the file's order.
  std::vector<std::string> sampling_notes;
  std::vector<Category> categories;
  std::vector<Process> processes;  // The parent first.
  std::vector<Thread> threads;
  std::vector<Function> functions;
  double start_time = 0;  // ms, over all processes.
  double end_time = 0;
  size_t total_samples = 0;

  double duration() const { return end_time - start_time; }
};

// A marker as a time span: an instant (start == end), an interval, or an IntervalStart /
// IntervalEnd pair (matched per name: an end closes the most recent open start of the same
// name, as the front-end does). A start without an end runs to the thread's end, an end
// without a start begins at the thread's registration. In start order.
struct MarkerSpan {
  std::string name;
  std::string type;
  double start = 0;
  double end = 0;
  bool instant = false;
};
std::vector<MarkerSpan> MarkerSpans(const Profile& profile, const Thread& thread);

// The end of a thread: its unregistration, or its process's end.
double ThreadEnd(const Profile& profile, const Thread& thread);

// Fills `profile` from a parsed Gecko profile; false with *error set (naming the thread or
// table that is malformed) when the document does not have the shape of one.
bool LoadProfileModel(const rapidjson::Value& document, Profile* profile, std::string* error);

// How a location string reads: see the file comment.
struct ParsedLocation {
  std::string name;
  std::string library;
  std::string file;
  uint32_t line = 0;
  bool is_address = false;
};
ParsedLocation ParseLocation(std::string_view location);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_PROFILE_MODEL_H_
