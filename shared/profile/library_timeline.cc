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
// by range, path and build-id; the merged lifetime spans all of them.
std::vector<LibraryLifetime> MergeReloads(std::vector<LibraryLifetime> lifetimes) {
  auto key_less = [](const LibraryLifetime& a, const LibraryLifetime& b) {
    return std::tie(a.library.start, a.library.end, a.library.path, a.library.code_id) <
           std::tie(b.library.start, b.library.end, b.library.path, b.library.code_id);
  };
  auto same_object = [](const LibraryLifetime& a, const LibraryLifetime& b) {
    return a.library.start == b.library.start && a.library.end == b.library.end &&
           a.library.path == b.library.path && a.library.code_id == b.library.code_id;
  };
  std::stable_sort(lifetimes.begin(), lifetimes.end(), key_less);
  std::vector<LibraryLifetime> merged;
  for (LibraryLifetime& l : lifetimes) {
    if (!merged.empty() && same_object(merged.back(), l)) {
      LibraryLifetime& m = merged.back();
      // A null `loaded` is the earliest, a null `unloaded` still mapped.
      if (!m.loaded.IsNull() && (l.loaded.IsNull() || l.loaded < m.loaded)) m.loaded = l.loaded;
      if (!m.unloaded.IsNull() && (l.unloaded.IsNull() || m.unloaded < l.unloaded)) {
        m.unloaded = l.unloaded;
      }
      continue;
    }
    merged.push_back(std::move(l));
  }
  return merged;
}

}  // namespace

LibraryTimeline::LibraryTimeline(std::vector<LibraryLifetime> lifetimes) {
  lifetimes = MergeReloads(std::move(lifetimes));
  // Latest loaded first: it keeps its real range; an earlier one overlapping a kept range is
  // moved. A null `loaded` is the earliest.
  std::stable_sort(lifetimes.begin(), lifetimes.end(), [](const LibraryLifetime& a, const LibraryLifetime& b) {
    return b.loaded < a.loaded;
  });
  std::vector<const LibraryLifetime*> kept;
  std::vector<const LibraryLifetime*> moved;
  for (const LibraryLifetime& l : lifetimes) {
    if (l.library.start >= l.library.end) continue;
    const bool overlaps = std::any_of(kept.begin(), kept.end(),
                                      [&](const LibraryLifetime* k) { return Overlaps(k->library, l.library); });
    (overlaps ? moved : kept).push_back(&l);
  }
  for (const LibraryLifetime* k : kept) libs_.push_back(k->library);
  std::sort(libs_.begin(), libs_.end(), [](const SharedLibrary& a, const SharedLibrary& b) { return a.start < b.start; });

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
