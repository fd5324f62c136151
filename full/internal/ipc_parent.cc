// The parent end of multi-process profiling (docs/ipc.md): listens for children, tells them
// the session, runs the global memory controller, gathers their profiles at capture and
// keeps the exit profiles of those that ended.
//
// Threads:
//   IPC thread     poll() over the listening socket, every child's connection and a waker;
//                  owns the connections, the GlobalController and the gathering in
//                  progress. It never takes the session lock, the registry lock or the
//                  buffer's lock (a capture may hold those for long): it cannot be stalled by
//                  the session.
//   worker thread  everything that needs the session: hooking the parent's own chunk
//                  manager (LocalManagerLink), destroying its chunks for the controller,
//                  reading the session's settings, expiring exit profiles.
//   capture thread (whoever saves the profile) asks for a gathering and waits for it.
#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/internal/core.h"
#include "base/internal/log.h"
#include "base/internal/tier_extension.h"
#include "base/profiler.h"
#include "full/internal/ipc.h"
#include "full/internal/ipc_guards.h"
#include "full/internal/ipc_link.h"
#include "full/internal/sub_process_end.h"
#include "full/ipc/global_controller.h"
#include "full/ipc/messages.h"
#include "full/ipc/transport.h"
#include "platform/private_fd.h"
#include "rapidjson/reader.h"
#include "shared/json/gecko_profile_writer.h"
#include "shared/profile/profile_capture.h"

namespace strata {
namespace full {
namespace {

using base_internal::LogError;
using base_internal::LogInfo;

// Accepted per round of the IPC loop (the others wait in the backlog for the next round).
constexpr int kAcceptsPerRound = 64;
// Log lines peers can cause: a burst, then a count (docs/ipc.md).
constexpr int kLogBurst = 40;
constexpr TimeDuration kLogWindow = TimeDuration::FromMilliseconds(10000);
// Frames above this wait for the budget's admission (every profile above it).
constexpr uint32_t kAdmissionAboveBytes = 64 * 1024;
// Dropped profiles listed in the gathering log (the count covers them all).
constexpr size_t kMaxDroppedListed = 64;
// A child that does not read what we send (stopped, stuck) is dropped beyond this.
constexpr size_t kMaxQueuedBytes = 4u << 20;
constexpr size_t kMaxEvents = 256;
using ipc::GlobalController;
constexpr GlobalController::ProcessKey kLocalKey = 0;
// The exit profiles held by the parent, counted as one more "process" of the tree.
constexpr GlobalController::ProcessKey kExitProfilesKey = UINT64_MAX;

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
const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPending: return "pending";
    case Outcome::kGathered: return "gathered";
    case Outcome::kFailed: return "capture-failed";
    case Outcome::kStalled: return "stalled";
    case Outcome::kDisconnected: return "disconnected";
    case Outcome::kDropped: return "dropped";
  }
  return "?";
}

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

// Valid JSON (encoding included) whose top level is an object: safe to splice.
bool IsJsonObject(const std::string& json, std::string* why) {
  const size_t first = json.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || json[first] != '{') {
    *why = "not a JSON object";
    return false;
  }
  if (json.find('\0') != std::string::npos) {
    *why = "NUL byte in the JSON";
    return false;
  }
  rapidjson::Reader reader;
  rapidjson::BaseReaderHandler<> handler;
  rapidjson::StringStream stream(json.c_str());
  if (!reader.Parse<rapidjson::kParseValidateEncodingFlag>(stream, handler)) {
    *why = "invalid JSON at byte " + std::to_string(reader.GetErrorOffset());
    return false;
  }
  return true;
}

}  // namespace

// One gathering: filled by the IPC thread, read by the capture thread once done.
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
  std::vector<DroppedProfile> dropped;  // The last kMaxDroppedListed.
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

// --- Start and stop

bool IpcParent::Start(std::string* error) {
  if (!waker_.ok()) {
    if (error) *error = "eventfd failed";
    return false;
  }
  if (!directory_.Create(ipc::DefaultDirectoryBases(), error)) return false;
  socket_path_ = directory_.SocketPath();
  if (!listen_.Adopt(ipc::Listen(socket_path_, error))) return false;
  RegisterInheritedFd(listen_.UncheckedNumber());
  RegisterInheritedFd(waker_.fd());
  worker_thread_started_ =
      StartInternalThread(&worker_thread_, "StrataIpcWork", [this] { WorkerMain(); });
  ipc_thread_started_ = worker_thread_started_ &&
      StartInternalThread(&ipc_thread_, "StrataIpcParent", [this] { IpcThreadMain(); });
  if (!ipc_thread_started_) {
    if (error) *error = "cannot start the IPC threads";
    return false;  // The caller's Shutdown() stops the worker and closes everything.
  }
  Event(false, "listening on " + socket_path_);
  return true;
}

void IpcParent::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  stop_ = true;
  waker_.Wake();
  {
    std::lock_guard<std::mutex> lock(worker_mutex_);
    worker_cv_.notify_all();
  }
  if (ipc_thread_started_) pthread_join(ipc_thread_, nullptr);
  if (worker_thread_started_) pthread_join(worker_thread_, nullptr);
  link_.Unhook();  // No more wake-ups from the session's manager.
  if (!listen_.empty()) {
    UnregisterInheritedFd(listen_.UncheckedNumber());
    listen_.Close();
  }
  directory_.Remove();
  {
    // BeginGather() wakes under this lock after checking stop_: none can come after.
    std::lock_guard<std::mutex> lock(gather_mutex_);
    UnregisterInheritedFd(waker_.fd());
    waker_.Close();  // One eventfd per StartIpcParent, given back (it was kept before).
  }
}

void IpcParent::Event(bool error, const std::string& text) {
  Log(error, text);
  char stamp[32];
  snprintf(stamp, sizeof(stamp), "%.3f ms: ", (TimeStamp::Now() - start_time_).ToMilliseconds());
  std::lock_guard<std::mutex> lock(status_mutex_);
  events_.push_back(stamp + text);
  if (events_.size() > kMaxEvents) events_.pop_front();
}

