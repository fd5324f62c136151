// The parent end of multi-process profiling: start and stop, the IPC thread's loop, the log,
// the worker thread, the status and the entry points (ipc_parent.h says how the class is
// split, its threads and its locks).
#include "full/internal/ipc_parent.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "base/internal/session/core.h"
#include "base/internal/settings/log.h"
#include "base/internal/signals/profiler_thread_signals.h"
#include "base/internal/session/tier_extension.h"
#include "full/internal/ipc.h"

namespace strata {
namespace full {
namespace {

using base_internal::LogError;
using base_internal::LogInfo;

}  // namespace

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
  base_internal::ThreadDirectedSignalCheck signal_check;
  while (!stop_.load(std::memory_order_acquire)) {
    // A signal sent to this thread alone is taken here (profiler_thread_signals.h); the poll
    // below waits 20 ms at most.
    base_internal::AnswerThreadDirectedSignals(&signal_check);
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


// --- Worker thread

void IpcParent::WorkerMain() {
  TimeStamp next_expiry;
  base_internal::ThreadDirectedSignalCheck signal_check;
  while (!stop_.load(std::memory_order_acquire)) {
    base_internal::AnswerThreadDirectedSignals(&signal_check);  // No lock held; 20 ms waits.
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


void IpcParent::FillStatus(IpcStatus* status) {
  {
    std::lock_guard<std::mutex> lock(status_mutex_);
    const IpcStatus& s = stats_;
    status->children = s.children;
    status->global_limit_bytes = s.global_limit_bytes;
    status->tracked_bytes = s.tracked_bytes;
    status->max_tracked_bytes = s.max_tracked_bytes;
    status->max_tracked_bytes_on_time = s.max_tracked_bytes_on_time;
    status->late_chunks = s.late_chunks;
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


}  // namespace full
}  // namespace strata
