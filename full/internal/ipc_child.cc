// The child end of multi-process profiling (docs/ipc.md): connects to the parent named by
// STRATA_IPC_PARENT, follows its session, forwards chunk-manager updates, destroys chunks on
// request, captures its profile for the parent, and sends its exit profile as it ends.
//
// Threads:
//   the thread that starts the full tier   connects, says Hello, waits for the parent's
//                                          session and takes it (synchronously: the
//                                          program's first samples are already the
//                                          parent's session).
//   IPC thread     poll() over the connection and a waker; answers at once what needs no
//                  session (progress polls, updates); never takes the session lock.
//   worker thread  what needs the session: following the parent's state, hooking the
//                  chunk manager, destroying chunks, capturing for a gathering.
//   exit           (atexit, or ShutdownFull) stops the worker, captures the exit profile,
//                  sends it and a final update, and waits until they are written.
#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <vector>

#include "base/internal/session/capture.h"
#include "base/internal/session/core.h"
#include "base/internal/settings/log.h"
#include "base/internal/signals/profiler_thread_signals.h"
#include "base/internal/session/tier_extension.h"
#include "base/profiler.h"
#include "full/internal/ipc.h"
#include "full/internal/ipc_link.h"
#include "full/ipc/messages.h"
#include "full/ipc/transport.h"
#include "shared/json/gecko_profile_writer.h"
#include "shared/json/json_writer.h"
#include "shared/profile/profile_capture.h"
#include "shared/progress/progress_logger.h"

namespace strata {
namespace full {
namespace {

using base_internal::LogError;
using base_internal::LogInfo;

constexpr int kConnectTimeoutMs = 2000;
constexpr int kHandshakeTimeoutMs = 2000;
constexpr int kExitFlushTimeoutMs = 5000;

// Set on the thread that captures for the parent (a gathering or the exit profile).
struct ChildCapture {
  int64_t epoch_offset_ns;
  ProgressLogger* progress;
};
thread_local ChildCapture* t_child_capture = nullptr;

bool SameSettings(const ProfilerSettings& a, const ProfilerSettings& b) {
  return a.interval_ms == b.interval_ms && a.buffer_megabytes == b.buffer_megabytes &&
         a.features == b.features && a.thread_filters == b.thread_filters;
}

int64_t NowMs() { return TimeStamp::Now().ToNanoseconds() / 1000000; }

}  // namespace

class IpcChild {
 public:
  explicit IpcChild(std::string path)
      : path_(std::move(path)), link_([this] { waker_.Wake(); }) {}

  bool Start();
  void Shutdown();
  bool following() const { return following_.load(); }
  const std::string& path() const { return path_; }
  void FillStatus(IpcStatus* status);

 private:
  bool Handshake(std::string* error);
  void ApplySessionState(const ipc::SessionState& state);
  std::string CaptureForParent(bool* ok, TimeDuration* took);
  // IPC thread.
  void IpcThreadMain();
  void HandleMessage(ipc::Message&& message);
  void Send(const ipc::Message& message);
  void LoseParent(const std::string& why, bool is_error);
  // Worker thread.
  void WorkerMain();
  void PostToParent(ipc::Message message);

  const std::string path_;
  ipc::Waker waker_;
  LocalManagerLink link_;
  std::unique_ptr<ipc::Connection> connection_;  // IPC thread, after the handshake.
  pthread_t ipc_thread_{};
  pthread_t worker_thread_{};
  bool threads_started_ = false;
  std::atomic<bool> following_{false};
  std::atomic<bool> connected_{false};
  std::atomic<bool> closing_{false};      // Exit: write what is queued, then close.
  std::atomic<bool> stop_ipc_{false};
  std::atomic<bool> stop_worker_{false};
  std::atomic<int64_t> epoch_offset_ns_{0};
  bool awaiting_update_ = false;  // IPC thread.
  bool parent_lost_ = false;      // IPC thread: LoseParent() ran.
  int waker_number_ = -1;         // As registered for forks.
  uint64_t applied_generation_ = 0;  // Worker (or the starting thread before it runs).

  // Worker requests (from the IPC thread).
  std::mutex worker_mutex_;
  std::condition_variable worker_cv_;
  std::optional<ipc::SessionState> pending_state_;
  TimeStamp pending_destroy_;
  std::optional<uint64_t> pending_gather_;