void IpcParent::Log(bool error, const std::string& text) {
  // An informational line without STRATA_LOGGING is never printed: it neither uses up the
  // budget of the lines that are (errors) nor counts among those not shown.
  if (!error && !base_internal::LoggingEnabled()) return;
  uint64_t suppressed = 0;
  bool allowed;
  {
    std::lock_guard<std::mutex> lock(status_mutex_);
    allowed = log_limiter_.Allow(TimeStamp::Now(), &suppressed);
  }
  if (allowed) {
    // Peers cannot flood the program's stderr: a burst, then a count (docs/ipc.md).
    const std::string more =
        suppressed ? " (" + std::to_string(suppressed) + " earlier IPC lines not shown)" : "";
    if (error) {
      LogError("ipc: %s%s", text.c_str(), more.c_str());
    } else {
      LogInfo("ipc: %s%s", text.c_str(), more.c_str());
    }
  }
}

void IpcParent::ReportSuppressedLines() {
  uint64_t suppressed = 0;
  {
    std::lock_guard<std::mutex> lock(status_mutex_);
    if (!log_limiter_.TakeUnreported(TimeStamp::Now(), &suppressed)) return;
  }
  // An error line: those held back may have been errors (informational ones are only counted
  // with STRATA_LOGGING on), and this one is rare (one per window at most, counted in it).
  LogError("ipc: %llu IPC log line(s) not shown (at most %d lines per %.0f s)",
           static_cast<unsigned long long>(suppressed), kLogBurst, kLogWindow.ToMilliseconds() / 1000);
}

std::string IpcParent::Describe(const Child& child) const {
  if (!child.ready) return "peer pid " + std::to_string(child.peer.pid);
  return "child " + std::to_string(child.pid.ToNumber()) + " (" + child.name + ")";
}

// --- IPC thread

void IpcParent::IpcThreadMain() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stop_.load(std::memory_order_acquire)) {
    fds.clear();
    ids.clear();
    CheckDescriptors();
    const TimeStamp before_poll = TimeStamp::Now();
    // While accept() lacks descriptors or memory, the listening socket is left alone for a
    // while (it would say "readable" at once, forever): -1 makes poll() skip it.
    const bool poll_listener = !listen_.empty() && accept_backoff_.MayPoll(before_poll);
    fds.push_back({poll_listener ? listen_.UncheckedNumber() : -1, POLLIN, 0});
    fds.push_back({waker_.fd(), POLLIN, 0});
    for (auto& [id, child] : children_) {
      if (child.connection->closed()) continue;
      fds.push_back({child.connection->fd(),
                     static_cast<short>(POLLIN | (child.connection->WantsWrite() ? POLLOUT : 0)),
                     0});
      ids.push_back(id);
    }
    int timeout_ms = 20;
    if (!poll_listener && accept_backoff_.in_episode()) {
      timeout_ms = std::min(timeout_ms, accept_backoff_.MillisecondsUntilRetry(before_poll));
    }
    if (gather_) {
      const int64_t until = (next_gather_poll_ - TimeStamp::Now()).ToNanoseconds() / 1000000;
      timeout_ms = static_cast<int>(std::clamp<int64_t>(until, 0, timeout_ms));
    }
    poll(fds.data(), fds.size(), timeout_ms);
    if (fds[1].revents & POLLIN) waker_.Drain();
    if (poll_listener && (fds[0].revents & POLLIN)) AcceptAll();
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = children_.find(ids[i]);
      if (it == children_.end() || it->second.connection->closed()) continue;
      Child& child = it->second;
      const short revents = fds[i + 2].revents;
      if (revents & (POLLIN | POLLHUP | POLLERR)) ReadFrom(child);
      if (!child.connection->closed() && (revents & POLLOUT)) {
        std::string error;
        if (!child.connection->Flush(&error)) CloseChild(child, error, false);
      }
    }
    HandleLocalUpdates();
    SyncExitProfileAccounting();
    controller_.Tick();  // Destroy requests that take too long are made up for elsewhere.
    BroadcastSessionState();
    AnswerWaitingHellos();
    StartRequestedGather();
    GatherTick();
    // Hello timeouts, and the closed connections' removal.
    const TimeStamp now = TimeStamp::Now();
    for (auto it = children_.begin(); it != children_.end();) {
      Child& child = it->second;
      if (!child.ready && !child.connection->closed() &&
          (now - child.connected_at).ToMilliseconds() > settings_.hello_timeout_ms) {
        CloseChild(child, "no Hello within the time limit", true);
        ++counters_.refused_connections;
      }
      it = child.connection->closed() ? children_.erase(it) : std::next(it);
    }
    if (refusals_in_episode_ > 0 && (now - refusal_episode_last_).ToMilliseconds() > 1000) {
      Event(true, "refused " + std::to_string(refusals_in_episode_) +
                      " connection(s) in all beyond the connection caps");
      refusals_in_episode_ = 0;
    }
    ReportSuppressedLines();
    SyncStats();
  }
  // Shutting down: children see the connection close and carry on alone.
  for (auto& [id, child] : children_) {
    (void)id;
    if (!child.connection->closed()) CloseChild(child, "the parent stops listening", false);
  }
  children_.clear();
  if (gather_) CompleteGather();
  std::lock_guard<std::mutex> lock(gather_mutex_);
  for (auto& g : requested_gathers_) g->MarkDone();
  requested_gathers_.clear();
}

bool IpcParent::CheckDescriptors() {
  // The program may have closed our descriptors (close_range) and reopened its own files on
  // those numbers: what is not ours any more is forgotten, never polled, read or closed.
  if (!listen_.empty() && !listen_.IsStillOurs() && !listen_lost_) {
    listen_lost_ = true;
    Event(true, "the listening socket was closed by the program: no more children can join "
                "(the connected ones stay)");
  }
  if (waker_.ok() && !waker_.StillOurs()) {
    Event(true, "the wake-up descriptor was closed by the program: the IPC thread polls "
                "every 20 ms instead");
  }
  bool all_ours = true;
  for (auto& [id, child] : children_) {
    (void)id;
    if (child.connection->closed() || child.connection->StillOurs()) continue;
    all_ours = false;
    CloseChild(child, "its connection's descriptor was closed by the program", true);
  }
  return all_ours;
}

void IpcParent::NoteRefusal(const std::string& why) {
  ++counters_.refused_connections;
  refusal_episode_last_ = TimeStamp::Now();
  // One line per episode (the first); the count when it has been quiet for a second.
  if (refusals_in_episode_++ == 0) Event(true, why + " (further refusals are counted)");
}

