#include "platform/sampling/libunwind_walker.h"

#include <algorithm>
#include <cstdint>

#include "platform/sampling/libunwind_loader.h"

namespace strata {

namespace libunwind_walker_internal {

size_t WalkStackWith(const LibunwindFunctions* functions, ucontext_t* context,
                     const StackBounds& bounds, NativeFrame* frames, size_t capacity) {
  if (capacity == 0) return 0;
  const FrameRegisters registers = FrameRegistersFromSignalContext(*context);
  frames[0].pc = registers.pc;
  frames[0].sp = registers.sp;
  if (functions == nullptr) return 1;  // libunwind unavailable: the pc only.
  if (!bounds.Contains(registers.sp)) return 1;

  unw_cursor_t cursor;
  // unw_context_t is ucontext_t on x86-64; the cursor reads the registers from `context`.
  if (functions->init_local2(&cursor, context, UNW_INIT_SIGNAL_FRAME) != 0) return 1;

  size_t count = 1;
  uintptr_t previous_sp = registers.sp;
  while (count < capacity) {
    if (functions->step(&cursor) <= 0) break;  // 0: outermost frame; < 0: no unwind info.
    unw_word_t pc = 0;
    unw_word_t sp = 0;
    if (functions->get_reg(&cursor, UNW_REG_IP, &pc) != 0 ||
        functions->get_reg(&cursor, UNW_REG_SP, &sp) != 0) {
      break;
    }
    if (pc == 0) break;
    // The caller's frame must sit above the callee's, on the same stack.
    if (sp <= previous_sp || sp >= bounds.high) break;
    frames[count].pc = static_cast<uintptr_t>(pc);
    frames[count].sp = static_cast<uintptr_t>(sp);
    ++count;
    previous_sp = sp;
  }
  return count;
}

}  // namespace libunwind_walker_internal

size_t WalkStackWithLibunwind(ucontext_t* context, const StackBounds& bounds, NativeFrame* frames,
                              size_t capacity) {
  return libunwind_walker_internal::WalkStackWith(LoadedLibunwind(), context, bounds, frames,
                                                  capacity);
}

bool WarmUpLibunwind() {
  const LibunwindFunctions* functions = LoadLibunwind();
  if (functions == nullptr) return false;
  unw_context_t context;
  if (functions->getcontext(&context) != 0) return true;
  unw_cursor_t cursor;
  if (functions->init_local(&cursor, &context) != 0) return true;
  for (int i = 0; i < 256 && functions->step(&cursor) > 0; ++i) {
    unw_word_t sp = 0;
    functions->get_reg(&cursor, UNW_REG_SP, &sp);
  }
  return true;
}

void FlushLibunwindCaches() {
  const LibunwindFunctions* functions = LoadedLibunwind();
  if (functions == nullptr) return;
  functions->flush_cache(*functions->local_addr_space, 0, 0);
}

// noinline: entry 0 must be this function's own return address, which needs a frame of its
// own; the call to unw_backtrace is not a tail call (the copy follows it).
__attribute__((noinline)) size_t CaptureCurrentStack(uintptr_t* return_addresses,
                                                     size_t capacity) {
  capacity = std::min(capacity, kMaxCapturedFrames);
  if (capacity == 0) return 0;
  const LibunwindFunctions* functions = LoadLibunwind();
  if (functions == nullptr) return 0;
  // unw_backtrace's entry 0 is its own return address, inside this function: skipped.
  void* frames[kMaxCapturedFrames + 1];
  const int n = functions->backtrace(frames, static_cast<int>(capacity + 1));
  size_t count = 0;
  for (int i = 1; i < n; ++i) return_addresses[count++] = reinterpret_cast<uintptr_t>(frames[i]);
  return count;
}

}  // namespace strata
