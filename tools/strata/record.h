// `strata record`: runs a command with the base tier preloaded into it and every process it
// starts, then merges the per-process profiles into one, symbolicates it and writes it.
//
//   1. A private temporary directory (mkdtemp, mode 0700) receives each process's profile,
//      saved at exit by libstrata_base.so (STRATA_SHUTDOWN=<dir>/%p.json).
//   2. The command runs with LD_PRELOAD=libstrata_base.so:libstrata_record.so (plus any
//      LD_PRELOAD it had), STRATA_STARTUP=1 and the sampling settings. libstrata_record.so
//      (record_hook.cc) saves the profile of a process killed by SIGINT/SIGTERM/SIGHUP
//      before letting it die by that signal, without changing what the program sees of its
//      signal dispositions, and implements --no-children.
//   3. `strata record` becomes a child subreaper (PR_SET_CHILD_SUBREAPER), so it waits for
//      the whole process tree, daemonised grandchildren included. SIGINT, SIGTERM and SIGHUP
//      sent to it by another process are forwarded to the command alone (to what is left of
//      the tree once the command has ended); a Ctrl-C from the terminal reaches the tree
//      directly. Processes the command leaves running get SIGTERM two seconds after the
//      first interrupt once it has ended (a shell's background jobs ignore SIGINT); a second
//      interrupt sends SIGTERM to the rest of the tree at once; a third kills the tree
//      (SIGKILL).
//   3b. A process that died without saving (its flight recorder file is left: a process
//      that saves removes it) is recovered from that file, marked as crashed with the signal
//      from its wait status when this process reaped it. One this process reaped that exited
//      (_exit, as shells do) is not recovered: it did not crash.
//   4. The profiles are merged (the command's own process is the parent; when it saved none,
//      e.g. a shell that ends with _exit, the earliest one is), raw addresses are
//      symbolicated with the DWARF symbolizer, and the file is written atomically (gzip
//      for ".gz").
//
// Thread safety: Record() changes the process's signal mask and subreaper flag; call it
// once, from main.
#ifndef STRATA_TOOLS_STRATA_RECORD_H_
#define STRATA_TOOLS_STRATA_RECORD_H_

#include <string>
#include <vector>

namespace strata {
namespace cli {

struct RecordOptions {
  std::string output = "strata-profile.json";
  double interval_ms = 0;  // 0: the base tier's default.
  std::string features;    // STRATA_STARTUP_FEATURES additions ("precise,-cpu").
  std::string filters;     // STRATA_STARTUP_FILTERS.
  int buffer_mb = 0;       // 0: default.
  bool children = true;    // Preload into every process the command starts.
  // --follow exec: only the command's own process, across the programs it execs (a shell
  // shim that ends in `exec python3`), not the processes it starts: they run unprofiled
  // (libstrata_record.so restores the caller's LD_PRELOAD in them) and any profile one still
  // saves is left out. Needs `children` (the exec'd image must be preloaded again).
  bool exec_only = false;
  bool symbolicate = true;  // Raw addresses + offline DWARF symbolication.
  // Then `strata view` the written profile (view.h) until Ctrl-C, before ending as the
  // command did. The file keeps its raw addresses: the front-end symbolicates them through
  // the view's symbol server (inline frames, file:line, the source view).
  bool view = false;
  int view_port = 3030;
  bool view_open_browser = true;
  std::string base_library;  // "" : found next to the strata binary.
  std::string hook_library;  // "" : found next to the strata binary.
  bool quiet = false;
  // Each process keeps its buffer in a flight recorder file in the temporary directory, so
  // that one that dies without saving (a crash, SIGKILL) is recovered into the profile,
  // marked "Process crashed" with the signal when known (docs/flight-recorder.md). Costs disk
  // space: each running process's buffer limit, reserved up front.
  bool flight_recorder = true;
  // > 0: after this many seconds the command is stopped as Ctrl-C stops it (SIGINT: every
  // process saves its profile); `strata record` then exits 0 when the command died of that
  // SIGINT, else with the command's status.
  double duration_seconds = 0;
  std::vector<std::string> command;
};

// When the command was killed by signal N, kills this process by N after writing the profile
// (the caller of `strata` sees what it would see running the command directly). Otherwise
// returns the exit status for `strata`: the command's exit status, also when no profile could
// be written (the error is on stderr); 127 (126) when it could not be started; 2 for a
// usage error before anything ran.
int Record(const RecordOptions& options);

// Where libstrata_base.so is: `explicit_path`, else $STRATA_BASE_LIB, else next to the
// strata binary in the Bazel output tree (../../base/) or an install tree (., ../lib).
// "" when not found.
std::string FindBaseLibrary(const std::string& explicit_path);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_RECORD_H_
