// `strata recover`: a Gecko profile from what a flight recorder file holds (flight_reader.h),
// written by the same capture as a normal save (shared/profile/profile_capture.h).
//
// The entries are read back untrusted: a string literal the dead process recorded by address
// (marker and label names) is read from the library file mapped at that address (the
// metadata's library list; file offsets from the ELF program headers); one that cannot be read
// shows as '?' characters. Typed markers of the program's own types keep their type name and
// times; their fields, which only the program's code could decode, are left out.
// A marker at the last time stamp tells where and why the data ends: "Recording ended" (the
// session ended normally, or the file was read from a session that goes on: `live`), else
// "Process crashed" with the reason given (e.g. the signal the caller learnt from the
// process's wait status), or "ended without saving" when unknown.
//
// Thread safety: one call at a time per FlightContents. Async-signal safety: no.
#ifndef STRATA_SHARED_FLIGHT_FLIGHT_RECOVERY_H_
#define STRATA_SHARED_FLIGHT_FLIGHT_RECOVERY_H_

#include <string>

#include "shared/flight/flight_reader.h"
#include "shared/json/json_writer.h"

namespace strata {
namespace flight {

struct RecoveryOptions {
  // Names native frames from the libraries' ELF symbol tables (as a normal save does);
  // false: raw addresses, for a symbolicator run afterwards (`strata record`).
  bool symbolicate = true;
  // Why the process ended, when the caller knows (e.g. "killed by SIGKILL"); "" : from the
  // file (a clean end, or unknown).
  std::string end_reason;
  // True: the caller knows the process died (a signal, or no normal save).
  bool crashed = false;
  // True: the file was read while its session ran (`strata record -p` joining a running
  // session): the data ends where the reading was made, not at a crash.
  bool live = false;
};

// What the profile's end marker says, for messages.
std::string EndMarkerName(const FlightContents& contents, const RecoveryOptions& options);

// Writes the profile. False with *error on a writer error or when the file holds no session.
bool WriteRecoveredProfile(const FlightContents& contents, const RecoveryOptions& options,
                           JsonWriter& out, std::string* error, size_t* samples_found = nullptr);

}  // namespace flight
}  // namespace strata

#endif  // STRATA_SHARED_FLIGHT_FLIGHT_RECOVERY_H_
