// Native allocation profiling, base's half (native_allocations.h, docs/memory.md).
#include "base/internal/allocations/native_allocations.h"

#include <ucontext.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/internal/allocations/allocation_stack.h"
#include "base/labels.h"

#include "base/internal/session/core.h"
#include "base/internal/session/session_state.h"
#include "base/internal/registry/thread_registry.h"
#include "base/markers.h"
#include "platform/sampling/libunwind_walker.h"

namespace strata {
namespace base_internal {

std::atomic<uint64_t> g_native_allocation_interval{0};

namespace {

std::atomic<uint64_t> g_configured_interval{kDefaultNativeAllocationInterval};
// The main thread of the process: every record goes on its track, as Firefox writes them.
std::atomic<int64_t> g_main_thread{0};
std::atomic<uint8_t> g_marker_tag{0};
std::atomic<bool> g_set_full_noted{false};
std::atomic<uint64_t> g_skipped_low_stack{0};
std::atomic<uint64_t> g_cursor_walks{0};
std::atomic<bool> g_force_cursor_walk{false};

// The payload the Firefox Profiler reads (shared/design/native-allocations.md): `size` (here
// the unbiased estimate of the bytes the sample stands for; negative for a free),
// `memoryAddress` and `threadId` (the thread that allocated or freed).
struct NativeAllocationMarker {
  static constexpr const char* MarkerTypeName() { return "Native allocation"; }
  static void StreamJSONMarkerData(JsonWriter& w, int64_t size, uint64_t address,
                                   int64_t thread_id) {
    w.IntProperty("size", size);
    w.IntProperty("memoryAddress", static_cast<int64_t>(address));
    w.IntProperty("threadId", thread_id);
  }
};

// The type, registered with its stacks in the front-end's minimal form (the save writes
// records by the hundred thousand: MarkerTypeFunctions::minimal_stack).
uint8_t RegisterNativeAllocationMarkerType() {
  MarkerTypeFunctions functions{NativeAllocationMarker::MarkerTypeName(),
                                &TypedMarker<NativeAllocationMarker>::Stream, nullptr};
  functions.minimal_stack = true;
  return RegisterMarkerType(functions);
}

// Namespace-scope (constructed at load): a function-local static would register its
// destructor (__cxa_atexit) inside the program's allocation call.
const ProfilerString kMarkerName = ProfilerString::Literal("Native allocation");
const ProfilerString kFullName = ProfilerString::Literal("Native allocations: live set full");

}  // namespace

void SetNativeAllocationInterval(uint64_t bytes) {
  if (bytes >= kMinNativeAllocationInterval && bytes <= kMaxNativeAllocationInterval) {
    g_configured_interval.store(bytes, std::memory_order_relaxed);
  }
}

void StartNativeAllocations(uint32_t features) {
  if (!(features & kFeatureNativeAllocations)) {
    g_native_allocation_interval.store(0, std::memory_order_relaxed);
    return;
  }
  // The type's tag now, on the starting thread: registering it takes the marker type
  // registry's lock, never to be taken inside an allocation.
  g_marker_tag.store(RegisterNativeAllocationMarkerType(), std::memory_order_relaxed);
  g_main_thread.store(RawGetPid(), std::memory_order_relaxed);
  g_set_full_noted.store(false, std::memory_order_relaxed);
  g_skipped_low_stack.store(0, std::memory_order_relaxed);
  g_cursor_walks.store(0, std::memory_order_relaxed);
  const char* force = getenv(kForceCursorWalkVariable);
  g_force_cursor_walk.store(force != nullptr && strcmp(force, "1") == 0,
                            std::memory_order_relaxed);
  g_native_allocation_interval.store(g_configured_interval.load(std::memory_order_relaxed),
                                     std::memory_order_release);
}

void StopNativeAllocations() { g_native_allocation_interval.store(0, std::memory_order_relaxed); }

uint64_t NativeAllocationsSkippedForLowStack() {
  return g_skipped_low_stack.load(std::memory_order_relaxed);
}

uint64_t NativeAllocationCursorWalks() { return g_cursor_walks.load(std::memory_order_relaxed); }

namespace {

// An allocation's stack as a marker stack (marker_entry.h): return addresses leaf first, with
// the thread's labels among them (allocation_stack.h).
constexpr size_t kMaxLabelWords = kMaxAllocationStackLabelWords;
// A label's dynamic string is copied up to this many bytes, as a CPU sample copies it.
constexpr size_t kMaxDynamicChars = 63;
constexpr size_t kMaxStackWords = kMaxMarkerStackFrames + kMaxLabelWords;

using ThreadLabels = AllocationStackLabels;

void ReadThreadLabels(const ProfilingStack& stack, ThreadLabels* labels) {
  uint32_t depth = stack.Depth();
  if (depth > ProfilingStack::kCapacity) depth = ProfilingStack::kCapacity;
  if (depth > kMaxAllocationStackLabels) depth = kMaxAllocationStackLabels;
  std::atomic_signal_fence(std::memory_order_acquire);
  for (uint32_t i = 0; i < depth; ++i) {
    labels->frames[i] = &stack.frame(i);
    labels->addresses[i] = reinterpret_cast<uintptr_t>(stack.frame(i).stack_address);
  }
  labels->count = depth;
}

size_t BoundedLength(const char* text, size_t most) {
  size_t length = 0;
  while (length < most && text[length] != '\0') ++length;
  return length;
}

// Walks the calling thread's stack with stack pointers (the CPU samples' walker, libunwind's
// cursor, from a context made here) for the labels the two searches could not place: ~0.3-0.6
// us a frame, against unw_backtrace's few ns, so only then. Writes each label's count of
// frames below it (the frames whose stack pointer is at or below its address) and the
// walk's pcs (leaf first) into `pcs`; returns how many.
__attribute__((noinline)) size_t WalkWithStackPointers(const StackBounds& bounds,
                                                       const ThreadLabels& labels,
                                                       uintptr_t* pcs, size_t capacity,
                                                       uint32_t* slots_below) {
  ucontext_t context;
  memset(&context, 0, sizeof(context));
  greg_t* registers = context.uc_mcontext.gregs;
  // The registers at the label `0:`, whose unwind rule libunwind looks up (the instruction's
  // own address: the context is taken as an interrupted one). Memory outputs only: no
  // register is written before it is read.
  __asm__ __volatile__(
      "lea 0f(%%rip), %%rax\n\t"
      "0:\n\t"
      "mov %%rax, %0\n\t"
      "mov %%rsp, %1\n\t"
      "mov %%rbp, %2\n\t"
      "mov %%rbx, %3\n\t"
      "mov %%r12, %4\n\t"
      "mov %%r13, %5\n\t"
      "mov %%r14, %6\n\t"
      "mov %%r15, %7\n\t"
      : "=m"(registers[REG_RIP]), "=m"(registers[REG_RSP]), "=m"(registers[REG_RBP]),
        "=m"(registers[REG_RBX]), "=m"(registers[REG_R12]), "=m"(registers[REG_R13]),
        "=m"(registers[REG_R14]), "=m"(registers[REG_R15])
      :
      : "rax", "memory");
  NativeFrame frames[kMaxMarkerStackFrames];
  if (capacity > kMaxMarkerStackFrames) capacity = kMaxMarkerStackFrames;
  const size_t count = WalkStackWithLibunwind(&context, bounds, frames, capacity);
  for (size_t i = 0; i < count; ++i) pcs[i] = frames[i].pc;
  for (uint32_t k = 0; k < labels.count; ++k) {
    uint32_t below = 0;
    while (below < count && frames[below].sp <= labels.addresses[k]) ++below;
    slots_below[k] = below;
  }
  return count;
}

// Writes the marker stack: `pcs` (leaf first) with each label right after, root first, the
// frame it belongs to (slots_below[k]: the frames below it), as a CPU sample merges them
// (labels root first; a label goes after the innermost frame that still has frames of its
// at or below it, never above an earlier label). Returns the words written.
size_t WriteMergedStack(const uintptr_t* pcs, size_t count, const ThreadLabels& labels,
                        const uint32_t* slots_below, uint64_t* words) {
  // The merged order, root first: natives as their index, labels as kLabelBit | index.
  constexpr uint32_t kLabelBit = 0x8000;
  uint16_t order[kMaxMarkerStackFrames + kMaxAllocationStackLabels];
  size_t length = 0;
  uint32_t label = 0;
  for (size_t j = count; j-- > 0;) {
    order[length++] = static_cast<uint16_t>(j);
    while (label < labels.count && slots_below[label] >= j + 1) {
      order[length++] = static_cast<uint16_t>(kLabelBit | label++);
    }
  }
  while (label < labels.count) order[length++] = static_cast<uint16_t>(kLabelBit | label++);
  // The labels that fit, outermost first.
  size_t label_words = 0;
  uint32_t labels_kept = 0;
  size_t text_lengths[kMaxAllocationStackLabels][2];
  for (; labels_kept < labels.count; ++labels_kept) {
    const LabelFrame& frame = *labels.frames[labels_kept];
    const size_t label_length = frame.label ? BoundedLength(frame.label, profile::kMaxMarkerStackLabelLength) : 0;
    const size_t dynamic_length = frame.dynamic_string
                                      ? BoundedLength(frame.dynamic_string, kMaxDynamicChars)
                                      : 0;
    const size_t needed = profile::MarkerStackLabelWords(label_length, dynamic_length);
    if (label_words + needed > kMaxLabelWords) break;
    label_words += needed;
    text_lengths[labels_kept][0] = label_length;
    text_lengths[labels_kept][1] = dynamic_length;
  }
  // Leaf first.
  size_t written = 0;
  for (size_t i = length; i-- > 0;) {
    if (!(order[i] & kLabelBit)) {
      words[written++] = pcs[order[i]];
      continue;
    }
    const uint32_t k = order[i] & ~kLabelBit;
    if (k >= labels_kept) continue;
    const LabelFrame& frame = *labels.frames[k];
    written += profile::WriteMarkerStackLabel(
        words + written, frame.label, text_lengths[k][0], frame.dynamic_string,
        text_lengths[k][1], frame.dynamic_string != nullptr,
        static_cast<uint8_t>(frame.category), reinterpret_cast<uintptr_t>(frame.push_site));
  }
  return written;
}

}  // namespace

size_t WriteAllocationStack(const uintptr_t* pcs, size_t count, uintptr_t anchor_return_address,
                            const AllocationStackLabels& labels, uint32_t* slots_below,
                            uint64_t* words) {
  if (count > kMaxMarkerStackFrames) count = kMaxMarkerStackFrames;
  // Strata's own frames (the capture's, the recording's, the hook's: up to the anchor's
  // return address, which is in the hook) are not written: the capture would elide them
  // (docs/symbols.md), and they are ~4 of a record's ~25 words.
  size_t own = 0;
  for (size_t i = 0; i < count && i < 16; ++i) {
    if (pcs[i] == anchor_return_address) {
      own = i + 1;
      break;
    }
  }
  if (count <= own) return 0;  // No frame of the program's: labels alone are no stack.
  for (uint32_t k = 0; k < labels.count; ++k) {
    slots_below[k] = slots_below[k] > own ? static_cast<uint32_t>(slots_below[k] - own) : 0;
  }
  if (labels.count == 0) {
    for (size_t i = own; i < count; ++i) words[i - own] = pcs[i];
    return count - own;
  }
  return WriteMergedStack(pcs + own, count - own, labels, slots_below, words);
}

namespace {

// The calling thread's stack with its labels into `words` (kMaxStackWords); the words
// written, 0 when there is no stack or when the labels need the cursor walk and
// `walk_allowed` is false (too little stack: counted).
__attribute__((noinline)) size_t CaptureAllocationStack(RegisteredThread* thread,
                                                        StackAnchor anchor, bool walk_allowed,
                                                        uint64_t* words) {
  uintptr_t pcs[kMaxMarkerStackFrames];
  size_t count = CaptureCurrentStack(pcs, kMaxMarkerStackFrames);
  ThreadLabels labels;
  ReadThreadLabels(thread->profiling_stack, &labels);
  uint32_t slots_below[kMaxAllocationStackLabels] = {};
  if (count != 0 && labels.count != 0) {
    const StackBounds& bounds = thread->bounds;
    if (anchor.slot >= bounds.low && anchor.slot < bounds.high) {
      if (g_force_cursor_walk.load(std::memory_order_relaxed) ||
          !CountSlotsBelowLabels(pcs, count, anchor, bounds.high, labels.addresses,
                                 labels.count, StackImage::OfOwnStack(), slots_below)) {
        if (!walk_allowed) {
          g_skipped_low_stack.fetch_add(1, std::memory_order_relaxed);
          return 0;
        }
        g_cursor_walks.fetch_add(1, std::memory_order_relaxed);
        count = WalkWithStackPointers(bounds, labels, pcs, kMaxMarkerStackFrames, slots_below);
      }
    }  // Else on another stack (a coroutine's, the signal stack): the labels after the leaf.
  }
  return WriteAllocationStack(pcs, count, anchor.return_address, labels, slots_below, words);
}

// The record itself, once RecordNativeAllocation found room: its own frame holds the stack's
// words (kMaxStackWords), so it is not inlined into the check, whose frame stays small: the
// room is measured before these bytes are taken (alloc_tiny_stack_test: with the words in the
// checking frame, a thread with 4.5 KiB left crashed at the check itself in 1 run of 8).
__attribute__((noinline)) bool WriteAllocationRecord(RegisteredThread* thread, int64_t bytes,
                                                     uint64_t address, StackAnchor anchor,
                                                     bool walk_allowed) {
  MarkerHeaderRef header;
  header.thread = ThreadId::FromNumber(
      static_cast<ThreadId::NumberType>(g_main_thread.load(std::memory_order_relaxed)));
  header.phase = MarkerPhase::kInstant;
  header.start = TimeStamp::Now();
  header.name = &kMarkerName;
  header.category = static_cast<uint8_t>(Category::kMemory);
  header.payload_tag = g_marker_tag.load(std::memory_order_relaxed);
  uint64_t words[kMaxStackWords];
  const size_t word_count = CaptureAllocationStack(thread, anchor, walk_allowed, words);
  if (word_count == 0) return false;  // No stack: the record would drop out of every tree.
  header.stack = absl::Span<const uint64_t>(words, word_count);
  // Straight into the session buffer, not the thread's staging: the buffer's order is then
  // the order of the calls, so a free is always after its allocation, whatever thread made
  // each (the front-end matches them in table order).
  return static_cast<bool>(SessionBuffer().PutObjects(
      EntryKind::kMarker, header, bytes, address,
      static_cast<int64_t>(thread->tid.ToNumber())));
}

}  // namespace

bool RecordNativeAllocation(int64_t bytes, uint64_t address, StackAnchor anchor) {
  if (g_native_allocation_interval.load(std::memory_order_acquire) == 0) return false;
  RegisteredThread* const thread = CurrentRegisteredThread();
  // Strata's own allocations while it holds the buffer's or the session's lock (a capture, a
  // start, a stop) are not recorded: the record would wait for a lock this thread holds.
  // A thread inside dl_iterate_phdr, or a changing link map: libunwind could wait for the
  // loader's lock (libunwind_walker.h).
  if (thread == nullptr || IsForkedChild() || ProfilerIsPaused() ||
      SessionBuffer().IsLockedOnCurrentThread() || SessionLockedOnCurrentThread() ||
      LibunwindWalkMayDeadlock()) {
    return false;
  }
  // The room below this frame, on the thread's own stack (native_allocations.h, "Stack").
  const uintptr_t sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  const StackBounds& bounds = thread->bounds;
  bool walk_allowed = true;
  if (sp >= bounds.low && sp < bounds.high) {
    if (sp - bounds.low < kRecordStackNeed) {
      g_skipped_low_stack.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    walk_allowed = sp - bounds.low >= kWalkStackNeed;
  }
  return WriteAllocationRecord(thread, bytes, address, anchor, walk_allowed);
}

void NoteNativeAllocationSetFull(uint64_t capacity) {
  if (g_native_allocation_interval.load(std::memory_order_relaxed) == 0) return;
  if (g_set_full_noted.exchange(true, std::memory_order_relaxed)) return;
  RegisteredThread* const thread = CurrentRegisteredThread();
  if (thread == nullptr || IsForkedChild() || SessionBuffer().IsLockedOnCurrentThread() ||
      SessionLockedOnCurrentThread()) {
    return;
  }
  MarkerHeaderRef header;
  header.thread = ThreadId::FromNumber(
      static_cast<ThreadId::NumberType>(g_main_thread.load(std::memory_order_relaxed)));
  header.phase = MarkerPhase::kInstant;
  header.start = TimeStamp::Now();
  header.name = &kFullName;
  header.category = static_cast<uint8_t>(Category::kMemory);
  header.payload_tag = kTextMarkerTag;
  static constexpr char kText[] =
      "later frees are not matched: their allocations look retained; capacity ";
  char text[sizeof(kText) + 20];
  memcpy(text, kText, sizeof(kText) - 1);
  const size_t length = static_cast<size_t>(
      std::to_chars(text + sizeof(kText) - 1, text + sizeof(text), capacity).ptr - text);
  SessionBuffer().PutObjects(EntryKind::kMarker, header, std::string_view(text, length));
}

}  // namespace base_internal
}  // namespace strata
