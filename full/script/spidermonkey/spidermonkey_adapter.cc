// The SpiderMonkey 102 adapter (spidermonkey.h, docs/js.md). One of the two translation units
// that include SpiderMonkey's headers (the other is embedding.cc); keep it that way: they are
// heavy, they must be compiled against the exact headers of the libmozjs that runs, and DEBUG
// must never be defined for them (js-config.h refuses it).
#include "full/script/spidermonkey/spidermonkey.h"

#include <js/CallArgs.h>
#include <js/CharacterEncoding.h>
#include <js/Conversions.h>
#include <js/Interrupt.h>
#include <js/ProfilingCategory.h>
#include <js/ProfilingFrameIterator.h>
#include <js/ProfilingStack.h>
#include <js/PropertyAndElement.h>
#include <js/PropertySpec.h>
#include <js/RootingAPI.h>
#include <jsapi.h>
#include <jsfriendapi.h>  // JS_PCToLineNumber

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "base/categories.h"
#include "base/internal/settings/log.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "full/script/script_stack.h"
#include "platform/mutex.h"
#include "platform/time_stamp.h"

namespace strata {
namespace full {
namespace spidermonkey {
namespace {

using base_internal::SampleSlot;
using profile::kScriptFrameHasPosition;
using profile::kScriptFrameRelevantForJs;
using profile::ScriptFrameKind;
using script::NativeResumePoint;
using script::ScriptFrameWriter;

// Per sample: profiling-stack frames looked at (the youngest ones), JIT frames kept (the
// youngest ones). Together with SampleSlot::kMaxScriptFrames (the youngest are written) this
// bounds the handler's work and its stack use (~4 KiB).
constexpr uint32_t kMaxStackFramesScanned = 256;
constexpr uint32_t kMaxStackFrames = 64;
constexpr uint32_t kMaxJitFrames = 48;

// One attached context. The ScriptThread base is what the sampling handler gets.
struct SmThread : script::ScriptThread {
  JSContext* cx = nullptr;
  ::ProfilingStack* stack = nullptr;  // SpiderMonkey's class (global namespace), ours.
  bool event_markers = true;
  // The engine's instrumentation is on (changed on this thread only).
  std::atomic<bool> enabled{false};
  // Set around enabling/disabling: the handler then reads nothing of the engine.
  std::atomic<bool> switching{false};
  // An interrupt was requested and has not run yet.
  std::atomic<bool> interrupt_pending{false};
  std::atomic<uint64_t> enable_count{0};
  std::atomic<uint64_t> disable_count{0};
};

// The calling thread's attached context (SpiderMonkey has one context per thread). Never
// read in the signal handler (it gets the SmThread through the tier data).
thread_local SmThread* t_thread = nullptr;

struct Registry {
  Mutex mutex{"strata spidermonkey contexts"};
  std::vector<SmThread*> threads;
};

Registry& GetRegistry() {
  static Registry* registry = new Registry;  // Leaked: the sampler may poll during exit.
  return *registry;
}

// ---------------------------------------------------------------------------------------
// Signal context. Capture() runs in the sampling handler of the context's own thread, which
// it interrupted (so the engine's state is stopped, as JS::ProfilingFrameIterator requires):
// no lock, no allocation; engine strings are copied into the slot.

Category CategoryOfPair(JS::ProfilingCategoryPair pair) {
  if (static_cast<uint32_t>(pair) >= static_cast<uint32_t>(JS::ProfilingCategoryPair::COUNT)) {
    return Category::kOther;
  }
  switch (JS::GetProfilingCategoryPairInfo(pair).mCategory) {
    case JS::ProfilingCategory::JS:
      return Category::kJavaScript;
    case JS::ProfilingCategory::GCCC:
      return Category::kGc;
    case JS::ProfilingCategory::IDLE:
      return Category::kIdle;
    case JS::ProfilingCategory::NETWORK:
      return Category::kNetwork;
    case JS::ProfilingCategory::GRAPHICS:
      return Category::kGraphics;
    case JS::ProfilingCategory::LAYOUT:
      return Category::kLayout;
    default:
      return Category::kOther;
  }
}

ScriptFrameKind KindOfJitFrame(JS::ProfilingFrameIterator::FrameKind kind) {
  switch (kind) {
    case JS::ProfilingFrameIterator::Frame_BaselineInterpreter:
      return ScriptFrameKind::kBaselineInterpreter;
    case JS::ProfilingFrameIterator::Frame_Baseline:
      return ScriptFrameKind::kBaseline;
    case JS::ProfilingFrameIterator::Frame_Ion:
      return ScriptFrameKind::kIon;
    case JS::ProfilingFrameIterator::Frame_Wasm:
      return ScriptFrameKind::kWasm;
  }
  return ScriptFrameKind::kFunction;
}

// An engine label frame, formatted as the Gecko profiler does.
void WriteLabel(ScriptFrameWriter& writer, const js::ProfilingStackFrame& frame,
                uintptr_t address) {
  using Flags = js::ProfilingStackFrame::Flags;
  const uint32_t flags = frame.flags();
  const uint8_t out_flags = (flags & uint32_t(Flags::RELEVANT_FOR_JS)) ? kScriptFrameRelevantForJs : 0;
  const Category category = CategoryOfPair(frame.categoryPair());
  const char* label = frame.label();
  const char* dynamic = frame.dynamicString();
  if (dynamic && *dynamic) {
    const char* prefix = nullptr;
    const char* separator = " ";
    if (flags & uint32_t(Flags::STRING_TEMPLATE_METHOD)) {
      separator = ".";
    } else if (flags & uint32_t(Flags::STRING_TEMPLATE_GETTER)) {
      prefix = "get ";
      separator = ".";
    } else if (flags & uint32_t(Flags::STRING_TEMPLATE_SETTER)) {
      prefix = "set ";
      separator = ".";
    }
    const char* pieces[4] = {prefix, label, separator, dynamic};
    writer.AppendPieces(ScriptFrameKind::kLabel, category, out_flags, address, pieces, 4);
    return;
  }
  writer.Append(ScriptFrameKind::kLabel, category, out_flags, address, label);
}

// A frame of our ProfilingStack: a JS function run by the C++ interpreter (with its current
// line), the "js::RunScript" entry label, or an engine label.
void WriteStackFrame(ScriptFrameWriter& writer, const js::ProfilingStackFrame& frame,
                     uintptr_t address) {
  if (!frame.isJsFrame()) {
    WriteLabel(writer, frame, address);
    return;
  }
  const char* dynamic = frame.dynamicString();
  if (!dynamic) {
    writer.Append(ScriptFrameKind::kLabel, Category::kJavaScript, 0, address, frame.label());
    return;
  }
  uint8_t flags = 0;
  unsigned line = 0;
  unsigned column = 0;
  // script() is null while the engine suppresses sampling (GC): then no line.
  if (JSScript* script = frame.script()) {
    if (jsbytecode* pc = frame.pc()) {
      line = JS_PCToLineNumber(script, pc, &column);
      flags |= kScriptFrameHasPosition;
    }
  }
  writer.Append(frame.isJsBlinterpFrame() ? ScriptFrameKind::kBaselineInterpreter
                                          : ScriptFrameKind::kInterpreter,
                Category::kJavaScript, flags, address, dynamic, nullptr, line, column);
}

void WriteJitFrame(ScriptFrameWriter& writer, const JS::ProfilingFrameIterator::Frame& frame) {
  uint8_t flags = 0;
  unsigned line = 0;
  unsigned column = 0;
  if (frame.kind == JS::ProfilingFrameIterator::Frame_BaselineInterpreter &&
      frame.interpreterScript && frame.interpreterPC()) {
    line = JS_PCToLineNumber(frame.interpreterScript, frame.interpreterPC(), &column);
    flags |= kScriptFrameHasPosition;
  }
  writer.Append(KindOfJitFrame(frame.kind), Category::kJavaScript, flags,
                reinterpret_cast<uintptr_t>(frame.stackAddress), frame.label, nullptr, line,
                column);
}

size_t Capture(script::ScriptThread* self, const ucontext_t& context, ScriptFrameWriter& writer,
               NativeResumePoint* resume, size_t max_resume) {
  SmThread* thread = static_cast<SmThread*>(self);
  if (thread->switching.load(std::memory_order_relaxed) ||
      !thread->enabled.load(std::memory_order_relaxed)) {
    return 0;
  }
  std::atomic_signal_fence(std::memory_order_acquire);
  JSContext* cx = thread->cx;
  // The iterator MOZ_CRASHes when the runtime's profiler is off.
  if (!JS::IsProfilingEnabledForContext(cx)) return 0;

  // 1. Our ProfilingStack, root first. Label and SP-marker frames carry a native stack
  // address; a JS frame takes the address of the last one before it (Gecko's MergeStacks).
  // JS_OSR frames are skipped: the JIT iterator reports the same function.
  struct StackEntry {
    const js::ProfilingStackFrame* frame;
    uintptr_t address;
  };
  StackEntry entries[kMaxStackFrames];  // A ring while scanning: the youngest are kept.
  uint32_t scanned = 0;
  const ::ProfilingStack& stack = *thread->stack;
  const uint32_t depth = std::min<uint32_t>(stack.stackPointer, stack.stackCapacity());
  const js::ProfilingStackFrame* frames = stack.frames;
  uintptr_t last_address = UINTPTR_MAX;
  for (uint32_t i = depth > kMaxStackFramesScanned ? depth - kMaxStackFramesScanned : 0;
       frames && i < depth; ++i) {
    const js::ProfilingStackFrame& frame = frames[i];
    if (!frame.isJsFrame()) {
      last_address = reinterpret_cast<uintptr_t>(frame.stackAddress());
      if (frame.isSpMarkerFrame()) continue;
    } else if (frame.isOSRFrame()) {
      continue;
    }
    entries[scanned++ % kMaxStackFrames] = {&frame, last_address};
  }
  const uint32_t entry_count = std::min(scanned, kMaxStackFrames);
  if (scanned > kMaxStackFrames) {
    std::rotate(entries, entries + scanned % kMaxStackFrames, entries + kMaxStackFrames);
  }

  // 2. JIT frames (Baseline Interpreter, Baseline, Ion, Wasm) on the interrupted registers,
  // youngest first, and for each JIT activation the native frame that entered it.
  const greg_t* registers = context.uc_mcontext.gregs;
  JS::ProfilingFrameIterator::RegisterState state;
  state.pc = reinterpret_cast<void*>(registers[REG_RIP]);
  state.sp = reinterpret_cast<void*>(registers[REG_RSP]);
  state.fp = reinterpret_cast<void*>(registers[REG_RBP]);
  state.lr = nullptr;
  JS::ProfilingFrameIterator::Frame jit[kMaxJitFrames];
  uint32_t jit_count = 0;
  size_t resume_count = 0;
  for (JS::ProfilingFrameIterator it(cx, state); !it.done() && jit_count < kMaxJitFrames; ++it) {
    jit_count += it.extractStack(jit, jit_count, kMaxJitFrames);
    if (resume_count < max_resume) {
      if (mozilla::Maybe<JS::ProfilingFrameIterator::RegisterState> entry =
              it.getCppEntryRegisters()) {
        resume[resume_count++] = NativeResumePoint{reinterpret_cast<uintptr_t>(entry->pc),
                                                   reinterpret_cast<uintptr_t>(entry->sp),
                                                   reinterpret_cast<uintptr_t>(entry->fp)};
      }
    }
  }

  // 3. Merge by address, older (higher) first, and write the youngest frames that fit.
  struct Item {
    bool jit;
    uint16_t index;
  };
  Item items[kMaxStackFrames + kMaxJitFrames];
  uint32_t item_count = 0;
  uint32_t s = 0;
  int32_t j = static_cast<int32_t>(jit_count) - 1;
  while (s < entry_count || j >= 0) {
    if (s < entry_count &&
        (j < 0 || entries[s].address > reinterpret_cast<uintptr_t>(jit[j].stackAddress))) {
      items[item_count++] = {false, static_cast<uint16_t>(s++)};
    } else {
      items[item_count++] = {true, static_cast<uint16_t>(j--)};
    }
  }
  const uint32_t first =
      item_count > SampleSlot::kMaxScriptFrames ? item_count - SampleSlot::kMaxScriptFrames : 0;
  for (uint32_t k = first; k < item_count; ++k) {
    const Item& item = items[k];
    if (item.jit) {
      if (jit[item.index].label) WriteJitFrame(writer, jit[item.index]);
    } else {
      WriteStackFrame(writer, *entries[item.index].frame, entries[item.index].address);
    }
  }
  return resume_count;
}
// End of signal context.

// ---------------------------------------------------------------------------------------
// Profiling on and off, on the context's thread.

void OnProfilingEvent(const char* event, const char* details) {
  if (!ProfilerIsActive() || !event) return;
  AddTextMarker(ProfilerString::Dynamic(event), Category::kJavaScript, MarkerOptions(),
                details ? details : "");
}

void Sync(SmThread* thread) {
  const bool want = script::ScriptProfilingWanted();
  if (want == thread->enabled.load(std::memory_order_relaxed)) return;
  thread->switching.store(true, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (want) {
    js::EnableContextProfilingStack(thread->cx, true);
    if (thread->event_markers) js::RegisterContextProfilingEventMarker(thread->cx, &OnProfilingEvent);
    thread->enable_count.fetch_add(1, std::memory_order_relaxed);
  } else {
    if (thread->event_markers) js::RegisterContextProfilingEventMarker(thread->cx, nullptr);
    js::EnableContextProfilingStack(thread->cx, false);
    thread->disable_count.fetch_add(1, std::memory_order_relaxed);
  }
  thread->enabled.store(want, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  thread->switching.store(false, std::memory_order_relaxed);
}

// Added to every attached context; stays registered after detach (no removal API in 102).
bool OnInterrupt(JSContext* cx) {
  SmThread* thread = t_thread;
  if (thread && thread->cx == cx) {
    thread->interrupt_pending.store(false, std::memory_order_relaxed);
    Sync(thread);
  }
  return true;  // Never stops the script.
}

// Sampler thread (each loop) and the thread ending a session: ask each context whose state
// differs from the session's to switch at its next interrupt check.
void RequestSyncs() {
  const bool want = script::ScriptProfilingWanted();
  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  for (SmThread* thread : registry.threads) {
    if (thread->enabled.load(std::memory_order_relaxed) == want) continue;
    if (thread->interrupt_pending.exchange(true, std::memory_order_relaxed)) continue;
    JS_RequestInterruptCallback(thread->cx);  // Thread-safe; cx lives while registered.
  }
}

const script::ScriptEngine kEngine = [] {
  script::ScriptEngine engine;
  engine.name = "SpiderMonkey";
  engine.on_sampling_loop = &RequestSyncs;
  engine.on_session_end = &RequestSyncs;
  return engine;
}();

// ---------------------------------------------------------------------------------------
// The Strata object for scripts.

// Argument `i` as UTF-8; false with an exception pending on failure; *present false when
// missing or undefined.
bool StringArgument(JSContext* cx, const JS::CallArgs& args, unsigned i, std::string* out,
                    bool* present) {
  *present = false;
  if (i >= args.length() || args[i].isUndefined()) return true;
  JS::RootedString string(cx, JS::ToString(cx, args[i]));
  if (!string) return false;
  JS::UniqueChars chars = JS_EncodeStringToUTF8(cx, string);
  if (!chars) return false;
  *out = chars.get();
  *present = true;
  return true;
}

// name (required), text (optional) at `text_index`.
bool NameAndText(JSContext* cx, const JS::CallArgs& args, const char* function, unsigned text_index,
                 std::string* name, std::string* text, bool* has_text) {
  bool has_name = false;
  if (!StringArgument(cx, args, 0, name, &has_name)) return false;
  if (!has_name) {
    JS_ReportErrorASCII(cx, "Strata.%s: a marker name is required", function);
    return false;
  }
  return StringArgument(cx, args, text_index, text, has_text);
}

void RecordMarker(const std::string& name, const MarkerOptions& options, const std::string& text,
                  bool has_text) {
  if (has_text) {
    AddTextMarker(ProfilerString::Dynamic(name), Category::kJavaScript, options, text);
  } else {
    AddMarker(ProfilerString::Dynamic(name), Category::kJavaScript, options);
  }
}

bool StrataMarker(JSContext* cx, unsigned argc, JS::Value* vp) {
  JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
  std::string name, text;
  bool has_text = false;
  if (!NameAndText(cx, args, "marker", 1, &name, &text, &has_text)) return false;
  if (ProfilerIsActive()) RecordMarker(name, MarkerOptions(), text, has_text);
  args.rval().setUndefined();
  return true;
}

bool StrataMarkerStart(JSContext* cx, unsigned argc, JS::Value* vp) {
  JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
  std::string name, text;
  bool has_text = false;
  if (!NameAndText(cx, args, "markerStart", 1, &name, &text, &has_text)) return false;
  if (ProfilerIsActive()) RecordMarker(name, MarkerOptions::IntervalStart(), text, has_text);
  args.rval().setUndefined();
  return true;
}

bool StrataMarkerEnd(JSContext* cx, unsigned argc, JS::Value* vp) {
  JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
  std::string name, text;
  bool has_text = false;
  if (!NameAndText(cx, args, "markerEnd", 1, &name, &text, &has_text)) return false;
  if (ProfilerIsActive()) RecordMarker(name, MarkerOptions::IntervalEnd(), text, has_text);
  args.rval().setUndefined();
  return true;
}

bool StrataInterval(JSContext* cx, unsigned argc, JS::Value* vp) {
  JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
  std::string name, text;
  bool has_text = false;
  if (!NameAndText(cx, args, "interval", 2, &name, &text, &has_text)) return false;
  double start_ms = 0;
  if (args.length() < 2 || !JS::ToNumber(cx, args[1], &start_ms)) {
    if (!JS_IsExceptionPending(cx)) {
      JS_ReportErrorASCII(cx, "Strata.interval: a start time (Strata.now()) is required");
    }
    return false;
  }
  if (ProfilerIsActive()) {
    const TimeStamp start = TimeStamp::FromNanoseconds(static_cast<int64_t>(start_ms * 1e6));
    RecordMarker(name, MarkerOptions::Interval(start, TimeStamp::Now()), text, has_text);
  }
  args.rval().setUndefined();
  return true;
}

bool StrataNow(JSContext* cx, unsigned argc, JS::Value* vp) {
  (void)cx;
  JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
  args.rval().setDouble(static_cast<double>(TimeStamp::Now().ToNanoseconds()) / 1e6);
  return true;
}

bool StrataIsActive(JSContext* cx, unsigned argc, JS::Value* vp) {
  (void)cx;
  JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
  args.rval().setBoolean(ProfilerIsActive() && !ProfilerIsPaused());
  return true;
}

const JSFunctionSpec kStrataFunctions[] = {
    JS_FN("marker", StrataMarker, 2, 0),
    JS_FN("markerStart", StrataMarkerStart, 2, 0),
    JS_FN("markerEnd", StrataMarkerEnd, 2, 0),
    JS_FN("interval", StrataInterval, 3, 0),
    JS_FN("now", StrataNow, 0, 0),
    JS_FN("isActive", StrataIsActive, 0, 0),
    JS_FS_END,
};

}  // namespace

bool AttachJSContext(JSContext* cx, const AttachOptions& options) {
  if (!cx) return false;
  if (t_thread) {
    if (t_thread->cx == cx) return true;
    base_internal::LogError("spidermonkey: this thread already has another JSContext attached");
    return false;
  }
  if (JS::RootingContext::get(cx)->geckoProfiler().getProfilingStack() != nullptr) {
    base_internal::LogError("spidermonkey: the JSContext already has a profiling stack");
    return false;
  }
  SmThread* thread = new SmThread;
  thread->capture = &Capture;
  thread->cx = cx;
  thread->event_markers = options.event_markers;
  thread->stack = new ::ProfilingStack();
  if (!script::AttachScriptThread(thread)) {
    delete thread->stack;
    delete thread;
    return false;
  }
  // From here on, every C++ -> JS entry pushes on our stack (even with profiling off): it
  // must stay alive until uninstalled (DetachJSContext).
  js::SetContextProfilingStack(cx, thread->stack);
  JS_AddInterruptCallback(cx, &OnInterrupt);
  t_thread = thread;
  script::RegisterScriptEngine(&kEngine);
  {
    Registry& registry = GetRegistry();
    AutoLock lock(registry.mutex);
    registry.threads.push_back(thread);
  }
  Sync(thread);
  return true;
}

bool DetachJSContext(JSContext* cx) {
  SmThread* thread = t_thread;
  if (!thread || thread->cx != cx) return false;
  if (thread->stack->stackSize() != 0) {
    base_internal::LogError(
        "spidermonkey: cannot detach a JSContext while its scripts run on this thread (%u "
        "profiling-stack frames)",
        thread->stack->stackSize());
    return false;
  }
  {
    // No interrupt is requested for it after this.
    Registry& registry = GetRegistry();
    AutoLock lock(registry.mutex);
    registry.threads.erase(std::remove(registry.threads.begin(), registry.threads.end(), thread),
                           registry.threads.end());
  }
  // The handler stops reading the engine first, then the engine's profiling goes off, then
  // the stack is uninstalled and freed (empty: checked above).
  script::DetachScriptThread(thread);
  thread->switching.store(true, std::memory_order_relaxed);
  if (thread->enabled.load(std::memory_order_relaxed)) {
    if (thread->event_markers) js::RegisterContextProfilingEventMarker(cx, nullptr);
    js::EnableContextProfilingStack(cx, false);
    thread->enabled.store(false, std::memory_order_relaxed);
    thread->disable_count.fetch_add(1, std::memory_order_relaxed);
  }
  js::SetContextProfilingStack(cx, nullptr);
  t_thread = nullptr;
  delete thread->stack;
  delete thread;
  return true;
}

bool IsAttached(JSContext* cx) { return t_thread && t_thread->cx == cx; }

void PollProfiling(JSContext* cx) {
  if (t_thread && t_thread->cx == cx) Sync(t_thread);
}

bool DefineStrataObject(JSContext* cx, JSObject* global) {
  JS::RootedObject target(cx, global);
  JSAutoRealm realm(cx, target);
  JS::RootedObject strata(cx, JS_NewPlainObject(cx));
  if (!strata || !JS_DefineFunctions(cx, strata, kStrataFunctions)) return false;
  return JS_DefineProperty(cx, target, "Strata", strata, JSPROP_READONLY | JSPROP_PERMANENT);
}

ThreadStats ReadThreadStats(JSContext* cx) {
  ThreadStats stats;
  SmThread* thread = t_thread;
  if (!thread || thread->cx != cx) return stats;
  const script::ScriptThreadStats s = script::ReadScriptThreadStats(*thread);
  stats.attached = true;
  stats.profiling_enabled = thread->enabled.load(std::memory_order_relaxed);
  stats.enable_count = thread->enable_count.load(std::memory_order_relaxed);
  stats.disable_count = thread->disable_count.load(std::memory_order_relaxed);
  stats.samples = s.samples;
  stats.samples_with_js = s.samples_with_script;
  stats.script_frames = s.script_frames;
  stats.dropped_frames = s.dropped_frames;
  stats.cached_walks = s.cached_walks;
  stats.cache_resumes = s.cache_resumes;
  stats.scan_resumes = s.scan_resumes;
  stats.cut_walks = s.cut_walks;
  stats.mean_sample_us = s.mean_sample_us;
  stats.median_sample_us = s.median_sample_us;
  stats.p90_sample_us = s.p90_sample_us;
  stats.max_sample_us = s.max_sample_us;
  return stats;
}

}  // namespace spidermonkey
}  // namespace full
}  // namespace strata