void IpcParent::EndAcceptEpisode(TimeStamp now) {
  uint64_t failures = 0;
  TimeDuration length;
  if (accept_backoff_.OnRecovered(now, &failures, &length)) {
    char text[160];
    snprintf(text, sizeof(text), "accepting connections again after %llu failed accept(s) over %.0f ms",
             static_cast<unsigned long long>(failures), length.ToMilliseconds());
    Event(false, text);
  }
}

void IpcParent::AcceptAll() {
  const int listen_fd = listen_.Get();
  if (listen_fd < 0) return;
  for (int round = 0; round < kAcceptsPerRound; ++round) {
    ipc::PeerCredentials peer;
    std::string error;
    int accept_errno = 0;
    const int fd = ipc::Accept(listen_fd, &peer, &error, &accept_errno);
    const TimeStamp now = TimeStamp::Now();
    if (fd < 0) {
      if (error.empty()) {  // Nobody else waiting.
        EndAcceptEpisode(now);
        return;
      }
      if (ipc::IsResourceExhaustion(accept_errno)) {
        // The program's descriptors (or memory) come first: back off, 10 ms doubling to 1 s,
        // and say so once per episode.
        if (accept_backoff_.OnExhausted(now)) {
          accept_error_ = error;
          Event(true, "cannot accept connections (" + error +
                          "): waiting for the program to free descriptors, retrying 10 ms to 1 s "
                          "apart; waiting children may time out and profile alone");
        }
        return;
      }
      NoteRefusal("refused a connection: " + error);
      continue;
    }
    EndAcceptEpisode(now);
    size_t unready = 0;
    for (const auto& [id, c] : children_) {
      (void)id;
      if (!c.ready && !c.connection->closed()) ++unready;
    }
    const bool too_many = children_.size() >= caps_.total;
    if (too_many || unready >= caps_.unready) {
      close(fd);  // Just accepted: ours.
      NoteRefusal("refused peer pid " + std::to_string(peer.pid) + ": " +
                  (too_many ? "at the cap of " + std::to_string(caps_.total) + " connections"
                            : "at the cap of " + std::to_string(caps_.unready) +
                                  " connections without Hello") +
                  " (a process never gives more than an eighth of its descriptor limit to IPC)");
      continue;
    }
    Child& child = children_[next_child_id_];
    child.id = next_child_id_++;
    child.connection = std::make_unique<ipc::Connection>(fd, limits_);  // Moved high.
    RegisterInheritedFd(child.connection->number());
    child.peer = peer;
    child.connected_at = now;
    // Any process of the user can connect and close in a loop: limited like the events.
    Log(false, "connection from pid " + std::to_string(peer.pid));
  }
}

void IpcParent::ReadFrom(Child& child) {
  std::string error;
  const bool open = child.connection->ReadAvailable(&error);
  for (;;) {
    ipc::Message message;
    ipc::MessageType type;
    size_t bytes = 0;
    const ipc::FrameReader::Status status = child.connection->Next(&message, &type, &bytes);
    if (status == ipc::FrameReader::Status::kNeedMore) break;
    if (status == ipc::FrameReader::Status::kNeedsAdmission) {
      Admit(child, type, bytes);
      if (child.connection->closed()) return;
      continue;
    }
    if (status == ipc::FrameReader::Status::kMalformed) {
      CloseChild(child, "malformed message: " + child.connection->read_error(), true);
      ++counters_.closed_connections;
      return;
    }
    ++counters_.messages_received;
    HandleMessage(child, std::move(message));
    if (child.connection->closed()) return;
  }
  if (!open) {
    std::string why = error;
    if (child.exit_profile_dropped) {
      why += " (its exit profile was dropped: over the memory budget)";
    } else if (child.ready && !child.sent_exit_profile) {
      why += child.sent_final ? " (it left without a session: no exit profile)"
                              : " without an exit profile (killed, or exited without running "
                                "its exit handlers)";
    }
    CloseChild(child, why, false);
  }
}

// --- The budget for children's profiles held here (docs/ipc.md, "Exit profiles")

void IpcParent::Admit(Child& child, ipc::MessageType type, size_t frame_bytes) {
  ipc::FrameReader& reader = child.connection->reader();
  const size_t payload = frame_bytes - ipc::kFrameHeaderBytes;
  if (!child.ready) {
    CloseChild(child, std::string("expected Hello, got a ") + std::to_string(payload) +
                          "-byte " + ipc::MessageTypeName(type),
               true);
    ++counters_.closed_connections;
    return;
  }
  if (type == ipc::MessageType::kChunkManagerUpdate) {  // Within its 1 MiB cap: small.
    reader.Admit();
    return;
  }
  const char* what = type == ipc::MessageType::kExitProfile ? "exit profile" : "gathered profile";
  if (type == ipc::MessageType::kGatherProfileReply) {
    bool pending = false;
    if (gather_) {
      for (const GatherChild& g : gather_->children) {
        pending = pending || (g.connection == child.id && g.outcome == Outcome::kPending);
      }
    }
    if (!pending) {  // Late, or never asked for: it would be ignored; not even buffered.
      reader.Skip();
      return;
    }
  } else if (type != ipc::MessageType::kExitProfile) {
    CloseChild(child, std::string("a ") + std::to_string(payload) + "-byte " +
                          ipc::MessageTypeName(type) + " (only profiles are that large)",
               true);
    ++counters_.closed_connections;
    return;
  }
  if (!MakeRoomFor(child, what, payload)) {
    reader.Skip();  // Read and thrown away as it arrives: never held.
    if (type == ipc::MessageType::kExitProfile) child.exit_profile_dropped = true;
    if (gather_ && type == ipc::MessageType::kGatherProfileReply) {
      for (GatherChild& g : gather_->children) {
        if (g.connection != child.id || g.outcome != Outcome::kPending) continue;
        g.outcome = Outcome::kDropped;
        g.bytes = payload;
        g.error = "over the parent's memory budget for children's profiles";
        gather_progressed_ = true;
      }
      CheckGatherDone();
    }
    return;
  }
  reader.Admit();
  child.admitted_bytes = payload;
  admitted_bytes_ += payload;
}

