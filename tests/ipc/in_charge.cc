// The full tier's own session and who gathers children (issue 35; full/full.h,
// full/multiprocess.h, docs/ipc.md "Children are gathered by the full tier"):
//
//   in_charge repeat   StartFull twice, strata_full_start while the full tier is in charge,
//       after StopFull, and after ShutdownFull + a base session: a repeated start says
//       "already in charge" (strata_full_start 2), never a takeover of the full tier's own
//       session; a real base session is still taken over.
//   in_charge listen   StartIpcParent without the full tier in charge (no session, then a
//       base session) is refused, with a reason and a log line, and listens to nothing;
//       SpawnProfiledChild then spawns without profiling; with the full tier in charge it
//       listens, and after ShutdownFull it refuses again.
//
// Prints "ok: ..." / "FAIL: ..." lines and "in_charge: ok" at the end when every check passed.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/profiler.h"
#include "full/full.h"
#include "full/multiprocess.h"

namespace {

int g_failures = 0;

void Check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) ++g_failures;
}

void Repeat() {
  using strata::full::StartFull;
  using strata::full::StartReport;
  // No session: the first start starts one.
  const StartReport first = StartFull();
  Check(!first.took_over_base_session && !first.already_in_charge && strata::ProfilerIsActive(),
        "the first StartFull starts a session (no takeover, not already in charge)");
  // Again, while the full tier's own session runs: nothing to take over.
  const StartReport second = StartFull();
  Check(second.already_in_charge, "a repeated StartFull says the full tier was already in charge");
  Check(!second.took_over_base_session,
        "a repeated StartFull reports no takeover of the full tier's own session");
  Check(strata::ProfilerIsActive(), "the session still runs");
  const int c_start = strata_full_start();
  Check(c_start == 2, "strata_full_start() while the full tier is in charge returns 2 (got " +
                          std::to_string(c_start) + ")");
  // After StopFull the full tier is still in charge: a start starts the next session.
  strata::full::StopFull();
  Check(!strata::ProfilerIsActive(), "StopFull stopped the session");
  const StartReport after_stop = StartFull();
  Check(after_stop.already_in_charge && !after_stop.took_over_base_session &&
            strata::ProfilerIsActive(),
        "StartFull after StopFull starts the next session, still in charge, no takeover");
  // Handed back to base: base's session runs, and the next StartFull does take it over.
  strata::full::ShutdownFull();
  Check(!strata::full::FullIsInCharge() && strata::ProfilerIsActive(),
        "after ShutdownFull base runs the session");
  const StartReport takeover = StartFull();
  Check(takeover.took_over_base_session && !takeover.already_in_charge,
        "StartFull takes over a base session (a real takeover is still reported)");
  strata::full::ShutdownFull();
  const int c_takeover = strata_full_start();
  Check(c_takeover == 0, "strata_full_start() over a base session returns 0 (got " +
                             std::to_string(c_takeover) + ")");
  const int c_again = strata_full_start();
  Check(c_again == 2, "... and 2 when called again (got " + std::to_string(c_again) + ")");
  strata::full::ShutdownFull();
  strata::ProfilerStop();
}

void Listen() {
  std::string error;
  // Neither the full tier nor a session.
  Check(!strata::full::StartIpcParent(strata::full::IpcSettings(), &error),
        "StartIpcParent without the full tier is refused");
  Check(error.find("StartFull") != std::string::npos,
        "... with a reason that names StartFull (\"" + error + "\")");
  Check(!strata::full::GetIpcStatus().parent && strata::full::IpcChildEnvironmentEntry().empty(),
        "... and nothing listens");
  // A base session, still without the full tier: children would follow it and never be
  // gathered.
  strata::ProfilerStart(strata::ProfilerSettings());
  error.clear();
  Check(!strata::full::StartIpcParent(strata::full::IpcSettings(), &error) && !error.empty() &&
            !strata::full::GetIpcStatus().parent,
        "StartIpcParent with a base session but without the full tier is refused");
  pid_t pid = 0;
  char program[] = "/bin/true";
  char* argv[] = {program, nullptr};
  const int spawned = strata::full::SpawnProfiledChild(&pid, program, argv);
  int status = -1;
  if (spawned == 0) waitpid(pid, &status, 0);
  Check(spawned == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "SpawnProfiledChild still spawns the child");
  Check(!strata::full::GetIpcStatus().parent, "... without listening (not profiled)");
  // The full tier in charge: it listens.
  strata::full::StartFull();
  error.clear();
  const bool listening = strata::full::StartIpcParent(strata::full::IpcSettings(), &error);
  Check(listening && strata::full::GetIpcStatus().parent,
        "with the full tier in charge StartIpcParent listens (" + error + ")");
  strata::full::ShutdownFull();
  Check(!strata::full::GetIpcStatus().parent, "ShutdownFull stops listening");
  error.clear();
  Check(!strata::full::StartIpcParent(strata::full::IpcSettings(), &error),
        "after ShutdownFull StartIpcParent is refused again");
  strata::ProfilerStop();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "repeat") {
    Repeat();
  } else if (mode == "listen") {
    Listen();
  } else {
    std::fprintf(stderr, "usage: in_charge repeat|listen\n");
    return 2;
  }
  if (g_failures == 0) {
    std::printf("in_charge: ok\n");
    return 0;
  }
  std::printf("in_charge: %d check(s) failed\n", g_failures);
  return 1;
}
