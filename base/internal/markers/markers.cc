// Markers (base/markers.h): the marker type registry, marker stacks, and recording a marker
// into the calling thread's staging (shared/buffer/staging_area.h) or the session buffer.
// Thread-safe; not async-signal-safe.
#include <atomic>
#include <cstring>
#include <mutex>

#include "base/internal/session/core.h"
#include "base/internal/session/session_state.h"
#include "base/internal/registry/thread_registry.h"
#include "base/markers.h"
#include "platform/never_destroyed.h"
#include "platform/mutex.h"
#include "platform/strata_clock_table.h"
#include "platform/sampling/frame_pointer_walker.h"
#include "platform/sampling/libunwind_walker.h"
#include "shared/buffer/staging_area.h"

namespace strata {
namespace base_internal {
namespace {

struct MarkerTypeRegistry {
  Mutex mutex{"strata marker types"};
  // Index = tag; tags 0 and 1 are the untyped and text markers. Entries are never removed,
  // so a pointer to one stays valid.
  MarkerTypeFunctions types[256] = {};
  int count = 2;
};

MarkerTypeRegistry& GetMarkerTypes() {
  static NeverDestroyed<MarkerTypeRegistry> registry;
  return registry.get();
}

}  // namespace

// noinline: the walks start at this function's own frame (its return address is the
// recording code's, the first frame reported).
__attribute__((noinline)) size_t CaptureMarkerStack(uint64_t (&frames)[kMaxMarkerStackFrames]) {
  if (!g_libunwind_ready.load(std::memory_order_acquire)) {
    // Before the sampler thread has loaded libunwind (its first loop, session_state.h), or
    // without it: the frame records from this frame outward, inside the thread's stack (none
    // for a thread whose bounds are unknown). The same frames as libunwind's where every
    // caller keeps frame pointers (Strata's builds do; most of libc does not: the walk ends
    // or skips there).
    RegisteredThread* const thread = CurrentRegisteredThread();
    if (thread == nullptr) return 0;
    const uintptr_t frame = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    NativeFrame callers[kMaxMarkerStackFrames];
    FrameRegisters resume;
    const size_t n = WalkFramePointerCallers({0, frame, frame}, thread->bounds, callers,
                                             kMaxMarkerStackFrames, nullptr, &resume);
    for (size_t i = 0; i < n; ++i) frames[i] = callers[i].pc;
    return n;
  }
  // The calling thread's own stack, outside signal context (libunwind, loaded privately).
  uintptr_t pcs[kMaxMarkerStackFrames + 1];
  const size_t n = CaptureCurrentStack(pcs, kMaxMarkerStackFrames + 1);
  // Skip this function's own frame: the next one is the recording code's caller (the
  // recording helpers are inline).
  size_t kept = 0;
  for (size_t i = 1; i < n; ++i) frames[kept++] = pcs[i];
  return kept;
}

uint8_t RegisterMarkerType(const MarkerTypeFunctions& functions) {
  MarkerTypeRegistry& registry = GetMarkerTypes();
  AutoLock lock(registry.mutex);
  for (int tag = 2; tag < registry.count; ++tag) {
    if (registry.types[tag].stream == functions.stream) return static_cast<uint8_t>(tag);
  }
  if (registry.count >= 256) return kUntypedMarkerTag;  // Out of tags: recorded without data.
  registry.types[registry.count] = functions;
  return static_cast<uint8_t>(registry.count++);
}

const MarkerTypeFunctions* MarkerTypeForTag(uint8_t tag) {
  MarkerTypeRegistry& registry = GetMarkerTypes();
  AutoLock lock(registry.mutex);
  if (tag < 2 || tag >= registry.count) return nullptr;
  return &registry.types[tag];
}

std::vector<MarkerTypeFunctions> RegisteredMarkerTypes() {
  MarkerTypeRegistry& registry = GetMarkerTypes();
  AutoLock lock(registry.mutex);
  return std::vector<MarkerTypeFunctions>(registry.types + 2, registry.types + registry.count);
}

// ---------------------------------------------------------------------------------------
// Recording a marker (markers.h): into the recording thread's staging, or straight into the
// session buffer.

namespace {

// A marker's times from its options, reading the clock only where one is missing:
// TimeStamp::Now() (the Strata clock), the clock of samples and of the caller's own Now() calls, so a marker
// recorded after a Now() call is never earlier than it, nor one recorded before it later.
__attribute__((always_inline)) inline void ResolveMarkerTimes(const MarkerTiming& timing,
                                                              TimeStamp* start, TimeStamp* end) {
  // Never rdtsc where it is forbidden. Out of line (library size): the one-read fast path
  // (BeginStagedMarkerNow) has the clock inline.
  auto now = [] { return TimeStamp::Now(); };
  switch (timing.phase) {
    case MarkerPhase::kInstant:
    case MarkerPhase::kIntervalStart:
      *start = timing.start.IsNull() ? now() : timing.start;
      break;
    case MarkerPhase::kInterval:
      *start = timing.start.IsNull() ? now() : timing.start;
      *end = timing.end.IsNull() ? (timing.start.IsNull() ? *start : now()) : timing.end;
      break;
    case MarkerPhase::kIntervalEnd:
      *end = timing.end.IsNull() ? now() : timing.end;
      break;
  }
}

// The calling thread's staging, created at its first marker; null when the thread is not
// registered, or in a forked child when the staging is still to be made.
// A child made without atfork handlers (raw fork, clone, _Fork; IsForkedChild()) is only
// looked for on the slow paths, where a lock or an allocation comes: the creation here and
// the flush of a full staging (MarkerStagingFlushAllowed). Until then its markers go into its
// own copy of the staging, which nothing reads: harmless, and the fast path saves the check
// (~22 of ~190 instructions per marker, issue 38).
__attribute__((always_inline)) inline StagingArea* CurrentThreadStagingArea(
    RegisteredThread* thread) {
  if (!thread) return nullptr;
  StagingArea* staging = thread->marker_staging.load(std::memory_order_relaxed);
  if (__builtin_expect(staging == nullptr, 0)) {
    if (IsForkedChild()) return nullptr;
    staging = new StagingArea;
    thread->marker_staging.store(staging, std::memory_order_release);
  }
  return staging;
}

// False in a forked child (see above): a full staging is not flushed there (the buffer's lock
// may be held by a thread of the parent that the child does not have).
__attribute__((always_inline)) inline bool MarkerStagingFlushAllowed() { return !IsForkedChild(); }

}  // namespace

// The general paths (not the one-read fast path below) are optimised for size: the library's
// limit (docs/benchmarks.md, "Library size").
__attribute__((optimize("Os"))) StagingArea* BeginMarker(const ProfilerString& name, Category category,
                           const MarkerOptions& options, uint8_t payload_tag,
                           MarkerHeaderRef* header) {
  // The recording thread's staging, unless the marker goes on another thread's track or
  // this thread is not registered.
  RegisteredThread* const thread = CurrentRegisteredThread();
  StagingArea* staging = nullptr;
  if (options.thread().IsSpecified() && !(thread && options.thread() == thread->tid)) {
    header->thread = options.thread();
    // Written directly: the target thread's staged markers go first, so that its own
    // markers recorded before this one (an IntervalStart this marker ends, say) stay before
    // it in the buffer, where the front-end pairs them in order.
    FlushStagedMarkersOfThread(options.thread());
  } else if ((staging = CurrentThreadStagingArea(thread)) != nullptr) {
    header->thread = thread->tid;
  } else {
    header->thread = CurrentThreadId();
  }
  header->phase = options.timing().phase;
  ResolveMarkerTimes(options.timing(), &header->start, &header->end);
  header->name = &name;
  header->category = static_cast<uint8_t>(category);
  header->payload_tag = payload_tag;
  return staging;
}

namespace {

// The fast paths' common part: the entry reserved in the calling thread's staging (flushing
// it first when full), or null (no staging, or too large).
__attribute__((always_inline)) inline uint8_t* ReserveStagedMarker(RegisteredThread* thread,
                                                                   size_t payload_bytes,
                                                                   StagingArea** staging_out) {
  StagingArea* const staging = CurrentThreadStagingArea(thread);
  if (__builtin_expect(staging == nullptr, 0)) return nullptr;
  const size_t entry_bytes = 1 + profile::kCommonMarkerHeaderBytes + payload_bytes;
  uint8_t* p = staging->TryReserveEntry(entry_bytes);
  if (__builtin_expect(p == nullptr, 0)) {
    if (!MarkerStagingFlushAllowed()) return nullptr;
    // Full (or too large): the batch goes first, so this thread's order is kept.
    staging->FlushAndRewind(SessionBuffer());
    p = staging->TryReserveEntry(entry_bytes);
    if (p == nullptr) return nullptr;  // Too large to stage: the general path writes it.
  }
  *staging_out = staging;
  return p;
}

}  // namespace

__attribute__((optimize("Os"))) uint8_t* BeginStagedMarker(LiteralName name, Category category,
                                                            const MarkerTiming& timing,
                                                            uint8_t payload_tag,
                                                            size_t payload_bytes,
                                                            StagingArea** staging_out) {
  RegisteredThread* const thread = CurrentRegisteredThread();
  uint8_t* p = ReserveStagedMarker(thread, payload_bytes, staging_out);
  if (__builtin_expect(p == nullptr, 0)) return nullptr;
  TimeStamp start;
  TimeStamp end;
  ResolveMarkerTimes(timing, &start, &end);
  *p++ = static_cast<uint8_t>(EntryKind::kMarker);
  return profile::WriteCommonMarkerHeader(p, thread->tid, timing.phase, start, end, name.chars,
                                          name.length, static_cast<uint8_t>(category),
                                          payload_tag);
}

namespace {

// Every case the fast path below leaves: no staging yet, a full one, a large payload, the
// clock off or forbidden, a tick the table cannot convert. Out of line, so that the fast path
// saves no registers; the general staged path (library size: no second copy of it), which
// reads the clock again.
__attribute__((noinline)) uint8_t* BeginStagedMarkerNowSlow(const char* name_chars,
                                                             size_t name_length,
                                                             unsigned packed, int64_t start_ns,
                                                             int64_t end_ns,
                                                             StagingArea** staging_out) {
  const MarkerTiming timing{UnpackMarkerPhase(packed), TimeStamp::FromNanoseconds(start_ns),
                            TimeStamp::FromNanoseconds(end_ns)};
  return BeginStagedMarker(LiteralName{name_chars, name_length},
                           static_cast<Category>(packed & 0xff), timing,
                           static_cast<uint8_t>(packed >> 8), packed >> 24, staging_out);
}

}  // namespace

uint8_t* BeginStagedMarkerNow(const char* name_chars, size_t name_length, unsigned packed,
                              int64_t start_ns, int64_t end_ns, StagingArea** staging_out) {
#if defined(__x86_64__)
  // The usual case with no call in it: the clock on the TSC, a registered thread with room in
  // its staging, a tick at or after the newest segment's start. The entry is reserved and
  // its header written first (its arguments then need no registers), then the tick is read
  // and converted, and the times that are now are stored over the header's.
  if (__builtin_expect(clock_internal::StrataClockOn() && !strata_t_tsc_forbidden, 1)) {
    RegisteredThread* const thread = CurrentRegisteredThread();
    if (__builtin_expect(thread != nullptr, 1)) {
      StagingArea* const staging = thread->marker_staging.load(std::memory_order_relaxed);
      if (__builtin_expect(staging != nullptr, 1)) {
        const size_t entry_bytes = 1 + profile::kCommonMarkerHeaderBytes + (packed >> 24);
        if (uint8_t* p = staging->TryReserveSmallEntry(entry_bytes)) {
          *p = static_cast<uint8_t>(EntryKind::kMarker);
          uint8_t* const header = p + 1;
          uint8_t* const payload = profile::WriteCommonMarkerHeader(
              header, thread->tid, UnpackMarkerPhase(packed),
              TimeStamp::FromNanoseconds(start_ns), TimeStamp::FromNanoseconds(end_ns),
              name_chars, name_length, static_cast<uint8_t>(packed),
              static_cast<uint8_t>(packed >> 8));
          const uint64_t ticks = clock_internal::ReadStrataClockTicks();
          int64_t now_ns;
          if (__builtin_expect(
                  clock_internal::TicksToStrataNanosecondsNewestSegment(ticks, &now_ns) ||
                      clock_internal::TicksToStrataNanosecondsSlow(ticks, &now_ns),
                  1)) {
            if (packed & kStagedMarkerStartIsNow) {
              std::memcpy(header + profile::kCommonMarkerHeaderStartOffset, &now_ns,
                          sizeof(now_ns));
            }
            if (packed & kStagedMarkerEndIsNow) {
              std::memcpy(header + profile::kCommonMarkerHeaderEndOffset, &now_ns,
                          sizeof(now_ns));
            }
            *staging_out = staging;
            return payload;
          }
        }
      }
    }
  }
#endif
  // (A reservation made above is made again: it only moves the owner's reserved head.)
  return BeginStagedMarkerNowSlow(name_chars, name_length, packed, start_ns, end_ns,
                                  staging_out);
}

void FlushAndRewindMarkerStaging(StagingArea* staging) {
  if (!MarkerStagingFlushAllowed()) return;  // Then nothing fits: written as unstaged.
  staging->FlushAndRewind(SessionBuffer());
}

}  // namespace base_internal
}  // namespace strata
