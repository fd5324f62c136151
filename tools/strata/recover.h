// `strata recover FILE [-o OUT]`: the profile a process left in its flight recorder file
// (STRATA_FLIGHT_RECORDER, docs/flight-recorder.md) when it crashed or was killed.
// The reading is in shared/flight; this is the command and what `strata record` calls for a
// process that died without saving.
//
// Thread safety: not thread-safe (one command per process). Async-signal safety: no.
#ifndef STRATA_TOOLS_STRATA_RECOVER_H_
#define STRATA_TOOLS_STRATA_RECOVER_H_

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <string>

#include "shared/flight/flight_recovery.h"

namespace strata {
namespace cli {

struct RecoverOptions {
  std::string input;
  std::string output;  // "": FILE with .flight replaced by .json.
  bool raw = false;    // Raw addresses (no symbolication).
  std::string reason;  // The end marker's text ("killed by SIGSEGV"...); "": from the file.
  bool quiet = false;
};

// The command: 0 when a profile was written (also when parts of the file were damaged: they
// are reported), 1 when nothing could be recovered.
int RunRecover(const RecoverOptions& options);

// Recovers `flight_path` into the profile `json_path` (written atomically). On success
// *summary says what was found ("N samples, M chunks; ...").
bool RecoverFlightFile(const std::string& flight_path, const std::string& json_path,
                       const flight::RecoveryOptions& options, std::string* summary,
                       std::string* error);

// `strata record`'s step for the processes that ended without saving: of the flight recorder
// files left in `directory` (strata-<pid>-<start>.flight; a process that saved removed its
// own), the newest of each pid (by <start>: an exec or a new session leaves several, and only
// the last is the image that ended; the older ones are removed) is recovered into <pid>.json
// and removed, except for a process reaped by `strata record` (`reaped`: its wait statuses)
// that exited (_exit, as shells do: not a crash; the file is just removed). Marked "killed by
// SIGx" when the status says so; with no status, from the file: "Recording ended" after a
// clean end (ProfilerStop), else "ended without saving its profile (crashed or killed)".
// `symbolicate`: ELF names now (false when the merged profile is symbolicated later).
// Returns how many were recovered.
size_t RecoverUnsavedProcesses(const std::string& directory, const std::map<pid_t, int>& reaped,
                               bool symbolicate, bool quiet);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_RECOVER_H_
