// Labels in allocation stacks (issue 37; tests/native_allocations/alloc_labels_test.sh),
// built -O2 -g and linked with the base tier. Each allocating function must sit under the
// labels its callers pushed, each label right after the function that pushed it:
//   - LabeledCaller enters "Labeled caller", then MiddleStep -> AllocateUnderLabel:
//     LabeledCaller;Labeled caller;MiddleStep;AllocateUnderLabel
//   - AllocateInLabelFrame enters "Own frame" and allocates itself:
//     AllocateInLabelFrame;Own frame
//   - Recurse(5) (noipa: never inlined into itself) enters "Depth 2" at depth 2 and allocates
//     at depth 0: four Recurse frames,
//     the label, then two (the same return address several times on one stack)
//   - LoadFile enters a dynamic label "Load <name>" and allocates: LoadFile;Load data.bin
//   - OuterHolder enters "Outer label" and inlines InlinedHelper, which calls AllocateLeaf:
//     after inline expansion, OuterHolder;Outer label;InlinedHelper;AllocateLeaf (the push
//     site places the label above the inlined function)
//   - Unlabeled allocates under no label.
// The main thread and a second thread each run all of them, `rounds` times.
//
//   alloc_labels_program [ROUNDS]   (default 20000)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/labels.h"

namespace {

volatile uintptr_t g_sink;

// Allocates and frees a few blocks (sampled at a small R), so that every path has records.
__attribute__((noinline)) uintptr_t AllocateBlocks(size_t size) {
  uintptr_t sum = 0;
  for (int i = 0; i < 4; ++i) {
    char* p = static_cast<char*>(malloc(size + i));
    p[0] = static_cast<char>(i);
    sum += reinterpret_cast<uintptr_t>(p) + p[0];
    free(p);
  }
  return sum;
}

__attribute__((noinline)) uintptr_t AllocateUnderLabel() { return AllocateBlocks(512) + 1; }
__attribute__((noinline)) uintptr_t MiddleStep() { return AllocateUnderLabel() * 3 + 1; }
__attribute__((noinline)) uintptr_t LabeledCaller() {
  STRATA_LABEL("Labeled caller", kOther);
  return MiddleStep() + 7;
}

__attribute__((noinline)) uintptr_t AllocateInLabelFrame() {
  STRATA_LABEL("Own frame", kOther);
  uintptr_t sum = 0;
  for (int i = 0; i < 4; ++i) {
    int* p = new int[100 + i];
    p[0] = i;
    sum += reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(p[0]);
    delete[] p;
  }
  return sum;
}

// The empty asm after each call keeps GCC from turning the recursion into a loop (its tail
// recursion elimination handles `return f(n - 1) * 2 + 3`).
__attribute__((noipa)) uintptr_t Recurse(int depth) {
  if (depth == 0) return AllocateBlocks(768) + 5;
  if (depth == 2) {
    STRATA_LABEL("Depth 2", kOther);
    uintptr_t r = Recurse(depth - 1);
    __asm__ __volatile__("" : "+r"(r));
    return r * 2 + 1;
  }
  uintptr_t r = Recurse(depth - 1);
  __asm__ __volatile__("" : "+r"(r));
  return r * 2 + 3;
}

__attribute__((noinline)) uintptr_t LoadFile(const char* name) {
  STRATA_LABEL_DYNAMIC("Load", kIo, name);
  return AllocateBlocks(640) + strlen(name);
}

__attribute__((noinline)) uintptr_t AllocateLeaf() { return AllocateBlocks(896) + 11; }
inline __attribute__((always_inline)) uintptr_t InlinedHelper(uintptr_t x) {
  return AllocateLeaf() * 5 + x;
}
__attribute__((noinline)) uintptr_t OuterHolder() {
  STRATA_LABEL("Outer label", kOther);
  return InlinedHelper(13) + 2;
}

__attribute__((noinline)) uintptr_t Unlabeled() { return AllocateBlocks(384) + 17; }

void RunAll(int rounds) {
  uintptr_t sum = 0;
  for (int r = 0; r < rounds; ++r) {
    sum += LabeledCaller();
    sum += AllocateInLabelFrame();
    sum += Recurse(5);
    sum += LoadFile("data.bin");
    sum += OuterHolder();
    sum += Unlabeled();
  }
  g_sink = sum;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 20000;
  std::thread other(RunAll, rounds);
  RunAll(rounds);
  other.join();
  printf("done %d rounds\n", rounds);
  return 0;
}
