// Multi-process profiling with the full tier: one session across a process tree, one global
// memory limit, one profile (docs/ipc.md).
//
// The parent (the process whose profile you save) listens on a Unix socket in a private
// directory; the programs it spawns find it through the STRATA_IPC_PARENT environment
// variable. A child whose full tier starts (StartFull) with that variable set connects,
// says who it is, and from then on follows the parent's session: start, stop, pause,
// resume and settings. While the session runs, the parent keeps the buffer memory of all
// processes together under one limit by destroying the oldest released chunk of the tree.
// When the parent captures its profile (ProfilerSaveProfile, ProfilerGetProfile, or at exit
// with STRATA_SHUTDOWN), it gathers every child's profile in parallel and writes them under
// "processes", with the profiles of children that already ended ("exit profiles"), and
// tells in "profileGatheringLog" what became of each child. The gathering is the full
// tier's, so a process listens only while the full tier is in charge (after StartFull,
// before ShutdownFull, which stops listening): without it StartIpcParent refuses (false, and
// a log line), and SpawnProfiledChild spawns without profiling.
//
//   // Parent:
//   strata::full::StartFull();
//   strata::full::StartIpcParent();                  // or let SpawnProfiledChild() do it
//   pid_t pid;
//   strata::full::SpawnProfiledChild(&pid, "/usr/bin/worker", argv);
//   ...
//   strata::ProfilerSaveProfile("tree.json");        // the parent and its children
//
//   // Child (linking the full tier): nothing to do beyond StartFull().
//
// Programs that spawn their own way add IpcChildEnvironmentEntry() to the child's
// environment (or use IpcChildEnvironment()). A child passes on the parent it follows, so
// grandchildren join the same tree.
//
// A child made by fork() (without exec) is in no tree: StartIpcParent fails, the environment
// entry is "", SpawnProfiledChild spawns without profiling, the status is empty.
//
// Thread safety: every function is thread-safe. Async-signal safety: none.
#ifndef STRATA_FULL_MULTIPROCESS_H_
#define STRATA_FULL_MULTIPROCESS_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata {
namespace full {

// The variable that tells a spawned program where the parent listens.
inline constexpr const char kIpcParentVariable[] = "STRATA_IPC_PARENT";

struct IpcSettings {
  // The limit on the buffer memory of the whole tree; 0: the parent's session buffer size
  // (ProfilerSettings::buffer_megabytes), and 64 MiB while the parent has no session.
  size_t global_limit_bytes = 0;
  // How often the parent asks children that have not sent their profile yet how far they
  // are. Two polls in a row with no progress anywhere end the gathering without them; the
  // first poll never counts, so a stalled child holds a save up for about 3 intervals.
  double gather_poll_interval_ms = 1000;
  // Gathering never takes longer than this, progress or not.
  double gather_timeout_ms = 120000;
  // The largest profile a child may send.
  size_t max_profile_bytes = 256u << 20;
  // A connection that has not said Hello after this long is closed.
  double hello_timeout_ms = 5000;
};

// Starts listening for children (idempotent; later settings are ignored). False with
// *error when the full tier is not in charge (call StartFull first; also logged), or when the
// private directory or the socket cannot be made.
bool StartIpcParent(const IpcSettings& settings = IpcSettings(), std::string* error = nullptr);

// "STRATA_IPC_PARENT=<socket>" for a program to spawn into this session: this process's
// socket when it is a parent, the parent it follows when it is a child, "" otherwise.
std::string IpcChildEnvironmentEntry();
// `envp` (null: this process's environment) with that entry in place of any
// STRATA_IPC_PARENT it had.
std::vector<std::string> IpcChildEnvironment(char* const envp[] = nullptr);
// posix_spawn() of `path` with `argv` and IpcChildEnvironment(envp); starts listening first
// if this process is neither a parent nor a child. Returns 0 and *pid, or posix_spawn's
// errno value. Profiling is best effort: when listening fails (the full tier is not in
// charge, or no socket) the child is still spawned, without STRATA_IPC_PARENT (so it is not
// in the profile), the reason is logged, and the call returns 0; check
// IpcChildEnvironmentEntry() != "" or GetIpcStatus().parent.
int SpawnProfiledChild(pid_t* pid, const char* path, char* const argv[],
                       char* const envp[] = nullptr);

// A child: true once it follows its parent's session.
bool IpcChildFollowsParent();

struct IpcStatus {
  bool parent = false;        // Listening for children.
  bool child = false;         // Connected to a parent.
  std::string socket_path;    // Where children connect (parent), or the parent's (child).
  size_t children = 0;        // Connected children that said Hello.
  size_t exit_profiles = 0;   // Exit profiles held (not expired).
  // The global controller (parent).
  size_t global_limit_bytes = 0;
  size_t tracked_bytes = 0;      // Buffer memory of the tree as the last updates tell.
  size_t max_tracked_bytes = 0;
  // The same without the chunks of late owners (asked to destroy them, silent past
  // late_after: docs/ipc.md, "Limits of the bound"), and how many chunks came to be late.
  size_t max_tracked_bytes_on_time = 0;
  uint64_t late_chunks = 0;
  uint64_t updates = 0;          // Chunk-manager updates handled (own and children's).
  uint64_t destroy_requests = 0;
  uint64_t chunks_destroyed = 0;  // Chunks given up on the controller's request.
  // From a destroy decision to the owner's update that shows the chunk gone.
  double destroy_latency_mean_ms = 0;
  double destroy_latency_max_ms = 0;
  uint64_t refused_connections = 0;  // Other uid, no Hello, too many.
  uint64_t closed_connections = 0;   // Malformed or unexpected messages.
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  std::vector<std::string> events;  // The last IPC events (connections, refusals, ...).
};
IpcStatus GetIpcStatus();

}  // namespace full
}  // namespace strata

#endif  // STRATA_FULL_MULTIPROCESS_H_
