#include "platform/sampling/stack_bounds.h"

#include <pthread.h>
#include <limits.h>
#include <sched.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"

namespace strata {
namespace {

uintptr_t AddressOfALocal() {
  volatile int local = 0;
  return reinterpret_cast<uintptr_t>(&local);
}

TEST_CASE("StackBounds: the main thread's bounds contain its locals", "[platform][sampling]") {
  const StackBounds bounds = StackBounds::OfCurrentThread();
  REQUIRE_FALSE(bounds.IsEmpty());
  CHECK(bounds.Contains(AddressOfALocal()));
  CHECK(bounds.size() >= 64 * 1024);
}

TEST_CASE("StackBounds: the main stack's reach holds the main thread's stack and more",
          "[platform][sampling]") {
  const StackBounds reach = StackBounds::MainStackReach();
  REQUIRE_FALSE(reach.IsEmpty());
  CHECK(reach.Contains(AddressOfALocal()));
  // It can grow down to at least where glibc says the soft limit allows (or the mapping
  // below): the reach is never smaller than the bounds glibc reports.
  const StackBounds bounds = StackBounds::OfCurrentThread();
  CHECK(reach.high >= bounds.high);
  CHECK(reach.low <= AddressOfALocal());
}

TEST_CASE("StackBounds: the main thread's, read from any thread, are what glibc reports",
          "[platform][sampling]") {
  pthread_attr_t attributes;
  REQUIRE(pthread_getattr_np(pthread_self(), &attributes) == 0);
  void* address = nullptr;
  size_t size = 0;
  REQUIRE(pthread_attr_getstack(&attributes, &address, &size) == 0);
  pthread_attr_destroy(&attributes);
  const StackBounds main_stack = StackBounds::OfMainThread();
  CHECK(main_stack.low == reinterpret_cast<uintptr_t>(address));
  CHECK(main_stack.high == reinterpret_cast<uintptr_t>(address) + size);
  const StackBounds own = StackBounds::OfCurrentThread();
  CHECK(own.low == main_stack.low);
  CHECK(own.high == main_stack.high);
}

// pthread_getattr_np's stack of `thread`: the whole stack block, TCB and static TLS included.
StackBounds GlibcStack(pthread_t thread) {
  pthread_attr_t attributes;
  if (pthread_getattr_np(thread, &attributes) != 0) return StackBounds();
  void* address = nullptr;
  size_t size = 0;
  pthread_attr_getstack(&attributes, &address, &size);
  pthread_attr_destroy(&attributes);
  StackBounds bounds;
  bounds.low = reinterpret_cast<uintptr_t>(address);
  bounds.high = bounds.low + size;
  return bounds;
}

struct ThreadResult {
  StackBounds bounds;
  uintptr_t local = 0;
  StackBounds glibc;  // pthread_getattr_np's.
  uintptr_t thread_pointer = 0;  // pthread_self(): glibc's TCB, at the stack block's top.
};

void* CaptureBounds(void* argument) {
  ThreadResult* result = static_cast<ThreadResult*>(argument);
  result->bounds = StackBounds::OfCurrentThread();
  result->local = AddressOfALocal();
  result->glibc = GlibcStack(pthread_self());
  result->thread_pointer = reinterpret_cast<uintptr_t>(pthread_self());
  return nullptr;
}

TEST_CASE("StackBounds: NarrowedTo keeps the part inside a given stack",
          "[platform][sampling]") {
  StackBounds mapping;
  mapping.low = 0x10000;
  mapping.high = 0x90000;
  StackBounds given;
  given.low = 0x20000;
  given.high = 0x30000;
  const StackBounds narrowed = mapping.NarrowedTo(given);
  CHECK(narrowed.low == given.low);
  CHECK(narrowed.high == given.high);
  const StackBounds unknown = StackBounds().NarrowedTo(given);
  CHECK(unknown.low == given.low);
  CHECK(unknown.high == given.high);
  // No stack given (pthread_create without one): the mapping as it is.
  const StackBounds not_given = mapping.NarrowedTo(StackBounds());
  CHECK(not_given.low == mapping.low);
  CHECK(not_given.high == mapping.high);
}

TEST_CASE("StackBounds: a thread's bounds are its stack, of the size it was given",
          "[platform][sampling]") {
  // 2 MiB, not the default 8 MiB, and above the smallest stack the sanitizers' pthread_create
  // leaves alone: they enlarge a smaller request to their TLS size + 128 KiB
  // (AdjustStackSize in sanitizer_common; under TSan 256 KiB became 921 088 bytes).
  constexpr size_t kStackSize = 2 * 1024 * 1024;
  pthread_attr_t attributes;
  REQUIRE(pthread_attr_init(&attributes) == 0);
  REQUIRE(pthread_attr_setstacksize(&attributes, kStackSize) == 0);
  ThreadResult result;
  pthread_t thread;
  REQUIRE(pthread_create(&thread, &attributes, &CaptureBounds, &result) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attributes);

  REQUIRE_FALSE(result.bounds.IsEmpty());
  CHECK(result.bounds.Contains(result.local));
  // The stack block minus its TCB and static TLS at the top.
  CHECK(result.bounds.size() >= kStackSize - 64 * 1024);
  CHECK(result.bounds.size() <= kStackSize + 64 * 1024);
  // Not the main thread's stack.
  CHECK_FALSE(result.bounds.Contains(AddressOfALocal()));
}

void* CaptureMainThreadBounds(void* argument) {
  auto* main_thread = static_cast<std::pair<pthread_t, StackBounds>*>(argument);
  main_thread->second = StackBounds::OfThread(main_thread->first);
  return nullptr;
}

struct WaitingThread {
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  StackBounds own;
};

void* CaptureBoundsAndWait(void* argument) {
  auto* waiting = static_cast<WaitingThread*>(argument);
  waiting->own = StackBounds::OfCurrentThread();
  waiting->started.store(true);
  while (!waiting->release.load()) sched_yield();
  return nullptr;
}

TEST_CASE("StackBounds: OfThread gives another thread's bounds, as that thread sees them",
          "[platform][sampling]") {
  // The main thread's bounds read from a second thread (the profiler reads them so when
  // sampling starts; for the main thread this parses /proc/self/maps).
  std::pair<pthread_t, StackBounds> main_thread{pthread_self(), StackBounds()};
  pthread_t other;
  REQUIRE(pthread_create(&other, nullptr, &CaptureMainThreadBounds, &main_thread) == 0);
  pthread_join(other, nullptr);
  const StackBounds own = StackBounds::OfCurrentThread();
  REQUIRE_FALSE(own.IsEmpty());
  CHECK(main_thread.second.low == own.low);
  CHECK(main_thread.second.high == own.high);

  // A live second thread's bounds read from the main thread.
  WaitingThread waiting;
  REQUIRE(pthread_create(&other, nullptr, &CaptureBoundsAndWait, &waiting) == 0);
  while (!waiting.started.load()) sched_yield();
  const StackBounds seen = StackBounds::OfThread(other);
  waiting.release.store(true);
  pthread_join(other, nullptr);
  REQUIRE_FALSE(seen.IsEmpty());
  CHECK(seen.low == waiting.own.low);
  CHECK(seen.high == waiting.own.high);
  CHECK_FALSE(seen.Contains(AddressOfALocal()));
}

TEST_CASE("StackBounds: Contains and ContainsRange are half-open and overflow-safe",
          "[platform][sampling]") {
  StackBounds bounds;
  bounds.low = 0x1000;
  bounds.high = 0x2000;
  CHECK(bounds.Contains(0x1000));
  CHECK(bounds.Contains(0x1fff));
  CHECK_FALSE(bounds.Contains(0x2000));
  CHECK_FALSE(bounds.Contains(0xfff));
  CHECK(bounds.ContainsRange(0x1ff0, 16));
  CHECK_FALSE(bounds.ContainsRange(0x1ff8, 16));
  CHECK_FALSE(bounds.ContainsRange(0x1ff8, SIZE_MAX));
  CHECK_FALSE(bounds.ContainsRange(0xff8, 16));
  CHECK(StackBounds().IsEmpty());
  CHECK_FALSE(StackBounds().Contains(0));
}

// Runs the enclosing test once with the PROCMAP_QUERY ioctl (where the kernel has it) and
// once reading the file's lines, as on kernels before 6.11.
#define FOR_BOTH_MAPS_READS()                                                   \
  const bool maps_file_read_forced = GENERATE(false, true);                     \
  INFO("maps file read forced: " << maps_file_read_forced);                     \
  StackBounds::ForceMapsFileReadForTesting(maps_file_read_forced);              \
  struct ResetMapsRead {                                                        \
    ~ResetMapsRead() { StackBounds::ForceMapsFileReadForTesting(false); }       \
  } reset_maps_read

TEST_CASE("StackBounds: a thread's own bounds, read without allocating, are glibc's",
          "[platform][sampling]") {
  FOR_BOTH_MAPS_READS();
  // Read from /proc/self/maps (the mapping that holds the frame), they equal what glibc's
  // pthread_getattr_np reports for stacks it allocated, of every size (last in this file:
  // glibc's stack cache may hand a later thread one of these larger stacks).
  for (const size_t stack_size : {size_t{0}, size_t{PTHREAD_STACK_MIN}, size_t{64 * 1024},
                                  size_t{2 * 1024 * 1024}}) {
    pthread_attr_t attributes;
    REQUIRE(pthread_attr_init(&attributes) == 0);
    if (stack_size != 0) REQUIRE(pthread_attr_setstacksize(&attributes, stack_size) == 0);
    ThreadResult result;
    pthread_t thread;
    REQUIRE(pthread_create(&thread, &attributes, &CaptureBounds, &result) == 0);
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attributes);
    INFO("stack size " << stack_size);
    REQUIRE_FALSE(result.glibc.IsEmpty());
    CHECK(result.bounds.low == result.glibc.low);
    // glibc's end is the stack block's; the frames end below the TCB, the thread pointer.
    CHECK(result.bounds.high == result.thread_pointer);
    CHECK(result.bounds.high <= result.glibc.high);
    CHECK(result.bounds.Contains(result.local));
  }
}

TEST_CASE("StackBounds: a stack inside a larger mapping ends at the thread's TCB",
          "[platform][sampling]") {
  FOR_BOTH_MAPS_READS();
  // One anonymous rw mapping, its lower half given as a thread's stack: the same /proc/self/maps
  // view as a glibc stack the kernel merged with an anonymous mapping above it (a large malloc
  // chunk, on kernels before 6.7), which the program may unmap while the thread runs. glibc
  // places the TCB at the top of a given stack too; the bounds must end there, below the
  // upper half.
  constexpr size_t kHalf = 1024 * 1024;
  void* mapping = mmap(nullptr, 2 * kHalf, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  REQUIRE(mapping != MAP_FAILED);
  const uintptr_t upper_half = reinterpret_cast<uintptr_t>(mapping) + kHalf;
  pthread_attr_t attributes;
  REQUIRE(pthread_attr_init(&attributes) == 0);
  REQUIRE(pthread_attr_setstack(&attributes, mapping, kHalf) == 0);
  ThreadResult result;
  pthread_t thread;
  REQUIRE(pthread_create(&thread, &attributes, &CaptureBounds, &result) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attributes);
  munmap(mapping, 2 * kHalf);

  REQUIRE_FALSE(result.bounds.IsEmpty());
  CHECK(result.bounds.low == reinterpret_cast<uintptr_t>(mapping));
  CHECK(result.bounds.Contains(result.local));
  CHECK(result.bounds.high == result.thread_pointer);
  CHECK(result.bounds.high <= upper_half);
  CHECK_FALSE(result.bounds.Contains(upper_half));
}
TEST_CASE("StackBounds: the main thread's, read both ways, are glibc's", "[platform][sampling]") {
  FOR_BOTH_MAPS_READS();
  const StackBounds glibc = GlibcStack(pthread_self());
  const StackBounds own = StackBounds::OfCurrentThread();
  CHECK(own.low == glibc.low);
  CHECK(own.high == glibc.high);
  const StackBounds reach = StackBounds::MainStackReach();
  REQUIRE_FALSE(reach.IsEmpty());
  CHECK(reach.Contains(AddressOfALocal()));
  CHECK(reach.low <= glibc.low);
}

// A maps file served from a string, at most `chunk` bytes per read.
struct SyntheticMaps {
  std::string text;
  size_t chunk = 0;
};

long ReadSyntheticMaps(void* context, char* into, size_t capacity, uint64_t offset) {
  const auto* maps = static_cast<const SyntheticMaps*>(context);
  if (offset >= maps->text.size()) return 0;
  const size_t count = std::min({capacity, maps->chunk, maps->text.size() - offset});
  std::memcpy(into, maps->text.data() + offset, count);
  return static_cast<long>(count);
}

TEST_CASE("StackBounds: a maps line longer than the buffer is skipped whole",
          "[platform][sampling]") {
  using stack_bounds_internal::FindInMaps;
  using stack_bounds_internal::kMapsBufferSize;
  using stack_bounds_internal::MapsLine;
  // A 3000-byte path made of what looks like maps lines: read from the middle of that line
  // (as before the fix, after the buffer filled), its text would be taken for mappings that
  // hold the address.
  std::string long_path = "/tmp/";
  while (long_path.size() < 3000) long_path += "x\n7000-9000 rw-p 0 00:00 0 /";
  for (char& c : long_path) {
    if (c == '\n') c = '_';
  }
  // No newline in the path: "_" instead; the fake ranges still parse after a mid-line start.
  SyntheticMaps maps;
  maps.text = "1000-2000 r--p 00000000 00:00 0\n"
              "3000-4000 r--p 00000000 08:01 12 " + long_path + "\n"
              "8000-a000 rw-p 00000000 00:00 0 [stack]\n"
              "b000-c000 rw-p 00000000 00:00 0\n";
  REQUIRE(long_path.size() > kMapsBufferSize);
  for (const size_t chunk : {size_t{1}, size_t{7}, size_t{100}, size_t{1000}, kMapsBufferSize}) {
    INFO("read chunk " << chunk);
    maps.chunk = chunk;
    MapsLine found;
    REQUIRE(FindInMaps(&ReadSyntheticMaps, &maps, 0x8800, &found));
    CHECK(found.start == 0x8000);
    CHECK(found.end == 0xa000);
    CHECK(found.previous_known);
    CHECK(found.previous_end == 0x4000);
    // The long line itself, found from its head.
    REQUIRE(FindInMaps(&ReadSyntheticMaps, &maps, 0x3800, &found));
    CHECK(found.start == 0x3000);
    CHECK(found.previous_end == 0x2000);
    // The first line: nothing before it.
    REQUIRE(FindInMaps(&ReadSyntheticMaps, &maps, 0x1000, &found));
    CHECK_FALSE(found.previous_known);
    // Between lines, and past the last: nothing.
    CHECK_FALSE(FindInMaps(&ReadSyntheticMaps, &maps, 0x7000, &found));
    CHECK_FALSE(FindInMaps(&ReadSyntheticMaps, &maps, 0xd000, &found));
    REQUIRE(FindInMaps(&ReadSyntheticMaps, &maps, 0xb000, &found));
    CHECK(found.previous_end == 0xa000);
  }
}

void* CaptureBoundsInChild(void* argument) {
  auto* bounds = static_cast<StackBounds*>(argument);
  *bounds = StackBounds::OfCurrentThread();
  return nullptr;
}

// In a forked child: a thread's stack (a mapping the parent does not have) found with the
// descriptor the child asks through, then with the one it opens itself. The exit status
// says which step failed.
int ChildFindsItsOwnThreadsStack() {
  for (int step = 1; step <= 2; ++step) {
    if (step == 2 && !StackBounds::OpenSharedMapsDescriptor(true)) return 10;
    // A stack size glibc's stack cache (stacks the parent mapped) cannot serve: under 4
    // times the request, none of the stacks before is that large.
    pthread_attr_t attributes;
    if (pthread_attr_init(&attributes) != 0 ||
        pthread_attr_setstacksize(&attributes, 40 * 1024 * 1024) != 0) {
      return 30;
    }
    StackBounds bounds;
    pthread_t thread;
    if (pthread_create(&thread, &attributes, &CaptureBoundsInChild, &bounds) != 0) return 20;
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attributes);
    if (bounds.IsEmpty()) return step;
  }
  return 0;
}

TEST_CASE("StackBounds: one process-wide maps descriptor, above the soft limit, per process",
          "[platform][sampling]") {
  FOR_BOTH_MAPS_READS();
  // A small soft limit the shared descriptor is placed above, then every number below it
  // taken: the queries still work (each opened its own descriptor before: EMFILE).
  struct rlimit original;
  REQUIRE(getrlimit(RLIMIT_NOFILE, &original) == 0);
  struct rlimit small = original;
  small.rlim_cur = 64;
  if (original.rlim_max <= 64 || setrlimit(RLIMIT_NOFILE, &small) != 0) {
    WARN("cannot lower the soft descriptor limit: not tested");
    return;
  }
  const bool held = StackBounds::OpenSharedMapsDescriptor(true);
  std::vector<int> fillers;
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers.push_back(fd);
  const StackBounds own = StackBounds::OfCurrentThread();
  const StackBounds main_stack = StackBounds::OfMainThread();
  const StackBounds reach = StackBounds::MainStackReach();
  for (const int fd : fillers) close(fd);
  // A forked child never asks the parent's maps through the inherited descriptor (still
  // under the small limit, above which the child's own can be placed).
  int status = -1;
  if (held) {
    const pid_t child = fork();
    if (child == 0) _exit(ChildFindsItsOwnThreadsStack());
    if (child < 0 || waitpid(child, &status, 0) != child) status = -1;
  }
  REQUIRE(setrlimit(RLIMIT_NOFILE, &original) == 0);
  if (!held) {
    WARN("no descriptor above the soft limit here (hard limit reached?): not tested");
    return;
  }
  CHECK_FALSE(fillers.empty());
  CHECK(own.Contains(AddressOfALocal()));
  CHECK(main_stack.Contains(AddressOfALocal()));
  CHECK(reach.Contains(AddressOfALocal()));
  // Opened once: a second call keeps it.
  CHECK(StackBounds::OpenSharedMapsDescriptor(true));

  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace strata
