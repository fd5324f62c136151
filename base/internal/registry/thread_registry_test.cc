// The thread registry's memory under thread churn (issue 16): entries of ended threads are
// reclaimed once the buffer holds nothing of them.
#include "base/internal/registry/thread_registry.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>

#include "base/markers.h"
#include "base/profiler.h"
#include "catch2/catch.hpp"

namespace {

using strata::AutoLock;
using strata::base_internal::GetRegistry;
using strata::base_internal::kMinPruneBatch;

size_t RegistryEntries() {
  auto& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  return registry.infos.size();
}

// Runs `count` short registered threads one after the other, each doing `work`.
template <typename F>
void RunShortThreads(int count, F work) {
  for (int i = 0; i < count; ++i) {
    std::thread([&] {
      strata::AutoProfilerRegisterThread registration("short");
      work();
    }).join();
  }
}

// A sanitizer's runtime owns operator new/delete (ASan reports memory allocated by its new and
// freed by a replacement's free): the replacement, and the case that counts through it, are
// left out there.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// The program's operator new/delete (this test's): counts the calls a thread makes while its
// t_count_allocations is set.
thread_local bool t_count_allocations = false;
std::atomic<long> g_counted_allocations{0};

}  // namespace

void* operator new(size_t bytes) {
  if (t_count_allocations) g_counted_allocations.fetch_add(1);
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  if (t_count_allocations && p) g_counted_allocations.fetch_add(1);
  std::free(p);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }

// Issue 33: a long name the program gives (longer than std::string's 15 in-place characters)
// was made with the program's operator new and, when a later thread's end pruned the entry,
// freed with the program's operator delete on that thread. Names are Strata's own memory now.
TEST_CASE("Long thread names never reach the program's operator new or delete") {
  REQUIRE_FALSE(strata::ProfilerIsActive());
  const std::string long_name(200, 'n');
  g_counted_allocations.store(0);
  for (int i = 0; i < 4 * static_cast<int>(kMinPruneBatch); ++i) {
    std::thread([&] {
      t_count_allocations = true;
      {
        strata::AutoProfilerRegisterThread registration(long_name.c_str());
      }  // Unregistered: every max(256, live) ends prune the ended threads' entries.
      t_count_allocations = false;
    }).join();
  }
  CHECK(g_counted_allocations.load() == 0);
  // The names are kept whole: the registry's copy of a live one.
  std::thread([&] {
    strata::AutoProfilerRegisterThread registration(long_name.c_str());
    auto& registry = GetRegistry();
    AutoLock lock(registry.mutex);
    bool found = false;
    for (const auto& info : registry.infos) found = found || info.name.view() == long_name;
    CHECK(found);
  }).join();
}
#else
}  // namespace
#endif  // !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)

// A thread registered before (by pthread_create's wrapper or by the program) keeps its
// registration after an AutoProfilerRegisterThread scope: the scope undoes only its own.
TEST_CASE("AutoProfilerRegisterThread undoes only a registration it made") {
  std::thread([] {
    // Registered by pthread_create's wrapper: this scope leaves it registered.
    const bool registered_at_start = strata::ProfilerIsThreadRegistered();
    {
      strata::AutoProfilerRegisterThread scoped("scoped");
    }
    CHECK(strata::ProfilerIsThreadRegistered() == registered_at_start);
    strata::ProfilerUnregisterThread();
    CHECK_FALSE(strata::ProfilerIsThreadRegistered());
    {
      strata::AutoProfilerRegisterThread scoped("scoped");
      CHECK(strata::ProfilerIsThreadRegistered());
    }
    CHECK_FALSE(strata::ProfilerIsThreadRegistered());
    strata::ProfilerRegisterThread("first");
    {
      strata::AutoProfilerRegisterThread scoped("second");
      CHECK(strata::ProfilerIsThreadRegistered());
    }
    CHECK(strata::ProfilerIsThreadRegistered());  // Unregistered here before.
    strata::ProfilerUnregisterThread();
  }).join();
}

TEST_CASE("Out of session, ended threads leave no registry entry behind") {
  REQUIRE_FALSE(strata::ProfilerIsActive());
  const size_t before = RegistryEntries();
  RunShortThreads(4 * static_cast<int>(kMinPruneBatch), [] {});
  CHECK(RegistryEntries() <= before + kMinPruneBatch);
}

