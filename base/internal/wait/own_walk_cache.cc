// A program thread's recent own-stack walks, reused while the words they read hold
// (own_walk_cache.h). Runs on the program's thread: no lock, no allocation but raw mmap.
#include "base/internal/wait/own_walk_cache.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "platform/checked_read.h"
#include "platform/page_allocation.h"

namespace strata {
namespace base_internal {

struct OwnWalkCache::Entry {
  OwnWalkStart start;
  uintptr_t stack_high;  // The thread's stack end then (the walk stops there).
  bool valid;
  uint32_t capacity;  // The walk's: a shorter one may have been cut there.
  uint32_t frame_count;
  uint32_t read_count;
  uint64_t last_use;
  NativeFrame frames[kMaxFrames];
  WalkReadLog::Read reads[kMaxReads];
};

namespace {

// Whether a step of the walk that gave `frames` used an unwind rule that is a DWARF
// expression (its DW_OP_deref words are read directly, not logged: libunwind_imports.h).
// Each frame was stepped from (the last one too, when the walk ended): the first at its pc,
// the others at their return address - 1, as the walk looked them up.
bool SteppedThroughExpression(const NativeFrame* frames, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (InFunctionWithExpressionRule(i == 0 ? frames[0].pc : frames[i].pc - 1)) return true;
  }
  return false;
}

}  // namespace

OwnWalkCache::~OwnWalkCache() {
  if (entries_ != nullptr) FreePages(entries_, kEntries * sizeof(Entry));
}

bool OwnWalkCache::EnsureEntries() {
  if (entries_ == nullptr) {
    // Zeroed pages: every entry starts invalid.
    entries_ = static_cast<Entry*>(AllocatePages(kEntries * sizeof(Entry)));
  }
  return entries_ != nullptr;
}

// Not instrumented: the words are the stack's, read as the walk read them (one an rbp chain
// guessed may lie in a sanitizer's red zone).
__attribute__((no_sanitize("address", "thread"))) bool OwnWalkCache::StillHolds(
    const Entry& entry, uintptr_t stack_high) const {
  const uintptr_t low = entry.start.sp;
  for (uint32_t i = 0; i < entry.read_count; ++i) {
    const WalkReadLog::Read& read = entry.reads[i];
    uintptr_t now;
    if (read.address >= low && stack_high >= sizeof(uintptr_t) &&
        read.address <= stack_high - sizeof(uintptr_t)) {
      now = *reinterpret_cast<const uintptr_t*>(read.address);
    } else if (!CheckedRead(reinterpret_cast<const void*>(read.address), &now, sizeof(now))) {
      return false;
    }
    if (now != read.value) return false;
  }
  return true;
}

size_t OwnWalkCache::Walk(const OwnWalkStart& start, const ucontext_t& context,
                          uintptr_t stack_high, NativeFrame* frames, size_t capacity,
                          OwnWalkFunction walk, void* argument) {
  capacity = std::min(capacity, kMaxFrames);
  if (!EnsureEntries()) {
    bool ignored;
    return walk(argument, frames, capacity, &ignored);
  }
  ++uses_;
  Entry* oldest = &entries_[0];
  for (int i = 0; i < kEntries; ++i) {
    Entry& entry = entries_[i];
    if (entry.valid && entry.start == start && entry.stack_high == stack_high &&
        entry.capacity == capacity && StillHolds(entry, stack_high)) {
      entry.last_use = uses_;
      std::memcpy(frames, entry.frames, entry.frame_count * sizeof(NativeFrame));
      ++reuses_;
      return entry.frame_count;
    }
    if (oldest->valid && (!entry.valid || entry.last_use < oldest->last_use)) oldest = &entry;
  }
  // A new walk into the least recently used entry, its words logged there.
  Entry& entry = *oldest;
  entry.valid = false;
  WalkReadLog log;
  log.reads = entry.reads;
  log.capacity = kMaxReads;
  log.unlogged_low = reinterpret_cast<uintptr_t>(&context);
  log.unlogged_high = log.unlogged_low + sizeof(context);
  const uint64_t refused_before = RefusedLookupsOfThisThread();
  SetWalkReadLog(&log);
  bool reads_logged = false;
  const size_t count = walk(argument, frames, capacity, &reads_logged);
  SetWalkReadLog(nullptr);
  ++walks_;
  if (reads_logged && !log.overflowed && !log.unreadable && count <= kMaxFrames &&
      RefusedLookupsOfThisThread() == refused_before && !SteppedThroughExpression(frames, count)) {
    entry.start = start;
    entry.stack_high = stack_high;
    entry.capacity = static_cast<uint32_t>(capacity);
    entry.frame_count = static_cast<uint32_t>(count);
    entry.read_count = log.count;
    entry.last_use = uses_;
    std::memcpy(entry.frames, frames, count * sizeof(NativeFrame));
    entry.valid = true;
  }
  return count;
}

}  // namespace base_internal
}  // namespace strata
