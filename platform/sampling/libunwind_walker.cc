#include "platform/sampling/libunwind_walker.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <cstdint>

namespace strata {

size_t WalkStackWithLibunwind(ucontext_t* context, const StackBounds& bounds, NativeFrame* frames,
                              size_t capacity) {
  if (capacity == 0) return 0;
  const FrameRegisters registers = FrameRegistersFromSignalContext(*context);
  frames[0].pc = registers.pc;
  frames[0].sp = registers.sp;
  if (!bounds.Contains(registers.sp)) return 1;

  unw_cursor_t cursor;
  // unw_context_t is ucontext_t on x86-64; the cursor reads the registers from `context`.
  if (unw_init_local2(&cursor, context, UNW_INIT_SIGNAL_FRAME) != 0) return 1;

  size_t count = 1;
  uintptr_t previous_sp = registers.sp;
  while (count < capacity) {
    if (unw_step(&cursor) <= 0) break;  // 0: outermost frame; < 0: no unwind information.
    unw_word_t pc = 0;
    unw_word_t sp = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &pc) != 0 || unw_get_reg(&cursor, UNW_REG_SP, &sp) != 0) {
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

void WarmUpLibunwind() {
  unw_context_t context;
  if (unw_getcontext(&context) != 0) return;
  unw_cursor_t cursor;
  if (unw_init_local(&cursor, &context) != 0) return;
  for (int i = 0; i < 256 && unw_step(&cursor) > 0; ++i) {
    unw_word_t sp = 0;
    unw_get_reg(&cursor, UNW_REG_SP, &sp);
  }
}

void FlushLibunwindCaches() { unw_flush_cache(unw_local_addr_space, 0, 0); }

}  // namespace strata
