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

size_t CaptureMarkerStack(uint64_t (&frames)[kMaxMarkerStackFrames]) {
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

}  // namespace base_internal
}  // namespace strata
