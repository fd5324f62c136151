// Progress of a long operation (a profile capture), readable from other threads while it
// runs. After Firefox's ProgressLogger.
//
// A SharedProgress holds the global progress (a ProportionValue, 0 to 1) and the last
// location (a static string saying what is being done). The operation's thread reports to
// it through ProgressLoggers: the top-level logger covers the whole range, and every logger
// can hand a sub-range of its own to a child (a called function), which reports in its own
// local 0..1 and never needs to know where its range sits in the whole. Levels nest
// freely; each maps its local progress onto the global one.
//
//   SharedProgress progress;                        // Polled: progress.Progress()
//   {
//     ProgressLogger logger(&progress, "capture: start", "capture: done");
//     ReadBuffer(logger.CreateSubLogger(ProportionValue(0.0), ProportionValue(0.4),
//                                       "reading"));  // Its 0..1 is 0..0.4 globally.
//     for (size_t i = 0; i < n; ++i) {
//       WriteThread(logger.CreateLoopSubLogger(ProportionValue(0.4), ProportionValue::One(),
//                                              i, n));
//     }
//   }  // The destructor reports local 1 (and "capture: done").
//
// A logger reports 0 (and its start location) when made and 1 (and its end location) when
// destroyed, unless moved from. Progress rises monotonically as long as the code reports in
// order (children within their parent's range, one after the other), which is the
// caller's part: SharedProgress stores what it is told.
//
// Locations must outlive every reader (use string literals). A null or empty location
// leaves the previous one in place.
//
// Thread safety: SharedProgress is thread-safe: any number of threads may poll Progress()
// and LastLocation() while one thread reports. A ProgressLogger belongs to one thread at a
// time. Async-signal safety: SharedProgress's getters are; the rest is too (no allocation,
// no lock), though nothing needs it.
#ifndef STRATA_SHARED_PROGRESS_PROGRESS_LOGGER_H_
#define STRATA_SHARED_PROGRESS_PROGRESS_LOGGER_H_

#include <atomic>
#include <cstdint>

#include "shared/progress/proportion_value.h"

namespace strata {

class SharedProgress {
 public:
  SharedProgress() = default;
  SharedProgress(const SharedProgress&) = delete;
  SharedProgress& operator=(const SharedProgress&) = delete;

  // The last progress reported (0 at first). Acquire: when it reads 1, everything the
  // operation did before reporting it is visible to the reader.
  ProportionValue Progress() const {
    return ProportionValue::FromUnderlying(progress_.load(std::memory_order_acquire));
  }
  // The last non-empty location reported, or null. Progress and location are two loads:
  // a reader may see one update's progress with the next one's location.
  const char* LastLocation() const { return location_.load(std::memory_order_acquire); }

  // Stores the location (unless null or empty), then the progress (unless invalid).
  void Set(ProportionValue progress, const char* location) {
    if (location && *location) location_.store(location, std::memory_order_release);
    if (progress.IsValid()) progress_.store(progress.ToUnderlying(), std::memory_order_release);
  }
  // Back to 0 and no location, to reuse this object for another operation.
  void Reset() {
    location_.store(nullptr, std::memory_order_release);
    progress_.store(0, std::memory_order_release);
  }

 private:
  std::atomic<ProportionValue::Underlying> progress_{0};
  std::atomic<const char*> location_{nullptr};
};

class ProgressLogger {
 public:
  // An inactive logger: every call does nothing, sub-loggers are inactive too.
  ProgressLogger() = default;
  // The top-level logger of `global` (null: inactive): local 0..1 is global 0..1. Reports 0
  // and `start_location` now, 1 and `end_location` when destroyed. `global` must outlive
  // this logger and all its sub-loggers.
  explicit ProgressLogger(SharedProgress* global, const char* start_location = nullptr,
                          const char* end_location = nullptr)
      : ProgressLogger(global, ProportionValue::Zero(), ProportionValue::One(), start_location,
                       end_location) {}

