// The parent end of multi-process profiling: children's profiles held by the parent. The
// budget they are held under (admission of large frames, room made by dropping the oldest
// exit profiles, drops listed), the exit profiles' share of the global limit and their
// expiry, and the gathering at capture: asked by the capture thread, run by the IPC thread,
// spliced into the parent's profile by the capture (ipc_parent.h).
#include "full/internal/ipc_parent.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "base/internal/session/core.h"
#include "base/internal/settings/log.h"
#include "full/internal/ipc.h"
#include "full/internal/sub_process_end.h"
#include "rapidjson/reader.h"
#include "shared/json/gecko_profile_writer.h"
#include "shared/profile/profile_capture.h"

namespace strata {
namespace full {
namespace {

using base_internal::LogError;

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
      // The front-end places a child's times by the difference of the two meta.startTime
      // doubles (epoch ms, whose unit in the last place is ~0.24 us today): up to ~0.25 us
      // from the exact difference used here. A microsecond more on each side keeps a child's
      // first and last data inside the range as the front-end computes it (a child's marker at
      // its own profilingStartTime was cut off by 69 ns: ipc_follow_test, issue 35).
      constexpr int64_t kFrontEndPlacementNs = 1000;
      result = profile::TimeRange{
          TimeStamp::FromNanoseconds(cover->start - epoch_offset_ns - kFrontEndPlacementNs),
          TimeStamp::FromNanoseconds(cover->end - epoch_offset_ns + kFrontEndPlacementNs)};
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
