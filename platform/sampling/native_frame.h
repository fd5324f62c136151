// One frame of a native stack walk, and the registers a walk starts from.
//
// NativeFrame is what both stack walkers (frame_pointer_walker.h, libunwind_walker.h) write
// into the caller's fixed array, innermost frame first:
//   - frames[0].pc is the interrupted instruction and frames[0].sp the interrupted stack
//     pointer;
//   - for i >= 1, frames[i].pc is a return address (the instruction after the call; subtract
//     one before symbolicating) and frames[i].sp is that frame's stack pointer at the call,
//     which is the canonical frame address (CFA) of frames[i - 1].
// The sp values strictly increase from frame to frame. Labels that record their own stack
// address can be merged into the native stack by comparing with them: a label whose address
// lies in [frames[i - 1].sp, frames[i].sp) belongs to frame i - 1 (Firefox's MergeStacks does
// the same with its native frames' stack addresses).
//
// Thread safety: value types. Async-signal safety: everything here is async-signal-safe.
#ifndef STRATA_PLATFORM_SAMPLING_NATIVE_FRAME_H_
#define STRATA_PLATFORM_SAMPLING_NATIVE_FRAME_H_

#include <ucontext.h>

#include <cstdint>

#if !defined(__linux__) || !defined(__x86_64__)
#error "platform/sampling supports x86-64 Linux only"
#endif

namespace strata {

struct NativeFrame {
  uintptr_t pc = 0;
  uintptr_t sp = 0;
};

// The three registers a frame-pointer walk needs.
struct FrameRegisters {
  uintptr_t pc = 0;  // %rip
  uintptr_t sp = 0;  // %rsp
  uintptr_t fp = 0;  // %rbp
};

// The interrupted thread's registers, from the third argument of an SA_SIGINFO handler.
inline FrameRegisters FrameRegistersFromSignalContext(const ucontext_t& context) {
  const greg_t* registers = context.uc_mcontext.gregs;
  FrameRegisters result;
  result.pc = static_cast<uintptr_t>(registers[REG_RIP]);
  result.sp = static_cast<uintptr_t>(registers[REG_RSP]);
  result.fp = static_cast<uintptr_t>(registers[REG_RBP]);
  return result;
}

}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_NATIVE_FRAME_H_
