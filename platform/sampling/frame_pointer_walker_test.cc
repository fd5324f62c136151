#include "platform/sampling/frame_pointer_walker.h"

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "platform/sampling/sampled_thread_for_testing.h"

namespace strata {
namespace {

using sampling_testing::ChainRun;
using sampling_testing::RecordedSample;

// A fake stack in an array, so that every frame record is under the test's control.
struct FakeStack {
  alignas(16) uintptr_t words[64] = {};
  StackBounds bounds() const {
    StackBounds b;
    b.low = reinterpret_cast<uintptr_t>(&words[0]);
    b.high = reinterpret_cast<uintptr_t>(&words[64]);
    return b;
  }
  uintptr_t at(size_t i) const { return reinterpret_cast<uintptr_t>(&words[i]); }
  // A frame record at word i: [caller fp, return address].
  void Record(size_t i, uintptr_t caller_fp, uintptr_t return_address) {
    words[i] = caller_fp;
    words[i + 1] = return_address;
  }
};

// Every frame after the first lies inside the bounds, with strictly increasing sp.
void CheckWellFormed(const NativeFrame* frames, size_t count, const StackBounds& bounds) {
  for (size_t i = 1; i < count; ++i) {
    CHECK(bounds.Contains(frames[i].sp - 1));
    CHECK(frames[i].sp > frames[i - 1].sp);
  }
}

TEST_CASE("WalkFramePointers: follows a chain of frame records", "[platform][sampling]") {
  FakeStack stack;
  stack.Record(4, stack.at(10), 0x401000);
  stack.Record(10, stack.at(20), 0x402000);
  stack.Record(20, 0, 0x403000);  // glibc ends its chains with a null frame pointer.
  FrameRegisters registers{0x400000, stack.at(2), stack.at(4)};
  NativeFrame frames[16];
  const size_t count = WalkFramePointers(registers, stack.bounds(), frames, 16);
  REQUIRE(count == 4);
  CHECK(frames[0].pc == 0x400000);
  CHECK(frames[0].sp == stack.at(2));
  CHECK(frames[1].pc == 0x401000);
  CHECK(frames[1].sp == stack.at(6));  // Just above the record: the caller's sp.
  CHECK(frames[2].pc == 0x402000);
  CHECK(frames[2].sp == stack.at(12));
  CHECK(frames[3].pc == 0x403000);
  CHECK(frames[3].sp == stack.at(22));

  SECTION("capacity limits the walk") {
    CHECK(WalkFramePointers(registers, stack.bounds(), frames, 2) == 2);
    CHECK(WalkFramePointers(registers, stack.bounds(), frames, 1) == 1);
    CHECK(WalkFramePointers(registers, stack.bounds(), frames, 0) == 0);
  }
}

TEST_CASE("WalkFramePointerCallers: stops at the first accepted return address",
          "[platform][sampling]") {
  FakeStack stack;
  stack.Record(4, stack.at(10), 0x401000);
  stack.Record(10, stack.at(20), 0x402000);
  stack.Record(20, 0, 0x403000);
  const FrameRegisters registers{0x400000, stack.at(2), stack.at(4)};
  NativeFrame frames[16];
  FrameRegisters resume;

  SECTION("accepted at the second caller: its registers are handed back") {
    const size_t count = WalkFramePointerCallers(
        registers, stack.bounds(), frames, 16,
        [](uintptr_t return_address) { return return_address == 0x402000; }, &resume);
    REQUIRE(count == 2);  // The interrupted pc is not reported.
    CHECK(frames[0].pc == 0x401000);
    CHECK(frames[1].pc == 0x402000);
    CHECK(resume.pc == 0x402000);
    CHECK(resume.sp == stack.at(12));
    CHECK(resume.fp == stack.at(20));
  }
  SECTION("never accepted: the whole chain, no resume point") {
    const size_t count = WalkFramePointerCallers(
        registers, stack.bounds(), frames, 16, [](uintptr_t) { return false; }, &resume);
    CHECK(count == 3);
    CHECK(resume.pc == 0);
  }
  SECTION("a frame pointer outside the stack: nothing read, no resume point") {
    const FrameRegisters outside{0x400000, stack.at(2), 0x1000};
    CHECK(WalkFramePointerCallers(outside, stack.bounds(), frames, 16,
                                  [](uintptr_t) { return true; }, &resume) == 0);
    CHECK(resume.pc == 0);
  }
}

TEST_CASE(
    "WalkFramePointers: a garbage frame pointer ends the walk without a read outside "
    "the stack",
    "[platform][sampling]") {
  FakeStack stack;
  stack.Record(10, stack.at(20), 0x402000);
  const StackBounds bounds = stack.bounds();
  NativeFrame frames[16];
  const uintptr_t sp = stack.at(4);
  const uintptr_t garbage[] = {
      0,                 // null
      0xdeadbeef,        // unmapped, misaligned
      stack.at(10) + 3,  // misaligned, inside the stack
      stack.at(2),       // below the stack pointer
      stack.at(63),      // a record would cross the top of the stack
      bounds.high,       // at the top
      bounds.low - 16,   // below the stack
      UINTPTR_MAX - 7,   // would overflow
  };
  for (uintptr_t fp : garbage) {
    CAPTURE(fp);
    const size_t count = WalkFramePointers(FrameRegisters{0x400000, sp, fp}, bounds, frames, 16);
    CHECK(count == 1);
    CHECK(frames[0].pc == 0x400000);
  }

  SECTION("a loop or a downward link ends the walk") {
    stack.Record(20, stack.at(10), 0x403000);  // Points back down.
    size_t count = WalkFramePointers(FrameRegisters{1 << 20, sp, stack.at(10)}, bounds, frames, 16);
    CHECK(count == 3);
    stack.Record(20, stack.at(20), 0x403000);  // Points at itself.
    count = WalkFramePointers(FrameRegisters{1 << 20, sp, stack.at(10)}, bounds, frames, 16);
    CHECK(count == 3);
  }
  SECTION("a return address in the first page ends the walk") {
    stack.Record(20, stack.at(30), 0);
    CHECK(WalkFramePointers(FrameRegisters{1 << 20, sp, stack.at(10)}, bounds, frames, 16) == 2);
  }
  SECTION("a stack pointer outside the bounds gives the pc only") {
    CHECK(WalkFramePointers(FrameRegisters{1 << 20, bounds.high + 64, stack.at(10)}, bounds, frames,
                            16) == 1);
  }
}

TEST_CASE("WalkFramePointers: random stack contents never take the walk outside the stack",
          "[platform][sampling]") {
  FakeStack stack;
  const StackBounds bounds = stack.bounds();
  std::mt19937_64 random(12345);
  NativeFrame frames[80];
  for (int round = 0; round < 20000; ++round) {
    for (uintptr_t& word : stack.words) {
      // Mostly addresses in and around the fake stack, sometimes anything.
      word = (random() % 4 == 0) ? random()
                                 : bounds.low - 64 + random() % (bounds.high - bounds.low + 128);
    }
    const uintptr_t sp = bounds.low + (random() % 64) * 8;
    const uintptr_t fp = bounds.low - 64 + random() % (bounds.high - bounds.low + 128);
    const size_t count = WalkFramePointers(FrameRegisters{0x400000, sp, fp}, bounds, frames, 80);
    REQUIRE(count >= 1);
    REQUIRE(count <= 33);  // At most one record per 16 bytes above sp.
    for (size_t i = 1; i < count; ++i) {
      REQUIRE(frames[i].sp > frames[i - 1].sp);
      REQUIRE(frames[i].sp <= bounds.high);
    }
  }
}

bool IsChainFunction(const std::string& name) {
  return name == "strata_test_frameless_leaf" || name == "strata_test_chain_inner" ||
         name == "strata_test_chain_middle" || name == "strata_test_chain_outer";
}

// Index of the first frame at or after `from` named `name`, or -1.
int Find(const std::vector<std::string>& names, const char* name, size_t from = 0) {
  for (size_t i = from; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

// True when every one of `wanted` occurs in `names`, in this order (outward).
bool InOrder(const std::vector<std::string>& names, std::initializer_list<const char*> wanted) {
  size_t from = 0;
  for (const char* name : wanted) {
    const int at = Find(names, name, from);
    if (at < 0) return false;
    from = static_cast<size_t>(at) + 1;
  }
  return true;
}

TEST_CASE(
    "WalkFramePointers: samples of a busy thread show its call chain, except the caller "
    "of a frameless leaf",
    "[platform][sampling]") {
  const ChainRun run = sampling_testing::RunChainOnSampledThread(
      sampling_testing::kFramePointerWalk, TimeDuration::FromMilliseconds(1),
      TimeDuration::FromMilliseconds(600));
  REQUIRE(run.install_error == 0);
  REQUIRE(run.timer_error == 0);
  REQUIRE(run.samples.size() >= 30);

  size_t in_chain = 0, in_leaf = 0, complete_from_middle = 0, leaf_with_inner = 0;
  std::vector<int64_t> walk_ns;
  for (const RecordedSample& sample : run.samples) {
    CheckWellFormed(sample.fp_frames, sample.fp_count, run.bounds);
    walk_ns.push_back(sample.fp_walk_ns);
    const std::vector<std::string> names =
        sampling_testing::SymbolNames(sample.fp_frames, sample.fp_count);
    if (names.empty() || !IsChainFunction(names[0])) continue;
    ++in_chain;
    const bool is_leaf = names[0] == "strata_test_frameless_leaf";
    if (is_leaf) ++in_leaf;
    // middle -> outer -> the thread's start routine, in that order, wherever the pc is.
    const bool pc_in_outer = names[0] == "strata_test_chain_outer";
    if (pc_in_outer ? InOrder(names, {"strata_test_chain_outer", "strata_test_sampled_thread_main"})
                    : InOrder(names, {"strata_test_chain_middle", "strata_test_chain_outer",
                                      "strata_test_sampled_thread_main"})) {
      ++complete_from_middle;
    }
    if (is_leaf && Find(names, "strata_test_chain_inner", 1) >= 0) ++leaf_with_inner;
  }
  std::printf(
      "frame pointers: %zu samples in %.3f s of thread CPU (%.0f/s), %zu in the chain, %zu in "
      "the frameless leaf; middle->outer->main found in %zu; leaf samples with the leaf's "
      "caller (inner): %zu; walk p50 %lld ns, p99 %lld ns\n",
      run.samples.size(), run.cpu_time.ToSeconds(), run.samples.size() / run.cpu_time.ToSeconds(),
      in_chain, in_leaf, complete_from_middle, leaf_with_inner,
      static_cast<long long>(sampling_testing::Percentile(walk_ns, 50)),
      static_cast<long long>(sampling_testing::Percentile(walk_ns, 99)));

  REQUIRE(in_chain >= run.samples.size() * 8 / 10);
  CHECK(in_leaf >= in_chain / 2);
  if (!sampling_testing::kHandlerRunsWhereSignalled) {
    std::printf("ThreadSanitizer build: the callers of the sampled pcs are not checked (the "
                "handler runs after the signal; sampled_thread_for_testing.h)\n");
    return;
  }
  // The frame records of the chain are found (a sample that lands in a prologue or epilogue,
  // between `push %rbp` and `mov %rsp,%rbp` or at `ret`, legitimately misses one frame)...
  CHECK(complete_from_middle >= in_chain - in_chain / 50 - 1);
  // ...but a frameless leaf has none: its caller is invisible to a frame-pointer walk.
  CHECK(leaf_with_inner == 0);
}

}  // namespace
}  // namespace strata
