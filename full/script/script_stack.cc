#include "full/script/script_stack.h"

#include <dlfcn.h>
#include <time.h>
#include <unistd.h>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <vector>

#include "base/internal/session/core.h"
#include "base/internal/settings/log.h"
#include "base/internal/session/tier_extension.h"
#include "base/profiler.h"
#include "platform/checked_read.h"
#include "platform/mutex.h"

namespace strata {
namespace full {
namespace script {

namespace {

// Resume points kept per sample: one per JIT activation on the stack (JS -> C++ -> JS
// nesting); deeper nesting loses the native frames between the older activations.
constexpr size_t kMaxResumePoints = 16;

struct EngineRegistry {
  Mutex mutex{"strata script engines"};
  std::vector<const ScriptEngine*> engines;
};

EngineRegistry& Engines() {
  static EngineRegistry* registry = new EngineRegistry;  // Leaked: used during exit.
  return *registry;
}

uint64_t ReadTicks() { return __builtin_ia32_rdtsc(); }

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Ticks and time at the first attach, to convert the handler's tick counts later.
std::atomic<uint64_t> g_anchor_ticks{0};
std::atomic<uint64_t> g_anchor_ns{0};

// Ordinary samples (TakeOrdinarySample): count and ticks, from every thread's handler, and
// the last ones' ticks (racy slots: statistics only).
std::atomic<uint64_t> g_ordinary_samples{0};
std::atomic<uint64_t> g_ordinary_ticks{0};
constexpr uint32_t kRecentOrdinary = 1024;
std::atomic<uint32_t> g_recent_ordinary[kRecentOrdinary];

uint32_t ClampTicks(uint64_t ticks) { return ticks > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(ticks); }

// Median and 90th percentile of `count` tick values, in microseconds.
void Percentiles(std::vector<uint32_t> ticks, double ns_per_tick, double* median, double* p90) {
  if (ticks.empty() || ns_per_tick <= 0) return;
  std::sort(ticks.begin(), ticks.end());
  *median = ticks[ticks.size() / 2] * ns_per_tick / 1000.0;
  *p90 = ticks[ticks.size() * 9 / 10] * ns_per_tick / 1000.0;
}

void SetAnchor() {
  if (g_anchor_ticks.load(std::memory_order_acquire) != 0) return;
  g_anchor_ns.store(MonotonicNs(), std::memory_order_relaxed);
  g_anchor_ticks.store(ReadTicks(), std::memory_order_release);
}

// Nanoseconds per tick since the anchor; 0 when unknown or too early to tell.
double NanosecondsPerTick() {
  const uint64_t anchor_ticks = g_anchor_ticks.load(std::memory_order_acquire);
  const uint64_t anchor_ns = g_anchor_ns.load(std::memory_order_acquire);
  if (anchor_ticks == 0) return 0;
  const uint64_t ticks = ReadTicks() - anchor_ticks;
  const uint64_t ns = MonotonicNs() - anchor_ns;
  if (ticks == 0 || ns < 1000000) return 0;  // < 1 ms: too short.
  return static_cast<double>(ns) / static_cast<double>(ticks);
}

// Signal context (the two functions below).
bool InLoadedObject(uintptr_t pc) {
  dl_find_object found;
  return _dl_find_object(reinterpret_cast<void*>(pc), &found) == 0;
}

// Crosses JIT code by its frame pointers (SpiderMonkey's JIT frames keep them) up to the
// first return address inside a loaded object, and makes that the resume point: the
// fallback when the engine named no entry point (its frame iterator yields nothing while
// the GC suppresses sampling). Every record read lies in the thread's stack, above the last.
bool HopJitFrames(const FrameRegisters& stopped, uintptr_t stack_low, uintptr_t stack_high,
                  NativeResumePoint* resume) {
  uintptr_t fp = stopped.fp;
  uintptr_t floor = std::max(stopped.sp, stack_low);
  for (int hops = 0; hops < 256; ++hops) {
    if (fp < floor || fp % sizeof(uintptr_t) != 0 || fp + 2 * sizeof(uintptr_t) > stack_high) {
      return false;
    }
    const uintptr_t* record = reinterpret_cast<const uintptr_t*>(fp);
    const uintptr_t saved_fp = record[0];
    const uintptr_t return_address = record[1];
    if (return_address != 0 && InLoadedObject(return_address - 1)) {
      *resume = NativeResumePoint{return_address, fp + 2 * sizeof(uintptr_t), saved_fp};
      return true;
    }
    floor = fp + 2 * sizeof(uintptr_t);
    fp = saved_fp;
  }
  return false;
}

// The stack scan below runs in the sampling signal handler, on the sampled thread: it cannot
// block, fault or allocate: stack words are read only between the stopped sp and the
// thread's stack top (mapped), code bytes only through CheckedRead (process_vm_readv on
// ourselves: an unmapped or unreadable page is an error return, not a fault), lookups with
// _dl_find_object (lock-free), walks with base's walker (async-signal-safe); no libc call the
// program can interpose or that is a cancellation point.
//
// Whether the code just before `return_address` is a call instruction (EndsWithCall), the
// bytes read with CheckedRead (the address came from a stack scan: it may point anywhere in a
// loaded object, data included).
bool FollowsCall(uintptr_t return_address) {
  constexpr size_t kLongest = 7;  // FF /2 with SIB and disp32.
  uint8_t code[kLongest];
  return return_address >= kLongest &&
         CheckedRead(reinterpret_cast<const void*>(return_address - kLongest), code, kLongest) &&
         internal::EndsWithCall(code, kLongest);
}

// The last fallback when leaving JIT code (docs/js.md, "Lost native roots"): candidate return
// addresses above the stopped sp, lowest first, from `*next_slot` on: a word that points into
// a loaded object just after a call instruction. The resume point's sp is the slot above it;
// its fp, the word below it (the callee's saved frame pointer, if it saved one: the native
// walk uses it only where the unwind rules say so). Looks at most kScanWords words and
// checks the code before at most kScanCallChecks of them (a read system call each) in all,
// counted in `*checks`.
constexpr uintptr_t kScanWords = 2048;
constexpr int kScanCallChecks = 64;
bool NextScannedCaller(const FrameRegisters& stopped, uintptr_t stack_low, uintptr_t stack_high,
                       uintptr_t* next_slot, int* checks, NativeResumePoint* resume) {
  if (stopped.sp < stack_low || stopped.sp >= stack_high) return false;
  const uintptr_t first = stopped.sp;
  const uintptr_t last = std::min(stack_high, first + kScanWords * sizeof(uintptr_t));
  if (*next_slot < first) *next_slot = first;
  for (uintptr_t slot = *next_slot; slot + sizeof(uintptr_t) <= last; slot += sizeof(uintptr_t)) {
    const uintptr_t word = *reinterpret_cast<const uintptr_t*>(slot);
    if (word < 4096 || !InLoadedObject(word - 1)) continue;
    if (*checks >= kScanCallChecks) return false;
    ++*checks;
    if (!FollowsCall(word)) continue;
    const uintptr_t fp = slot > first ? *reinterpret_cast<const uintptr_t*>(slot - 8) : 0;
    *resume = NativeResumePoint{word, slot + sizeof(uintptr_t), fp};
    *next_slot = slot + sizeof(uintptr_t);
    return true;
  }
  *next_slot = last;
  return false;
}

// STRATA_JS_WALK_DEBUG set: every walk that leaves JIT code by the cached segment, or is
// cut, writes a line to stderr (the stopped registers, the resume points, the stack words
// above the stopped sp, "W*" marking those inside a loaded object). Read once at load; only
// the rare paths look at it.
const bool g_walk_debug = getenv("STRATA_JS_WALK_DEBUG") != nullptr;
// STRATA_JS_WALK_DEBUG=scan: once the thread's outermost frame is known (the scan needs it),
// walks leave JIT code by the stack scan only (the engine's entry points, the frame-pointer
// hop and the cached segment are not tried), which tests the scan on every sample in JIT
// code (tests/js: js_scan_test).
const bool g_scan_only = [] {
  const char* value = getenv("STRATA_JS_WALK_DEBUG");
  return value != nullptr && std::strcmp(value, "scan") == 0;
}();

// Signal context: appends `value` in hex after `name` and a space.
void AppendHex(char*& out, const char* name, uintptr_t value) {
  while (*name) *out++ = *name++;
  char digits[16];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value & 15];
    value >>= 4;
  } while (value);
  while (n) *out++ = digits[--n];
  *out++ = ' ';
}

// Signal context: the STRATA_JS_WALK_DEBUG line (write(2), no allocation).
void LogWalkExit(const char* what, const FrameRegisters& stopped, size_t resume_count,
                 const NativeResumePoint* resume, uintptr_t stack_low, uintptr_t stack_high) {
  char line[1024];  // At most ~60 + 4 * 40 + 24 * 20 characters below.
  char* out = line;
  for (const char* c = what; *c;) *out++ = *c++;
  *out++ = ' ';
  AppendHex(out, "pc=", stopped.pc);
  AppendHex(out, "sp=", stopped.sp);
  AppendHex(out, "fp=", stopped.fp);
  AppendHex(out, "stack_high=", stack_high);
  AppendHex(out, "resume_points=", resume_count);
  for (size_t i = 0; i < resume_count && i < 4; ++i) {
    AppendHex(out, "resume_pc=", resume[i].pc);
    AppendHex(out, "resume_sp=", resume[i].sp);
  }
  for (size_t i = 0; i < 24 && stopped.sp >= stack_low &&
                     stopped.sp + (i + 1) * sizeof(uintptr_t) <= stack_high; ++i) {
    const uintptr_t word = reinterpret_cast<const uintptr_t*>(stopped.sp)[i];
    AppendHex(out, InLoadedObject(word) ? "W*" : "w", word);
  }
  *out++ = '\n';
  (void)!write(2, line, static_cast<size_t>(out - line));
}

}  // namespace

namespace internal {

bool CachedResumeIsLive(const WalkCache& cache, const FrameRegisters& stopped,
                        uintptr_t stack_low, uintptr_t stack_high) {
  if (cache.count == 0 || cache.sp <= stopped.sp) return false;
  const uintptr_t slot = cache.sp - sizeof(uintptr_t);
  if (slot < stopped.sp || slot < stack_low || slot + sizeof(uintptr_t) > stack_high) return false;
  return *reinterpret_cast<const uintptr_t*>(slot) == cache.pc;
}

bool EndsWithCall(const uint8_t* code, size_t length) {
  if (length >= 5 && code[length - 5] == 0xE8) return true;  // call rel32
  for (size_t size = 2; size <= 7 && size <= length; ++size) {
    const size_t at = length - size;
    if (code[at] != 0xFF) continue;
    const uint8_t modrm = code[at + 1];
    if (((modrm >> 3) & 7) != 2) continue;  // Not /2 (call near, indirect).
    const uint8_t mod = modrm >> 6;
    const uint8_t rm = modrm & 7;
    size_t expected = 2;  // mod 3: a register.
    if (mod == 0) {
      if (rm == 5) {
        expected = 6;  // [rip + disp32]
      } else if (rm == 4) {
        expected = size >= 3 && (code[at + 2] & 7) == 5 ? 7 : 3;  // SIB, base 5: + disp32
      }
    } else if (mod != 3) {
      expected = (mod == 1 ? 3 : 6) + (rm == 4 ? 1 : 0);  // disp8 or disp32, SIB
    }
    if (expected == size) return true;
  }
  return false;
}

}  // namespace internal

namespace {

bool CacheMatches(const WalkCache& cache, const NativeResumePoint& from, uintptr_t stack_low,
                  uintptr_t stack_high) {
  if (cache.count == 0 || cache.pc != from.pc || cache.sp != from.sp) return false;
  for (uint32_t i = 1; i < cache.count; ++i) {
    const uintptr_t slot = cache.frames[i].sp - sizeof(uintptr_t);
    if (slot < stack_low || slot + sizeof(uintptr_t) > stack_high) return false;
    if (*reinterpret_cast<const uintptr_t*>(slot) != cache.frames[i].pc) return false;
  }
  return true;
}

// Tries the stack scan's candidates (NextScannedCaller) in turn, each walked into `slot`
// after its `*count` frames, and keeps the first whose walk ends, by libunwind's account, at
// the thread's known outermost frame (ScriptThread::root_pc/root_sp; a walk can also "end"
// early where a frame has no unwind information): its frames counted, true returned. A
// candidate whose walk reaches JIT code again (a JS -> C++ -> JS nest the engine named no
// entry for) ends the scan: a higher candidate would drop the native frames in between
// silently; the sample is cut instead. At most kScanCandidates walks.
constexpr int kScanCandidates = 16;
bool ResumeFromScan(void* thread_context, ucontext_t* context, const ScriptThread& thread,
                    const FrameRegisters& stopped, const base_internal::NativeWalkPlan& plan,
                    SampleSlot* slot, uint32_t* count) {
  if (thread.root_sp == 0) return false;  // No outermost frame known yet.
  uintptr_t next_slot = 0;
  int checks = 0;
  NativeResumePoint candidate;
  for (int tried = 0; tried < kScanCandidates; ++tried) {
    if (!NextScannedCaller(stopped, plan.stack_low, plan.stack_high, &next_slot, &checks,
                           &candidate)) {
      return false;
    }
    FrameRegisters after;
    bool ended = false;
    const uint32_t walked = static_cast<uint32_t>(base_internal::WalkNativeSegment(
        thread_context, context, &candidate, slot->natives + *count,
        SampleSlot::kMaxNativeFrames - *count, &after, &ended));
    if (ended && walked > 1 && slot->natives[*count + walked - 1].pc == thread.root_pc &&
        slot->natives[*count + walked - 1].sp == thread.root_sp) {
      *count += walked;
      return true;
    }
    if (after.sp != 0 && walked > 1) return false;  // JIT code again: see above.
  }
  return false;
}

// Notes the last frame of a walk libunwind ended (`ended`) as the thread's outermost frame
// when it lies above the one known (ScriptThread::root_pc/root_sp).
void NoteEndedWalk(ScriptThread* thread, const NativeFrame* frames, uint32_t walked, bool ended) {
  if (!ended || walked == 0) return;
  const NativeFrame& last = frames[walked - 1];
  if (last.sp > thread->root_sp) {
    thread->root_pc = last.pc;
    thread->root_sp = last.sp;
  }
}

void UpdateMax(std::atomic<uint64_t>& max, uint64_t value) {
  if (value > max.load(std::memory_order_relaxed)) max.store(value, std::memory_order_relaxed);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Signal context: ScriptFrameWriter and TakeScriptSample. No lock, no allocation.

void ScriptFrameWriter::CopyText(const char* text) {
  uint32_t used = slot_.script_text_bytes;
  for (const char* c = text; *c != '\0' && used < SampleSlot::kScriptTextBytes; ++c) {
    slot_.script_text[used++] = *c;
  }
  slot_.script_text_bytes = used;
}

bool ScriptFrameWriter::AppendPieces(ScriptFrameKind kind, Category category, uint8_t flags,
                                     uintptr_t stack_address, const char* const* pieces,
                                     size_t count, uint32_t line, uint32_t column) {
  if (slot_.script_frame_count >= SampleSlot::kMaxScriptFrames) {
    ++dropped_;
    return false;
  }
  SampleSlot::ScriptFrame& frame = slot_.script_frames[slot_.script_frame_count++];
  frame.stack_address = stack_address;
  frame.kind = static_cast<uint8_t>(kind);
  frame.category = static_cast<uint8_t>(category);
  frame.flags = flags;
  frame.reserved = 0;
  frame.line = (flags & profile::kScriptFrameHasPosition) ? line : 0;
  frame.column = (flags & profile::kScriptFrameHasPosition) ? column : 0;
  const uint32_t start = slot_.script_text_bytes;
  for (size_t i = 0; i < count; ++i) {
    if (pieces[i]) CopyText(pieces[i]);
  }
  frame.text_offset = static_cast<uint16_t>(start);
  frame.text_length = static_cast<uint16_t>(slot_.script_text_bytes - start);
  return true;
}

bool ScriptFrameWriter::Append(ScriptFrameKind kind, Category category, uint8_t flags,
                               uintptr_t stack_address, const char* text, const char* text2,
                               uint32_t line, uint32_t column) {
  const bool two = text2 && *text2 != '\0';
  const char* pieces[3] = {text, two ? " " : nullptr, two ? text2 : nullptr};
  return AppendPieces(kind, category, flags, stack_address, pieces, 3, line, column);
}

namespace internal {

bool TakeScriptSample(void* thread_context, ucontext_t* context, int overruns) {
  ScriptThread* thread = static_cast<ScriptThread*>(base_internal::TierDataOf(thread_context));
  if (!thread || !thread->capture) return false;
  const uint64_t start_ticks = ReadTicks();
  base_internal::NativeWalkPlan plan;
  SampleSlot* slot =
      base_internal::BeginSampleWithoutNativeWalk(thread_context, context, overruns, &plan);
  if (!slot) return true;

  ScriptFrameWriter writer(*slot);
  NativeResumePoint resume[kMaxResumePoints];
  const size_t resume_count =
      std::min(thread->capture(thread, *context, writer, resume, kMaxResumePoints),
               kMaxResumePoints);

  // The native stack, segment by segment around the JIT code: each segment stops at the
  // first pc in JIT code, leaves a boundary, and the next starts at the entry point the engine
  // gave for the JIT activation there (or, without one, past the JIT frames' frame pointers).
  uint32_t count = 0;
  const NativeResumePoint* from = nullptr;  // First segment: the interrupted registers.
  NativeResumePoint hop;
  size_t next_resume = 0;
  uint32_t cached_walks = 0;
  uint32_t cache_resumes = 0;
  uint32_t cut_walks = 0;
  uint32_t scan_resumes = 0;
  WalkCache* cache = plan.frame_pointers ? nullptr : thread->walk_cache;
  while (count < SampleSlot::kMaxNativeFrames) {
    FrameRegisters stopped;
    const uint32_t room = SampleSlot::kMaxNativeFrames - count;
    if (from && cache && cache->count <= room &&
        CacheMatches(*cache, *from, plan.stack_low, plan.stack_high)) {
      std::copy(cache->frames, cache->frames + cache->count, slot->natives + count);
      count += cache->count;
      ++cached_walks;
      break;  // A cached segment reaches the end of the stack.
    }
    bool ended = false;
    const uint32_t walked = static_cast<uint32_t>(base_internal::WalkNativeSegment(
        thread_context, context, from, slot->natives + count, room, &stopped, &ended));
    NoteEndedWalk(thread, slot->natives + count, walked, ended);
    if (from && cache && stopped.sp == 0 && walked > 1 && walked < room) {
      cache->pc = from->pc;
      cache->sp = from->sp;
      cache->count = walked;
      std::copy(slot->natives + count, slot->natives + count + walked, cache->frames);
    }
    count += walked;
    if (stopped.sp == 0 || count >= SampleSlot::kMaxNativeFrames) break;
    slot->natives[count++] = NativeFrame{0, stopped.sp};  // Boundary: JIT code from here.
    if (!plan.walk) break;
    while (next_resume < resume_count && resume[next_resume].sp <= stopped.sp) ++next_resume;
    // STRATA_JS_WALK_DEBUG=scan: the scan alone once the thread's outermost frame is known.
    const bool scan_only = g_scan_only && thread->root_sp != 0;
    if (next_resume < resume_count && !scan_only) {
      from = &resume[next_resume++];
    } else if (!scan_only && HopJitFrames(stopped, plan.stack_low, plan.stack_high, &hop)) {
      from = &hop;
    } else if (!scan_only && cache && internal::CachedResumeIsLive(*cache, stopped, plan.stack_low,
                                                     plan.stack_high)) {
      hop = NativeResumePoint{cache->pc, cache->sp, 0};
      from = &hop;
      ++cache_resumes;
      if (g_walk_debug) {
        LogWalkExit("resumed-from-cache", stopped, resume_count, resume, plan.stack_low,
                    plan.stack_high);
      }
    } else if (!plan.frame_pointers &&
               ResumeFromScan(thread_context, context, *thread, stopped, plan, slot, &count)) {
      ++scan_resumes;
      if (g_walk_debug && !g_scan_only) {
        LogWalkExit("resumed-from-scan", stopped, resume_count, resume, plan.stack_low,
                    plan.stack_high);
      }
      break;  // The scanned walk reached the stack's outermost frame.
    } else {
      ++cut_walks;
      if (g_walk_debug) {
        LogWalkExit("cut", stopped, resume_count, resume, plan.stack_low, plan.stack_high);
      }
      break;
    }
  }
  slot->native_count = count;
  const uint32_t frames = writer.count();
  const uint32_t dropped = writer.dropped();
  base_internal::CommitSample(thread_context);

  const uint64_t ticks = ReadTicks() - start_ticks;
  const uint64_t sample_number = thread->samples.load(std::memory_order_relaxed);
  thread->recent_ticks[sample_number % ScriptThread::kRecentSamples] = ClampTicks(ticks);
  thread->samples.store(sample_number + 1, std::memory_order_relaxed);
  thread->sample_ticks.store(thread->sample_ticks.load(std::memory_order_relaxed) + ticks,
                             std::memory_order_relaxed);
  UpdateMax(thread->max_sample_ticks, ticks);
  thread->script_frames.store(thread->script_frames.load(std::memory_order_relaxed) + frames,
                              std::memory_order_relaxed);
  if (dropped) {
    thread->dropped_frames.store(thread->dropped_frames.load(std::memory_order_relaxed) + dropped,
                                 std::memory_order_relaxed);
  }
  if (cached_walks) {
    thread->cached_walks.store(thread->cached_walks.load(std::memory_order_relaxed) + cached_walks,
                               std::memory_order_relaxed);
  }
  if (cache_resumes) {
    thread->cache_resumes.store(
        thread->cache_resumes.load(std::memory_order_relaxed) + cache_resumes,
        std::memory_order_relaxed);
  }
  if (scan_resumes) {
    thread->scan_resumes.store(thread->scan_resumes.load(std::memory_order_relaxed) + scan_resumes,
                               std::memory_order_relaxed);
  }
  if (cut_walks) {
    thread->cut_walks.store(thread->cut_walks.load(std::memory_order_relaxed) + cut_walks,
                            std::memory_order_relaxed);
  }
  if (frames) {
    thread->samples_with_script.store(
        thread->samples_with_script.load(std::memory_order_relaxed) + 1,
        std::memory_order_relaxed);
  }
  return true;
}
void TakeOrdinarySample(void* thread_context, ucontext_t* context, int overruns) {
  const uint64_t start_ticks = ReadTicks();
  if (!base_internal::BeginSample(thread_context, context, overruns)) return;
  base_internal::CommitSample(thread_context);
  const uint64_t ticks = ReadTicks() - start_ticks;
  g_ordinary_ticks.fetch_add(ticks, std::memory_order_relaxed);
  const uint64_t n = g_ordinary_samples.fetch_add(1, std::memory_order_relaxed);
  g_recent_ordinary[n % kRecentOrdinary].store(ClampTicks(ticks), std::memory_order_relaxed);
}
// End of signal context.

void PollScriptEngines() {
  EngineRegistry& registry = Engines();
  AutoLock lock(registry.mutex);
  for (const ScriptEngine* engine : registry.engines) {
    if (engine->on_sampling_loop) engine->on_sampling_loop();
  }
}

void NoteSessionStart() { SetAnchor(); }

void NotifySessionEnd() {
  EngineRegistry& registry = Engines();
  AutoLock lock(registry.mutex);
  for (const ScriptEngine* engine : registry.engines) {
    if (engine->on_session_end) engine->on_session_end();
  }
}

}  // namespace internal

ScriptThreadStats ReadScriptThreadStats(const ScriptThread& thread) {
  ScriptThreadStats stats;
  stats.samples = thread.samples.load(std::memory_order_relaxed);
  stats.samples_with_script = thread.samples_with_script.load(std::memory_order_relaxed);
  stats.script_frames = thread.script_frames.load(std::memory_order_relaxed);
  stats.dropped_frames = thread.dropped_frames.load(std::memory_order_relaxed);
  stats.cached_walks = thread.cached_walks.load(std::memory_order_relaxed);
  stats.cache_resumes = thread.cache_resumes.load(std::memory_order_relaxed);
  stats.scan_resumes = thread.scan_resumes.load(std::memory_order_relaxed);
  stats.cut_walks = thread.cut_walks.load(std::memory_order_relaxed);
  const double ns_per_tick = NanosecondsPerTick();
  if (stats.samples > 0) {
    stats.mean_sample_us = static_cast<double>(thread.sample_ticks.load(std::memory_order_relaxed)) *
                           ns_per_tick / 1000.0 / static_cast<double>(stats.samples);
  }
  stats.max_sample_us =
      static_cast<double>(thread.max_sample_ticks.load(std::memory_order_relaxed)) * ns_per_tick /
      1000.0;
  const uint64_t recent = std::min<uint64_t>(stats.samples, ScriptThread::kRecentSamples);
  Percentiles(std::vector<uint32_t>(thread.recent_ticks, thread.recent_ticks + recent),
              ns_per_tick, &stats.median_sample_us, &stats.p90_sample_us);
  return stats;
}

OrdinarySampleStats ReadOrdinarySampleStats() {
  OrdinarySampleStats stats;
  stats.samples = g_ordinary_samples.load(std::memory_order_relaxed);
  if (stats.samples > 0) {
    stats.mean_sample_us = static_cast<double>(g_ordinary_ticks.load(std::memory_order_relaxed)) *
                           NanosecondsPerTick() / 1000.0 / static_cast<double>(stats.samples);
  }
  std::vector<uint32_t> recent;
  for (uint64_t i = 0; i < std::min<uint64_t>(stats.samples, kRecentOrdinary); ++i) {
    recent.push_back(g_recent_ordinary[i].load(std::memory_order_relaxed));
  }
  Percentiles(std::move(recent), NanosecondsPerTick(), &stats.median_sample_us,
              &stats.p90_sample_us);
  return stats;
}

bool AttachScriptThread(ScriptThread* thread) {
  if (!thread || base_internal::IsForkedChild()) return false;
  SetAnchor();
  if (!ProfilerIsThreadRegistered()) ProfilerRegisterThread(nullptr);
  if (!thread->walk_cache) thread->walk_cache = new WalkCache;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (!base_internal::SetCurrentThreadTierData(thread)) {
    base_internal::LogError("cannot attach a script engine: this thread is not registered");
    delete thread->walk_cache;
    thread->walk_cache = nullptr;
    return false;
  }
  return true;
}

void DetachScriptThread(ScriptThread* thread) {
  // The handler reads the pointer on this very thread: once the store is done, no handler
  // that starts later sees it, and one that interrupted us before has already returned.
  base_internal::SetCurrentThreadTierData(nullptr);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (thread) {
    delete thread->walk_cache;
    thread->walk_cache = nullptr;
  }
}

// A fork()ed child has no sampler to poll engines (and the engine list's lock may be held by
// the parent's sampler thread): nothing to register there.
void RegisterScriptEngine(const ScriptEngine* engine) {
  if (base_internal::IsForkedChild()) return;
  EngineRegistry& registry = Engines();
  AutoLock lock(registry.mutex);
  if (std::find(registry.engines.begin(), registry.engines.end(), engine) ==
      registry.engines.end()) {
    registry.engines.push_back(engine);
  }
}

void UnregisterScriptEngine(const ScriptEngine* engine) {
  if (base_internal::IsForkedChild()) return;
  EngineRegistry& registry = Engines();
  AutoLock lock(registry.mutex);
  registry.engines.erase(std::remove(registry.engines.begin(), registry.engines.end(), engine),
                         registry.engines.end());
}

}  // namespace script
}  // namespace full
}  // namespace strata
