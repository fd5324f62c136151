#include "platform/sampling/libunwind_walker.h"

#include <link.h>

#include <errno.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "platform/sampling/frame_pointer_walker.h"
#include "platform/sampling/libunwind_imports.h"
#include "platform/sampling/libunwind_loader.h"

namespace strata {

namespace {

// For WalkFramePointerCallers: a return address whose call site is in a loaded object.
bool ReturnsIntoLoadedObject(uintptr_t return_address) {
  return PcInLoadedObject(return_address - 1);
}

// Unwinds with libunwind from `start`, whose registers `walk_context` holds (the signal
// context itself when `signal_frame`, else a copy of it with pc/sp/fp replaced: a return
// address and its frame), appending frames after frames[count - 1] up to `capacity`. Stops
// at the first return address outside every loaded object, after appending it, and returns
// its registers in *next (pc == 0: walk over). `start` is a copy: *next may alias the
// caller's.
size_t WalkLibunwindFrom(const LibunwindFunctions* functions, ucontext_t* walk_context,
                         FrameRegisters start, bool signal_frame, const StackBounds& bounds,
                         NativeFrame* frames, size_t count, size_t capacity,
                         FrameRegisters* next, unw_cursor_t* cursor_storage) {
  *next = FrameRegisters();
  unw_cursor_t& cursor = *cursor_storage;
  const uintptr_t first_lookup = signal_frame ? start.pc : start.pc - 1;
  SetLibunwindLookupPc(first_lookup);
  // Signal frame: the walk starts at the interrupted instruction. Otherwise (flag 0) the pc
  // is a return address, looked up at its call site.
  if (functions->init_local2(&cursor, walk_context, signal_frame ? UNW_INIT_SIGNAL_FRAME : 0) !=
      0) {
    return count;
  }
  uintptr_t previous_sp = start.sp;
  uintptr_t lookup = first_lookup;
  while (count < capacity) {
    // The first step unwinds `start`; later ones a return address (its call site).
    SetLibunwindLookupPc(lookup);
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
    lookup = static_cast<uintptr_t>(pc) - 1;
    if (!PcInLoadedObject(lookup)) {
      // JIT or other foreign code: libunwind is never handed it (it would fall back to
      // reading through %rbp, trusting a cache of pages checked earlier).
      unw_word_t fp = 0;
      if (functions->get_reg(&cursor, UNW_X86_64_RBP, &fp) != 0) break;
      *next = {static_cast<uintptr_t>(pc), static_cast<uintptr_t>(sp),
               static_cast<uintptr_t>(fp)};
      break;
    }
  }
  return count;
}

// WalkLibunwindFrom() at a return address in a loaded object and its frame, found by frame
// pointers. libunwind reads the registers from a ucontext: a copy of the signal context with
// pc/sp/fp replaced (the other callee-saved registers only matter to unusual CFA rules).
// The copy is in the scratch (LibunwindWalkScratch).
size_t ResumeLibunwindAt(const LibunwindFunctions* functions, const ucontext_t& context,
                         FrameRegisters start, const StackBounds& bounds, NativeFrame* frames,
                         size_t count, size_t capacity, FrameRegisters* next,
                         LibunwindWalkScratch* scratch) {
  ucontext_t& resumed = scratch->resumed;
  resumed = context;
  resumed.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(start.pc);
  resumed.uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(start.sp);
  resumed.uc_mcontext.gregs[REG_RBP] = static_cast<greg_t>(start.fp);
  return WalkLibunwindFrom(functions, &resumed, start, /*signal_frame=*/false, bounds, frames,
                           count, capacity, next, &scratch->cursor);
}

}  // namespace

namespace libunwind_walker_internal {

namespace {
// A walk without the caller's scratch: the scratch on the stack, in this frame only.
__attribute__((noinline)) size_t WalkWithStackScratch(const LibunwindFunctions* functions,
                                                      ucontext_t* context,
                                                      const StackBounds& bounds,
                                                      NativeFrame* frames, size_t capacity) {
  LibunwindWalkScratch scratch;
  return WalkStackWith(functions, context, bounds, frames, capacity, &scratch);
}
}  // namespace

size_t WalkStackWith(const LibunwindFunctions* functions, ucontext_t* context,
                     const StackBounds& bounds, NativeFrame* frames, size_t capacity,
                     LibunwindWalkScratch* scratch) {
  if (capacity == 0) return 0;
  const FrameRegisters registers = FrameRegistersFromSignalContext(*context);
  frames[0].pc = registers.pc;
  frames[0].sp = registers.sp;
  if (functions == nullptr) return 1;  // libunwind unavailable: the pc only.
  if (!bounds.Contains(registers.sp)) return 1;

  if (scratch == nullptr) {
    return WalkWithStackScratch(functions, context, bounds, frames, capacity);
  }
  // Nothing libunwind does in this walk touches a descriptor (libunwind_imports.h).
  ScopedStrataLibunwindWalk walk;
  size_t count = 1;
  FrameRegisters next = registers;  // The frame to unwind next: frames[count - 1]'s.
  bool signal_frame = true;
  // Alternates between libunwind (code in loaded objects) and frame pointers read inside the
  // stack bounds (code in no loaded object: JIT code). Each segment appends at least one
  // frame or ends the walk, and stack pointers strictly increase, so this terminates.
  while (count < capacity && next.pc != 0) {
    const uintptr_t lookup = signal_frame ? next.pc : next.pc - 1;
    if (PcInLoadedObject(lookup)) {
      count = signal_frame ? WalkLibunwindFrom(functions, context, next, /*signal_frame=*/true,
                                               bounds, frames, count, capacity, &next,
                                               &scratch->cursor)
                           : ResumeLibunwindAt(functions, *context, next, bounds, frames, count,
                                               capacity, &next, scratch);
    } else {
      FrameRegisters resume;
      const size_t added = WalkFramePointerCallers(next, bounds, frames + count,
                                                   capacity - count, &ReturnsIntoLoadedObject,
                                                   &resume);
      count += added;
      next = resume;
    }
    signal_frame = false;
  }
  SetLibunwindLookupPc(0);
  return count;
}

}  // namespace libunwind_walker_internal

namespace {
// Depth of dl_iterate_phdr calls on this thread (ScopedDlIteratePhdrCall). Initial-exec: read
// in signal handlers, where a dynamic TLS access could allocate.
__thread int t_dl_iterate_phdr_depth __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace

bool PcInLoadedObject(uintptr_t pc) {
  dl_find_object found;
  return _dl_find_object(reinterpret_cast<void*>(pc), &found) == 0;
}

bool LibunwindWalkMayDeadlock() {
  if (t_dl_iterate_phdr_depth > 0) return true;
  return __atomic_load_n(&_r_debug.r_state, __ATOMIC_RELAXED) != r_debug::RT_CONSISTENT;
}

__attribute__((no_sanitize("address", "undefined", "thread")))
ScopedDlIteratePhdrCall::ScopedDlIteratePhdrCall() {
  ++t_dl_iterate_phdr_depth;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

__attribute__((no_sanitize("address", "undefined", "thread")))
ScopedDlIteratePhdrCall::~ScopedDlIteratePhdrCall() {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  --t_dl_iterate_phdr_depth;
}

size_t WalkStackWithLibunwind(ucontext_t* context, const StackBounds& bounds, NativeFrame* frames,
                              size_t capacity, LibunwindWalkScratch* scratch) {
  return libunwind_walker_internal::WalkStackWith(LoadedLibunwind(), context, bounds, frames,
                                                  capacity, scratch);
}

namespace {

// One walk of the calling thread's stack, which runs libunwind's one-time set-up.
void WarmUpWalk(const LibunwindFunctions* functions) {
  ScopedStrataLibunwindWalk walk;
  unw_context_t context;
  if (functions->getcontext(&context) != 0) return;
  unw_cursor_t cursor;
  if (functions->init_local(&cursor, &context) != 0) return;
  // The walk's lookups go through ServeDlIteratePhdrDuringWalk(), as in a handler.
  unw_word_t pc = 0;
  functions->get_reg(&cursor, UNW_REG_IP, &pc);
  SetLibunwindLookupPc(static_cast<uintptr_t>(pc));
  for (int i = 0; i < 256 && functions->step(&cursor) > 0; ++i) {
    if (functions->get_reg(&cursor, UNW_REG_IP, &pc) != 0 || pc == 0) break;
    // Never hand libunwind a pc in no loaded object (JIT code calling in).
    if (!PcInLoadedObject(static_cast<uintptr_t>(pc) - 1)) break;
    SetLibunwindLookupPc(static_cast<uintptr_t>(pc) - 1);
  }
  SetLibunwindLookupPc(0);
}

}  // namespace

bool WarmUpLibunwind() {
  const LibunwindFunctions* functions = LoadLibunwind();
  if (functions == nullptr) return false;
  const int saved_errno = errno;  // The program's errno is left as it was.
  WarmUpWalk(functions);
  errno = saved_errno;
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
  // Only a libunwind already loaded (WarmUpLibunwind, at session start): loading it here
  // would dlopen on the caller's thread, maybe inside the program's own allocator.
  const LibunwindFunctions* functions = LoadedLibunwind();
  if (functions == nullptr) return 0;
  // unw_backtrace's entry 0 is its own return address, inside this function: skipped.
  void* frames[kMaxCapturedFrames + 1];
  ScopedStrataLibunwindWalk walk;  // Nothing it does touches a descriptor.
  const int n = functions->backtrace(frames, static_cast<int>(capacity + 1));
  size_t count = 0;
  for (int i = 1; i < n; ++i) return_addresses[count++] = reinterpret_cast<uintptr_t>(frames[i]);
  return count;
}

}  // namespace strata
