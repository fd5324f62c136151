// Native allocation profiling, base's half (native_allocations.h, docs/memory.md).
#include "base/internal/allocations/native_allocations.h"

#include <atomic>
#include <string_view>

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
  g_marker_tag.store(TypedMarker<NativeAllocationMarker>::Tag(), std::memory_order_relaxed);
  g_main_thread.store(RawGetPid(), std::memory_order_relaxed);
  g_set_full_noted.store(false, std::memory_order_relaxed);
  g_native_allocation_interval.store(g_configured_interval.load(std::memory_order_relaxed),
                                     std::memory_order_release);
}

void StopNativeAllocations() { g_native_allocation_interval.store(0, std::memory_order_relaxed); }

bool RecordNativeAllocation(int64_t bytes, uint64_t address) {
  if (g_native_allocation_interval.load(std::memory_order_acquire) == 0) return false;
  RegisteredThread* const thread = t_registered_thread;
  // Strata's own allocations while it holds the buffer's or the session's lock (a capture, a
  // start, a stop) are not recorded: the record would wait for a lock this thread holds.
  // A thread inside dl_iterate_phdr, or a changing link map: libunwind could wait for the
  // loader's lock (libunwind_walker.h).
  if (thread == nullptr || IsForkedChild() || ProfilerIsPaused() ||
      SessionBuffer().IsLockedOnCurrentThread() || SessionLockedOnCurrentThread() ||
      LibunwindWalkMayDeadlock()) {
    return false;
  }
  MarkerHeaderRef header;
  header.thread = ThreadId::FromNumber(
      static_cast<ThreadId::NumberType>(g_main_thread.load(std::memory_order_relaxed)));
  header.phase = MarkerPhase::kInstant;
  header.start = TimeStamp::Now();
  header.name = &kMarkerName;
  header.category = static_cast<uint8_t>(Category::kMemory);
  header.payload_tag = g_marker_tag.load(std::memory_order_relaxed);
  uint64_t frames[kMaxMarkerStackFrames];
  const size_t frame_count = CaptureMarkerStack(frames);
  if (frame_count == 0) return false;  // No stack: the record would drop out of every tree.
  header.stack = absl::Span<const uint64_t>(frames, frame_count);
  // Straight into the session buffer, not the thread's staging: the buffer's order is then
  // the order of the calls, so a free is always after its allocation, whatever thread made
  // each (the front-end matches them in table order).
  return static_cast<bool>(SessionBuffer().PutObjects(
      EntryKind::kMarker, header, bytes, address,
      static_cast<int64_t>(thread->tid.ToNumber())));
}

void NoteNativeAllocationSetFull(uint64_t capacity) {
  if (g_native_allocation_interval.load(std::memory_order_relaxed) == 0) return;
  if (g_set_full_noted.exchange(true, std::memory_order_relaxed)) return;
  RegisteredThread* const thread = t_registered_thread;
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
  char text[96] = "later frees are not matched: their allocations look retained; capacity ";
  size_t length = 0;
  while (text[length] != '\0') ++length;
  char digits[24];
  size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + capacity % 10);
    capacity /= 10;
  } while (capacity != 0 && n < sizeof(digits));
  while (n > 0 && length + 1 < sizeof(text)) text[length++] = digits[--n];
  text[length] = '\0';
  SessionBuffer().PutObjects(EntryKind::kMarker, header, std::string_view(text, length));
}

}  // namespace base_internal
}  // namespace strata
