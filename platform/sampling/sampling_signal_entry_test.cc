// The sampling handler's assembly entry called as a plain function, the way ThreadSanitizer's
// deferred delivery calls it (CallUserSignalHandler, from ProcessPendingSignals at an interceptor's
// exit) and a runtime that forwards signals to a handler it read with a raw rt_sigaction does: on
// every path through the entry (a skip on each kind of stack, a jump to the C++ handler) the
// callee-saved registers of the System V ABI (rbx, rbp, r12-r15) must come back unchanged. The
// kernel restores every register at sigreturn, so a signal never shows a clobbered one; such a
// caller does not. The entry once kept the handler's arguments in r12-r14 and its scratch pointer
// in r15 across the main stack's prlimit64: every preloaded TSan scenario then crashed in its exit
// save (SIGSEGV in CallUserSignalHandler).
#include <signal.h>
#include <string.h>
#include <ucontext.h>

#include <cstdint>

#include "catch2/catch.hpp"
#include "platform/sampling/sampling_signal.h"

// Calls entry(signal_number, info, context) with a known value in each callee-saved register and
// returns a bit per register changed by the call: 1 rbx, 2 rbp, 4 r12, 8 r13, 16 r14, 32 r15.
extern "C" uint64_t strata_test_call_preserving(void* entry, int signal_number, siginfo_t* info,
                                                void* context);
__asm__(R"(
  .text
  .p2align 4
  .type strata_test_call_preserving, @function
strata_test_call_preserving:
  .cfi_startproc
  pushq %rbx
  .cfi_adjust_cfa_offset 8
  pushq %rbp
  .cfi_adjust_cfa_offset 8
  pushq %r12
  .cfi_adjust_cfa_offset 8
  pushq %r13
  .cfi_adjust_cfa_offset 8
  pushq %r14
  .cfi_adjust_cfa_offset 8
  pushq %r15
  .cfi_adjust_cfa_offset 8
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  movq %rdi, %rax
  movl %esi, %edi
  movq %rdx, %rsi
  movq %rcx, %rdx
  movabsq $0x5a5a00000000b001, %rbx
  movabsq $0x5a5a00000000b002, %rbp
  movabsq $0x5a5a00000000b003, %r12
  movabsq $0x5a5a00000000b004, %r13
  movabsq $0x5a5a00000000b005, %r14
  movabsq $0x5a5a00000000b006, %r15
  call *%rax
  xorl %eax, %eax
  movabsq $0x5a5a00000000b001, %rcx
  cmpq %rcx, %rbx
  je 1f
  orl $1, %eax
1:
  movabsq $0x5a5a00000000b002, %rcx
  cmpq %rcx, %rbp
  je 2f
  orl $2, %eax
2:
  movabsq $0x5a5a00000000b003, %rcx
  cmpq %rcx, %r12
  je 3f
  orl $4, %eax
3:
  movabsq $0x5a5a00000000b004, %rcx
  cmpq %rcx, %r13
  je 4f
  orl $8, %eax
4:
  movabsq $0x5a5a00000000b005, %rcx
  cmpq %rcx, %r14
  je 5f
  orl $16, %eax
5:
  movabsq $0x5a5a00000000b006, %rcx
  cmpq %rcx, %r15
  je 6f
  orl $32, %eax
6:
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  popq %r15
  .cfi_adjust_cfa_offset -8
  popq %r14
  .cfi_adjust_cfa_offset -8
  popq %r13
  .cfi_adjust_cfa_offset -8
  popq %r12
  .cfi_adjust_cfa_offset -8
  popq %rbp
  .cfi_adjust_cfa_offset -8
  popq %rbx
  .cfi_adjust_cfa_offset -8
  ret
  .cfi_endproc
  .size strata_test_call_preserving, .-strata_test_call_preserving
)");

