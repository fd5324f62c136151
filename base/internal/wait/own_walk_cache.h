// A program thread's recent walks of its own stack at the end of wrapped calls, kept for the
// next call from the same place (own_samples.h: a wait the sampler never walked, a call's
// kernel CPU). Such a walk runs on the program's thread, in the call's return path: ~0.15 us
// a frame with libunwind, 30 us at 200 frames, at the end of every short wait of a loop
// (realtime_test: a real-time thread's wake-up lateness). A loop waits from the same few
// places, with the same stack above them.
//
// Why a reuse is exact: the walk starts from the caller's pc, sp and fp (the other registers
// zero), and libunwind's local build reads program memory through its accessor for the stack
// words its unwind rules name (its tables come from checked copies of the loaded objects'
// own: unwind_table_copy.h). Every such word is logged (WalkReadLog). A later walk from the
// same registers, under the same sampling features and stack bounds, whose logged words all
// hold the same values now, would take the same steps and give the same frames: they are
// copied instead. Not kept, because some input was not logged or may change by itself:
//   - a walk that read frame pointers (directly);
//   - one that stepped through a function whose rule is a DWARF expression: libunwind reads
//     an expression's DW_OP_deref words directly (glibc's signal trampoline __restore_rt,
//     so every walk across a signal frame; GCC's realigned frames; the PLT);
//   - one during which a lookup was refused for a passing reason (a busy copy slot, an
//     unreadable byte), or a read failed (its readability was an input), or the log
//     overflowed.
// Only the loaded objects could differ (an object unloaded and another loaded at its address
// since); the frames then name the same addresses a new walk would have started from, and
// symbols are resolved from the module list at save time in both cases.
//
// Cost of a reuse: one load and compare per logged word (in-stack words: plain loads above
// the start sp; any other through CheckedRead). Memory: kEntries entries of the thread's own
// pages (page_allocation.h), mapped at its first walk (~190 KiB of address space, touched as
// far as the walks reach: ~13 KiB for a 200-frame walk), unmapped with the thread's record.
//
// Thread safety: one thread's (the owner's; a RegisteredThread's, used in its own wrappers
// with every signal blocked). Async-signal-safe: no lock, no allocation but raw mmap.
#ifndef STRATA_BASE_INTERNAL_WAIT_OWN_WALK_CACHE_H_
#define STRATA_BASE_INTERNAL_WAIT_OWN_WALK_CACHE_H_

#include <ucontext.h>

#include <cstddef>
#include <cstdint>

#include "base/internal/session/session_state.h"
#include "platform/sampling/libunwind_imports.h"
#include "platform/sampling/native_frame.h"

namespace strata {
namespace base_internal {

// Where a walk starts: a wrapped call's caller registers (the walk's ucontext holds these
// and zeros), and the sampling features that decide how it walks.
struct OwnWalkStart {
  uintptr_t pc;
  uintptr_t sp;
  uintptr_t fp;
  uint32_t features;
  bool operator==(const OwnWalkStart& other) const {
    return pc == other.pc && sp == other.sp && fp == other.fp && features == other.features;
  }
};

// The walk the cache calls on a miss: frames into `frames` (at most `capacity`), the words
// read logged in the thread's WalkReadLog (set by the cache meanwhile); *reads_logged false
// when some were read otherwise (WalkCallerStack).
using OwnWalkFunction = size_t (*)(void* argument, NativeFrame* frames, size_t capacity,
                                   bool* reads_logged);

class OwnWalkCache {
 public:
  static constexpr int kEntries = 4;
  static constexpr size_t kMaxFrames = 1023;  // SampleSlot::kMaxNativeFrames less the leaf
                                              // (static_assert in own_samples.cc).
  static constexpr uint32_t kMaxReads = 2048;

  OwnWalkCache() = default;
  ~OwnWalkCache();
  OwnWalkCache(const OwnWalkCache&) = delete;
  OwnWalkCache& operator=(const OwnWalkCache&) = delete;

  // The frames of the walk from `start` into `frames` (at most min(capacity, kMaxFrames)):
  // copied from a kept walk whose words still hold, or walked by `walk` (and kept when its
  // reads were all logged). `context` is the ucontext the walk starts from (its registers:
  // start's pc, sp and fp, the others zero), whose own words are not logged. `stack_high` is
  // the thread's stack end: logged words in [start.sp, stack_high) are read directly, others
  // with CheckedRead.
  size_t Walk(const OwnWalkStart& start, const ucontext_t& context, uintptr_t stack_high,
              NativeFrame* frames, size_t capacity, OwnWalkFunction walk, void* argument);

  // For tests and the sampler's statistics: walks copied, walks made.
  uint64_t reuses() const { return reuses_; }
  uint64_t walks() const { return walks_; }

 private:
  struct Entry;
  bool EnsureEntries();
  bool StillHolds(const Entry& entry, uintptr_t stack_high) const;

  Entry* entries_ = nullptr;  // kEntries of them, mapped at the first walk.
  uint64_t uses_ = 0;         // The clock of least-recent replacement.
  uint64_t reuses_ = 0;
  uint64_t walks_ = 0;
};

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_WAIT_OWN_WALK_CACHE_H_
