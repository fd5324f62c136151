// The parent end of multi-process profiling (docs/ipc.md): listens for children, tells them
// the session, runs the global memory controller, gathers their profiles at capture and
// keeps the exit profiles of those that ended. Internal to the full tier: ipc.h is its
// interface (StartIpcParentImpl, RunningIpcParent, AdjustParentCapture...).
//
// One class in three files, by concept:
//   ipc_parent.cc           start and stop; the IPC thread's loop (descriptors, accept, read,
//                           send, close); the log and the events; the worker thread; the
//                           status; the entry points of ipc.h.
//   ipc_parent_messages.cc  what each child's message does; the session state children
//                           follow; the global controller's destroy requests and statistics.
//   ipc_parent_profiles.cc  children's profiles held by the parent: the budget (admission,
//                           room, drops), exit profiles' accounting and expiry, gathering at
//                           capture and its splice into the parent's profile.
//
// Threads (who owns what; each member's comment says it too):
//   IPC thread     poll() over the listening socket, every child's connection and a waker;
//                  owns the connections (children_), the GlobalController and the gathering
//                  in progress (gather_). It never takes the session lock, the registry lock
//                  or the buffer's lock (a capture may hold those for long): it cannot be
//                  stalled by the session.
//   worker thread  everything that needs the session: hooking the parent's own chunk
//                  manager (LocalManagerLink), destroying its chunks for the controller,
//                  reading the session's settings, expiring exit profiles.
//   capture thread (whoever saves the profile) asks for a gathering (BeginGather) and waits
//                  for it; the Gather it gets is its own to read once done.
//   any thread     Event() and Log(), FillStatus(), BeginGather().
// Shared state is under small mutexes, each held briefly and never two at once:
// session_mutex_ (the hooked session's facts: worker -> IPC thread), worker_mutex_ (requests
// to the worker), gather_mutex_ (requested gatherings), exits_mutex_ (exit profiles and
// drops), status_mutex_ (statistics, events, the log limiter).
//
// Ownership: an IpcParent is made by StartIpcParentImpl and never deleted: ShutdownIpcParent
// stops it (its threads may run during exit, and a capture may still hold its gathering).
//
// Thread safety: as above; the public members are thread-safe. Async-signal safety: none.
#ifndef STRATA_FULL_INTERNAL_IPC_PARENT_H_
#define STRATA_FULL_INTERNAL_IPC_PARENT_H_

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/profiler.h"
#include "full/internal/ipc_guards.h"
#include "full/internal/ipc_link.h"
#include "full/ipc/global_controller.h"
#include "full/ipc/messages.h"
#include "full/ipc/transport.h"
#include "full/multiprocess.h"
#include "platform/private_fd.h"
#include "platform/time_stamp.h"

namespace strata {
namespace full {

// A child's exit profile kept by the parent (IpcParent::exits_, under exits_mutex_; copied
// into a gathering).
struct ExitRecord {
  ProcessId pid;
  std::string name;
  TimeStamp end_time;
  TimeStamp received_at;
  std::shared_ptr<const std::string> profile;
  // The parent buffer's end when it arrived (0: not stamped yet). Once the parent's buffer
  // no longer holds anything that old, the exit profile is older than all data kept: gone.
  BufferIndex parent_index = 0;
};

// A child's profile the parent did not keep (over the memory budget).
struct DroppedProfile {
  ProcessId pid;
  std::string name;
  std::string what;  // "exit profile" or "gathered profile".
  size_t bytes = 0;
  std::string reason;
  TimeStamp at;
};

enum class Outcome { kPending, kGathered, kFailed, kStalled, kDisconnected, kDropped };
const char* OutcomeName(Outcome o);

struct GatherChild {
  uint64_t connection = 0;
  ProcessId pid;
  std::string name;
  Outcome outcome = Outcome::kPending;
  uint32_t progress = 0;
  std::string location;
  std::string profile;  // Gathered JSON.
  std::string error;
  TimeDuration capture_time;
  TimeDuration reply_after;  // From the gathering's start.
  size_t bytes = 0;
};

// One gathering: filled by the IPC thread, then handed to the capture thread (MarkDone() then
// Wait(): the IPC thread touches it no more after MarkDone, the capture owns it after Wait).
// Shared (shared_ptr) by the IpcParent that runs it and the capture that waits for it.
class Gather {
 public:
  explicit Gather(uint64_t id) : id(id) {}
  const uint64_t id;
  TimeStamp started;
  TimeStamp finished;
  double poll_interval_ms = 0;
  int polls = 0;
  bool ended_by_stall = false;
  std::vector<GatherChild> children;
  std::vector<ExitRecord> exit_profiles;
  std::vector<std::string> events;
  std::vector<DroppedProfile> dropped;  // The last IpcParent::kMaxDroppedListed.
  uint64_t dropped_count = 0;           // Since the session started.
  size_t profile_budget_bytes = 0;