bool IpcParent::MakeRoomFor(const Child& child, const char* what, size_t bytes) {
  const bool gathered = std::string(what) != "exit profile";
  const size_t budget = gathered ? GatherBudgetBytes() : ProfileBudgetBytes();
  std::vector<DroppedProfile> evicted;
  bool fits;
  {
    std::lock_guard<std::mutex> lock(exits_mutex_);
    std::vector<size_t> sizes;
    for (const ExitRecord& e : exits_) sizes.push_back(e.profile->size());
    const RoomDecision room =
        MakeRoom(sizes, (gathered ? gathered_bytes_ : 0) + admitted_bytes_, bytes, budget);
    fits = room.fits;
    for (size_t i = 0; i < room.drop_oldest; ++i) {
      const ExitRecord& e = exits_[i];
      evicted.push_back({e.pid, e.name, "exit profile", e.profile->size(),
                         "the oldest kept, dropped for a newer " + std::string(what) + " (" +
                             std::to_string(bytes) + " bytes of child " +
                             std::to_string(child.pid.ToNumber()) + ") under the budget of " +
                             std::to_string(budget) + " bytes",
                         TimeStamp::Now()});
    }
    exits_.erase(exits_.begin(), exits_.begin() + static_cast<ptrdiff_t>(room.drop_oldest));
  }
  for (const DroppedProfile& d : evicted) {
    Child owner;
    owner.ready = true;
    owner.pid = d.pid;
    owner.name = d.name;
    RecordDrop(owner, d.what.c_str(), d.bytes, d.reason);
  }
  if (!fits) {
    RecordDrop(child, what, bytes,
               bytes > budget
                   ? "larger than the budget for children's " + std::string(what) +
                         "s held by the parent (" + std::to_string(budget) + " bytes, from the "
                         "global limit of " + std::to_string(controller_.limit_bytes()) + ")"
                   : "the budget for children's profiles held by the parent (" +
                         std::to_string(budget) + " bytes) is taken by profiles being gathered");
  }
  return fits;
}

void IpcParent::RecordDrop(const Child& child, const char* what, size_t bytes,
                           const std::string& reason) {
  Event(true, std::string("dropped the ") + what + " of " + Describe(child) + " (" +
                  std::to_string(bytes) + " bytes): " + reason);
  std::lock_guard<std::mutex> lock(exits_mutex_);
  ++dropped_count_;
  dropped_.push_back({child.pid, child.name, what, bytes, reason, TimeStamp::Now()});
  if (dropped_.size() > kMaxDroppedListed) dropped_.pop_front();
}

void IpcParent::SyncExitProfileAccounting() {
  // The exit profiles held count against the one global limit, as a process of the tree
  // whose bytes the controller cannot destroy (the others' oldest chunks go instead).
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(exits_mutex_);
    for (const ExitRecord& e : exits_) bytes += e.profile->size();
  }
  if (bytes == reported_exit_bytes_) return;
  reported_exit_bytes_ = bytes;
  if (bytes == 0) {
    controller_.RemoveProcess(kExitProfilesKey);
  } else {
    controller_.HandleUpdate(kExitProfilesKey,
                             ControlledChunkManager::Update(bytes, 0, TimeStamp(), {}));
  }
}

void IpcParent::Send(Child& child, const ipc::Message& message) {
  if (child.connection->closed()) return;
  std::string error;
  if (!child.connection->Send(message, &error)) {
    CloseChild(child, error, false);
    return;
  }
  ++counters_.messages_sent;
  if (child.connection->queued_bytes() > kMaxQueuedBytes) {
    CloseChild(child,
               "it does not read its messages (" +
                   std::to_string(child.connection->queued_bytes()) + " bytes queued)",
               true);
  }
}

void IpcParent::CloseChild(Child& child, const std::string& why, bool is_error) {
  if (child.closed_noted) return;  // Once, also for a connection the program took away.
  child.closed_noted = true;
  closed_bytes_sent_ += child.connection->bytes_sent();
  closed_bytes_received_ += child.connection->bytes_received();
  UnregisterInheritedFd(child.connection->number());
  child.connection->Close();
  admitted_bytes_ -= std::min(admitted_bytes_, child.admitted_bytes);
  child.admitted_bytes = 0;
  controller_.RemoveProcess(child.id);
  pending_destroys_.erase(child.id);
  if (gather_) {
    for (GatherChild& g : gather_->children) {
      if (g.connection == child.id && g.outcome == Outcome::kPending) {
        g.outcome = Outcome::kDisconnected;
        g.error = why;
        gather_progressed_ = true;
      }
    }
    CheckGatherDone();
  }
  Event(is_error, (is_error ? "closed the connection of " : "connection closed: ") +
                      Describe(child) + ": " + why);
}

