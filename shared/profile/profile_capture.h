// Profile capture from the session buffer, shared by both tiers: the buffer is read once to
// collect native addresses (and count each thread's entries), which are symbolicated in one
// batch from ELF symbol tables; then it is read again, up to the same block, to turn every
// sample and marker into Gecko JSON. Threads holding at least 1/8 of the samples and markers
// (and at least 4096 of them) are streamed: written straight to `out` by two reads of their
// own (samples, then markers), so their rows are never held in memory; the other threads are
// formatted by one shared read and held until spliced in. Threads appear in document order
// (main first, then by id). A read holds the buffer's lock, and `out` is written during the
// streamed threads' reads: a slow `out` delays the buffer's writers meanwhile.
// Memory while writing: the tables (strings, frames, stacks) of the threads, the rows of the
// small threads, and `out`'s own buffering.
//
// The tiers say what they know through CaptureInputs (threads, counters, marker types,
// schemas, log fields); nothing here knows which tier runs.
//
// Progress (optional): CaptureInputs::progress goes from its local 0 to 1 through the
// phases, with these locations:
//   0    - 0.25  "capture: collecting addresses"  pass 1, by block position in the buffer
//   0.25 - 0.4   "capture: symbolicating"
//   0.4  - 0.97  "capture: writing threads"       meta, libs, then each read of the buffer
//                                                 (shared, then two per streamed thread) in
//                                                 an equal part, by block position
//   0.97 - 1     "capture: finishing"             counters, overhead, sub-processes,
//                                                 profilingLog, closing the document
// Failures: the first writer error is latched in CaptureInputs::failure (or a latch of the
// call's own) and returned; a latch that fails meanwhile (another part of the caller's
// operation, or another thread cancelling) stops the capture at its next check, every
// 1/256 of a pass and between phases.
//
// Thread safety: one capture per call; the buffer may be written meanwhile (its own lock).
// Async-signal safety: no.
#ifndef STRATA_SHARED_PROFILE_PROFILE_CAPTURE_H_
#define STRATA_SHARED_PROFILE_PROFILE_CAPTURE_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/buffer/chunked_buffer.h"
#include "shared/json/gecko_profile_writer.h"
#include "shared/json/json_writer.h"
#include "shared/profile/library_timeline.h"
#include "shared/profile/marker_entry.h"
#include "shared/progress/failure_latch.h"
#include "shared/progress/progress_logger.h"

namespace strata {
namespace profile {

struct CaptureThread {
  ThreadId tid;
  std::string name;  // "GeckoMain" for the process's main thread.
  TimeStamp register_time;
  std::optional<TimeStamp> unregister_time;
  bool is_main = false;
};

struct TimeRange {
  TimeStamp start;
  TimeStamp end;
};

struct CaptureCounter {
  const char* name = nullptr;  // null: the counter is gone, its samples are skipped.
  const char* category = nullptr;
  const char* description = nullptr;
};

struct CaptureInputs {
  ProfileMeta meta;             // start_time, interval, product, categories, schemas, ...
  TimeStamp start_time;         // Session start (same as meta.start_time).
  std::string process_name;
  // The process the buffer's data is from; null: this one (a recovered flight recorder
  // file gives the dead process's).
  std::optional<ProcessId> pid;
  bool symbolicate = true;      // false: raw addresses (rawaddresses).
  // Keep native frames of Strata's own libraries (the ownframes feature); by default they
  // are elided from every stack (docs/symbols.md, "Strata's own frames").
  bool keep_strata_frames = false;
  // The category of the "Profiler" label a sample gets when every frame it had was Strata's.
  uint8_t profiler_category = 0;
  // Entries from outside this process (a recovered flight recorder file): the buffer reads
  // them untrusted (ChunkedBuffer::SetUntrustedReading), and so must the capture's own
  // readers of their parts, resolving literal-string addresses with this.
  const LiteralResolver* untrusted_literals = nullptr;
  // Threads to write: live ones (no unregister_time) and the main thread always, ended ones
  // only when the buffer holds entries of theirs (met in pass 1, and, for a thread not
  // streamed, still there when its rows are read). Threads found in the buffer but not here
  // are written as "Thread <tid>".
  std::vector<CaptureThread> threads;
  std::vector<CaptureCounter> counters;  // Index = counter id of kCounterSample entries.
  // The functions of a typed marker's tag (null for unknown tags).
  std::function<const MarkerTypeFunctions*(uint8_t tag)> marker_type;
  // Extra properties of this process's profilingLog entry.
  std::function<void(JsonWriter&)> profiling_log;
  // kParent: the top-level document. kSubProcess: one entry of a parent's "processes",
  // written by a child process for its parent (docs/ipc.md).
  GeckoProfileWriter::Kind kind = GeckoProfileWriter::Kind::kParent;
  // Parent only: adds the sub-process profiles ("processes") after this process's own data,
  // before profilingLog. Called once, on the capturing thread (it may wait for children).
  std::function<void(GeckoProfileWriter&)> sub_processes;
  // Parent only: the range the sub-processes' profiles cover (each covers its own samples
  // and markers), called before this process's meta is written: the parent's
  // profilingStartTime/EndTime are widened to it, so that the front-end keeps every child's
  // data (it drops what is outside). Called once, on the capturing thread (it may wait for the
  // children's captures). Null, or an empty result: nothing to widen.
  std::function<std::optional<TimeRange>()> sub_processes_range;
  // Parent only: the properties of the top-level "profileGatheringLog" object (what became
  // of each sub-process during gathering), written last. Null: no such object.
  std::function<void(JsonWriter&)> profile_gathering_log;
  // Every library mapped during the session with its load and unload times
  // (library_timeline.h): each sample's addresses resolve in the library mapped at its time.
  // Null: the libraries mapped at capture.
  std::function<std::vector<LibraryLifetime>()> library_history;
  // Reports the capture's progress (see the top of this file); null: none, at no cost. Must
  // stay valid during the call; it is left at its local 1 (not finished).
  ProgressLogger* progress = nullptr;
  // Latches the capture's first failure; null: a latch of the call's own. A latch that has
  // already failed makes the capture stop at once.
  FailureLatch* failure = nullptr;
};

// Writes the whole profile document. False with *error set to the latched failure (the
// first writer error, or whatever failed the caller's latch).
bool WriteProfile(const CaptureInputs& inputs, const ChunkedBuffer& buffer, JsonWriter& out,
                  std::string* error);

}  // namespace profile
}  // namespace strata

#endif  // STRATA_SHARED_PROFILE_PROFILE_CAPTURE_H_