  void MarkDone() {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return done_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
};

class IpcParent {
 public:
  // Limits (docs/ipc.md, "Limits on what peers can do").
  // Accepted per round of the IPC loop (the others wait in the backlog for the next round).
  static constexpr int kAcceptsPerRound = 64;
  // Log lines peers can cause: a burst, then a count.
  static constexpr int kLogBurst = 40;
  static constexpr TimeDuration kLogWindow = TimeDuration::FromMilliseconds(10000);
  // Frames above this wait for the budget's admission (every profile above it).
  static constexpr uint32_t kAdmissionAboveBytes = 64 * 1024;
  // Dropped profiles listed in the gathering log (the count covers them all).
  static constexpr size_t kMaxDroppedListed = 64;
  // A child that does not read what we send (stopped, stuck) is dropped beyond this.
  static constexpr size_t kMaxQueuedBytes = 4u << 20;
  static constexpr size_t kMaxEvents = 256;
  using GlobalController = ipc::GlobalController;
  static constexpr GlobalController::ProcessKey kLocalKey = 0;
  // The exit profiles held by the parent, counted as one more "process" of the tree.
  static constexpr GlobalController::ProcessKey kExitProfilesKey = UINT64_MAX;

  explicit IpcParent(const IpcSettings& settings)
      : settings_(settings),
        epoch_offset_ns_(ReadEpochOffsetNs()),
        link_([this] { waker_.Wake(); }),
        controller_(settings.global_limit_bytes ? settings.global_limit_bytes : 64u << 20,
                    [this](GlobalController::ProcessKey key, TimeStamp done) {
                      OnDestroyDecision(key, done);
                    }) {
    limits_.profile_bytes = static_cast<uint32_t>(
        std::min<size_t>(settings.max_profile_bytes, UINT32_MAX));
    limits_.admission_above_bytes = kAdmissionAboveBytes;
  }

  bool Start(std::string* error);
  void Shutdown();
  std::shared_ptr<Gather> BeginGather();
  int64_t epoch_offset_ns() const { return epoch_offset_ns_; }
  const std::string& socket_path() const { return socket_path_; }
  // Unlinks the socket and removes the private directory; connections stay up.
  void RemoveSocketPath() { directory_.Remove(); }
  void FillStatus(IpcStatus* status);

 private:
  struct Child {
    uint64_t id = 0;
    std::unique_ptr<ipc::Connection> connection;
    ipc::PeerCredentials peer;
    TimeStamp connected_at;
    bool ready = false;  // Said Hello.
    // Said Hello while the worker had not yet hooked the running session: the session state
    // is sent once it has (AnswerWaitingHellos), so that the child starts the right session.
    bool awaiting_state = false;
    ProcessId pid;
    std::string name;
    bool update_requested = false;
    bool sent_exit_profile = false;
    bool exit_profile_dropped = false;
    bool sent_final = false;
    size_t admitted_bytes = 0;  // Of the frame being received, counted in the budget.
    bool closed_noted = false;  // CloseChild() ran.
  };

  // IPC thread.
  void IpcThreadMain();
  void AcceptAll();
  void EndAcceptEpisode(TimeStamp now);
  void NoteRefusal(const std::string& why);
  bool CheckDescriptors();
  void ReadFrom(Child& child);
  // Profiles held in the parent, against the budget (half the global limit).
  size_t ProfileBudgetBytes() const { return controller_.limit_bytes() / 2; }
  // Profiles of a gathering are the children's live data (bounded by the limit in binary
  // form, larger as JSON) and held only during a capture: a looser bound.
  size_t GatherBudgetBytes() const {
    return std::max<size_t>(4 * controller_.limit_bytes(), size_t{64} << 20);
  }
  void Admit(Child& child, ipc::MessageType type, size_t frame_bytes);
  bool MakeRoomFor(const Child& child, const char* what, size_t bytes);
  void RecordDrop(const Child& child, const char* what, size_t bytes, const std::string& reason);
  void SyncExitProfileAccounting();
  void HandleMessage(Child& child, ipc::Message&& message);
  void Send(Child& child, const ipc::Message& message);
  void CloseChild(Child& child, const std::string& why, bool is_error);
  std::string Describe(const Child& child) const;
  ipc::SessionState CurrentSessionState();
  // True when CurrentSessionState() describes the session running now: no session, or the
  // worker has hooked it (its generation and settings are published). IPC thread.
  bool SessionStateSettled();
  // Sends the session state to the children waiting for it once it is settled (IPC thread).
  void AnswerWaitingHellos();
  void BroadcastSessionState();
  void HandleLocalUpdates();
  void OnDestroyDecision(GlobalController::ProcessKey key, TimeStamp done);
  void NoteDestroyDone(GlobalController::ProcessKey key,
                       const ControlledChunkManager::Update& update);
  void StartRequestedGather();
  void GatherTick();
  void CheckGatherDone();
  void CompleteGather();
  void SyncStats();
  // Worker thread.
  void WorkerMain();
  void ExpireExitProfiles();
  // Any thread.
  void Event(bool error, const std::string& text);
  // A log line peers can cause, not kept as an event: rate-limited with the events' lines.
  void Log(bool error, const std::string& text);
  // The count of lines the limiter held back, once their window is over and no later line
  // carried it (IPC thread, every round).
  void ReportSuppressedLines();

