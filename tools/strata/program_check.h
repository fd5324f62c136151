// Whether `strata record` can enter a program at all (issue 34: a static binary was run,
// nothing was saved, and record said so only in passing and exited 0).
//
// Strata enters a recorded program through LD_PRELOAD, which only the dynamic loader reads:
// a statically linked executable (no PT_INTERP) never loads libstrata_base.so, and the
// loader ignores LD_PRELOAD paths in a secure-execution program (set-user-ID or
// set-group-ID to another user or group than the caller's). Such a program is refused
// before it runs, with the reason. Scripts and programs that cannot be read are left to
// run: what they start is decided later (and a run that saves nothing is an error).
//
// Thread safety: thread-compatible (reads files; no shared state).
#ifndef STRATA_TOOLS_STRATA_PROGRAM_CHECK_H_
#define STRATA_TOOLS_STRATA_PROGRAM_CHECK_H_

#include <set>
#include <string>
#include <vector>

namespace strata {

// The executable `command` names, found as execvp finds it (a name without '/' through
// PATH); "" when none is found.
std::string ResolveCommand(const std::string& command);

// Why Strata's library cannot be loaded into the program at `path` ("statically linked",
// "set-user-ID root"...), or "" when it can (or when it cannot tell: not an ELF file,
// unreadable).
std::string WhyStrataCannotEnter(const std::string& path);

// A program started inside a recorded tree that Strata could not enter (issue 34): the
// process `pid` ran `path` (as noted: a name is looked up in PATH) and saved no profile.
struct NotEnteredProgram {
  int pid = 0;
  std::string path;
  std::string reason;  // As WhyStrataCannotEnter says, or that LD_PRELOAD was cleared.
};

// From the notes that the base tier's exec and posix_spawn wrappers left in a record's
// `directory` (<pid>.exec: base/internal/process/exec_notes.h), the programs of processes
// without a profile (not in `saved_pids`) that Strata could not enter, by pid.
std::vector<NotEnteredProgram> NotEnteredPrograms(const std::string& directory,
                                                  const std::set<int>& saved_pids);

}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_PROGRAM_CHECK_H_
