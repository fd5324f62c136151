// `strata convert`: a profile as Chrome trace-event JSON, pprof or collapsed stacks. The
// weights (wall, cpu, samples) are those of function_stats.h.
//
// * Chrome trace (Trace Event Format, JSON object form; opens in ui.perfetto.dev and
//   chrome://tracing): per process and thread a name ("M" metadata events); the samples of
//   each thread as a stack chart of nested "B"/"E" slices (a frame is open from the sample
//   where it appears on the stack until the first sample where it does not; a gap of more
//   than max(100 ms, 20 intervals) without samples closes everything; with weight
//   cpu, a sample whose CPU delta is 0 closes everything too: the thread was off CPU);
//   interval markers as async "b"/"e" pairs (their own tracks; start/end-only markers paired
//   by name), instant markers as "i" events. Timestamps in µs from the parent process's start.
// * pprof: profile.proto (github.com/google/pprof/proto/profile.proto) encoded by hand and
//   gzipped. Sample types [samples/count, wall/nanoseconds, cpu/nanoseconds] (cpu only when
//   the profile has CPU deltas); default_sample_type the weight asked for (samples when cpu
//   is asked of a profile without CPU deltas); period_type cpu/nanoseconds (wall without CPU
//   deltas), period the interval. One Sample per distinct (thread, stack) with labels
//   "process", "pid", "thread", "thread_id"; one Location per distinct (function, line);
//   Functions with name and file. No Mappings (the profile is symbolic). The sum of the
//   "samples" values is the profile's sample count.
// * collapsed: flamegraph.pl's input, one line per distinct stack:
//   "process (pid);thread (tid);root;...;leaf VALUE", VALUE the sample count (weight
//   samples), or whole µs of wall or CPU time (lines that round to 0 are left out); counts
//   sum to the sample count (a sample without a stack counts under "process;thread"). ';' in
//   names becomes ':'.
//
// Thread safety: pure functions of the profile.
#ifndef STRATA_TOOLS_STRATA_CONVERT_H_
#define STRATA_TOOLS_STRATA_CONVERT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "tools/strata/function_stats.h"
#include "tools/strata/profile_model.h"

namespace strata {
namespace cli {

struct ConvertStats {
  size_t samples = 0;  // Samples converted.
  uint64_t bytes = 0;  // Bytes written (before compression for pprof and .gz outputs).
};

// In-memory forms (tests): the JSON text; the uncompressed protobuf; the collapsed text.
std::string ChromeTraceJson(const Profile& profile, Weight weight = Weight::kWall);
std::string PprofProtobuf(const Profile& profile, Weight weight = Weight::kWall);
std::string CollapsedStacks(const Profile& profile, Weight weight = Weight::kSamples);

// To files, atomically; ".gz" compresses the JSON and collapsed outputs; pprof is always
// gzipped. "-" writes to standard output.
bool WriteChromeTrace(const Profile& profile, Weight weight, const std::string& path, ConvertStats* stats,
                      std::string* error);
bool WritePprof(const Profile& profile, Weight weight, const std::string& path, ConvertStats* stats,
                std::string* error);
bool WriteCollapsed(const Profile& profile, Weight weight, const std::string& path, ConvertStats* stats,
                    std::string* error);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_CONVERT_H_