  const IpcSettings settings_;
  const int64_t epoch_offset_ns_;
  ipc::FrameLimits limits_;
  ipc::Waker waker_;
  LocalManagerLink link_;
  ipc::PrivateDirectory directory_;
  std::string socket_path_;
  PrivateDescriptor listen_;  // IPC thread after Start(); closed by Shutdown() after the join.
  bool listen_lost_ = false;
  const ConnectionCaps caps_ = ComputeConnectionCaps();
  pthread_t ipc_thread_{};
  pthread_t worker_thread_{};
  bool ipc_thread_started_ = false;
  bool worker_thread_started_ = false;
  bool shut_down_ = false;  // Shutdown() ran (callers: under g_parent_mutex, or once).
  std::atomic<bool> stop_{false};
  const TimeStamp start_time_ = TimeStamp::Now();

  // IPC thread only.
  GlobalController controller_;
  AcceptBackoff accept_backoff_;
  std::string accept_error_;       // Of the episode in progress.
  uint64_t refusals_in_episode_ = 0;
  TimeStamp refusal_episode_last_;
  size_t gathered_bytes_ = 0;      // Profiles of the gathering in progress.
  size_t admitted_bytes_ = 0;      // Frames admitted and being received.
  size_t reported_exit_bytes_ = 0;  // What the controller was last told.
  std::map<uint64_t, Child> children_;
  uint64_t next_child_id_ = 1;
  uint64_t last_generation_ = 0;
  std::optional<std::tuple<bool, bool, uint64_t>> last_broadcast_;
  std::shared_ptr<Gather> gather_;
  TimeStamp next_gather_poll_;
  bool gather_first_tick_ = false;
  bool gather_progressed_ = false;
  int gather_stalls_ = 0;
  // Counted here, published by SyncStats() once per loop (no lock per message).
  struct {
    uint64_t messages_sent = 0;
    uint64_t messages_received = 0;
    uint64_t refused_connections = 0;
    uint64_t closed_connections = 0;
  } counters_;
  // Destroy latency: from the decision to the owner's update without the chunk.
  std::map<GlobalController::ProcessKey, std::pair<TimeStamp, TimeStamp>> pending_destroys_;
  uint64_t destroy_latency_count_ = 0;
  double destroy_latency_sum_ms_ = 0;
  double destroy_latency_max_ms_ = 0;
  uint64_t closed_bytes_sent_ = 0;
  uint64_t closed_bytes_received_ = 0;

  // Session facts published by the worker, read by the IPC thread.
  std::mutex session_mutex_;
  uint64_t generation_ = 0;  // Sessions hooked so far.
  ProfilerSettings session_settings_;
  bool syncing_ = false;     // The worker is hooking a session (generation_ may be stale).

  // Worker requests.
  std::mutex worker_mutex_;
  std::condition_variable worker_cv_;
  TimeStamp local_destroy_;  // Destroy own chunks at or before (null: nothing to do).
  bool sync_requested_ = false;  // A child waits for the session state: hook now.

  // Gatherings asked by capture threads.
  std::mutex gather_mutex_;
  std::deque<std::shared_ptr<Gather>> requested_gathers_;
  uint64_t next_gather_id_ = 1;

  // Exit profiles (IPC thread adds, worker expires, gatherings copy).
  std::mutex exits_mutex_;
  std::vector<ExitRecord> exits_;   // Oldest first.
  std::deque<DroppedProfile> dropped_;
  uint64_t dropped_count_ = 0;

  // Status (read by GetIpcStatus()).
  std::mutex status_mutex_;
  IpcStatus stats_;
  std::deque<std::string> events_;
  LogRateLimiter log_limiter_{kLogBurst, kLogWindow};
};

}  // namespace full
}  // namespace strata

#endif  // STRATA_FULL_INTERNAL_IPC_PARENT_H_
