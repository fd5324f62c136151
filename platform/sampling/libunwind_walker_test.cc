#include "platform/sampling/libunwind_walker.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <limits.h>
#include <stdlib.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "platform/sampling/sampled_thread_for_testing.h"

namespace strata {
namespace {

using sampling_testing::ChainRun;
using sampling_testing::RecordedSample;

int Find(const std::vector<std::string>& names, const char* name, size_t from = 0) {
  for (size_t i = from; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

bool IsOurFunction(const std::string& name) { return name.rfind("strata_test_", 0) == 0; }

void CheckWellFormed(const NativeFrame* frames, size_t count, const StackBounds& bounds) {
  for (size_t i = 1; i < count; ++i) {
    CHECK(bounds.Contains(frames[i].sp));
    CHECK(frames[i].sp > frames[i - 1].sp);
  }
}

TEST_CASE(
    "WalkStackWithLibunwind: samples of a busy thread show the whole call chain, "
    "including the caller of a frameless leaf",
    "[platform][sampling]") {
  const ChainRun run = sampling_testing::RunChainOnSampledThread(
      sampling_testing::kLibunwindWalk | sampling_testing::kFramePointerWalk,
      TimeDuration::FromMilliseconds(1), TimeDuration::FromMilliseconds(600));
  REQUIRE(run.install_error == 0);
  REQUIRE(run.timer_error == 0);
  REQUIRE(run.samples.size() >= 30);

  size_t in_leaf = 0, leaf_complete = 0, in_chain_function = 0, chain_complete = 0;
  size_t fp_frames_checked = 0, fp_frames_matched = 0;
  std::vector<int64_t> walk_ns;
  size_t depth_sum = 0;
  for (const RecordedSample& sample : run.samples) {
    CheckWellFormed(sample.unwind_frames, sample.unwind_count, run.bounds);
    walk_ns.push_back(sample.unwind_walk_ns);
    depth_sum += sample.unwind_count;
    const std::vector<std::string> names =
        sampling_testing::SymbolNames(sample.unwind_frames, sample.unwind_count);
    REQUIRE(!names.empty());
    // The walk continues past the thread's start routine into the threading library.
    const int main = Find(names, "strata_test_sampled_thread_main");
    if (names[0] == "strata_test_frameless_leaf") {
      ++in_leaf;
      if (names.size() > 4 && names[1] == "strata_test_chain_inner" &&
          names[2] == "strata_test_chain_middle" && names[3] == "strata_test_chain_outer" &&
          main == 4 && sample.unwind_count > 5) {
        ++leaf_complete;
      }
    } else if (names[0] == "strata_test_chain_inner") {
      ++in_chain_function;
      if (names.size() > 3 && names[1] == "strata_test_chain_middle" &&
          names[2] == "strata_test_chain_outer" && main == 3) {
        ++chain_complete;
      }
    }
    // Where frame pointers exist, both walkers report the same frame: same pc, same sp.
    const std::vector<std::string> fp_names =
        sampling_testing::SymbolNames(sample.fp_frames, sample.fp_count);
    for (size_t i = 0; i < sample.fp_count; ++i) {
      if (!IsOurFunction(fp_names[i])) continue;
      ++fp_frames_checked;
      for (size_t j = 0; j < sample.unwind_count; ++j) {
        if (sample.unwind_frames[j].pc == sample.fp_frames[i].pc &&
            sample.unwind_frames[j].sp == sample.fp_frames[i].sp) {
          ++fp_frames_matched;
          break;
        }
      }
    }
  }
  std::printf(
      "libunwind: %zu samples in %.3f s of thread CPU (%.0f/s, %.2f overruns per signal); "
      "%zu in the frameless leaf, %zu of them with leaf<-inner<-middle<-outer<-main; %zu in "
      "inner, %zu complete; mean depth %.1f; walk p50 %lld ns, p90 %lld ns, p99 %lld ns; "
      "frame-pointer frames found with equal pc and sp: %zu of %zu\n",
      run.samples.size(), run.cpu_time.ToSeconds(), run.samples.size() / run.cpu_time.ToSeconds(),
      static_cast<double>(run.overruns) / static_cast<double>(run.signals), in_leaf, leaf_complete,
      in_chain_function, chain_complete,
      static_cast<double>(depth_sum) / static_cast<double>(run.samples.size()),
      static_cast<long long>(sampling_testing::Percentile(walk_ns, 50)),
      static_cast<long long>(sampling_testing::Percentile(walk_ns, 90)),
      static_cast<long long>(sampling_testing::Percentile(walk_ns, 99)), fp_frames_matched,
      fp_frames_checked);

  REQUIRE(in_leaf + in_chain_function >= run.samples.size() * 8 / 10);
  CHECK(fp_frames_checked > 0);
  CHECK(fp_frames_matched == fp_frames_checked);
  if (!sampling_testing::kHandlerRunsWhereSignalled) {
    std::printf("ThreadSanitizer build: the callers of the sampled pcs are not checked (the "
                "handler runs after the signal; sampled_thread_for_testing.h)\n");
    return;
  }
  CHECK(leaf_complete == in_leaf);
  CHECK(chain_complete == in_chain_function);
}

TEST_CASE("WalkStackWithLibunwind: a stack pointer outside the bounds gives the pc only",
          "[platform][sampling]") {
  WarmUpLibunwind();
  ucontext_t context;
  REQUIRE(getcontext(&context) == 0);
  const StackBounds bounds = StackBounds::OfCurrentThread();
  NativeFrame frames[8];
  context.uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(bounds.high + 4096);
  CHECK(WalkStackWithLibunwind(&context, bounds, frames, 8) == 1);
  CHECK(frames[0].pc == static_cast<uintptr_t>(context.uc_mcontext.gregs[REG_RIP]));
  CHECK(WalkStackWithLibunwind(&context, bounds, frames, 0) == 0);
}

// --- Sampling a thread inside the dynamic loader, malloc and exception unwinding ---------

std::string g_target_path;

std::string FindTargetLibrary() {
  const char* name = "libdlopen_target_for_testing.so";
  std::vector<std::string> candidates;
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  if (srcdir != nullptr && workspace != nullptr) {
    candidates.push_back(std::string(srcdir) + "/" + workspace + "/platform/sampling/" + name);
  }
  char exe[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (length > 0) {
    exe[length] = '\0';
    std::string directory(exe);
    directory.resize(directory.rfind('/') + 1);
    candidates.push_back(directory + name);
  }
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return std::string();
}

uint64_t g_sink = 0;

// Runs on the sampled thread between chain calls: mostly dlopen/dlclose, malloc/free and
// C++ exceptions, so that many samples land inside the loader, the allocator and the unwinder.
void LoaderMallocAndExceptionWork() {
  for (int i = 0; i < 8; ++i) {
    void* handle = dlopen(g_target_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) continue;
    auto function =
        reinterpret_cast<uint64_t (*)(uint64_t)>(dlsym(handle, "strata_test_dlopen_target"));
    if (function != nullptr) g_sink += function(i);
    dlclose(handle);
    FlushLibunwindCaches();
  }
  for (int i = 0; i < 64; ++i) {
    std::vector<char> buffer(1000 + i * 100);
    g_sink += static_cast<uint64_t>(buffer.size());
  }
  try {
    throw std::runtime_error("sampled");
  } catch (const std::exception& e) {
    g_sink += e.what()[0];
  }
}

TEST_CASE(
    "WalkStackWithLibunwind: sampling inside dlopen/dlclose, malloc and exception "
    "unwinding neither deadlocks nor crashes",
    "[platform][sampling]") {
  g_target_path = FindTargetLibrary();
  REQUIRE(!g_target_path.empty());

  const ChainRun run = sampling_testing::RunChainOnSampledThread(
      sampling_testing::kLibunwindWalk, TimeDuration::FromMilliseconds(1),
      TimeDuration::FromMilliseconds(1000), &LoaderMallocAndExceptionWork);
  REQUIRE(run.install_error == 0);
  REQUIRE(run.timer_error == 0);
  REQUIRE(run.samples.size() >= 30);

  size_t in_loader = 0, in_libc = 0, reached_main = 0;
  for (const RecordedSample& sample : run.samples) {
    CheckWellFormed(sample.unwind_frames, sample.unwind_count, run.bounds);
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(sample.unwind_frames[0].pc), &info) != 0 &&
        info.dli_fname != nullptr) {
      const std::string object = info.dli_fname;
      if (object.find("ld-linux") != std::string::npos) ++in_loader;
      if (object.find("libc.so") != std::string::npos) ++in_libc;
    }
    const std::vector<std::string> names =
        sampling_testing::SymbolNames(sample.unwind_frames, sample.unwind_count);
    if (Find(names, "strata_test_sampled_thread_main") >= 0) ++reached_main;
  }
  std::printf(
      "libunwind under dlopen/malloc/throw: %zu samples, %zu with the pc in the dynamic loader, "
      "%zu in libc; %zu walks reached the thread's start routine\n",
      run.samples.size(), in_loader, in_libc, reached_main);
  CHECK(in_loader + in_libc > 0);
  if (!sampling_testing::kHandlerRunsWhereSignalled) {
    std::printf("ThreadSanitizer build: the callers of the sampled pcs are not checked (the "
                "handler runs after the signal; sampled_thread_for_testing.h)\n");
    return;
  }
  // Through glibc, the loader and the unwinder, DWARF information gets the walk home.
  CHECK(reached_main >= run.samples.size() * 9 / 10);
}

// --- Frames in no loaded object (JIT code) ---------------------------------------------------

// Hand-assembled functions in an anonymous executable page, keeping frame pointers:
//   trap:  push %rbp; mov %rsp, %rbp; int3; pop %rbp; ret       (the signal lands in it)
//   call:  push %rbp; mov %rsp, %rbp; call *%rdi; pop %rbp; ret  (it calls back into C++)
constexpr unsigned char kJitTrap[] = {0x55, 0x48, 0x89, 0xe5, 0xcc, 0x5d, 0xc3};
constexpr unsigned char kJitCall[] = {0x55, 0x48, 0x89, 0xe5, 0xff, 0xd7, 0x5d, 0xc3};
constexpr size_t kJitCallOffset = 64;

struct JitWalk {
  StackBounds bounds;
  NativeFrame frames[128];
  size_t count = 0;
};
JitWalk g_jit_walk;

void WalkInTrapHandler(int, siginfo_t*, void* context) {
  g_jit_walk.count = WalkStackWithLibunwind(static_cast<ucontext_t*>(context), g_jit_walk.bounds,
                                            g_jit_walk.frames, 128);
}

void (*g_jit_trap)() = nullptr;

extern "C" __attribute__((noinline)) void strata_test_called_from_jit() {
  raise(SIGTRAP);
  asm volatile("" ::: "memory");  // Not a tail call.
}

extern "C" __attribute__((noinline)) void strata_test_calls_jit_trap() {
  g_jit_trap();
  asm volatile("" ::: "memory");
}

extern "C" __attribute__((noinline)) void strata_test_calls_jit_call(void (*jit)(void (*)())) {
  jit(&strata_test_called_from_jit);
  asm volatile("" ::: "memory");
}

// The index of the first frame whose pc lies in [begin, end), or -1.
int FindPcIn(uintptr_t begin, uintptr_t end) {
  for (size_t i = 0; i < g_jit_walk.count; ++i) {
    if (g_jit_walk.frames[i].pc >= begin && g_jit_walk.frames[i].pc < end) return static_cast<int>(i);
  }
  return -1;
}

TEST_CASE(
    "WalkStackWithLibunwind: frames in no loaded object are crossed by frame pointers and "
    "libunwind resumes after them",
    "[platform][sampling]") {
  if (!sampling_testing::kHandlerRunsWhereSignalled) {
    std::printf("ThreadSanitizer build: skipped (the handler runs after the signal)\n");
    return;
  }
  REQUIRE(WarmUpLibunwind());
  const long page = sysconf(_SC_PAGESIZE);
  void* code = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(code != MAP_FAILED);
  std::memcpy(code, kJitTrap, sizeof kJitTrap);
  std::memcpy(static_cast<char*>(code) + kJitCallOffset, kJitCall, sizeof kJitCall);
  REQUIRE(mprotect(code, page, PROT_READ | PROT_EXEC) == 0);
  const uintptr_t jit_begin = reinterpret_cast<uintptr_t>(code);
  const uintptr_t jit_end = jit_begin + page;
  REQUIRE_FALSE(PcInLoadedObject(jit_begin));

  struct sigaction action = {}, previous = {};
  action.sa_sigaction = &WalkInTrapHandler;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  REQUIRE(sigaction(SIGTRAP, &action, &previous) == 0);
  g_jit_walk.bounds = StackBounds::OfCurrentThread();

  SECTION("the signal lands in JIT code") {
    g_jit_trap = reinterpret_cast<void (*)()>(code);
    strata_test_calls_jit_trap();
    const std::vector<std::string> names =
        sampling_testing::SymbolNames(g_jit_walk.frames, g_jit_walk.count);
    INFO("walk: " << g_jit_walk.count << " frames");
    CHECK(FindPcIn(jit_begin, jit_end) == 0);
    const int caller = Find(names, "strata_test_calls_jit_trap");
    CHECK(caller == 1);  // From the JIT frame's record.
    // libunwind resumed: the test's own callers follow.
    CHECK(static_cast<int>(g_jit_walk.count) > caller + 2);
    CheckWellFormed(g_jit_walk.frames, g_jit_walk.count, g_jit_walk.bounds);
  }
  SECTION("libunwind reaches a return address in JIT code") {
    strata_test_calls_jit_call(
        reinterpret_cast<void (*)(void (*)())>(static_cast<char*>(code) + kJitCallOffset));
    const std::vector<std::string> names =
        sampling_testing::SymbolNames(g_jit_walk.frames, g_jit_walk.count);
    const int called = Find(names, "strata_test_called_from_jit");
    const int jit = FindPcIn(jit_begin, jit_end);
    const int caller = Find(names, "strata_test_calls_jit_call");
    INFO("walk: " << g_jit_walk.count << " frames; called " << called << ", jit " << jit
                  << ", caller " << caller);
    CHECK(called >= 0);
    CHECK(jit == called + 1);
    CHECK(caller == jit + 1);
    CHECK(static_cast<int>(g_jit_walk.count) > caller + 2);
    CheckWellFormed(g_jit_walk.frames, g_jit_walk.count, g_jit_walk.bounds);
  }
  REQUIRE(sigaction(SIGTRAP, &previous, nullptr) == 0);
  munmap(code, page);
}


// --- Verified frame-pointer steps (issue 38). A 300-deep recursion of functions with frame
// records (this file keeps frame pointers), walked in a signal handler three ways: every
// frame by libunwind (verified steps off), then with them on twice (the first walk notes the
// return addresses, the second crosses them by frame pointers). Same frames, pc and sp.
namespace verified_steps {

constexpr size_t kCapacity = 1024;
NativeFrame g_plain[kCapacity];
NativeFrame g_learning[kCapacity];
NativeFrame g_verified[kCapacity];
size_t g_plain_count = 0, g_learning_count = 0, g_verified_count = 0;
StackBounds g_bounds;

void WalkThreeWays(int, siginfo_t*, void* context) {
  ucontext_t* uc = static_cast<ucontext_t*>(context);
  SetVerifiedFramePointerSteps(false);
  g_plain_count = WalkStackWithLibunwind(uc, g_bounds, g_plain, kCapacity);
  SetVerifiedFramePointerSteps(true);
  g_learning_count = WalkStackWithLibunwind(uc, g_bounds, g_learning, kCapacity);
  g_verified_count = WalkStackWithLibunwind(uc, g_bounds, g_verified, kCapacity);
}

extern "C" __attribute__((noinline)) int strata_test_verified_recurse(int depth) {
  const int result = depth <= 0 ? raise(SIGUSR2) : strata_test_verified_recurse(depth - 1);
  __asm__ volatile("" : : "r"(result) : "memory");
  return result + 1;
}

void* RecurseAndSignal(void*) {
  g_bounds = StackBounds::OfCurrentThread();
  strata_test_verified_recurse(300);
  return nullptr;
}

}  // namespace verified_steps

TEST_CASE("WalkStackWithLibunwind: verified frame-pointer steps give libunwind's frames",
          "[platform][sampling]") {
  using namespace verified_steps;
  REQUIRE(WarmUpLibunwind());
  FlushLibunwindCaches();  // No verdict from an earlier walk.
  struct sigaction action {};
  action.sa_sigaction = &WalkThreeWays;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  struct sigaction previous {};
  REQUIRE(sigaction(SIGUSR2, &action, &previous) == 0);
  pthread_t thread;
  REQUIRE(pthread_create(&thread, nullptr, &RecurseAndSignal, nullptr) == 0);
  REQUIRE(pthread_join(thread, nullptr) == 0);
  sigaction(SIGUSR2, &previous, nullptr);

  const std::vector<std::string> names = sampling_testing::SymbolNames(g_plain, g_plain_count);
  size_t recursion_frames = 0;
  for (const std::string& name : names) recursion_frames += name == "strata_test_verified_recurse";
  std::printf("verified steps: %zu frames (%zu in the recursion); learning walk %zu, verified "
              "walk %zu\n",
              g_plain_count, recursion_frames, g_learning_count, g_verified_count);
  CHECK(recursion_frames == 301);
  CHECK(g_plain_count > recursion_frames + 1);  // The walk went past the recursion.
  REQUIRE(g_learning_count == g_plain_count);
  REQUIRE(g_verified_count == g_plain_count);
  size_t differing = 0;
  for (size_t i = 0; i < g_plain_count; ++i) {
    differing += g_learning[i].pc != g_plain[i].pc || g_learning[i].sp != g_plain[i].sp ||
                 g_verified[i].pc != g_plain[i].pc || g_verified[i].sp != g_plain[i].sp;
  }
  CHECK(differing == 0);
  // The recursion's return address was noted: the third walk crossed it by frame pointers.
  size_t noted = 0;
  for (size_t i = 1; i < g_plain_count; ++i) {
    noted += names[i] == "strata_test_verified_recurse" &&
             FramePointerStepVerifiedForTesting(g_plain[i].pc);
  }
  CHECK(noted >= 300);
}

}  // namespace
}  // namespace strata
