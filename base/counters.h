// Counters: numbers the program maintains (bytes in a cache, requests in flight) read by the
// profiler's sampler thread at each of its loops and shown as a track. A sample is written
// when the value or the operation count changed, at a session's first loop for every counter,
// and at the first loop after its construction for one made during a session (docs/api.md).
//
//   static auto* const g_cache_bytes =  // Never destroyed (below).
//       new strata::ProfilerCounter("Cache bytes", "Memory", "Bytes in the cache");
//   g_cache_bytes->Add(+4096);
//
// A counter registers itself at construction and unregisters at destruction; a profile lists
// only the counters registered when it is written, so a counter must outlive every session
// that samples it. A global or static ProfilerCounter object is destroyed when main returns,
// before the exit save (STRATA_SHUTDOWN) writes the profile, and is then missing from it:
// allocate it and never destroy it, as above (docs/api.md). "Memory" as category makes the
// front-end draw an accumulated-bytes graph.
//
// In a fork()ed child, construction and destruction do not touch the counter list (nothing
// samples counters there, and its lock may have been held at the fork).
//
// Thread safety: Add/Set are thread-safe (relaxed atomics, a few ns); construction and
// destruction lock the counter list. Async-signal safety: Add/Set are async-signal-safe.
#ifndef STRATA_BASE_COUNTERS_H_
#define STRATA_BASE_COUNTERS_H_

#include <atomic>
#include <cstdint>

namespace strata {

class ProfilerCounter {
 public:
  // The strings must have static storage.
  ProfilerCounter(const char* name, const char* category, const char* description);
  ~ProfilerCounter();
  ProfilerCounter(const ProfilerCounter&) = delete;
  ProfilerCounter& operator=(const ProfilerCounter&) = delete;

  // Changes the value by `delta` and counts one operation.
  void Add(int64_t delta) {
    value_.fetch_add(delta, std::memory_order_relaxed);
    operations_.fetch_add(1, std::memory_order_relaxed);
  }
  // Sets the value (counts one operation).
  void Set(int64_t value) {
    value_.store(value, std::memory_order_relaxed);
    operations_.fetch_add(1, std::memory_order_relaxed);
  }

  int64_t value() const { return value_.load(std::memory_order_relaxed); }
  uint64_t operations() const { return operations_.load(std::memory_order_relaxed); }
  const char* name() const { return name_; }
  const char* category() const { return category_; }
  const char* description() const { return description_; }

 private:
  const char* const name_;
  const char* const category_;
  const char* const description_;
  std::atomic<int64_t> value_{0};
  std::atomic<uint64_t> operations_{0};
};

}  // namespace strata

#endif  // STRATA_BASE_COUNTERS_H_
