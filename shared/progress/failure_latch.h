// FailureLatch: the first unrecoverable failure of a long operation (a profile capture),
// kept with its message, so that every part of the operation can stop early and the caller
// gets one clear error. After Firefox's FailureLatchSource.
//
// A latch made with the default constructor is a source: it owns the state. A child latch
// (made from a parent) shares its source's state: a failure set through any latch of the
// family is the family's failure, and every member sees it. A child may prefix its messages
// with a context ("thread 12: ").
//
//   FailureLatch latch;                           // The source, owned by the operation.
//   FailureLatch writing(latch, "threads: ");     // Given to a part of it.
//   if (!ok) writing.SetFailure("write(/tmp/p.json): No space left on device");
//   if (latch.Failed()) return latch.Failure();   // "threads: write(/tmp/p.json): ..."
//
// Only the first failure is kept; later ones are ignored. Failed() is one atomic load.
//
// Thread safety: thread-safe (failures may be set and read from any thread). A child must
// not outlive its source. Async-signal safety: Failed() only.
#ifndef STRATA_SHARED_PROGRESS_FAILURE_LATCH_H_
#define STRATA_SHARED_PROGRESS_FAILURE_LATCH_H_

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace strata {

class FailureLatch {
 public:
  // A source: no failure yet.
  FailureLatch() = default;
  // A child of `parent` (a source or another child): shares the source's state. `context` is
  // prefixed to the messages set through this latch (after the parent's own context); it may
  // be empty.
  FailureLatch(FailureLatch& parent, std::string_view context)
      : state_(parent.state_), context_(parent.context_) {
    context_.append(context.data(), context.size());
  }
  FailureLatch(const FailureLatch&) = delete;
  FailureLatch& operator=(const FailureLatch&) = delete;

  // True once any latch of the family failed (even while the message is being stored).
  bool Failed() const { return state_->status.load(std::memory_order_acquire) != kOk; }

  // Records `message` (with this latch's context) as the family's failure, unless one was
  // recorded before. Returns true when this call's message is the one kept. An empty message
  // is recorded as "unknown failure".
  bool SetFailure(std::string_view message) {
    int expected = kOk;
    if (!state_->status.compare_exchange_strong(expected, kStoring, std::memory_order_acq_rel)) {
      return false;
    }
    state_->message = context_;
    if (message.empty()) {
      state_->message += "unknown failure";
    } else {
      state_->message.append(message.data(), message.size());
    }
    state_->status.store(kFailed, std::memory_order_release);
    return true;
  }

  // The first failure's message, or "" when none. Stays valid and unchanged for the source's
  // life once non-empty.
  const std::string& Failure() const {
    static const std::string* const kNone = new std::string();
    int status = state_->status.load(std::memory_order_acquire);
    if (status == kOk) return *kNone;
    // Another thread is storing the message: a few instructions away.
    while (status == kStoring) {
      sched_yield();
      status = state_->status.load(std::memory_order_acquire);
    }
    return state_->message;
  }

  // This latch's message prefix ("" for a source made with no context).
  const std::string& context() const { return context_; }

 private:
  enum : int { kOk = 0, kStoring = 1, kFailed = 2 };
  struct State {
    std::atomic<int> status{kOk};
    std::string message;  // Written once, by the thread that moved status from kOk.
  };

  State own_;
  State* state_ = &own_;  // own_ for a source; the source's own_ for a child.
  std::string context_;
};

}  // namespace strata

#endif  // STRATA_SHARED_PROGRESS_FAILURE_LATCH_H_
