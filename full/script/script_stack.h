// Script stacks in samples: the engine-neutral part of the full tier (docs/js.md).
//
// A script engine runs functions the native stack walk cannot name (interpreted bytecode) or
// cannot even cross (JIT code has no unwind information). An adapter per engine (for
// SpiderMonkey: full/script/spidermonkey/) attaches an engine context on the thread that owns
// it, through a ScriptThread. From then on every sample of that thread, in its own sampling
// signal handler:
//
//   1. base fills the slot (time, CPU time, labels) but does not walk the native stack;
//   2. the adapter's capture() copies the engine's frames into the slot (ScriptFrameWriter:
//      fixed storage, text copied, no allocation), root first, each with the native stack
//      address it runs at, and returns where the native walk must resume after each JIT
//      activation (the registers of the native frame that entered it);
//   3. the native walk goes segment by segment (base_internal::WalkNativeSegment): it stops
//      at the first pc outside every loaded ELF object (JIT code), leaves a boundary there
//      and resumes at the next older entry point (or, when the engine gave none, past the JIT
//      frames by their frame pointers). The outermost segment (the embedder's frames down to
//      the engine's entry) rarely changes between samples: it is cached per thread and reused
//      while the return addresses on the stack still match it. When neither the engine nor
//      the frame pointers lead out of the JIT code, the walk resumes at the cached segment if
//      its entry is still live on the stack (else the sample is cut there: no native root);
//   4. the sampler thread later merges natives, labels and script frames by stack address
//      (base/internal/sampling/sample_entries.h) into one kSample entry.
//
// The handler runs on the very thread whose engine it reads, so the thread is stopped while
// it is read (what the engine's profiling API requires), and detaching on that same thread
// is naturally serialised with it: once DetachScriptThread() returns, no handler of the
// thread uses the ScriptThread or the engine any more.
//
// Engines also hook into the session (ScriptEngine): the sampler thread polls them once per
// loop (to turn their instrumentation on from another thread, e.g. through an interrupt
// callback) and the full tier tells them when it ends a session.
//
// Thread safety: Attach/Detach on the owning thread; Register/Unregister thread-safe.
// Async-signal safety: ScriptFrameWriter and ScriptThread::capture are for the signal handler;
// nothing else is.
#ifndef STRATA_FULL_SCRIPT_SCRIPT_STACK_H_
#define STRATA_FULL_SCRIPT_SCRIPT_STACK_H_

#include <ucontext.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/categories.h"
#include "base/internal/sampling/sample_ring.h"
#include "platform/sampling/native_frame.h"
#include "shared/profile/sample_entry.h"

namespace strata {
namespace full {
namespace script {

using base_internal::SampleSlot;
using profile::ScriptFrameKind;

// Where a native walk resumes after JIT code: the registers of the native frame that entered
// it (its pc is a return address into that frame).
using NativeResumePoint = FrameRegisters;

// Writes script frames into a sample slot, in the signal handler. Frames are appended root
// first; their text is copied into the slot's bounded pool (truncated when it runs out).
class ScriptFrameWriter {
 public:
  explicit ScriptFrameWriter(SampleSlot& slot) : slot_(slot) {}
  ScriptFrameWriter(const ScriptFrameWriter&) = delete;
  ScriptFrameWriter& operator=(const ScriptFrameWriter&) = delete;

  // One frame: `text`, followed by " " + `text2` when text2 is given (an engine label and its
  // dynamic part). `flags`: profile::kScriptFrame* bits; line/column are stored with
  // kScriptFrameHasPosition. False when the slot's frames are full (the frame is dropped).
  bool Append(ScriptFrameKind kind, Category category, uint8_t flags, uintptr_t stack_address,
              const char* text, const char* text2 = nullptr, uint32_t line = 0,
              uint32_t column = 0);
  // The same with the text made of `count` pieces put together as they are (null pieces
  // skipped), e.g. {"get ", label, ".", dynamic}.
  bool AppendPieces(ScriptFrameKind kind, Category category, uint8_t flags,
                    uintptr_t stack_address, const char* const* pieces, size_t count,
                    uint32_t line = 0, uint32_t column = 0);

  uint32_t count() const { return slot_.script_frame_count; }
  uint32_t dropped() const { return dropped_; }

 private:
  void CopyText(const char* text);

  SampleSlot& slot_;
  uint32_t dropped_ = 0;
};

// A script engine's hook for one thread, owned by the adapter (which embeds it in its own
// per-thread object).
struct ScriptThread {
  // Signal context, on the owning thread only: appends the thread's script frames through
  // `writer` (root first, each with the native stack address it runs at) and writes up to
  // `max_resume` native resume points, youngest first; returns how many.
  size_t (*capture)(ScriptThread* self, const ucontext_t& context, ScriptFrameWriter& writer,
                    NativeResumePoint* resume, size_t max_resume) = nullptr;

  // The full tier's per-thread state (its native-walk cache), set by AttachScriptThread.
  struct WalkCache* walk_cache = nullptr;

  // Signal context, owning thread: the outermost native frame seen so far (pc, sp), from
  // walks that libunwind ended for lack of a caller: the one with the highest sp (a walk
  // that ended early, for lack of unwind information, stops lower). A stack scan's candidate
  // is kept only if its walk ends at this very frame (docs/js.md, "Lost native roots").
  uintptr_t root_pc = 0;
  uintptr_t root_sp = 0;

