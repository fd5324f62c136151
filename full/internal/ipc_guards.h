// What keeps the parent end of multi-process profiling (ipc_parent.h) from harming the program
// it lives in when peers misbehave or are many (docs/ipc.md, "Limits on what peers can do"):
//
//   LogRateLimiter   bounds the log lines peers can cause (a burst per window, then a count
//                    of those not shown, at most a window later).
//   AcceptBackoff    accept() failing for lack of descriptors or memory (EMFILE, ENFILE,
//                    ENOBUFS, ENOMEM): stop polling the listening socket for a while (10 ms,
//                    doubling to 1 s) instead of retrying at once, one log line per episode.
//   ConnectionCaps   how many connections the parent keeps, from RLIMIT_NOFILE: Strata must
//                    never hold the descriptors the program needs.
//   MakeRoom         the budget for children's profiles held in the parent (exit profiles,
//                    gathered profiles, frames being received): which kept exit profiles go
//                    (oldest first) for a new one, or whether it cannot fit at all.
//
// Thread safety: value types and pure functions; each object belongs to one thread (the
// parent's IPC thread). Async-signal safety: none.
#ifndef STRATA_FULL_INTERNAL_IPC_GUARDS_H_
#define STRATA_FULL_INTERNAL_IPC_GUARDS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "platform/time_stamp.h"

namespace strata {
namespace full {

class LogRateLimiter {
 public:
  LogRateLimiter(int burst, TimeDuration window) : burst_(burst), window_(window) {}
  // True when a line may be written at `now`: at most `burst` lines per window. When the
  // lines of an earlier window were suppressed, *suppressed (if given) says how many, once,
  // with the first line allowed after them (report it in that line).
  bool Allow(TimeStamp now, uint64_t* suppressed = nullptr);
  // True, with *suppressed, when lines were suppressed and their window is over without a
  // later line to carry the count: write it on a line of its own. That line counts in a new
  // window (so at most `burst` lines per window, count lines included). Call it periodically:
  // the count comes at most a window after the burst, whatever follows.
  bool TakeUnreported(TimeStamp now, uint64_t* suppressed);
  uint64_t total_suppressed() const { return total_suppressed_; }

 private:
  const int burst_;
  const TimeDuration window_;
  TimeStamp window_start_;
  int lines_in_window_ = 0;
  uint64_t suppressed_unreported_ = 0;
  uint64_t total_suppressed_ = 0;
};

class AcceptBackoff {
 public:
  static constexpr int kFirstDelayMs = 10;
  static constexpr int kMaxDelayMs = 1000;

  // accept() failed for lack of descriptors or memory. Returns true when this starts an
  // episode (log it once).
  bool OnExhausted(TimeStamp now);
  // accept() worked, or the backlog is empty. Returns true when this ends an episode, with
  // its failed accepts and length (log them); the delay starts again from kFirstDelayMs.
  bool OnRecovered(TimeStamp now, uint64_t* failures, TimeDuration* length);
  // Whether the listening socket may be polled now (false while backing off).
  bool MayPoll(TimeStamp now) const { return resume_at_.IsNull() || now >= resume_at_; }
  // Milliseconds until MayPoll() turns true (0 when it is).
  int MillisecondsUntilRetry(TimeStamp now) const;
  bool in_episode() const { return failures_ > 0; }
  uint64_t episodes() const { return episodes_; }

 private:
  int delay_ms_ = 0;
  TimeStamp resume_at_;
  TimeStamp episode_start_;
  uint64_t failures_ = 0;
  uint64_t episodes_ = 0;
};

struct ConnectionCaps {
  size_t total = 0;    // Connections kept at once (children and peers that have not said Hello).
  size_t unready = 0;  // Of which without Hello yet (a silent peer holds one until its timeout).
};
// From the soft RLIMIT_NOFILE: an eighth of it, between 8 and 256 connections; at most 16
// (and half the total) without Hello.
ConnectionCaps ComputeConnectionCaps();
ConnectionCaps ConnectionCapsFor(uint64_t soft_descriptor_limit);

struct RoomDecision {
  size_t drop_oldest = 0;  // How many of the kept exit profiles (oldest first) to drop.
  bool fits = false;       // Whether `incoming` then fits (false: drop `incoming` instead,
                           // and drop_oldest is 0).
};
// Kept exit profiles `exit_sizes` (oldest first), `other_held` bytes held otherwise (gathered
// profiles, frames admitted and being received), `incoming` bytes wanting in, under `budget`.
// The oldest exit profiles go first; an incoming profile that would not fit even with every
// exit profile gone is refused (and nothing else is dropped for it).
RoomDecision MakeRoom(const std::vector<size_t>& exit_sizes, size_t other_held, size_t incoming,
                      size_t budget);

}  // namespace full
}  // namespace strata

#endif  // STRATA_FULL_INTERNAL_IPC_GUARDS_H_