void IpcParent::HandleMessage(Child& child, ipc::Message&& message) {
  const ipc::MessageType type = ipc::TypeOf(message);
  auto violation = [&](const std::string& what) {
    CloseChild(child, what, true);
    ++counters_.closed_connections;
  };
  if (!child.ready) {
    if (type != ipc::MessageType::kHello) {
      violation(std::string("expected Hello, got ") + ipc::MessageTypeName(type));
      return;
    }
    ipc::Hello& hello = std::get<ipc::Hello>(message);
    child.ready = true;
    // The kernel's word for the pid; a child in another pid namespace says another number.
    child.pid = ProcessId::FromNumber(child.peer.pid);
    child.name = hello.name;
    Event(false, Describe(child) + " connected" +
                     (hello.pid.ToNumber() != child.peer.pid
                          ? " (calls itself pid " + std::to_string(hello.pid.ToNumber()) + ")"
                          : std::string()));
    // The child's StartFull() waits for this answer and starts the session it describes
    // (docs/ipc.md, "Sequences"): it must be the one running now. A session the worker has
    // not hooked yet (just started, or restarted) is hooked first: the worker is asked at once.
    if (!SessionStateSettled()) {
      child.awaiting_state = true;
      std::lock_guard<std::mutex> lock(worker_mutex_);
      sync_requested_ = true;
      worker_cv_.notify_all();
      return;
    }
    Send(child, CurrentSessionState());
    Send(child, ipc::AwaitNextChunkManagerUpdate{});
    child.update_requested = true;
    return;
  }
  switch (type) {
    case ipc::MessageType::kChunkManagerUpdate: {
      ControlledChunkManager::Update& update = std::get<ipc::ChunkManagerUpdate>(message).update;
      if (update.IsFinal()) {
        controller_.RemoveProcess(child.id);
        child.sent_final = true;
        child.update_requested = false;
        return;
      }
      if (!child.update_requested) {
        violation("an update nobody asked for");
        return;
      }
      NoteDestroyDone(child.id, update);
      std::string error;
      if (!controller_.HandleUpdate(child.id, std::move(update), &error)) {
        violation("inconsistent update: " + error);
        return;
      }
      // Ask for the next one at once: the child answers as soon as it has something.
      Send(child, ipc::AwaitNextChunkManagerUpdate{});
      return;
    }
    case ipc::MessageType::kGatherProfileReply: {
      ipc::GatherProfileReply& reply = std::get<ipc::GatherProfileReply>(message);
      const size_t admitted = std::exchange(child.admitted_bytes, 0);
      admitted_bytes_ -= std::min(admitted_bytes_, admitted);
      if (!gather_ || reply.request_id != gather_->id) return;  // Late: that gathering ended.
      // A small reply (not admitted on its header) is checked against the budget now.
      if (reply.ok && admitted == 0 && !MakeRoomFor(child, "gathered profile", reply.profile.size())) {
        for (GatherChild& g : gather_->children) {
          if (g.connection != child.id || g.outcome != Outcome::kPending) continue;
          g.outcome = Outcome::kDropped;
          g.bytes = reply.profile.size();
          g.error = "over the parent's memory budget for children's profiles";
          gather_progressed_ = true;
        }
        CheckGatherDone();
        return;
      }
      for (GatherChild& g : gather_->children) {
        if (g.connection != child.id || g.outcome != Outcome::kPending) continue;
        g.outcome = reply.ok ? Outcome::kGathered : Outcome::kFailed;
        g.capture_time = reply.capture_time;
        g.reply_after = TimeStamp::Now() - gather_->started;
        g.bytes = reply.profile.size();
        g.progress = ipc::kProgressOne;
        if (reply.ok) {
          gathered_bytes_ += reply.profile.size();
          g.profile = std::move(reply.profile);
        } else {
          g.error = std::move(reply.profile);
        }
        gather_progressed_ = true;
      }
      CheckGatherDone();
      return;
    }
    case ipc::MessageType::kGatherProfileProgress: {
      const ipc::GatherProfileProgress& p = std::get<ipc::GatherProfileProgress>(message);
      if (!gather_ || p.request_id != gather_->id) return;
      for (GatherChild& g : gather_->children) {
        if (g.connection != child.id || g.outcome != Outcome::kPending) continue;
        if (p.progress > g.progress) gather_progressed_ = true;
        g.progress = std::max(g.progress, p.progress);
        g.location = p.location;
      }
      return;
    }
    case ipc::MessageType::kExitProfile: {
      ipc::ExitProfile& exit = std::get<ipc::ExitProfile>(message);
      const size_t admitted = std::exchange(child.admitted_bytes, 0);
      admitted_bytes_ -= std::min(admitted_bytes_, admitted);
      // Admitted on its header (room made then), or small: make room now.
      if (admitted == 0 && !MakeRoomFor(child, "exit profile", exit.profile.size())) {
        child.exit_profile_dropped = true;
        return;
      }
      ExitRecord record;
      record.pid = child.pid;
      record.name = child.name;
      record.end_time = exit.end_time;
      record.received_at = TimeStamp::Now();
      const size_t bytes = exit.profile.size();
      record.profile = std::make_shared<const std::string>(std::move(exit.profile));
      {
        std::lock_guard<std::mutex> lock(exits_mutex_);
        exits_.push_back(std::move(record));
      }
      child.sent_exit_profile = true;
      Event(false, "exit profile of " + Describe(child) + ", " + std::to_string(bytes) + " bytes");
      SyncExitProfileAccounting();
      return;
    }
    default:
      violation(std::string("unexpected ") + ipc::MessageTypeName(type) + " from a child");
      return;
  }
}

ipc::SessionState IpcParent::CurrentSessionState() {
  ipc::SessionState state;
  ProfilerSettings settings;
  {
    std::lock_guard<std::mutex> lock(session_mutex_);
    state.generation = generation_;
    settings = session_settings_;
  }
  // Atomics only: never a lock the session may hold.
  state.active = ProfilerIsActive() && state.generation > 0;
  state.paused = state.active && ProfilerIsPaused();
  state.interval_ms = settings.interval_ms;
  state.buffer_megabytes = settings.buffer_megabytes;
  state.features = settings.features;
  state.thread_filters = settings.thread_filters;
  state.epoch_offset_ns = epoch_offset_ns_;
  return state;
}

bool IpcParent::SessionStateSettled() {
  // Order: a session that stopped unhooks the link (its manager's final update) before a new
  // one turns active, so "active" read first, then "hooked", never pairs a new session with
  // the old one's hook.
  if (!ProfilerIsActive()) return true;
  const bool hooked = link_.hooked();
  std::lock_guard<std::mutex> lock(session_mutex_);
  return hooked && !syncing_ && generation_ > 0;
}

void IpcParent::AnswerWaitingHellos() {
  bool any = false;
  for (auto& [id, child] : children_) {
    (void)id;
    any = any || (child.awaiting_state && !child.connection->closed());
  }
  if (!any || !SessionStateSettled()) return;
  const ipc::SessionState state = CurrentSessionState();
  for (auto& [id, child] : children_) {
    (void)id;
    if (!child.awaiting_state || child.connection->closed()) continue;
    child.awaiting_state = false;
    Send(child, state);
    Send(child, ipc::AwaitNextChunkManagerUpdate{});
    child.update_requested = true;
  }
}

void IpcParent::BroadcastSessionState() {
  const ipc::SessionState state = CurrentSessionState();
  if (state.generation != last_generation_) {
    last_generation_ = state.generation;
    if (settings_.global_limit_bytes == 0) {
      controller_.SetLimitBytes(size_t{state.buffer_megabytes} << 20);
    }
  }
  const std::tuple<bool, bool, uint64_t> key(state.active, state.paused, state.generation);
  if (last_broadcast_ && *last_broadcast_ == key) return;
  last_broadcast_ = key;
  for (auto& [id, child] : children_) {
    (void)id;
    if (child.ready && !child.awaiting_state && !child.connection->closed()) Send(child, state);
  }
}

