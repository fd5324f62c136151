#include "full/ipc/global_controller.h"

#include <algorithm>
#include <vector>

namespace strata {
namespace ipc {

GlobalController::GlobalController(size_t limit_bytes, DestroyCallback destroy)
    : GlobalController(limit_bytes, std::move(destroy), Options()) {}

GlobalController::GlobalController(size_t limit_bytes, DestroyCallback destroy, Options options)
    : limit_bytes_(limit_bytes), destroy_(std::move(destroy)), options_(std::move(options)) {}

void GlobalController::SetLimitBytes(size_t limit_bytes) {
  limit_bytes_ = limit_bytes;
  EnforceLimit();
}

size_t GlobalController::CountedBytes(const Process& p) const {
  // The chunk being written and the spare (see the header), once the process writes.
  const size_t unreleased =
      p.unreleased > 0 ? std::max(p.unreleased, 2 * p.chunk_bytes) : 0;
  return unreleased + (p.released > p.doomed_bytes ? p.released - p.doomed_bytes : 0);
}

size_t GlobalController::TotalBytes() const {
  size_t total = 0;
  for (const auto& [key, p] : processes_) {
    (void)key;
    total += CountedBytes(p);
  }
  return total;
}

size_t GlobalController::LateBytes() const {
  size_t late = 0;
  for (const auto& [key, p] : processes_) {
    (void)key;
    for (const Chunk& c : p.chunks) {
      if (c.doomed_at.IsNull()) break;  // The doomed ones come first.
      if (c.late) late += c.bytes;
    }
  }
  return late;
}

size_t GlobalController::ProcessBytes(ProcessKey process) const {
  auto it = processes_.find(process);
  return it == processes_.end() ? 0 : CountedBytes(it->second);
}

bool GlobalController::HandleUpdate(ProcessKey key, ControlledChunkManager::Update&& update,
                                    std::string* error) {
  if (update.IsNotUpdate()) return true;
  if (update.IsFinal()) {
    RemoveProcess(key);
    return true;
  }
  Process& p = processes_[key];
  const std::vector<ControlledChunkManager::ChunkMetadata>& newly = update.NewlyReleasedChunks();
  // Chunks are released in done order, and each once.
  if (!newly.empty() && !p.chunks.empty() && newly.front().done_time_stamp <= p.chunks.back().done) {
    if (error) *error = "a chunk was released again or out of order";
    return false;
  }
  ++stats_.updates;
  // What the process no longer has: everything before its oldest released chunk.
  const TimeStamp oldest = update.OldestDoneTimeStamp();
  while (!p.chunks.empty() && (oldest.IsNull() || p.chunks.front().done < oldest)) {
    const Chunk& c = p.chunks.front();
    if (c.doomed_at.IsNull()) {
      candidates_.erase({c.done, key});
    } else if (!c.late) {
      p.doomed_bytes -= std::min(p.doomed_bytes, c.bytes);
    }
    p.chunks.pop_front();
  }
  for (const ControlledChunkManager::ChunkMetadata& m : newly) {
    p.chunks.push_back({m.done_time_stamp, m.buffer_bytes, TimeStamp(), false});
    candidates_.insert({m.done_time_stamp, key});
    p.chunk_bytes = m.buffer_bytes;
    largest_chunk_bytes_ = std::max<size_t>(largest_chunk_bytes_, m.buffer_bytes);
  }
  p.unreleased = update.UnreleasedBytes();
  p.released = update.ReleasedBytes();
  EnforceLimit();
  const size_t total = TotalBytes();
  stats_.max_total_bytes = std::max(stats_.max_total_bytes, total);
  const size_t late = LateBytes();
  stats_.max_total_bytes_on_time =
      std::max(stats_.max_total_bytes_on_time, total > late ? total - late : 0);
  return true;
}

void GlobalController::RemoveProcess(ProcessKey key) {
  auto it = processes_.find(key);
  if (it == processes_.end()) return;
  for (const Chunk& c : it->second.chunks) candidates_.erase({c.done, key});
  processes_.erase(it);
}

void GlobalController::Tick() { EnforceLimit(); }

void GlobalController::MarkLateChunks() {
  if (options_.late_after <= TimeDuration()) return;
  const TimeStamp now = options_.clock();
  for (auto& [key, p] : processes_) {
    (void)key;
    for (Chunk& c : p.chunks) {
      if (c.doomed_at.IsNull()) break;  // The doomed ones come first.
      if (c.late || now - c.doomed_at < options_.late_after) continue;
      c.late = true;
      p.doomed_bytes -= std::min(p.doomed_bytes, c.bytes);
      ++stats_.late_chunks;
    }
  }
}

void GlobalController::EnforceLimit() {
  MarkLateChunks();
  size_t total = TotalBytes();
  const size_t headroom = options_.headroom_chunks * largest_chunk_bytes_;
  const size_t target = limit_bytes_ > headroom ? limit_bytes_ - headroom : 0;
  if (total <= target) return;
  // One request per process, for its newest doomed chunk (destruction is oldest first).
  std::map<ProcessKey, TimeStamp> requests;
  const TimeStamp now = options_.clock();
  while (total > target && !candidates_.empty()) {
    const auto [done, key] = *candidates_.begin();
    candidates_.erase(candidates_.begin());
    Process& p = processes_[key];
    size_t bytes = 0;
    for (Chunk& c : p.chunks) {
      if (c.done == done) {
        bytes = c.bytes;
        c.doomed_at = now;
        break;
      }
    }
    p.doomed_bytes += bytes;
    total -= std::min(total, bytes);
    requests[key] = done;
    ++stats_.chunks_doomed;
    stats_.bytes_doomed += bytes;
  }
  if (total > target) ++stats_.over_limit_unreleased;
  // Sent oldest first, like the decisions.
  std::vector<std::pair<TimeStamp, ProcessKey>> ordered;
  for (const auto& [key, done] : requests) ordered.emplace_back(done, key);
  std::sort(ordered.begin(), ordered.end());
  for (const auto& [done, key] : ordered) {
    ++stats_.destroy_requests;
    if (destroy_) destroy_(key, done);
  }
}

}  // namespace ipc
}  // namespace strata
