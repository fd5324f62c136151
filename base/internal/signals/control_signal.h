// The control signal (STRATA_SIGNAL, for daemons; gperftools' CPUPROFILESIGNAL): each
// instance of the chosen signal sent to the process toggles the session. Out of session it
// starts one (with the STRATA_STARTUP_* settings); in session it saves the profile to a new
// numbered file and stops. See docs/env-vars.md, "Daemons".
//
// How (control_signal.cc):
//   - The handler only counts the request (an atomic add) and wakes the control thread (a
//     futex wake): no lock, no allocation, no descriptor. The work (start, save, stop) runs
//     on the control thread "StrataControl", a thread of the profiler (CreateProfilerThread:
//     never registered, never sampled, not in the profile, every signal blocked).
//   - Files: <path>-N.json for the Nth save (N counts up from 1, skipping names that exist),
//     <path> being the process's STRATA_SHUTDOWN path (%p expanded) or, without it,
//     $TMPDIR/strata-<pid>.json (/tmp without TMPDIR). A session still running at exit is
//     saved by the usual exit save (preload.cc) to the next such file: while the control is
//     on, ShutdownPath() always names the next free numbered file.
//   - The program's own handler: the control is only installed when the signal's disposition
//     is SIG_DFL at load (a handler or SIG_IGN is left alone, and said on stderr). When the
//     program later sets SIG_DFL, that is recorded (the control stays); when it sets a handler
//     or SIG_IGN, its action goes to the kernel and the control is off for good (said on
//     stderr by the control thread): the program keeps its signal. `oldact` reports SIG_DFL
//     while the control is on, never Strata's handler.
//   - fork() without exec: the child gets the program's action (SIG_DFL) back; it has no
//     control thread.
//
// Thread safety: StartControlSignal once, at load, before the session starts (so that the
// sampling signal is never chosen equal to it). The rest is thread-safe.
// Async-signal safety: HandleProgramControlSignalAction and ControlSignal are (atomics and
// the real sigaction only): the interposers call them, from any context.
#ifndef STRATA_BASE_INTERNAL_CONTROL_SIGNAL_H_
#define STRATA_BASE_INTERNAL_CONTROL_SIGNAL_H_

#include <signal.h>

#include <string>

#include "base/profiler.h"

namespace strata {
namespace base_internal {

// Installs the control for `signal_number` (0: nothing) and starts the control thread.
// `settings` are those of the sessions it starts; `shutdown_path` is the process's
// STRATA_SHUTDOWN path (unexpanded, empty when not set). Problems are reported on stderr
// and leave the program without a control signal.
void StartControlSignal(int signal_number, const ProfilerSettings& settings,
                        const std::string& shutdown_path);

// The installed control signal, or 0.
int ControlSignal();

// For the sigaction/signal interposers (signal_interposers.cc). When `signal_number` is the
// installed control signal, serves the program's call as the header comment says, stores
// sigaction's return value in *result (errno set on failure) and returns true; otherwise
// returns false and does nothing.
bool HandleProgramControlSignalAction(int signal_number, const struct sigaction* action,
                                      struct sigaction* old_action, int* result);

// `path` with "-<number>" inserted before a final ".json" (else appended). Pure.
std::string NumberedProfilePath(const std::string& path, int number);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_CONTROL_SIGNAL_H_
