// The libraries a process had mapped over a session, for resolving each sample's native
// addresses against the library that was mapped at that sample's time.
//
// A library can be dlclose'd and another one loaded at the same address later; symbolicated
// against the list of libraries at save time, the first one's samples would be named after
// the newcomer. The base tier records each library's lifetime (base/internal/
// library_history.h); from that history a LibraryTimeline makes the profile's `libs` list:
//   - where no lifetimes overlap in address (the usual case), every library at its own
//     address, unloaded ones included (their files are read by path to name them);
//   - of lifetimes that overlap in address, the most recently loaded keeps its real range
//     and each earlier one is "moved": listed at a synthetic range at or above
//     kSyntheticBase (no process maps anything there; x86-64 and AArch64 user space ends far
//     below), with its addresses in samples moved by the same amount. The lib-relative
//     address (address - (start - offset)), which the front-end, symbol servers and the
//     symbolizers use, is unchanged, so each moved frame resolves in its own library.
// AddressAt() gives the address to write for an address sampled at a time: the address
// itself unless it falls in a moved library's range and that library (rather than a later
// one at the same address) was mapped at that time.
//
// Thread safety: immutable after construction; const methods are thread-safe. Not
// async-signal-safe (construction allocates).
#ifndef STRATA_SHARED_PROFILE_LIBRARY_TIMELINE_H_
#define STRATA_SHARED_PROFILE_LIBRARY_TIMELINE_H_

#include <cstdint>
#include <vector>

#include "platform/time_stamp.h"
#include "shared/json/shared_libraries.h"

namespace strata {
namespace profile {

// One library's time in the process: mapped from `loaded` (null: from before anything was
// recorded) until `unloaded` (null: still mapped).
struct LibraryLifetime {
  SharedLibrary library;
  TimeStamp loaded;
  TimeStamp unloaded;
};

class LibraryTimeline {
 public:
  static constexpr uint64_t kSyntheticBase = uint64_t{0x4000000000000000};
  // The most earlier libraries moved to synthetic ranges (the latest loaded are kept).
  static constexpr size_t kMaxMovedLibraries = 64;

  // A timeline of the libraries loaded now only (CollectSharedLibraries()), no history.
  LibraryTimeline();
  explicit LibraryTimeline(std::vector<LibraryLifetime> lifetimes);

  // The profile's `libs`: sorted by start, non-overlapping (moved libraries last).
  const std::vector<SharedLibrary>& libs() const { return libs_; }
  // Whether any library was moved (AddressAt() is then not the identity).
  bool has_moved_libraries() const { return !moved_.empty(); }
  // The address to write and symbolicate for `address` sampled at `time`.
  uint64_t AddressAt(uint64_t address, TimeStamp time) const;

 private:
  struct Candidate {
    uint64_t start, end;  // Real range.
    TimeStamp loaded, unloaded;
    uint64_t shift;       // Added to move it (0: kept at its real address).
  };
  std::vector<SharedLibrary> libs_;
  // Every lifetime overlapping a moved one (the moved ones and the one kept at its address).
  std::vector<Candidate> contested_;
  std::vector<size_t> moved_;  // Indexes into contested_.
};

}  // namespace profile
}  // namespace strata

#endif  // STRATA_SHARED_PROFILE_LIBRARY_TIMELINE_H_