  // The gathering in progress, polled by the IPC thread.
  SharedProgress gather_progress_;
  std::atomic<uint64_t> gather_id_{0};

  // Messages the worker or the exit path hand to the IPC thread.
  std::mutex outbox_mutex_;
  std::vector<ipc::Message> outbox_;

  std::mutex status_mutex_;
  uint64_t messages_sent_ = 0;
  uint64_t messages_received_ = 0;
};

// --- Start: connect, Hello, the parent's session

bool IpcChild::Start() {
  std::string error;
  if (!waker_.ok() || !Handshake(&error)) {
    LogError("ipc: cannot join the parent's session at %s: %s; profiling alone", path_.c_str(),
             error.c_str());
    connection_.reset();
    waker_.Close();  // Nothing will wake it: given back at once.
    return false;
  }
  RegisterInheritedFd(connection_->number());
  RegisterInheritedFd(waker_.fd());
  waker_number_ = waker_.fd();
  link_.Sync();
  connected_ = true;
  if (!StartInternalThread(&worker_thread_, "StrataIpcWork", [this] { WorkerMain(); }) ||
      !StartInternalThread(&ipc_thread_, "StrataIpcChild", [this] { IpcThreadMain(); })) {
    LogError("ipc: cannot start the IPC threads; profiling alone");
    stop_worker_ = stop_ipc_ = true;
    connected_ = false;
    UnregisterInheritedFd(connection_->number());
    connection_->Close();
    UnregisterInheritedFd(waker_number_);
    return false;
  }
  threads_started_ = true;
  LogInfo("ipc: following the parent's session at %s", path_.c_str());
  return true;
}

bool IpcChild::Handshake(std::string* error) {
  const int fd = ipc::Connect(path_, kConnectTimeoutMs, error);
  if (fd < 0) return false;
  connection_ = std::make_unique<ipc::Connection>(fd, ipc::FrameLimits());
  ipc::Hello hello;
  hello.pid = CurrentProcessId();
  hello.parent_pid = ProcessId::FromNumber(getppid());
  hello.name = ProgramName();
  if (!connection_->Send(hello, error)) return false;
  const int64_t deadline = NowMs() + kHandshakeTimeoutMs;
  while (NowMs() < deadline) {
    pollfd p{connection_->fd(),
             static_cast<short>(POLLIN | (connection_->WantsWrite() ? POLLOUT : 0)), 0};
    poll(&p, 1, 50);
    if (!connection_->Flush(error)) return false;
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) && !connection_->ReadAvailable(error)) {
      return false;
    }
    ipc::Message message;
    const ipc::FrameReader::Status status = connection_->Next(&message);
    if (status == ipc::FrameReader::Status::kMalformed) {
      *error = "malformed message from the parent: " + connection_->read_error();
      return false;
    }
    if (status == ipc::FrameReader::Status::kNeedMore) continue;
    if (!std::holds_alternative<ipc::SessionState>(message)) {
      *error = std::string("expected the session state, got ") +
               ipc::MessageTypeName(ipc::TypeOf(message));
      return false;
    }
    // Later messages stay in the connection's reader for the IPC thread.
    ApplySessionState(std::get<ipc::SessionState>(message));
    return true;
  }
  *error = "the parent did not answer";
  return false;
}

void IpcChild::ApplySessionState(const ipc::SessionState& state) {
  epoch_offset_ns_ = state.epoch_offset_ns;
  if (!state.active) {
    if (ProfilerIsActive()) ProfilerStop();
    following_ = true;
    return;
  }
  ProfilerSettings settings;
  settings.interval_ms = state.interval_ms;
  settings.buffer_megabytes = state.buffer_megabytes;
  settings.features = state.features;
  settings.thread_filters = state.thread_filters;
  // Keep a running session with the same settings (its data so far is the tree's too),
  // unless the parent started a new session since.
  const bool new_parent_session = applied_generation_ != 0 && applied_generation_ != state.generation;
  if (!ProfilerIsActive() || new_parent_session ||
      !SameSettings(ProfilerCurrentSettings(), settings)) {
    ProfilerStart(settings);
  }
  applied_generation_ = state.generation;
  if (state.paused) {
    ProfilerPause();
  } else {
    ProfilerResume();
  }
  following_ = true;
}

// --- Capture for the parent (worker or exit path)

