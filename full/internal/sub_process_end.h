// The range of a sub-process profile: its meta.startTime (epoch ms) plus its
// meta.profilingStartTime and profilingEndTime (ms from that start), read from the profile's
// JSON text by a SAX parse that stops at the end of the top-level "meta" object (the rest,
// usually megabytes of threads, is not read).
//
// Thread safety: reentrant. Not async-signal-safe (allocates).
#ifndef STRATA_FULL_INTERNAL_SUB_PROCESS_END_H_
#define STRATA_FULL_INTERNAL_SUB_PROCESS_END_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace strata {
namespace full {

struct EpochRangeNs {
  int64_t start = 0;
  int64_t end = 0;
};

// The profile's range in epoch nanoseconds; nullopt when the text has no top-level "meta"
// with a numeric "startTime", "profilingStartTime" and "profilingEndTime".
std::optional<EpochRangeNs> SubProcessProfileRangeEpochNs(std::string_view json);

}  // namespace full
}  // namespace strata

#endif  // STRATA_FULL_INTERNAL_SUB_PROCESS_END_H_