namespace strata {
namespace {

void IgnoringCallback(void*, ucontext_t*, int) {}

// Where the entry will run: just below the caller's stack pointer (within a few hundred bytes: this
// frame's return address and the helper's seven words).
uintptr_t StackPointerHere() {
  uintptr_t sp;
  __asm__ volatile("movq %%rsp, %0" : "=r"(sp));
  return sp;
}

enum class Path {
  kAlternateStackLow,
  kAlternateStackRoom,
  kThreadStackLow,
  kMainStackLow,
  kMainStackRoom,
  kThreadStackRoom
};

struct Outcome {
  uint64_t changed_registers;
  uint64_t skipped_alternate, skipped_thread, skipped_main, strays;
  uint64_t on_alternate_stack;  // SamplingSignalsOnAlternateStack's growth.
  bool masked_for_return;       // The signal added to the context's uc_sigmask.
};

// Sets the stack bounds for `path` around the current stack pointer, calls the entry with a timer
// notification that is none of ours (si_code SI_TIMER, no thread's timer: a stray once it reaches
// the C++ handler, with the program's action SIG_DFL), and returns what changed.
__attribute__((noinline)) Outcome CallEntry(void* entry, int signal_number, Path path) {
  siginfo_t info;
  memset(&info, 0, sizeof(info));
  info.si_signo = signal_number;
  info.si_code = SI_TIMER;
  ucontext_t context;
  memset(&context, 0, sizeof(context));  // uc_stack {0, 0}: not on an alternate stack.
  const uint64_t alternate_before = SamplesSkippedForLowStack(LowStack::kAlternateStack);
  const uint64_t thread_before = SamplesSkippedForLowStack(LowStack::kThreadStack);
  const uint64_t main_before = SamplesSkippedForLowStack(LowStack::kMainStack);
  const uint64_t strays_before = StrayNotificationsDropped();
  const uint64_t on_alternate_before = SamplingSignalsOnAlternateStack();
  const uintptr_t sp = StackPointerHere();
  constexpr uintptr_t kLittle = 2048;        // Less than kSamplingHandlerStackNeed.
  constexpr uintptr_t kPlenty = 256 * 1024;  // More.
  switch (path) {
    case Path::kAlternateStackLow:
      context.uc_stack.ss_sp = reinterpret_cast<void*>(sp - kLittle);
      context.uc_stack.ss_size = 16 * 1024;
      break;
    case Path::kAlternateStackRoom:
      context.uc_stack.ss_sp = reinterpret_cast<void*>(sp - kPlenty);
      context.uc_stack.ss_size = kPlenty + 4096;
      break;
    case Path::kThreadStackLow:
      SetSamplingThreadStackBounds(sp - kLittle, sp + 4096);
      break;
    case Path::kThreadStackRoom:
      SetSamplingThreadStackBounds(sp - kPlenty, sp + 4096);
      break;
    case Path::kMainStackLow:
      SetSamplingMainStackLimits(sp - kLittle, sp + 64 * 1024);
      break;
    case Path::kMainStackRoom:
      SetSamplingMainStackLimits(sp - kPlenty, sp + 64 * 1024);
      break;
  }
  Outcome outcome;
  outcome.changed_registers = strata_test_call_preserving(entry, signal_number, &info, &context);
  SetSamplingThreadStackBounds(0, 0);
  SetSamplingMainStackLimits(0, 0);
  outcome.skipped_alternate =
      SamplesSkippedForLowStack(LowStack::kAlternateStack) - alternate_before;
  outcome.skipped_thread = SamplesSkippedForLowStack(LowStack::kThreadStack) - thread_before;
  outcome.skipped_main = SamplesSkippedForLowStack(LowStack::kMainStack) - main_before;
  outcome.strays = StrayNotificationsDropped() - strays_before;
  outcome.on_alternate_stack = SamplingSignalsOnAlternateStack() - on_alternate_before;
  outcome.masked_for_return = sigismember(&context.uc_sigmask, signal_number) == 1;
  return outcome;
}

TEST_CASE("Sampling signal entry: called as a function, it keeps the callee-saved registers",
          "[platform][sampling]") {
  const int signal_number = ChooseSamplingSignal();
  REQUIRE(signal_number != 0);
  REQUIRE(InstallSamplingSignalHandler(signal_number, &IgnoringCallback) == 0);
  // The entry as whoever calls it finds it: the disposition through sigaction (TSan's table in a
  // TSan build, the kernel's elsewhere).
  struct sigaction installed;
  memset(&installed, 0, sizeof(installed));
  REQUIRE(sigaction(signal_number, nullptr, &installed) == 0);
  REQUIRE((installed.sa_flags & SA_SIGINFO) != 0);
  void* const entry = reinterpret_cast<void*>(installed.sa_sigaction);

  SECTION("a skip on the program's alternate stack") {
    const Outcome outcome = CallEntry(entry, signal_number, Path::kAlternateStackLow);
    CHECK(outcome.skipped_alternate == 1);
    CHECK(outcome.changed_registers == 0);
    // The interrupted handler on the alternate stack runs on with the signal blocked.
    CHECK(outcome.on_alternate_stack == 1);
    CHECK(outcome.masked_for_return);
  }
  SECTION("room on the program's alternate stack: on to the C++ handler, the signal blocked") {
    const Outcome outcome = CallEntry(entry, signal_number, Path::kAlternateStackRoom);
    CHECK(outcome.skipped_alternate == 0);
    CHECK(outcome.strays == 1);
    CHECK(outcome.changed_registers == 0);
    CHECK(outcome.on_alternate_stack == 1);
    CHECK(outcome.masked_for_return);
  }
  SECTION("a skip on the thread's own stack") {
    const Outcome outcome = CallEntry(entry, signal_number, Path::kThreadStackLow);
    CHECK(outcome.skipped_thread == 1);
    CHECK(outcome.changed_registers == 0);
    CHECK(outcome.on_alternate_stack == 0);
    CHECK(!outcome.masked_for_return);  // Off the alternate stack, the mask is left alone.
  }
  SECTION("a skip on the main stack, after the entry's prlimit64") {
    const Outcome outcome = CallEntry(entry, signal_number, Path::kMainStackLow);
    CHECK(outcome.skipped_main == 1);
    CHECK(outcome.changed_registers == 0);
  }
  SECTION("room on the main stack: on to the C++ handler, after the entry's prlimit64") {
    const Outcome outcome = CallEntry(entry, signal_number, Path::kMainStackRoom);
    CHECK(outcome.skipped_main == 0);
    CHECK(outcome.strays == 1);
    CHECK(outcome.changed_registers == 0);
  }
  SECTION("room on the thread's stack: on to the C++ handler") {
    const Outcome outcome = CallEntry(entry, signal_number, Path::kThreadStackRoom);
    CHECK(outcome.skipped_thread == 0);
    CHECK(outcome.strays == 1);
    CHECK(outcome.changed_registers == 0);
  }
  REQUIRE(UninstallSamplingSignalHandler() == 0);
}

}  // namespace
}  // namespace strata
