// The libraries this process mapped during a session, with their load and unload times, so
// that a capture names each sample's frames after the library mapped at that sample's time
// (shared/profile/library_timeline.h) — not after a library loaded later at the same address.
//
// The dlclose wrapper (preload.cc) calls NoteLibrariesMayChange() before and after the real
// dlclose: before, libraries loaded since the last look are added (loaded at that last look,
// the latest time they are known to have been absent, or "from the start"); after, those gone
// get their unload time. dl_iterate_phdr's load and unload counters (dlpi_adds/dlpi_subs)
// make a look where nothing changed cost one call. Libraries the loader unloads by itself
// (not through dlclose) are seen gone at the next look, later than they went.
//
// Thread safety: all functions are thread-safe (one mutex, never held across the real
// dlclose). Not async-signal-safe: they allocate and take the loader's lock.
#ifndef STRATA_BASE_INTERNAL_LIBRARY_HISTORY_H_
#define STRATA_BASE_INTERNAL_LIBRARY_HISTORY_H_

#include <vector>

#include "platform/time_stamp.h"
#include "shared/profile/library_timeline.h"

namespace strata {
namespace base_internal {

// Records what changed in the loaded libraries since the last call (nothing when no session
// is running).
void NoteLibrariesMayChange();

// Every library mapped at some time since `since` (the session's start), the ones mapped
// now included: for the capture.
std::vector<profile::LibraryLifetime> LibraryHistorySince(TimeStamp since);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_LIBRARY_HISTORY_H_