void IpcParent::HandleLocalUpdates() {
  if (!link_.HasPending()) return;
  ControlledChunkManager::Update update = link_.TakePending();
  NoteDestroyDone(kLocalKey, update);
  controller_.HandleUpdate(kLocalKey, std::move(update));
}

void IpcParent::NoteDestroyDone(GlobalController::ProcessKey key,
                                const ControlledChunkManager::Update& update) {
  auto it = pending_destroys_.find(key);
  if (it == pending_destroys_.end() || update.IsNotUpdate() || update.IsFinal()) return;
  const TimeStamp oldest = update.OldestDoneTimeStamp();
  if (!oldest.IsNull() && oldest <= it->second.first) return;  // Not yet.
  const double ms = (TimeStamp::Now() - it->second.second).ToMilliseconds();
  pending_destroys_.erase(it);
  ++destroy_latency_count_;
  destroy_latency_sum_ms_ += ms;
  destroy_latency_max_ms_ = std::max(destroy_latency_max_ms_, ms);
}

void IpcParent::OnDestroyDecision(GlobalController::ProcessKey key, TimeStamp done) {
  // The time until the owner's update shows the chunk gone (first request only).
  pending_destroys_.emplace(key, std::make_pair(done, TimeStamp::Now()));
  if (key == kLocalKey) {
    // At once when the session is free; else the worker waits for it (a capture).
    if (link_.hooked() && base_internal::TryDestroySessionChunksAtOrBefore(done)) return;
    std::lock_guard<std::mutex> lock(worker_mutex_);
    if (local_destroy_ < done) local_destroy_ = done;
    worker_cv_.notify_all();
    return;
  }
  auto it = children_.find(key);
  if (it != children_.end()) Send(it->second, ipc::DestroyReleasedChunksAtOrBefore{done});
}

void IpcParent::SyncStats() {
  const GlobalController::Stats& c = controller_.stats();
  size_t ready = 0;
  uint64_t sent = closed_bytes_sent_, received = closed_bytes_received_;
  for (const auto& [id, child] : children_) {
    (void)id;
    if (child.ready && !child.connection->closed()) ++ready;
    sent += child.connection->bytes_sent();
    received += child.connection->bytes_received();
  }
  std::lock_guard<std::mutex> lock(status_mutex_);
  stats_.children = ready;
  stats_.bytes_sent = sent;
  stats_.bytes_received = received;
  stats_.messages_sent = counters_.messages_sent;
  stats_.messages_received = counters_.messages_received;
  stats_.refused_connections = counters_.refused_connections;
  stats_.closed_connections = counters_.closed_connections;
  stats_.destroy_latency_max_ms = destroy_latency_max_ms_;
  stats_.destroy_latency_mean_ms =
      destroy_latency_count_ ? destroy_latency_sum_ms_ / destroy_latency_count_ : 0;
  stats_.global_limit_bytes = controller_.limit_bytes();
  stats_.tracked_bytes = controller_.TotalBytes();
  stats_.max_tracked_bytes = c.max_total_bytes;
  stats_.updates = c.updates;
  stats_.destroy_requests = c.destroy_requests;
  stats_.chunks_destroyed = c.chunks_doomed;
}

// --- Gathering (IPC thread)

std::shared_ptr<Gather> IpcParent::BeginGather() {
  std::shared_ptr<Gather> gather;
  {
    std::lock_guard<std::mutex> lock(gather_mutex_);
    gather = std::make_shared<Gather>(next_gather_id_++);
    gather->poll_interval_ms = settings_.gather_poll_interval_ms;
    if (stop_.load()) {
      gather->MarkDone();
      return gather;
    }
    requested_gathers_.push_back(gather);
    waker_.Wake();  // Under the lock: Shutdown() closes the waker under it, after stop_.
  }
  return gather;
}

void IpcParent::StartRequestedGather() {
  if (gather_) return;
  std::shared_ptr<Gather> gather;
  {
    std::lock_guard<std::mutex> lock(gather_mutex_);
    if (requested_gathers_.empty()) return;
    gather = requested_gathers_.front();
    requested_gathers_.pop_front();
  }
  gather_ = gather;
  gather->started = TimeStamp::Now();
  std::vector<uint64_t> asked;
  for (auto& [id, child] : children_) {
    if (!child.ready || child.connection->closed()) continue;
    GatherChild g;
    g.connection = id;
    g.pid = child.pid;
    g.name = child.name;
    gather->children.push_back(std::move(g));
    asked.push_back(id);
  }
  next_gather_poll_ =
      gather->started + TimeDuration::FromMilliseconds(settings_.gather_poll_interval_ms);
  gather_first_tick_ = true;
  gather_progressed_ = false;
  gather_stalls_ = 0;
  // Sending may close a connection, and that may end the gathering.
  for (uint64_t id : asked) {
    auto it = children_.find(id);
    if (it != children_.end()) Send(it->second, ipc::GatherProfile{gather->id});
  }
  if (gather_ == gather) CheckGatherDone();
}

void IpcParent::GatherTick() {
  if (!gather_ || TimeStamp::Now() < next_gather_poll_) return;
  next_gather_poll_ = TimeStamp::Now() + TimeDuration::FromMilliseconds(settings_.gather_poll_interval_ms);
  ++gather_->polls;
  const bool timed_out =
      (TimeStamp::Now() - gather_->started).ToMilliseconds() > settings_.gather_timeout_ms;
  if (!gather_first_tick_ || timed_out) {
    // Firefox's rule: two polls in a row without progress anywhere (no answer, or the same
    // progress) and the children still pending are taken as frozen.
    gather_stalls_ = gather_progressed_ ? 0 : gather_stalls_ + 1;
    if (gather_stalls_ >= 2 || timed_out) {
      for (GatherChild& g : gather_->children) {
        if (g.outcome != Outcome::kPending) continue;
        g.outcome = Outcome::kStalled;
        Event(true, "gathering: child " + std::to_string(g.pid.ToNumber()) + " (" + g.name +
                        (timed_out ? ") did not finish within the gathering time limit"
                                   : ") made no progress in two polls") +
                        "; its profile is left out");
      }
      gather_->ended_by_stall = true;
      CompleteGather();
      return;
    }
  }
  gather_first_tick_ = false;
  gather_progressed_ = false;
  std::vector<uint64_t> pending;
  for (const GatherChild& g : gather_->children) {
    if (g.outcome == Outcome::kPending) pending.push_back(g.connection);
  }
  const uint64_t id = gather_->id;
  for (uint64_t connection : pending) {  // Sending may close a connection (and end this).
    auto it = children_.find(connection);
    if (it != children_.end()) Send(it->second, ipc::GetGatherProfileProgress{id});
  }
}

