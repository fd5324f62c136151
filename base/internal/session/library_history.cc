#include "base/internal/session/library_history.h"

#include <link.h>

#include <utility>

#include "base/internal/session/core.h"
#include "base/profiler.h"
#include "platform/mutex.h"

namespace strata {
namespace base_internal {
namespace {

struct LoaderCounts {
  unsigned long long adds = 0;
  unsigned long long subs = 0;
  bool operator==(const LoaderCounts& o) const { return adds == o.adds && subs == o.subs; }
};

// The loader's running counts of objects loaded and unloaded (any object reports them).
LoaderCounts CurrentLoaderCounts() {
  LoaderCounts counts;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t size, void* data) {
        if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
          auto* out = static_cast<LoaderCounts*>(data);
          out->adds = info->dlpi_adds;
          out->subs = info->dlpi_subs;
        }
        return 1;  // The first object is enough.
      },
      &counts);
  return counts;
}

bool SameLibrary(const SharedLibrary& a, const SharedLibrary& b) {
  return a.start == b.start && a.end == b.end && a.path == b.path && a.code_id == b.code_id;
}

struct History {
  Mutex mutex{"strata library history"};
  bool looked = false;
  LoaderCounts counts;
  TimeStamp last_look;                            // Null: never looked.
  std::vector<profile::LibraryLifetime> lifetimes;  // Still mapped: unloaded is null.
};

History& GetHistory() {
  static History* history = new History;  // Never destroyed: used by exit-time dlcloses.
  return *history;
}

// Updates the history from the loaded objects now. Called with the mutex held.
void Look(History& history) {
  const LoaderCounts counts = CurrentLoaderCounts();
  if (history.looked && counts == history.counts) return;
  const std::vector<SharedLibrary> now = CollectSharedLibraries();
  const TimeStamp time = TimeStamp::Now();
  std::vector<bool> known(now.size(), false);
  for (profile::LibraryLifetime& l : history.lifetimes) {
    if (!l.unloaded.IsNull()) continue;
    bool present = false;
    for (size_t i = 0; i < now.size() && !present; ++i) {
      if (!known[i] && SameLibrary(l.library, now[i])) known[i] = present = true;
    }
    if (!present) l.unloaded = time;
  }
  for (size_t i = 0; i < now.size(); ++i) {
    if (!known[i]) history.lifetimes.push_back({now[i], history.last_look, TimeStamp()});
  }
  history.looked = true;
  history.counts = counts;
  history.last_look = time;
}

}  // namespace

void NoteLibrariesMayChange() {
  if (IsForkedChild() || !ProfilerIsActive()) return;
  History& history = GetHistory();
  AutoLock lock(history.mutex);
  Look(history);
}

std::vector<profile::LibraryLifetime> LibraryHistorySince(TimeStamp since) {
  History& history = GetHistory();
  AutoLock lock(history.mutex);
  Look(history);
  // Libraries gone before the session started have no samples: dropped for good.
  std::vector<profile::LibraryLifetime> kept;
  for (profile::LibraryLifetime& l : history.lifetimes) {
    if (l.unloaded.IsNull() || !(l.unloaded < since)) kept.push_back(std::move(l));
  }
  history.lifetimes = std::move(kept);
  return history.lifetimes;
}

}  // namespace base_internal
}  // namespace strata
