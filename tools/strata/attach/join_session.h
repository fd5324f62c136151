// Joining a Strata session that already runs in a process (issue 36): a process preloaded
// with STRATA_STARTUP=1, or attached by another `strata record -p`, is not loaded into twice.
// Its session keeps its buffer in a flight recorder file (docs/flight-recorder.md); `strata
// record -p` opens that file when it joins, and at the end of its window (Ctrl-C, --duration,
// the process's exit) reads it through the descriptor (the process may have removed the file
// meanwhile: a save at exit, a STRATA_SIGNAL toggle, the other strata's end), recovers the
// profile as `strata recover` does, and keeps the samples and markers of the window only.
// The process is not touched: no ptrace, no signal, no write.
//
// A session without a flight recorder file cannot be read from outside: refused (the caller
// learns it from strata_attach_start's "busy"); so is a file this strata cannot read (another
// Strata version's format).
//
// Thread safety: a RunningSession belongs to one thread. Async-signal safety: none.
#ifndef STRATA_TOOLS_STRATA_ATTACH_JOIN_SESSION_H_
#define STRATA_TOOLS_STRATA_ATTACH_JOIN_SESSION_H_

#include <sys/types.h>

#include <string>

#include "rapidjson/document.h"

namespace strata {
namespace attach {

// The flight recorder file of a session running in a process, opened.
class RunningSession {
 public:
  RunningSession() = default;
  ~RunningSession();
  RunningSession(const RunningSession&) = delete;
  RunningSession& operator=(const RunningSession&) = delete;

  // Looks in /proc/PID/maps for the flight recorder file of a session that runs (mapped, not
  // deleted, its header without a clean end; the newest when there are several) and opens it
  // through /proc/PID/root. Returns true when one was found and opened (the window starts
  // now); false with *refusal empty when there is none (no session, or one without a flight
  // recorder), false with *refusal set when the file cannot be read by this strata (with what
  // to do).
  bool Open(pid_t pid, std::string* refusal);

  // The window's profile: the file read now, recovered (`raw_addresses`: left for the
  // symbolicator, as `strata record` does), cut to [Open, now]. False with *error.
  bool ReadWindow(bool raw_addresses, rapidjson::Document* document, std::string* error);

  const std::string& path() const { return path_; }  // As the process sees it.

 private:
  int fd_ = -1;
  pid_t pid_ = 0;
  std::string path_;
  double window_start_epoch_ms_ = 0;
};

}  // namespace attach
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_ATTACH_JOIN_SESSION_H_
