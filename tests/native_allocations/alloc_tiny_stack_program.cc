// Sampled allocations with little stack left (tests/native_allocations/alloc_tiny_stack_test.sh,
// docs/memory.md "Stack"). A thread on the smallest stack (PTHREAD_STACK_MIN; LEFT + 64 KiB
// when LEFT is above 8 KiB) recurses until only LEFT bytes of it remain (default 4608),
// enters a label there and allocates and frees
// 20000 blocks of 64-4159 bytes (at a small R, hundreds of sampled ones; --unlabelled: without
// the label). Prints
// "done allocations=N left=L" and exits 0.
// With --measure, the thread instead runs on a 1 MiB stack, paints 64 KiB below its deepest
// frame, allocates there the same way and prints how many bytes below that frame the
// allocations used ("used_below=B"): what the sampled path needs (RecordNativeAllocation's
// kRecordStackNeed).
//
//   alloc_tiny_stack_program [LEFT] [--measure] [--unlabelled]
#include <limits.h>
#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/labels.h"

namespace {

uintptr_t g_stack_low;
size_t g_left = 4608;
bool g_measure = false;
bool g_labelled = true;
constexpr size_t kPaint = 64 * 1024;
constexpr int kAllocations = 20000;
volatile uintptr_t g_sink;

__attribute__((noinline)) void AllocateBlocks() {
  for (int i = 0; i < kAllocations; ++i) {
    char* p = static_cast<char*>(malloc(64 + (i * 97) % 4096));
    p[0] = static_cast<char>(i);
    g_sink = g_sink + reinterpret_cast<uintptr_t>(p) + p[0];
    free(p);
  }
}

__attribute__((noinline)) void AllocateHere() {
  if (!g_labelled) {
    AllocateBlocks();
    return;
  }
  STRATA_LABEL("Tiny stack", kOther);
  AllocateBlocks();
}

__attribute__((noinline)) void AllocateMeasured() {
  if (!g_measure) {
    AllocateHere();
    return;
  }
  volatile char* here = static_cast<volatile char*>(__builtin_frame_address(0));
  // Below the red zone and this frame's own callees' frames before the allocations.
  volatile char* top = here - 1024;
  for (size_t i = 0; i < kPaint; ++i) top[-static_cast<long>(i)] = static_cast<char>(0xa5);
  AllocateHere();
  size_t used = 0;
  for (size_t i = kPaint; i-- > 0;) {
    if (top[-static_cast<long>(i)] != static_cast<char>(0xa5)) {
      used = i + 1024;
      break;
    }
  }
  std::printf("used_below=%zu\n", used);
}

__attribute__((noinline)) int Recurse(int depth) {
  volatile char pad[256];
  pad[0] = static_cast<char>(depth);
  const uintptr_t sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  const size_t left = g_measure ? 2 * kPaint : g_left;
  if (sp - g_stack_low <= left + 512) {
    AllocateMeasured();
    return pad[0];
  }
  return Recurse(depth + 1) + pad[0];
}

void* Thread(void*) {
  pthread_attr_t attr;
  pthread_getattr_np(pthread_self(), &attr);
  void* low;
  size_t size;
  pthread_attr_getstack(&attr, &low, &size);
  pthread_attr_destroy(&attr);
  g_stack_low = reinterpret_cast<uintptr_t>(low);
  Recurse(0);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--measure") == 0) {
      g_measure = true;
    } else if (std::strcmp(argv[i], "--unlabelled") == 0) {
      g_labelled = false;
    } else {
      g_left = static_cast<size_t>(std::atol(argv[i]));
    }
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  size_t stack_size = PTHREAD_STACK_MIN;
  if (g_measure) {
    stack_size = 1024 * 1024;
  } else if (g_left > 8 * 1024) {
    stack_size = g_left + 64 * 1024;
  }
  pthread_attr_setstacksize(&attr, stack_size);
  pthread_t thread;
  if (pthread_create(&thread, &attr, &Thread, nullptr) != 0) return 2;
  pthread_join(thread, nullptr);
  // (Not the depth: a profiler's thread-start trampoline may take a frame of the stack.)
  if (!g_measure) std::printf("done allocations=%d left=%zu\n", kAllocations, g_left);
  return 0;
}