void IpcParent::CheckGatherDone() {
  if (!gather_) return;
  for (const GatherChild& g : gather_->children) {
    if (g.outcome == Outcome::kPending) return;
  }
  CompleteGather();
}

void IpcParent::CompleteGather() {
  std::shared_ptr<Gather> gather = std::move(gather_);
  gather_.reset();
  gather->finished = TimeStamp::Now();
  gathered_bytes_ = 0;  // Handed to the capture.
  gather->profile_budget_bytes = ProfileBudgetBytes();
  {
    std::lock_guard<std::mutex> lock(exits_mutex_);
    gather->dropped.assign(dropped_.begin(), dropped_.end());
    gather->dropped_count = dropped_count_;
    for (const ExitRecord& e : exits_) {
      // A child that answered this very gathering is already in it.
      bool gathered = false;
      for (const GatherChild& g : gather->children) {
        gathered = gathered || (g.pid == e.pid && g.outcome == Outcome::kGathered);
      }
      if (!gathered) gather->exit_profiles.push_back(e);
    }
  }
  {
    std::lock_guard<std::mutex> lock(status_mutex_);
    gather->events.assign(events_.begin(), events_.end());
  }
  gather->MarkDone();
}

// --- Worker thread

void IpcParent::WorkerMain() {
  TimeStamp next_expiry;
  while (!stop_.load(std::memory_order_acquire)) {
    TimeStamp destroy;
    bool sync_requested = false;
    {
      std::unique_lock<std::mutex> lock(worker_mutex_);
      worker_cv_.wait_for(lock, std::chrono::milliseconds(20), [this] {
        return stop_.load() || !local_destroy_.IsNull() || sync_requested_;
      });
      std::swap(destroy, local_destroy_);
      sync_requested = sync_requested_;
      sync_requested_ = false;
    }
    if (stop_.load()) break;
    {
      std::lock_guard<std::mutex> lock(session_mutex_);
      syncing_ = true;  // Until the generation below matches the hooked session.
    }
    const bool hooked_new_session = link_.Sync();
    if (hooked_new_session) {
      // A new session of the parent: its settings, for the children and the limit.
      const ProfilerSettings settings = ProfilerCurrentSettings();
      bool restarted;
      {
        std::lock_guard<std::mutex> lock(session_mutex_);
        session_settings_ = settings;
        restarted = generation_++ > 0;
      }
      if (restarted) {
        // Exit profiles belong to the session they were recorded in (those that came
        // before the first session was hooked belong to it).
        std::lock_guard<std::mutex> lock(exits_mutex_);
        exits_.clear();
        dropped_.clear();
        dropped_count_ = 0;
      }
    }
    {
      std::lock_guard<std::mutex> lock(session_mutex_);
      syncing_ = false;
    }
    // The IPC thread answers the children waiting for the session state.
    if (hooked_new_session || sync_requested) waker_.Wake();
    if (!destroy.IsNull()) link_.DestroyAtOrBefore(destroy);
    const TimeStamp now = TimeStamp::Now();
    if (now >= next_expiry) {
      next_expiry = now + TimeDuration::FromMilliseconds(100);
      ExpireExitProfiles();
    }
  }
}

