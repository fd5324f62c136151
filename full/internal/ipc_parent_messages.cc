// The parent end of multi-process profiling: what each child's message does, the session
// state the children follow, the global controller's destroy requests and statistics. All of
// it runs on the IPC thread (ipc_parent.h).
#include "full/internal/ipc_parent.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/internal/session/tier_extension.h"
#include "base/profiler.h"

namespace strata {
namespace full {

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
  stats_.max_tracked_bytes_on_time = c.max_total_bytes_on_time;
  stats_.late_chunks = c.late_chunks;
  stats_.updates = c.updates;
  stats_.destroy_requests = c.destroy_requests;
  stats_.chunks_destroyed = c.chunks_doomed;
}


}  // namespace full
}  // namespace strata
