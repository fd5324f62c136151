#include "shared/profile/library_timeline.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

namespace strata {
namespace profile {
namespace {

constexpr uint64_t kSyntheticAlignment = uint64_t{1} << 32;

bool Overlaps(const SharedLibrary& a, const SharedLibrary& b) { return a.start < b.end && b.start < a.end; }

// How far `time` is from the lifetime [loaded, unloaded) (0 inside it; null ends are open).
uint64_t DistanceInTime(TimeStamp time, TimeStamp loaded, TimeStamp unloaded) {
  const int64_t t = time.ToNanoseconds();
  if (!loaded.IsNull() && t < loaded.ToNanoseconds()) return static_cast<uint64_t>(loaded.ToNanoseconds() - t);
  if (!unloaded.IsNull() && t >= unloaded.ToNanoseconds()) {
    return static_cast<uint64_t>(t - unloaded.ToNanoseconds()) + 1;
  }
  return 0;
}

}  // namespace

LibraryTimeline::LibraryTimeline() : libs_(CollectSharedLibraries()) {}

namespace {

// Lifetimes of the same object loaded again at the same place (a plugin opened and closed in
// a loop) become one: its symbols are the same at every load, so nothing needs moving. Keyed
// by range, path and build-id; the merged lifetime spans all of them. (Pointers are sorted,
// not the entries: sorting structs of six strings instantiates much code in the library.)
std::vector<LibraryLifetime> MergeReloads(const std::vector<LibraryLifetime>& lifetimes) {
  std::vector<const LibraryLifetime*> order;
  order.reserve(lifetimes.size());
  for (const LibraryLifetime& l : lifetimes) order.push_back(&l);
  std::stable_sort(order.begin(), order.end(), [](const LibraryLifetime* a, const LibraryLifetime* b) {
    return std::tie(a->library.start, a->library.end, a->library.path, a->library.code_id) <
           std::tie(b->library.start, b->library.end, b->library.path, b->library.code_id);
  });
  std::vector<LibraryLifetime> merged;
  for (const LibraryLifetime* l : order) {
    LibraryLifetime* m = merged.empty() ? nullptr : &merged.back();
    if (m && m->library.start == l->library.start && m->library.end == l->library.end &&
        m->library.path == l->library.path && m->library.code_id == l->library.code_id) {
      // A null `loaded` is the earliest, a null `unloaded` still mapped.
      if (!m->loaded.IsNull() && (l->loaded.IsNull() || l->loaded < m->loaded)) m->loaded = l->loaded;
      if (!m->unloaded.IsNull() && (l->unloaded.IsNull() || m->unloaded < l->unloaded)) {
        m->unloaded = l->unloaded;
      }
      continue;
    }
    merged.push_back(*l);
  }
  return merged;
}

}  // namespace

LibraryTimeline::LibraryTimeline(std::vector<LibraryLifetime> lifetimes) {
  lifetimes = MergeReloads(lifetimes);
  // Latest loaded first: it keeps its real range; an earlier one overlapping a kept range is
  // moved. A null `loaded` is the earliest.
  std::vector<const LibraryLifetime*> by_load;
  by_load.reserve(lifetimes.size());
  for (const LibraryLifetime& l : lifetimes) by_load.push_back(&l);
  std::stable_sort(by_load.begin(), by_load.end(), [](const LibraryLifetime* a, const LibraryLifetime* b) {
    return b->loaded < a->loaded;
  });
  std::vector<const LibraryLifetime*> kept;
  std::vector<const LibraryLifetime*> moved;
  for (const LibraryLifetime* l : by_load) {
    if (l->library.start >= l->library.end) continue;
    const bool overlaps = std::any_of(kept.begin(), kept.end(),
                                      [&](const LibraryLifetime* k) { return Overlaps(k->library, l->library); });
    (overlaps ? moved : kept).push_back(l);
  }
  std::vector<const LibraryLifetime*> by_start = kept;
  std::sort(by_start.begin(), by_start.end(), [](const LibraryLifetime* a, const LibraryLifetime* b) {
    return a->library.start < b->library.start;
  });
  for (const LibraryLifetime* k : by_start) libs_.push_back(k->library);

  uint64_t next = kSyntheticBase;
  // Every moved library is one more candidate for each sample address (AddressAt) and one
  // more `libs` entry: beyond kMaxMovedLibraries the earlier ones are left out, and their
  // samples resolve in the library that replaced them, as before the timeline existed.
  if (moved.size() > kMaxMovedLibraries) moved.resize(kMaxMovedLibraries);
  for (const LibraryLifetime* m : moved) {
    const uint64_t size = m->library.end - m->library.start;
    if (size > std::numeric_limits<uint64_t>::max() - next - kSyntheticAlignment) break;
    SharedLibrary placed = m->library;
    const uint64_t shift = next - m->library.start;
    placed.start += shift;
    placed.end += shift;
    libs_.push_back(placed);
    moved_.push_back(contested_.size());
    contested_.push_back({m->library.start, m->library.end, m->loaded, m->unloaded, shift});
    next = (placed.end + kSyntheticAlignment) & ~(kSyntheticAlignment - 1);
  }
  if (moved_.empty()) return;
  for (const LibraryLifetime* k : kept) {
    const bool contested = std::any_of(moved.begin(), moved.end(),
                                       [&](const LibraryLifetime* m) { return Overlaps(k->library, m->library); });
    if (contested) contested_.push_back({k->library.start, k->library.end, k->loaded, k->unloaded, 0});
  }
}

uint64_t LibraryTimeline::AddressAt(uint64_t address, TimeStamp time) const {
  if (moved_.empty()) return address;
  // The lifetime holding the address that is nearest in time (0: mapped then); ties go to
  // the kept library, which comes last.
  const Candidate* best = nullptr;
  uint64_t best_distance = std::numeric_limits<uint64_t>::max();
  for (const Candidate& c : contested_) {
    if (address < c.start || address >= c.end) continue;
    const uint64_t distance = DistanceInTime(time, c.loaded, c.unloaded);
    if (best == nullptr || distance <= best_distance) {
      best = &c;
      best_distance = distance;
    }
  }
  return best ? address + best->shift : address;
}

}  // namespace profile
}  // namespace strata
