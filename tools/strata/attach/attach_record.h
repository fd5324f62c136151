// `strata record -p PID[,PID...]`: profiles running processes without restarting them
// (docs/attach.md, issue 36).
//
// For each process: CheckTarget's refusals (exit 1), then InjectAndStart (injector.h) loads
// libstrata_base.so there and starts an attach session that saves to a private directory
// (mkdtemp, owned by the process's user so that it can write there, seen through
// /proc/PID/root: a process in another mount namespace writes into its own /tmp). Then it
// waits: Ctrl-C (SIGINT, SIGTERM, SIGHUP: never forwarded to the processes), --duration, or
// the end of every process. Each running process is asked to save and stop (a word written
// into it, injector.h's WriteTargetWord); a process that exited saved at its exit; one killed
// is recovered from its flight recorder file. The profiles are merged, symbolicated and
// written as `strata record -- CMD` does. The processes keep running, as they were.
//
// Thread safety: changes the signal mask; call once, from main.
#ifndef STRATA_TOOLS_STRATA_ATTACH_ATTACH_RECORD_H_
#define STRATA_TOOLS_STRATA_ATTACH_ATTACH_RECORD_H_

#include <string>

#include "tools/strata/record.h"

namespace strata {
namespace cli {

// `pids`: "PID[,PID...]" as given to -p. `options.command` must be empty. Returns the exit
// status of `strata`: 0 written, 1 refused or nothing saved, 2 usage.
int AttachRecord(const std::string& pids, const RecordOptions& options);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_ATTACH_ATTACH_RECORD_H_