void IpcParent::ExpireExitProfiles() {
  {
    std::lock_guard<std::mutex> lock(exits_mutex_);
    if (exits_.empty()) return;
  }
  // May wait for the buffer (a capture reading it): this is the worker thread.
  const ChunkedBuffer::State state = base_internal::SessionBuffer().GetState();
  std::vector<std::string> expired;
  {
    std::lock_guard<std::mutex> lock(exits_mutex_);
    for (auto it = exits_.begin(); it != exits_.end();) {
      if (it->parent_index == 0) it->parent_index = state.range_end;
      if (it->parent_index < state.range_start) {
        expired.push_back("exit profile of child " + std::to_string(it->pid.ToNumber()) + " (" +
                          it->name + ") expired: older than the oldest data still held");
        it = exits_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const std::string& e : expired) Event(false, e);
}

void IpcParent::FillStatus(IpcStatus* status) {
  {
    std::lock_guard<std::mutex> lock(status_mutex_);
    const IpcStatus& s = stats_;
    status->children = s.children;
    status->global_limit_bytes = s.global_limit_bytes;
    status->tracked_bytes = s.tracked_bytes;
    status->max_tracked_bytes = s.max_tracked_bytes;
    status->updates = s.updates;
    status->destroy_requests = s.destroy_requests;
    status->chunks_destroyed = s.chunks_destroyed;
    status->refused_connections = s.refused_connections;
    status->closed_connections = s.closed_connections;
    status->messages_sent = s.messages_sent;
    status->messages_received = s.messages_received;
    status->bytes_sent = s.bytes_sent;
    status->bytes_received = s.bytes_received;
    status->destroy_latency_max_ms = s.destroy_latency_max_ms;
    status->destroy_latency_mean_ms = s.destroy_latency_mean_ms;
    status->events.assign(events_.begin(), events_.end());
  }
  status->parent = true;
  status->socket_path = socket_path_;
  std::lock_guard<std::mutex> lock(exits_mutex_);
  status->exit_profiles = exits_.size();
}

// --- Entry points

namespace {
std::mutex g_parent_mutex;
IpcParent* g_parent = nullptr;  // Leaked: threads may run during exit.
}  // namespace

static ProcessId g_parent_pid;

// At exit the socket file and the private directory go (the IPC thread keeps running, with
// its connections: the exit save, after this, still gathers the children).
static void ParentAtExit() {
  if (base_internal::IsForkedChild() || CurrentProcessId() != g_parent_pid) return;
  std::lock_guard<std::mutex> lock(g_parent_mutex);
  if (g_parent) g_parent->RemoveSocketPath();
}

IpcParent* RunningIpcParent() {
  std::lock_guard<std::mutex> lock(g_parent_mutex);
  return g_parent;
}

bool StartIpcParentImpl(const IpcSettings& settings, std::string* error) {
  std::lock_guard<std::mutex> lock(g_parent_mutex);
  if (g_parent) return true;
  auto* parent = new IpcParent(settings);
  if (!parent->Start(error)) {
    parent->Shutdown();
    delete parent;
    return false;
  }
  g_parent = parent;
  g_parent_pid = CurrentProcessId();
  static std::once_flag once;
  std::call_once(once, [] { atexit(&ParentAtExit); });
  return true;
}

void ShutdownIpcParent() {
  IpcParent* parent;
  {
    std::lock_guard<std::mutex> lock(g_parent_mutex);
    parent = g_parent;
    g_parent = nullptr;
  }
  // Not deleted: a capture thread may still hold its gathering.
  if (parent) parent->Shutdown();
}

void FillParentStatus(IpcStatus* status) {
  if (IpcParent* parent = RunningIpcParent()) parent->FillStatus(status);
}

std::string ParentSocketPath() {
  IpcParent* parent = RunningIpcParent();
  return parent ? parent->socket_path() : std::string();
}

void AdjustParentCapture(profile::CaptureInputs& inputs) {
  IpcParent* parent = RunningIpcParent();
  if (!parent) return;
  // The children start capturing now, while this process captures its own.
  std::shared_ptr<Gather> gather = parent->BeginGather();
  // One monotonic -> epoch mapping for the whole tree: sub-process times align exactly.
  inputs.meta.start_time_epoch_ns = inputs.start_time.ToNanoseconds() + parent->epoch_offset_ns();
  inputs.sub_processes = [gather](GeckoProfileWriter& writer) {
    gather->Wait();
    auto splice = [&writer](std::string& json, GatherChild* child, const char* what, int pid) {
      std::string why;
      if (!IsJsonObject(json, &why)) {
        LogError("ipc: %s of child %d left out: %s", what, pid, why.c_str());
        if (child) {
          child->outcome = Outcome::kFailed;
          child->error = why;
        }
        return;
      }
      ChunkedJsonOutput fragment;
      fragment.Consume(&json);
      writer.AddSubProcessJson(std::move(fragment));
    };
    for (GatherChild& child : gather->children) {
      if (child.outcome == Outcome::kGathered) {
        splice(child.profile, &child, "the profile", child.pid.ToNumber());
      }
    }
    for (ExitRecord& exit : gather->exit_profiles) {
      std::string copy = *exit.profile;
      splice(copy, nullptr, "the exit profile", exit.pid.ToNumber());
    }
  };
  // The children's captures end after this one's started, and a child's profile can begin
  // before it: the range covers their data (their startTime shares this process's epoch
  // mapping, above).
  const int64_t epoch_offset_ns = parent->epoch_offset_ns();
  inputs.sub_processes_range = [gather, epoch_offset_ns]() {
    gather->Wait();
    std::optional<EpochRangeNs> cover;
    auto note = [&](const std::string& json) {
      const std::optional<EpochRangeNs> range = SubProcessProfileRangeEpochNs(json);
      if (!range) return;
      if (!cover) {
        cover = range;
      } else {
        cover->start = std::min(cover->start, range->start);
        cover->end = std::max(cover->end, range->end);
      }
    };
    for (const GatherChild& child : gather->children) {
      if (child.outcome == Outcome::kGathered) note(child.profile);
    }
    for (const ExitRecord& exit : gather->exit_profiles) note(*exit.profile);
    std::optional<profile::TimeRange> result;
    if (cover) {
      result = profile::TimeRange{TimeStamp::FromNanoseconds(cover->start - epoch_offset_ns),
                                  TimeStamp::FromNanoseconds(cover->end - epoch_offset_ns)};
    }
    return result;
  };
  const TimeStamp start = inputs.start_time;
  inputs.profile_gathering_log = [gather, start](JsonWriter& w) {
    w.DoubleProperty("gatherMs", (gather->finished - gather->started).ToMilliseconds());
    w.DoubleProperty("pollIntervalMs", gather->poll_interval_ms);
    w.UintProperty("polls", static_cast<uint64_t>(gather->polls));
    w.BoolProperty("endedByStall", gather->ended_by_stall);
    w.StartArrayProperty("children");
    for (const GatherChild& child : gather->children) {
      w.StartObject();
      w.IntProperty("pid", child.pid.ToNumber());
      w.StringProperty("name", child.name);
      w.StringProperty("outcome", OutcomeName(child.outcome));
      w.DoubleProperty("progress", static_cast<double>(child.progress) / ipc::kProgressOne);
      if (!child.location.empty()) w.StringProperty("location", child.location);
      if (child.outcome == Outcome::kGathered) {
        w.UintProperty("bytes", child.bytes);
        w.DoubleProperty("captureMs", child.capture_time.ToMilliseconds());
        w.DoubleProperty("replyMs", child.reply_after.ToMilliseconds());
      }
      if (!child.error.empty()) w.StringProperty("error", child.error);
      w.EndObject();
    }
    w.EndArray();
    w.StartArrayProperty("exitProfiles");
    for (const ExitRecord& exit : gather->exit_profiles) {
      w.StartObject();
      w.IntProperty("pid", exit.pid.ToNumber());
      w.StringProperty("name", exit.name);
      w.TimeMsProperty("endTime", exit.end_time - start);
      w.UintProperty("bytes", exit.profile->size());
      w.EndObject();
    }
    w.EndArray();
    // Children's profiles the parent did not keep (the memory budget): the profile says so.
    w.UintProperty("profileBudgetBytes", gather->profile_budget_bytes);
    w.UintProperty("droppedProfileCount", gather->dropped_count);
    w.StartArrayProperty("droppedProfiles");
    for (const DroppedProfile& d : gather->dropped) {
      w.StartObject();
      w.IntProperty("pid", d.pid.ToNumber());
      w.StringProperty("name", d.name);
      w.StringProperty("what", d.what);
      w.UintProperty("bytes", d.bytes);
      w.StringProperty("reason", d.reason);
      w.TimeMsProperty("time", d.at - start);
      w.EndObject();
    }
    w.EndArray();
    w.StartArrayProperty("events");
    for (const std::string& e : gather->events) w.String(e);
    w.EndArray();
  };
}

}  // namespace full
}  // namespace strata
