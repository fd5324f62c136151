// Native stack walk by frame pointers: follows the %rbp chain of frame records
// [saved %rbp, return address] from an interrupted context.
//
// Cost: 10-40 ns for a dozen frames whose pages are in the TLB; 70-90 ns p50 for 6 frames
// and 0.2-0.6 us for 46 as the first thing in a signal handler here (TLB refills after the
// kernel exit; docs/sampling.md). Completeness: only as good as the frame pointers. With
// g++ 12, a frameless leaf function has no frame record even under -fno-omit-frame-pointer,
// so when the sample lands in such a leaf its direct caller is missing (75-79 % of the
// samples of the design note's workload); code built with -fomit-frame-pointer (most of
// libc, for example) ends or derails the chain. Use libunwind_walker.h where that matters.
//
// Safety: every load is checked first to lie inside the walked thread's stack, between the
// interrupted stack pointer and bounds.high, 8-byte aligned, with frame records strictly
// increasing. A garbage frame pointer therefore can never fault or loop; it can only end the
// walk early or add a few garbage frames at the outer end (for example when an outermost
// function without a frame pointer leaves a stack address in %rbp).
//
// Thread safety: thread-safe (reads only the caller's arguments and the walked stack).
// Async-signal safety: async-signal-safe: no lock, no allocation, no system call, no TLS.
// The caller must guarantee:
//   - `bounds` are the bounds of the stack that `registers` / `context` belong to (captured
//     at registration with StackBounds::OfCurrentThread() on that thread), and that stack
//     stays mapped during the walk: walk your own stack in a signal handler, or a thread
//     that is suspended and cannot exit;
//   - `frames` has room for `capacity` entries.
#ifndef STRATA_PLATFORM_SAMPLING_FRAME_POINTER_WALKER_H_
#define STRATA_PLATFORM_SAMPLING_FRAME_POINTER_WALKER_H_

#include <ucontext.h>

#include <cstddef>
#include <cstdint>

#include "platform/sampling/native_frame.h"
#include "platform/sampling/stack_bounds.h"

namespace strata {

// Writes at most `capacity` frames (see native_frame.h) and returns how many were written:
// 0 only when capacity is 0, 1 when the stack pointer is outside `bounds` (for example code
// running on a signal alternate stack or a coroutine stack: only the pc is reported).
size_t WalkFramePointers(const FrameRegisters& registers, const StackBounds& bounds,
                         NativeFrame* frames, size_t capacity);

// The same, from the third argument of an SA_SIGINFO signal handler.
size_t WalkFramePointers(const ucontext_t& context, const StackBounds& bounds, NativeFrame* frames,
                         size_t capacity);

// The callers of the frame whose registers are `registers`, by frame pointers, with the same
// checks: frames[0] is its caller (the return address in the record at registers.fp), and
// so on outward. `registers.pc` is not reported. Stops after the first frame whose return
// address `is_resume_point` accepts (nullptr: none does) and stores that caller's registers
// in *resume: pc = the return address, sp = just above the record, fp = the saved frame
// pointer (not checked); resume->pc == 0 when the walk ended otherwise (end of the chain,
// a record outside the stack, `capacity` reached). Returns the number of frames written.
// Mixed-mode walkers use it to cross code they cannot unwind otherwise (JIT code).
size_t WalkFramePointerCallers(const FrameRegisters& registers, const StackBounds& bounds,
                               NativeFrame* frames, size_t capacity,
                               bool (*is_resume_point)(uintptr_t return_address),
                               FrameRegisters* resume);

}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_FRAME_POINTER_WALKER_H_