std::string IpcChild::CaptureForParent(bool* ok, TimeDuration* took) {
  const TimeStamp start = TimeStamp::Now();
  ChunkedJsonOutput output;
  std::string error;
  {
    JsonWriter writer(&output);
    ProgressLogger progress(&gather_progress_, "gather: capturing", "gather: sending");
    ChildCapture capture{epoch_offset_ns_.load(), &progress};
    t_child_capture = &capture;
    *ok = base_internal::WriteSessionProfile(writer, &error);
    t_child_capture = nullptr;
    writer.Flush();
  }
  *took = TimeStamp::Now() - start;
  if (!*ok) return error.empty() ? std::string("capture failed") : error;
  return output.ToString();
}

// --- IPC thread

void IpcChild::Send(const ipc::Message& message) {
  if (!connection_ || connection_->closed()) return;
  std::string error;
  if (!connection_->Send(message, &error)) {
    LoseParent(error, false);
    return;
  }
  std::lock_guard<std::mutex> lock(status_mutex_);
  ++messages_sent_;
}

void IpcChild::LoseParent(const std::string& why, bool is_error) {
  if (!connection_ || parent_lost_) return;
  parent_lost_ = true;  // Logged once, whatever the path.
  // A failed read or write can be the first sign that the program took the descriptor (closed
  // between the last check and the call): look again, so that it is told the same way.
  if (!connection_->lost() && !connection_->closed()) (void)connection_->StillOurs();
  if (connection_->lost()) {
    LogError("ipc: the connection to the parent was closed by the program (its descriptor "
             "number was closed or reused); profiling alone, the program's descriptors are "
             "left alone");
  } else if (is_error) {
    LogError("ipc: leaving the parent's session: %s", why.c_str());
  } else if (!closing_) {
    LogInfo("ipc: the parent's session is gone (%s); profiling alone", why.c_str());
  }
  UnregisterInheritedFd(connection_->number());
  connection_->Close();
  connected_ = false;
  following_ = false;
  stop_ipc_ = true;
  {
    std::lock_guard<std::mutex> lock(worker_mutex_);
    stop_worker_ = true;
    worker_cv_.notify_all();
  }
}

void IpcChild::IpcThreadMain() {
  int64_t closing_deadline = 0;
  base_internal::ThreadDirectedSignalCheck signal_check;
  while (!stop_ipc_.load()) {
    // A signal sent to this thread alone is taken here (profiler_thread_signals.h); the poll
    // below waits 100 ms at most.
    base_internal::AnswerThreadDirectedSignals(&signal_check);
    // Messages already received (the handshake may have left some).
    for (;;) {
      ipc::Message message;
      const ipc::FrameReader::Status status = connection_->Next(&message);
      if (status == ipc::FrameReader::Status::kNeedMore) break;
      if (status == ipc::FrameReader::Status::kMalformed) {
        LoseParent("malformed message from the parent: " + connection_->read_error(), true);
        break;
      }
      {
        std::lock_guard<std::mutex> lock(status_mutex_);
        ++messages_received_;
      }
      HandleMessage(std::move(message));
    }
    if (stop_ipc_.load()) break;
    std::vector<ipc::Message> outgoing;
    {
      std::lock_guard<std::mutex> lock(outbox_mutex_);
      outgoing.swap(outbox_);
    }
    for (const ipc::Message& m : outgoing) Send(m);
    if (awaiting_update_ && link_.HasPending() && !closing_) {
      Send(ipc::ChunkManagerUpdate{link_.TakePending()});
      awaiting_update_ = false;
    }
    if (stop_ipc_.load()) break;
    if (closing_) {
      if (closing_deadline == 0) closing_deadline = NowMs() + kExitFlushTimeoutMs;
      bool outbox_empty;
      {
        std::lock_guard<std::mutex> lock(outbox_mutex_);
        outbox_empty = outbox_.empty();
      }
      if (outbox_empty && !connection_->WantsWrite()) break;
      if (NowMs() > closing_deadline) {
        LogError("ipc: the parent did not take the exit profile in time");
        break;
      }
    }
    // The program may have closed our descriptors (close_range) and reopened its files on
    // their numbers: never poll, read, write or close what is no longer ours.
    if (!connection_->StillOurs()) {
      LoseParent(connection_->lost() ? "lost" : "closed", false);
      break;
    }
    if (waker_.ok() && !waker_.StillOurs()) {
      LogError("ipc: the wake-up descriptor was closed by the program; polling every 100 ms");
    }
    pollfd fds[2] = {
        {connection_->fd(), static_cast<short>(POLLIN | (connection_->WantsWrite() ? POLLOUT : 0)),
         0},
        {waker_.fd(), POLLIN, 0}};
    poll(fds, 2, 100);
    if (fds[1].revents & POLLIN) waker_.Drain();
    std::string error;
    if ((fds[0].revents & POLLOUT) && !connection_->Flush(&error)) {
      LoseParent(error, false);
      break;
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) && !connection_->ReadAvailable(&error)) {
      // Handle what came before the end, then go.
      ipc::Message message;
      while (connection_->Next(&message) == ipc::FrameReader::Status::kMessage) {
        HandleMessage(std::move(message));
      }
      LoseParent(error, false);
      break;
    }
  }
  if (connection_ && !connection_->closed()) {
    UnregisterInheritedFd(connection_->number());
    connection_->Close();
  }
  connected_ = false;
}