  ProgressLogger(const ProgressLogger&) = delete;
  ProgressLogger& operator=(const ProgressLogger&) = delete;
  // The moved-from logger is inactive (it reports nothing more, not even at destruction).
  ProgressLogger(ProgressLogger&& other) noexcept
      : global_(other.global_), start_(other.start_), width_(other.width_),
        end_location_(other.end_location_) {
    other.global_ = nullptr;
  }
  // Takes over `other`'s range. This logger's own range is dropped without its end report:
  // the right-hand side (usually a new sub-logger) has already reported its start, and
  // reporting this one's end after it could make the progress go back. Call Finish() first
  // to report it.
  ProgressLogger& operator=(ProgressLogger&& other) noexcept {
    if (this != &other) {
      global_ = other.global_;
      start_ = other.start_;
      width_ = other.width_;
      end_location_ = other.end_location_;
      other.global_ = nullptr;
    }
    return *this;
  }
  ~ProgressLogger() { Finish(); }

  bool IsActive() const { return global_ != nullptr; }

  // Reports `local` (0..1 of this logger's range; invalid values are ignored) and the
  // location (null or empty: unchanged).
  void SetLocalProgress(ProportionValue local, const char* location = nullptr) {
    if (global_ && local.IsValid()) global_->Set(LocalToGlobal(local), location);
  }
  // SetLocalProgress(done / total); nothing when total is 0.
  void SetLocalProgress(uint64_t done, uint64_t total, const char* location = nullptr) {
    if (global_ && total != 0) {
      SetLocalProgress(ProportionValue::FromRatio(done < total ? done : total, total), location);
    }
  }
  // Reports local 1 and the end location now; the logger is inactive afterwards.
  void Finish() {
    if (!global_) return;
    global_->Set(LocalToGlobal(ProportionValue::One()), end_location_);
    global_ = nullptr;
  }

  // A logger for the sub-range [from, to] of this one's local range (from <= to; otherwise,
  // or when inactive, an inactive logger). It reports its local 0 (global `from`) now.
  [[nodiscard]] ProgressLogger CreateSubLogger(ProportionValue from, ProportionValue to,
                                               const char* start_location = nullptr,
                                               const char* end_location = nullptr) const {
    if (!global_ || !from.IsValid() || !to.IsValid() || from > to) return ProgressLogger();
    const ProportionValue global_from = LocalToGlobal(from);
    return ProgressLogger(global_, global_from, LocalToGlobal(to) - global_from, start_location,
                          end_location);
  }
  // Part `index` of `count` equal parts of [from, to]: parts made in order tile the range.
  [[nodiscard]] ProgressLogger CreateLoopSubLogger(ProportionValue from, ProportionValue to,
                                                   uint64_t index, uint64_t count,
                                                   const char* start_location = nullptr,
                                                   const char* end_location = nullptr) const {
    return CreateSubLogger(ProportionValue::SplitPoint(from, to, index, count),
                           ProportionValue::SplitPoint(from, to, index + 1, count),
                           start_location, end_location);
  }

  // The global progress and location (invalid / null when inactive).
  ProportionValue GlobalProgress() const {
    return global_ ? global_->Progress() : ProportionValue::Invalid();
  }
  const char* LastGlobalLocation() const { return global_ ? global_->LastLocation() : nullptr; }

 private:
  ProgressLogger(SharedProgress* global, ProportionValue start, ProportionValue width,
                 const char* start_location, const char* end_location)
      : global_(global), start_(start), width_(width), end_location_(end_location) {
    if (global_ && (!start_.IsValid() || !width_.IsValid())) global_ = nullptr;
    SetLocalProgress(ProportionValue::Zero(), start_location);
  }

  // start + local * width: within [start, start + width] (the product never exceeds width).
  ProportionValue LocalToGlobal(ProportionValue local) const { return start_ + local * width_; }

  SharedProgress* global_ = nullptr;
  ProportionValue start_;  // This logger's local 0 in the global range...
  ProportionValue width_;  // ...and the global length of its local 0..1.
  const char* end_location_ = nullptr;
};

}  // namespace strata

#endif  // STRATA_SHARED_PROGRESS_PROGRESS_LOGGER_H_
