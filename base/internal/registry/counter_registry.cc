// The counter registry (counter_registry.h) and ProfilerCounter's registration (counters.h).
#include "base/internal/registry/counter_registry.h"

#include <sys/syscall.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "base/counters.h"
#include "base/internal/session/core.h"
#include "platform/never_destroyed.h"
#include "platform/mutex.h"
#include "platform/raw_syscall.h"
#include "shared/buffer/entry_kinds.h"

namespace strata {
namespace base_internal {

namespace {

// ---------------------------------------------------------------------------------------
// Counters.

struct CounterRegistry {
  Mutex mutex{"strata counters"};
  std::vector<ProfilerCounter*> counters;  // Index = counter id; null once destroyed.
  // Last sampled (value, operations) of each counter in this session; none before its first
  // sample of the session, so that every session samples every live counter at least once.
  std::vector<std::optional<std::pair<int64_t, uint64_t>>> last;
};
CounterRegistry& GetCounters() {
  static NeverDestroyed<CounterRegistry> counters;
  return counters.get();
}

}  // namespace

void SampleCounters(TimeStamp now) {
  CounterRegistry& counters = GetCounters();
  AutoLock lock(counters.mutex);
  for (size_t i = 0; i < counters.counters.size(); ++i) {
    ProfilerCounter* counter = counters.counters[i];
    if (!counter) continue;
    const std::pair<int64_t, uint64_t> current(counter->value(), counter->operations());
    if (counters.last[i] == current) continue;  // Unchanged since its last sample.
    counters.last[i] = current;
    GetSession().buffer.PutObjects(EntryKind::kCounterSample, static_cast<uint32_t>(i), now,
                                   current.first, current.second);
  }
}

void ForgetCounterSamples() {
  CounterRegistry& counters = GetCounters();
  AutoLock lock(counters.mutex);
  for (auto& last : counters.last) last.reset();
}

namespace {
// A fork()ed child neither registers nor unregisters counters: nothing samples them there,
// and the counter list's lock may be held by the parent's sampler thread, which the child
// does not have.
int RegisterCounter(ProfilerCounter* counter) {
  if (IsForkedChild()) return -1;
  CounterRegistry& counters = GetCounters();
  AutoLock lock(counters.mutex);
  counters.counters.push_back(counter);
  counters.last.emplace_back();  // Sampled at the next sampling loop.
  return static_cast<int>(counters.counters.size() - 1);
}

// A counter destroyed during a session is missing from every profile written after it (the
// exit save of a global counter, destroyed when main returns, above all): said once per
// process on stderr, with a raw write (no stdio, no allocation on the program's thread).
void WarnCounterDestroyedWhileProfiling(const ProfilerCounter* counter) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true, std::memory_order_relaxed)) return;
  char message[512];
  size_t length = 0;
  auto append = [&](const char* text) {
    const size_t n = std::min(strlen(text), sizeof(message) - 1 - length);
    memcpy(message + length, text, n);
    length += n;
  };
  append("strata: warning: counter '");
  append(counter->name() != nullptr ? counter->name() : "?");
  append("' was destroyed while profiling: it is missing from the profile saved afterwards (a global or "
         "static ProfilerCounter is destroyed before the exit save); allocate it with new and never delete "
         "it (docs/api.md, \"Counters\")\n");
  RawSyscall(SYS_write, 2, reinterpret_cast<long>(message), static_cast<long>(length));
}

void UnregisterCounter(ProfilerCounter* counter) {
  if (IsForkedChild()) return;
  if (ProfilerIsActive() && !IsOtherProcess()) WarnCounterDestroyedWhileProfiling(counter);
  CounterRegistry& counters = GetCounters();
  AutoLock lock(counters.mutex);
  for (ProfilerCounter*& c : counters.counters) {
    if (c == counter) c = nullptr;
  }
}

}  // namespace

std::vector<CounterDescription> CounterDescriptions() {
  if (IsForkedChild()) return {};
  CounterRegistry& counters = GetCounters();
  AutoLock lock(counters.mutex);
  std::vector<CounterDescription> out;
  for (ProfilerCounter* c : counters.counters) {
    out.push_back(c ? CounterDescription{c->name(), c->category(), c->description()}
                    : CounterDescription{nullptr, nullptr, nullptr});
  }
  return out;
}

}  // namespace base_internal

// ---------------------------------------------------------------------------------------
// Public API (counters.h).

using namespace base_internal;

ProfilerCounter::ProfilerCounter(const char* name, const char* category, const char* description)
    : name_(name), category_(category), description_(description) {
  RegisterCounter(this);
}
ProfilerCounter::~ProfilerCounter() { UnregisterCounter(this); }

}  // namespace strata