void IpcChild::HandleMessage(ipc::Message&& message) {
  switch (ipc::TypeOf(message)) {
    case ipc::MessageType::kSessionState: {
      std::lock_guard<std::mutex> lock(worker_mutex_);
      pending_state_ = std::get<ipc::SessionState>(message);
      worker_cv_.notify_all();
      return;
    }
    case ipc::MessageType::kAwaitNextChunkManagerUpdate:
      awaiting_update_ = true;
      return;
    case ipc::MessageType::kDestroyReleasedChunksAtOrBefore: {
      const TimeStamp done = std::get<ipc::DestroyReleasedChunksAtOrBefore>(message).done;
      // At once when the session is free (the update it causes leaves from this thread at
      // the end of this loop); else the worker waits for the session.
      if (link_.hooked() && base_internal::TryDestroySessionChunksAtOrBefore(done)) return;
      std::lock_guard<std::mutex> lock(worker_mutex_);
      if (pending_destroy_ < done) pending_destroy_ = done;
      worker_cv_.notify_all();
      return;
    }
    case ipc::MessageType::kGatherProfile: {
      const uint64_t id = std::get<ipc::GatherProfile>(message).request_id;
      gather_progress_.Reset();
      gather_id_ = id;
      std::lock_guard<std::mutex> lock(worker_mutex_);
      pending_gather_ = id;
      worker_cv_.notify_all();
      return;
    }
    case ipc::MessageType::kGetGatherProfileProgress: {
      const uint64_t id = std::get<ipc::GetGatherProfileProgress>(message).request_id;
      ipc::GatherProfileProgress reply;
      reply.request_id = id;
      if (id == gather_id_.load()) {
        reply.progress = std::min(gather_progress_.Progress().ToUnderlying(), ipc::kProgressOne);
        const char* location = gather_progress_.LastLocation();
        reply.location = location ? location : "gather: waiting";
      }
      Send(reply);
      return;
    }
    default:
      LoseParent(std::string("unexpected ") + ipc::MessageTypeName(ipc::TypeOf(message)) +
                     " from the parent",
                 true);
      return;
  }
}

// --- Worker thread

void IpcChild::PostToParent(ipc::Message message) {
  {
    std::lock_guard<std::mutex> lock(outbox_mutex_);
    outbox_.push_back(std::move(message));
  }
  waker_.Wake();
}

void IpcChild::WorkerMain() {
  base_internal::ThreadDirectedSignalCheck signal_check;
  for (;;) {
    base_internal::AnswerThreadDirectedSignals(&signal_check);  // No lock held; 20 ms waits.
    std::optional<ipc::SessionState> state;
    TimeStamp destroy;
    std::optional<uint64_t> gather;
    {
      std::unique_lock<std::mutex> lock(worker_mutex_);
      worker_cv_.wait_for(lock, std::chrono::milliseconds(20), [this] {
        return stop_worker_.load() || pending_state_ || !pending_destroy_.IsNull() ||
               pending_gather_;
      });
      if (stop_worker_.load()) return;
      std::swap(state, pending_state_);
      std::swap(destroy, pending_destroy_);
      std::swap(gather, pending_gather_);
    }
    if (state) ApplySessionState(*state);
    link_.Sync();
    if (!destroy.IsNull()) link_.DestroyAtOrBefore(destroy);
    if (gather) {
      ipc::GatherProfileReply reply;
      reply.request_id = *gather;
      if (ProfilerIsActive()) {
        reply.profile = CaptureForParent(&reply.ok, &reply.capture_time);
      } else {
        reply.profile = "no session";
      }
      PostToParent(std::move(reply));
    }
  }
}

