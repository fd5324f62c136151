#include <atomic>
#include <mutex>

#include "base/internal/core.h"
#include "base/markers.h"
#include "platform/mutex.h"
#include "platform/tsc_clock.h"
#include "platform/sampling/libunwind_walker.h"

namespace strata {
namespace base_internal {
namespace {

constexpr size_t kMaxMarkerStackFrames = 128;

struct MarkerTypeRegistry {
  Mutex mutex{"strata marker types"};
  // Index = tag; tags 0 and 1 are the untyped and text markers. Entries are never removed,
  // so a pointer to one stays valid.
  MarkerTypeFunctions types[256] = {};
  int count = 2;
};

MarkerTypeRegistry& GetMarkerTypes() {
  static MarkerTypeRegistry* registry = new MarkerTypeRegistry;
  return *registry;
}

}  // namespace

MarkerHeader MakeMarkerHeader(const ProfilerString& name, Category category,
                              const MarkerOptions& options, uint8_t payload_tag) {
  MarkerHeader header;
  header.thread = options.thread().IsSpecified() ? options.thread() : CurrentThreadId();
  const MarkerTiming& timing = options.timing();
  header.phase = timing.phase;
  // The calibrated TSC (~10 ns) once the sampler has calibrated it, as samples use;
  // clock_gettime (~25 ns) before.
  TimeStamp now = TscTicksToTimeStamp(ReadTscTicks());
  if (now.IsNull()) now = TimeStamp::Now();
  switch (timing.phase) {
    case MarkerPhase::kInstant:
    case MarkerPhase::kIntervalStart:
      header.start = timing.start.IsNull() ? now : timing.start;
      break;
    case MarkerPhase::kInterval:
      header.start = timing.start.IsNull() ? now : timing.start;
      header.end = timing.end.IsNull() ? now : timing.end;
      break;
    case MarkerPhase::kIntervalEnd:
      header.end = timing.end.IsNull() ? now : timing.end;
      break;
  }
  header.name = name;
  header.category = static_cast<uint8_t>(category);
  header.payload_tag = payload_tag;
  if (options.capture_stack()) {
    // The calling thread's own stack, outside signal context (libunwind, loaded privately).
    uintptr_t frames[kMaxMarkerStackFrames];
    const size_t n = CaptureCurrentStack(frames, kMaxMarkerStackFrames);
    // Skip this function and the inline recording helpers: frame 0 is MakeMarkerHeader.
    for (size_t i = 1; i < n; ++i) header.stack.push_back(frames[i]);
  }
  return header;
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

}  // namespace base_internal
}  // namespace strata