  // Statistics, written by the owning thread's signal handler (ReadScriptThreadStats).
  std::atomic<uint64_t> samples{0};              // Samples taken with this hook.
  std::atomic<uint64_t> sample_ticks{0};         // Their total TSC ticks in the handler.
  std::atomic<uint64_t> max_sample_ticks{0};
  std::atomic<uint64_t> script_frames{0};        // Script frames written.
  std::atomic<uint64_t> dropped_frames{0};       // Frames that did not fit in the slot.
  std::atomic<uint64_t> samples_with_script{0};  // Samples with at least one script frame.
  std::atomic<uint64_t> cached_walks{0};  // Native segments taken from the walk cache.
  // Walks that could not leave JIT code by the engine's entry points or the frame pointers
  // and resumed at the cached outermost segment instead (still live on the stack).
  std::atomic<uint64_t> cache_resumes{0};
  // Walks that left JIT code by a return address found scanning the stack (a walk from it
  // reached the stack's outermost frame), the last fallback.
  std::atomic<uint64_t> scan_resumes{0};
  // Walks cut at a boundary with no way out of the JIT code (the sample has no native root).
  std::atomic<uint64_t> cut_walks{0};
  // The last kRecentSamples samples' ticks, for percentiles.
  static constexpr uint32_t kRecentSamples = 1024;
  uint32_t recent_ticks[kRecentSamples] = {};
};

struct ScriptThreadStats {
  uint64_t samples = 0;
  uint64_t samples_with_script = 0;
  uint64_t script_frames = 0;
  uint64_t dropped_frames = 0;
  uint64_t cached_walks = 0;
  uint64_t cache_resumes = 0;
  uint64_t scan_resumes = 0;
  uint64_t cut_walks = 0;
  double mean_sample_us = 0;  // Whole sample in the handler: base part, script part, walk.
  double median_sample_us = 0;  // Over the last ScriptThread::kRecentSamples samples.
  double p90_sample_us = 0;
  double max_sample_us = 0;
};
// Not async-signal-safe (converts ticks with a calibration taken at the first attach).
ScriptThreadStats ReadScriptThreadStats(const ScriptThread& thread);

// Publishes `thread` to the calling thread's sampling handler. The calling thread is
// registered with the profiler if it is not. False when it cannot be (forked child, ...).
bool AttachScriptThread(ScriptThread* thread);
// Unpublishes the calling thread's script thread. On return, no sampling handler of the
// calling thread uses it: the caller may free it and tear the engine state down.
void DetachScriptThread(ScriptThread* thread);

// A script engine's hooks into the session.
struct ScriptEngine {
  const char* name = "";
  // Sampler thread, once per sampling loop (keep it short: a flag check per context).
  void (*on_sampling_loop)() = nullptr;
  // The full tier ended the session (StopFull) or handed it back (ShutdownFull).
  void (*on_session_end)() = nullptr;
};
// `engine` must outlive its registration.
void RegisterScriptEngine(const ScriptEngine* engine);
void UnregisterScriptEngine(const ScriptEngine* engine);

// Whether engines should have their profiling instrumentation on: the full tier is in charge
// and a session is active.
bool ScriptProfilingWanted();

// The cost of the samples the full tier took of threads without a script engine (base's
// capture through full's callback), for comparison with ScriptThreadStats.
struct OrdinarySampleStats {
  uint64_t samples = 0;
  double mean_sample_us = 0;
  double median_sample_us = 0;  // Over the last 1024 samples (any thread).
  double p90_sample_us = 0;
};
OrdinarySampleStats ReadOrdinarySampleStats();

// The last outermost native segment of a thread: from a resume point to the end of the
// stack. Frames older than a live frame cannot change, so when a later sample resumes at the
// same pc and sp and every cached return address is still in its slot on the stack (a
// return address sits just below its frame's sp: at the CFA of the frame it called), the
// segment is the same. Owned by the full tier, used only by the owning thread's handler.
struct WalkCache {
  uintptr_t pc = 0;
  uintptr_t sp = 0;
  uint32_t count = 0;
  NativeFrame frames[SampleSlot::kMaxNativeFrames];
};

namespace internal {

// The fallback when neither the engine nor the frame pointers lead out of the JIT code at
// `stopped` (seen while the GC suppresses sampling, so the engine names no entry point, with
// rbp at the JIT return address not a frame record: docs/js.md, "Lost native roots"): the
// cached outermost segment, when its resume point is still live on the stack above
// `stopped` (its return address still in its slot just below the resume sp); the walk then
// takes the segment only if every other cached return address is still in its slot too.
// Signal context; reads one stack word, only between `stack_low` and `stack_high`.
bool CachedResumeIsLive(const WalkCache& cache, const FrameRegisters& stopped,
                        uintptr_t stack_low, uintptr_t stack_high);

// Whether `code`, the `length` bytes just before a return address, ends with an x86-64 call
// instruction: `call rel32` (E8), or `call` through a register or memory operand (FF /2, any
// ModRM/SIB/displacement form; prefixes such as REX come before FF and do not matter).
// Pure; `length` >= 7 looks at every form.
bool EndsWithCall(const uint8_t* code, size_t length);

// For full/internal/full_tier.cc. Signal context: takes the sample of a thread with a script
// engine attached and returns true, or returns false (no engine: the caller takes an ordinary
// sample).
bool TakeScriptSample(void* thread_context, ucontext_t* context, int overruns);
// Signal context: base's sample of a thread without a script engine, timed.
void TakeOrdinarySample(void* thread_context, ucontext_t* context, int overruns);
// Sampler thread, each loop.
void PollScriptEngines();
// When the full tier starts or takes over a session (anchors the statistics' clock).
void NoteSessionStart();
// After the full tier stopped or handed back a session.
void NotifySessionEnd();

}  // namespace internal

}  // namespace script
}  // namespace full
}  // namespace strata

#endif  // STRATA_FULL_SCRIPT_SCRIPT_STACK_H_