// --- Exit

void IpcChild::Shutdown() {
  if (!threads_started_) return;
  threads_started_ = false;
  {
    // The worker finishes what it does (a gathering's capture is sent first).
    std::lock_guard<std::mutex> lock(worker_mutex_);
    stop_worker_ = true;
    worker_cv_.notify_all();
  }
  pthread_join(worker_thread_, nullptr);
  if (connected_.load()) {
    if (ProfilerIsActive()) {
      ipc::ExitProfile exit;
      bool ok = false;
      TimeDuration took;
      exit.end_time = TimeStamp::Now();
      exit.profile = CaptureForParent(&ok, &took);
      if (ok) {
        PostToParent(std::move(exit));
      } else {
        LogError("ipc: no exit profile: %s", exit.profile.c_str());
      }
    }
    link_.Unhook();
    PostToParent(ipc::ChunkManagerUpdate{ControlledChunkManager::Update::Final()});
    closing_ = true;
    waker_.Wake();
  } else {
    stop_ipc_ = true;
    waker_.Wake();
  }
  pthread_join(ipc_thread_, nullptr);
  following_ = false;
  // The eventfd goes back (it was kept before: one per child start). The threads are joined
  // and the session's manager unhooked: nothing wakes it any more (and Wake() on a closed
  // Waker does nothing).
  link_.Unhook();
  UnregisterInheritedFd(waker_number_);
  waker_.Close();
}

void IpcChild::FillStatus(IpcStatus* status) {
  status->child = connected_.load();
  if (!status->parent) status->socket_path = path_;
  std::lock_guard<std::mutex> lock(status_mutex_);
  status->messages_sent += messages_sent_;
  status->messages_received += messages_received_;
}

// --- Entry points

namespace {
std::mutex g_child_mutex;
IpcChild* g_child = nullptr;  // Leaked: its threads may run during exit.
ProcessId g_child_pid;

void ChildAtExit() {
  // A fork()ed copy of the process has neither the threads nor the connection.
  if (base_internal::IsForkedChild() || CurrentProcessId() != g_child_pid) return;
  ShutdownIpcChild();
}
}  // namespace

IpcChild* RunningIpcChild() {
  std::lock_guard<std::mutex> lock(g_child_mutex);
  return g_child;
}

bool StartIpcChild(const std::string& socket_path) {
  std::lock_guard<std::mutex> lock(g_child_mutex);
  if (g_child) return true;
  auto* child = new IpcChild(socket_path);
  if (!child->Start()) {
    child->Shutdown();
    // Kept, not deleted: small, and its waker may still be in use. Kept reachable, so that
    // leak checkers (LeakSanitizer) do not report it.
    static auto* abandoned = new std::vector<IpcChild*>;
    abandoned->push_back(child);
    return false;
  }
  g_child = child;
  g_child_pid = CurrentProcessId();
  static std::once_flag once;
  // Registered after base's own exit handler, so it runs before it: the session is still
  // there to capture the exit profile.
  std::call_once(once, [] { atexit(&ChildAtExit); });
  return true;
}

void ShutdownIpcChild() {
  IpcChild* child;
  {
    std::lock_guard<std::mutex> lock(g_child_mutex);
    child = g_child;
    g_child = nullptr;
  }
  if (child) child->Shutdown();
}

void FillChildStatus(IpcStatus* status) {
  if (IpcChild* child = RunningIpcChild()) child->FillStatus(status);
}

bool ChildFollowsParent() {
  IpcChild* child = RunningIpcChild();
  return child && child->following();
}

std::string ChildParentSocketPath() {
  IpcChild* child = RunningIpcChild();
  return child ? child->path() : std::string();
}

bool AdjustChildCapture(profile::CaptureInputs& inputs) {
  ChildCapture* capture = t_child_capture;
  if (!capture) return false;
  inputs.kind = GeckoProfileWriter::Kind::kSubProcess;
  inputs.meta.start_time_epoch_ns = inputs.start_time.ToNanoseconds() + capture->epoch_offset_ns;
  inputs.progress = capture->progress;
  return true;
}

}  // namespace full
}  // namespace strata
