#include "full/internal/ipc_guards.h"

#include <sys/resource.h>

#include <algorithm>

namespace strata {
namespace full {

bool LogRateLimiter::Allow(TimeStamp now, uint64_t* suppressed) {
  if (suppressed) *suppressed = 0;
  if (window_start_.IsNull() || now - window_start_ >= window_) {
    window_start_ = now;
    lines_in_window_ = 0;
  }
  if (lines_in_window_ >= burst_) {
    ++suppressed_unreported_;
    ++total_suppressed_;
    return false;
  }
  ++lines_in_window_;
  if (suppressed) *suppressed = suppressed_unreported_;
  suppressed_unreported_ = 0;
  return true;
}

bool LogRateLimiter::TakeUnreported(TimeStamp now, uint64_t* suppressed) {
  if (suppressed_unreported_ == 0 || now - window_start_ < window_) return false;
  *suppressed = suppressed_unreported_;
  suppressed_unreported_ = 0;
  window_start_ = now;  // The count line is the first of a new window.
  lines_in_window_ = 1;
  return true;
}

bool AcceptBackoff::OnExhausted(TimeStamp now) {
  const bool starts = failures_ == 0;
  if (starts) {
    episode_start_ = now;
    ++episodes_;
    delay_ms_ = kFirstDelayMs;
  } else {
    delay_ms_ = std::min(delay_ms_ * 2, kMaxDelayMs);
  }
  ++failures_;
  resume_at_ = now + TimeDuration::FromMilliseconds(delay_ms_);
  return starts;
}

bool AcceptBackoff::OnRecovered(TimeStamp now, uint64_t* failures, TimeDuration* length) {
  resume_at_ = TimeStamp();
  delay_ms_ = 0;
  if (failures_ == 0) return false;
  if (failures) *failures = failures_;
  if (length) *length = now - episode_start_;
  failures_ = 0;
  return true;
}

int AcceptBackoff::MillisecondsUntilRetry(TimeStamp now) const {
  if (MayPoll(now)) return 0;
  const int64_t ms = (resume_at_ - now).ToNanoseconds() / 1000000 + 1;
  return static_cast<int>(std::clamp<int64_t>(ms, 0, kMaxDelayMs));
}

ConnectionCaps ConnectionCapsFor(uint64_t soft_descriptor_limit) {
  ConnectionCaps caps;
  caps.total = static_cast<size_t>(std::clamp<uint64_t>(soft_descriptor_limit / 8, 8, 256));
  caps.unready = std::min<size_t>(16, caps.total / 2);
  return caps;
}

ConnectionCaps ComputeConnectionCaps() {
  struct rlimit limit;
  uint64_t soft = 1024;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    soft = limit.rlim_cur;
  } else if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    soft = UINT64_MAX;
  }
  return ConnectionCapsFor(soft);
}

RoomDecision MakeRoom(const std::vector<size_t>& exit_sizes, size_t other_held, size_t incoming,
                      size_t budget) {
  RoomDecision decision;
  size_t held = other_held;
  for (size_t bytes : exit_sizes) held += bytes;
  if (held + incoming <= budget) {
    decision.fits = true;
    return decision;
  }
  if (other_held + incoming > budget) return decision;  // Cannot fit: refuse it alone.
  for (size_t bytes : exit_sizes) {
    held -= bytes;
    ++decision.drop_oldest;
    if (held + incoming <= budget) break;
  }
  decision.fits = true;
  return decision;
}

}  // namespace full
}  // namespace strata
