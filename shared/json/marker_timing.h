// When a marker happened: its phase and time stamps, as the Gecko format's markers table
// stores them (phase 0 instant, 1 interval, 2 interval start, 3 interval end). Used by the
// tiers' marker APIs and by the profile writer.
//
// Thread safety: value types. Async-signal safety: yes.
#ifndef STRATA_SHARED_JSON_MARKER_TIMING_H_
#define STRATA_SHARED_JSON_MARKER_TIMING_H_

#include <cstdint>

#include "platform/time_stamp.h"

namespace strata {

enum class MarkerPhase : uint8_t {
  kInstant = 0,        // startTime = time, endTime = null.
  kInterval = 1,       // startTime, endTime.
  kIntervalStart = 2,  // startTime, endTime = null; closed by the next End of the same name.
  kIntervalEnd = 3,    // startTime = null, endTime.
};

struct MarkerTiming {
  MarkerPhase phase = MarkerPhase::kInstant;
  TimeStamp start;
  TimeStamp end;
  static MarkerTiming Instant(TimeStamp t) { return {MarkerPhase::kInstant, t, TimeStamp()}; }
  static MarkerTiming Interval(TimeStamp s, TimeStamp e) { return {MarkerPhase::kInterval, s, e}; }
  static MarkerTiming IntervalStart(TimeStamp s) {
    return {MarkerPhase::kIntervalStart, s, TimeStamp()};
  }
  static MarkerTiming IntervalEnd(TimeStamp e) {
    return {MarkerPhase::kIntervalEnd, TimeStamp(), e};
  }
};

}  // namespace strata

#endif  // STRATA_SHARED_JSON_MARKER_TIMING_H_
