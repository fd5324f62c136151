// OwnWalkCache with real libunwind walks of this thread's own stack: a walk is reused only from
// the same registers while every stack word it read holds, and a reuse gives a fresh walk's
// frames.
#include "base/internal/wait/own_walk_cache.h"

#include <libunwind.h>
#include <signal.h>
#include <ucontext.h>

#include <vector>

#include "base/internal/wait/scoped_wait.h"
#include "catch2/catch.hpp"
#include "platform/sampling/libunwind_imports.h"
#include "platform/sampling/libunwind_loader.h"
#include "platform/sampling/libunwind_walker.h"
#include "platform/sampling/stack_bounds.h"

namespace strata {
namespace base_internal {
namespace {

constexpr size_t kCapacity = 64;

struct WalkResult {
  std::vector<NativeFrame> frames;
  CallerRegisters caller;
};

// The walk the cache makes on a miss, as own_samples.cc's (WalkCallerStack): libunwind from
// the context itself (its registers read through the accessor, from the context's memory),
// each lookup served from checked copies of the tables (SetLibunwindLookupPc), each stack
// word read logged through libunwind's accessor. frames[0] is the start.
size_t WalkFromContext(void* argument, NativeFrame* frames, size_t capacity,
                       bool* reads_logged) {
  *reads_logged = true;
  ucontext_t* context = static_cast<ucontext_t*>(argument);
  const LibunwindFunctions* unwind = LoadedLibunwind();
  static unw_cursor_t cursor;
  const StackBounds bounds = StackBounds::OfCurrentThread();
  SetLibunwindWalkStackBounds(bounds.low, bounds.high);
  frames[0] = {static_cast<uintptr_t>(context->uc_mcontext.gregs[REG_RIP]),
               static_cast<uintptr_t>(context->uc_mcontext.gregs[REG_RSP])};
  SetLibunwindLookupPc(frames[0].pc);
  size_t count = 1;
  if (unwind->init_local2(&cursor, context, UNW_INIT_SIGNAL_FRAME) == 0) {
    while (count < capacity && unwind->step(&cursor) > 0) {
      unw_word_t pc = 0, sp = 0;
      unwind->get_reg(&cursor, UNW_REG_IP, &pc);
      unwind->get_reg(&cursor, UNW_REG_SP, &sp);
      if (pc == 0 || sp <= frames[count - 1].sp) break;
      frames[count++] = {static_cast<uintptr_t>(pc), static_cast<uintptr_t>(sp)};
      SetLibunwindLookupPc(pc - 1);
    }
  }
  SetLibunwindLookupPc(0);
  return count;
}

ucontext_t ContextOf(const CallerRegisters& caller) {
  ucontext_t context{};
  context.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(caller.pc);
  context.uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(caller.sp);
  context.uc_mcontext.gregs[REG_RBP] = static_cast<greg_t>(caller.fp);
  return context;
}

OwnWalkCache* g_cache = nullptr;
uint32_t g_features = 1;
volatile int g_sink = 0;

// The "wrapped call": walks from its caller's registers through the cache, twice over when
// asked (a fresh walk to compare with, made outside the cache).
__attribute__((noinline)) WalkResult Leaf(bool fresh) {
  WalkResult result;
  result.caller = CallerRegistersFromFrame(__builtin_frame_address(0));
  result.frames.resize(kCapacity);
  // In static memory, as own_samples.cc's is in the thread's record: not on this stack.
  static ucontext_t context;
  context = ContextOf(result.caller);
  size_t count;
  if (fresh) {
    bool ignored;
    count = WalkFromContext(&context, result.frames.data(), kCapacity, &ignored);
  } else {
    const OwnWalkStart start{result.caller.pc, result.caller.sp, result.caller.fp, g_features};
    count = g_cache->Walk(start, context, StackBounds::OfCurrentThread().high,
                          result.frames.data(), kCapacity, &WalkFromContext, &context);
  }
  result.frames.resize(count);
  return result;
}

// Leaf's one caller: the same pc, sp and fp whichever of OuterA and OuterB called it.
__attribute__((noinline)) WalkResult Middle(bool fresh) {
  WalkResult result = Leaf(fresh);
  g_sink = g_sink + 1;
  return result;
}

// Two callers of Middle with the same frame size, called from one place: Middle's frame is at
// the same address under both; only the return address in it differs.
__attribute__((noinline)) WalkResult OuterA(bool fresh) {
  volatile int distinct = 0xa;
  WalkResult result = Middle(fresh);
  g_sink = g_sink + distinct;
  return result;
}

__attribute__((noinline)) WalkResult OuterB(bool fresh) {
  volatile int distinct = 0xb;
  WalkResult result = Middle(fresh);
  g_sink = g_sink + distinct * 3;
  return result;
}

__attribute__((noinline)) WalkResult Through(bool use_b, bool fresh) {
  WalkResult result = use_b ? OuterB(fresh) : OuterA(fresh);
  g_sink = g_sink + 1;
  return result;
}

struct Step {
  bool use_b;
  bool fresh;
  uint32_t features;
};

// The steps' walks, all made from one call site: the stack above Through is the same for each.
__attribute__((noinline)) std::vector<WalkResult> Run(const std::vector<Step>& steps) {
  std::vector<WalkResult> results;
  for (const Step& step : steps) {
    g_features = step.features;
    results.push_back(Through(step.use_b, step.fresh));
  }
  return results;
}

bool SameFrames(const WalkResult& a, const WalkResult& b) {
  if (a.frames.size() != b.frames.size()) return false;
  for (size_t i = 0; i < a.frames.size(); ++i) {
    if (a.frames[i].pc != b.frames[i].pc || a.frames[i].sp != b.frames[i].sp) return false;
  }
  return true;
}

TEST_CASE("OwnWalkCache: a second walk from the same place is a copy of a fresh walk",
          "[base][wait]") {
  REQUIRE(WarmUpLibunwind());
  OwnWalkCache cache;
  g_cache = &cache;
  const std::vector<WalkResult> walks =
      Run({{false, true, 1}, {false, false, 1}, {false, false, 1}});
  const WalkResult& fresh = walks[0];
  REQUIRE(fresh.frames.size() > 4);
  CHECK(cache.walks() == 1);
  CHECK(cache.reuses() == 1);
  CHECK(walks[1].caller.sp == walks[2].caller.sp);
  CHECK(SameFrames(walks[1], fresh));
  CHECK(SameFrames(walks[2], fresh));
}

TEST_CASE("OwnWalkCache: the same registers over another stack above are walked again",
          "[base][wait]") {
  REQUIRE(WarmUpLibunwind());
  OwnWalkCache cache;
  g_cache = &cache;
  const std::vector<WalkResult> walks = Run({{false, false, 1},
                                             {true, false, 1},
                                             {true, true, 1},
                                             {false, false, 1},
                                             {true, false, 1}});
  const WalkResult& through_a = walks[0];
  const WalkResult& through_b = walks[1];
  // Leaf's caller had the same registers both times (the premise of this test)...
  REQUIRE(through_a.caller.pc == through_b.caller.pc);
  REQUIRE(through_a.caller.sp == through_b.caller.sp);
  REQUIRE(through_a.caller.fp == through_b.caller.fp);
  // ...but Middle's return address differed, a word the first walk read: walked again, and
  // right. Both are kept: each place is reused afterwards.
  CHECK(SameFrames(through_b, walks[2]));
  CHECK_FALSE(SameFrames(through_a, through_b));
  CHECK(cache.walks() == 2);
  CHECK(cache.reuses() == 2);
  CHECK(SameFrames(walks[3], through_a));
  CHECK(SameFrames(walks[4], through_b));
}

TEST_CASE("OwnWalkCache: other sampling features are another walk; the oldest entry goes",
          "[base][wait]") {
  REQUIRE(WarmUpLibunwind());
  OwnWalkCache cache;
  g_cache = &cache;
  // Features 1 to kEntries + 1: the last replaces features 1 (the least recently used); then
  // features 2 is reused and features 1 is walked again.
  std::vector<Step> steps;
  for (uint32_t features = 1; features <= OwnWalkCache::kEntries + 1; ++features) {
    steps.push_back({false, false, features});
  }
  steps.push_back({false, false, 2});
  steps.push_back({false, false, 1});
  Run(steps);
  CHECK(cache.walks() == OwnWalkCache::kEntries + 2);
  CHECK(cache.reuses() == 1);
}

// A signal handler's walks, from one place in it: they cross the signal frame.
std::vector<WalkResult> g_handler_walks;
void WalkInHandler(int) {
  g_handler_walks = Run({{false, false, 1}, {false, false, 1}, {false, true, 1}});
}

TEST_CASE("OwnWalkCache: a walk across a signal frame is not kept", "[base][wait]") {
  // libunwind finds the interrupted frame through glibc's __restore_rt, whose CFA rule is a
  // DWARF expression (DW_OP_deref of the saved rsp, read directly, not logged): a reuse could
  // not tell another interrupted stack from this one.
  REQUIRE(WarmUpLibunwind());
  OwnWalkCache cache;
  g_cache = &cache;
  struct sigaction action {};
  action.sa_handler = &WalkInHandler;
  sigemptyset(&action.sa_mask);
  struct sigaction previous;
  REQUIRE(sigaction(SIGUSR1, &action, &previous) == 0);
  raise(SIGUSR1);
  sigaction(SIGUSR1, &previous, nullptr);
  REQUIRE(g_handler_walks.size() == 3);
  // The walks reached this test's own frames, past the signal frame...
  const WalkResult& fresh = g_handler_walks[2];
  const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  bool below_here = false, above_here = false;
  for (const NativeFrame& frame : fresh.frames) {
    below_here = below_here || frame.sp < here;
    above_here = above_here || frame.sp > here;
  }
  CHECK(below_here);
  CHECK(above_here);
  // ...and each was walked: none kept, none reused.
  CHECK(cache.walks() == 2);
  CHECK(cache.reuses() == 0);
  CHECK(SameFrames(g_handler_walks[0], fresh));
  CHECK(SameFrames(g_handler_walks[1], fresh));
}

TEST_CASE("OwnWalkCache: a walk that read otherwise than through libunwind is not kept",
          "[base][wait]") {
  OwnWalkCache cache;
  const CallerRegisters caller{1, 2, 3};
  const OwnWalkStart start{caller.pc, caller.sp, caller.fp, 0};
  const ucontext_t context{};
  auto unlogged = [](void*, NativeFrame* frames, size_t, bool* reads_logged) -> size_t {
    *reads_logged = false;  // Frame pointers, read directly.
    frames[0] = {7, 8};
    return 1;
  };
  NativeFrame frames[4];
  CHECK(cache.Walk(start, context, 0, frames, 4, unlogged, nullptr) == 1);
  CHECK(cache.Walk(start, context, 0, frames, 4, unlogged, nullptr) == 1);
  CHECK(cache.walks() == 2);
  CHECK(cache.reuses() == 0);
}

}  // namespace
}  // namespace base_internal
}  // namespace strata