TEST_CASE("In session, an ended thread's entry goes when nothing of it is in the buffer") {
  strata::ProfilerSettings settings;
  settings.buffer_megabytes = 1;
  settings.features = strata::kFeatureThreads;  // No stack walks: markers only matter here.
  strata::AutoProfilerSession session(settings);
  const size_t live = RegistryEntries();

  SECTION("threads that recorded nothing: reclaimed in batches") {
    RunShortThreads(4 * static_cast<int>(kMinPruneBatch), [] {});
    CHECK(RegistryEntries() <= live + kMinPruneBatch);
  }
  SECTION("threads with a marker: kept while the buffer holds it, then reclaimed") {
    const std::string payload(1000, 'x');
    auto record = [&] { STRATA_MARKER_TEXT("churn", kOther, strata::MarkerOptions(), payload); };
    RunShortThreads(100, record);
    const strata::base_internal::SessionSnapshot kept = strata::base_internal::TakeSessionSnapshot();
    CHECK(kept.threads.size() >= live + 100);  // All 100 markers fit in 1 MiB.
    // 3000 markers of ~1 kB each: a 1 MiB buffer keeps about the last 1000.
    RunShortThreads(3000, record);
    const strata::base_internal::SessionSnapshot after = strata::base_internal::TakeSessionSnapshot();
    CHECK(after.threads.size() <= live + 1100);
    CHECK(after.threads.size() >= live + 500);
  }
}

// Not under AddressSanitizer: a thread that ends with a raw SYS_exit skips ASan's own thread
// teardown too, and the next thread glibc starts on the joined thread's cached stack aborts
// in ASan's start-up ("AsanTSDGet() == 0" CHECK failed; seen in a fresh-clone CI run). The
// scenario //tests/host_safety/process_life:thread_ends_test covers the same ending plain.
// Nor under ThreadSanitizer: the thread skips TSan's thread teardown, and TSan's pthread_join
// waits for it forever (in ThreadRegistry::JoinThread).
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// Issue 33: a registered thread that ends with a raw SYS_exit runs no thread-specific-data
// destructor; its robust liveness mutex is marked by the kernel and the registration is
// reclaimed by the next sweep (here called directly, out of session), however its tid is
// reused; a live thread's is not.
TEST_CASE("A thread ended by a raw SYS_exit is reclaimed; live threads are not") {
  auto live_count = [] {
    auto& registry = GetRegistry();
    AutoLock lock(registry.mutex);
    return registry.live.size();
  };
  auto reclaim = [] {
    auto& registry = GetRegistry();
    AutoLock lock(registry.mutex);
    return strata::base_internal::ReclaimDeadThreadsLocked(registry);
  };
  (void)reclaim();  // Anything an earlier case left.
  const size_t before = live_count();
  for (int i = 0; i < 20; ++i) {
    pthread_t thread;
    REQUIRE(pthread_create(
                &thread, nullptr,
                [](void*) -> void* {
                  strata::ProfilerRegisterThread("raw-exit");
                  for (;;) syscall(SYS_exit, 0);
                },
                nullptr) == 0);
    pthread_join(thread, nullptr);  // The kernel clears the tid word: join works.
  }
  CHECK(live_count() == before + 20);
  // A live registered thread that waits meanwhile is kept.
  std::atomic<bool> release{false};
  std::thread live([&] {
    strata::ProfilerRegisterThread("alive");
    while (!release.load()) std::this_thread::yield();
  });
  while (live_count() != before + 21) std::this_thread::yield();
  CHECK(reclaim() == 20);
  CHECK(live_count() == before + 1);
  release.store(true);
  live.join();
  CHECK(live_count() == before);
  CHECK(reclaim() == 0);
}

// Out of session no sampler loop sweeps: the registrations do, every max(kMinPruneBatch, live
// threads after the last sweep) of them, and they prune the swept entries too. Before, only
// an ordinary thread's end pruned them, and the sweep's period counted the dead threads not
// swept yet, so it never came again after the first: a program whose threads all end by a
// raw SYS_exit kept a registration (12 KiB) and an entry for each (1 024 of 1 024 here).
TEST_CASE("Out of session, threads ended by a raw SYS_exit leave no registry entry behind") {
  REQUIRE_FALSE(strata::ProfilerIsActive());
  const size_t before = RegistryEntries();
  const int threads = 4 * static_cast<int>(kMinPruneBatch);
  for (int i = 0; i < threads; ++i) {
    pthread_t thread;
    REQUIRE(pthread_create(
                &thread, nullptr,
                [](void*) -> void* {
                  strata::ProfilerRegisterThread("raw-exit");
                  for (;;) syscall(SYS_exit, 0);
                },
                nullptr) == 0);
    pthread_join(thread, nullptr);
  }
  CHECK(RegistryEntries() <= before + 2 * kMinPruneBatch);
  auto& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  CHECK(registry.live.size() <= 2 * kMinPruneBatch);  // Swept again and again, not once.
}
#endif  // !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
