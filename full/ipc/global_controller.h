// GlobalController: keeps the buffer memory of a whole process tree under one limit
// (Firefox: ProfileBufferGlobalController). It lives in the parent process.
//
// It is fed the chunk-manager updates (ControlledChunkManager::Update) of every process:
// the parent's own manager and each child's, as they arrive over IPC. From them it knows
// each process's unreleased bytes (chunks being written, and the spare), its released bytes
// and the list of its released chunks (done time stamp, size). When the total passes the
// limit less one chunk of headroom (Options), it picks the oldest released chunk of the whole
// tree (smallest done time stamp; all processes stamp with the same CLOCK_MONOTONIC) and asks
// its owner to destroy released chunks at or before that time stamp, until the total is back
// under it. The headroom is for the next release: its spare is allocated before its update
// arrives.
//
// A chunk asked for destruction is "doomed": it no longer counts, and no longer competes for
// destruction, although its owner may report it a while longer (its update may have left
// before the request arrived). Updates still listing it do not count it twice, and it is
// forgotten once an update no longer lists it. A doomed chunk still listed `late_after` its
// request (the owner is slow, stopped, or stuck) counts again: the limit is kept by
// destroying elsewhere, rather than waiting for the owner.
//
// The spare: a writing manager holds the chunk being written and a spare prepared right
// after each release, but the update sent at the release reports only the first (the spare
// comes after it, unreported until the next update). So a process that has released chunks
// is counted with at least two chunks unreleased.
//
// A manager's recycled chunk (kept after a local-limit destruction, it becomes the next
// spare) is in its updates' unreleased bytes: held, and not destroyable; chunks destroyed
// on the controller's request are freed, never recycled. What is not counted is memory a
// process allocates between an update and the destruction that update causes (messages
// take microseconds, a chunk takes milliseconds to fill): the real memory of the tree may
// pass the limit by about one chunk per process, which tests/ipc measures.
//
// Thread safety: not thread-safe; the parent's IPC thread owns it. The destroy callback is
// called synchronously from HandleUpdate().
#ifndef STRATA_FULL_IPC_GLOBAL_CONTROLLER_H_
#define STRATA_FULL_IPC_GLOBAL_CONTROLLER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "platform/time_stamp.h"
#include "shared/buffer/controlled_chunk_manager.h"

namespace strata {
namespace ipc {

class GlobalController {
 public:
  // A process's chunk manager (0 is customarily the parent's own).
  using ProcessKey = uint64_t;
  // Ask `process` to destroy its released chunks at or before `done`.
  using DestroyCallback = std::function<void(ProcessKey process, TimeStamp done)>;

  struct Options {
    // When a doomed chunk still listed counts again (see above); zero: never.
    TimeDuration late_after = TimeDuration::FromMilliseconds(5);
    // Chunks (of the largest size seen) kept free under the limit: the next release of a
    // writing process allocates its spare before its update arrives, so destroying only once
    // over the limit would pass it by a chunk for every release in flight.
    size_t headroom_chunks = 1;
    // Now (tests replace it).
    std::function<TimeStamp()> clock = &TimeStamp::Now;
  };

  GlobalController(size_t limit_bytes, DestroyCallback destroy);  // Default options.
  GlobalController(size_t limit_bytes, DestroyCallback destroy, Options options);

  // Applies an update of `process` (a new process is tracked from its first update; a final
  // update forgets it). Returns false, changing nothing, when the update contradicts what
  // the process said before (a chunk released again or out of order): a peer to drop.
  bool HandleUpdate(ProcessKey process, ControlledChunkManager::Update&& update,
                    std::string* error = nullptr);
  // Forgets a process (its connection is gone).
  void RemoveProcess(ProcessKey process);
  // Checks the limit again (late doomed chunks count again with time): call periodically.
  void Tick();

  size_t limit_bytes() const { return limit_bytes_; }
  // A new limit (the parent's session changed); destroys at once if now over it.
  void SetLimitBytes(size_t limit_bytes);
  // What counts against the limit: unreleased + released - doomed, over all processes.
  size_t TotalBytes() const;
  size_t ProcessBytes(ProcessKey process) const;
  size_t ProcessCount() const { return processes_.size(); }

  struct Stats {
    uint64_t updates = 0;
    uint64_t destroy_requests = 0;   // Destroy callbacks.
    uint64_t chunks_doomed = 0;      // Chunks given up by those requests.
    uint64_t bytes_doomed = 0;
    size_t max_total_bytes = 0;      // Largest total seen after handling an update.
    // The same with late chunks left out: what the controller itself holds to the limit
    // (a late owner's chunks count again until it reports them gone; when nothing is left to
    // doom, they are the only excess: see docs/ipc.md, "Limits of the bound").
    size_t max_total_bytes_on_time = 0;
    uint64_t over_limit_unreleased = 0;  // Times the total stayed over with nothing to destroy.
    uint64_t late_chunks = 0;        // Doomed chunks that came to count again (late owner).
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Chunk {
    TimeStamp done;
    size_t bytes;
    TimeStamp doomed_at;  // When its destruction was asked (null: not doomed).
    bool late = false;    // Doomed, and still there `late_after` later: counts again.
  };
  struct Process {
    size_t unreleased = 0;
    size_t released = 0;          // As reported (doomed chunks included while reported).
    std::deque<Chunk> chunks;     // Released, oldest first, as the process has them; the
                                  // doomed ones first.
    size_t doomed_bytes = 0;      // Bytes of doomed, not late, chunks still listed.
    size_t chunk_bytes = 0;       // Size of its last released chunk (0: none yet).
  };
  size_t CountedBytes(const Process& p) const;
  // Bytes of late chunks (doomed, still listed past `late_after`), over all processes.
  size_t LateBytes() const;
  // Doomed chunks past `late_after` count again.
  void MarkLateChunks();
  void EnforceLimit();

  size_t limit_bytes_;
  DestroyCallback destroy_;
  Options options_;
  size_t largest_chunk_bytes_ = 0;
  std::map<ProcessKey, Process> processes_;
  // Candidates for destruction: released, not doomed; (done, process), oldest first.
  std::set<std::pair<TimeStamp, ProcessKey>> candidates_;
  Stats stats_;
};

}  // namespace ipc
}  // namespace strata

#endif  // STRATA_FULL_IPC_GLOBAL_CONTROLLER_H_
