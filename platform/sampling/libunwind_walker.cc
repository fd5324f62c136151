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

// --- Verified frame-pointer steps (issue 38; libunwind_walker.h, "Deep stacks").
//
// A direct-mapped table of return addresses at which libunwind's step was seen to equal a
// frame-pointer step: the caller's sp is the frame's %rbp + 16, its pc the word at %rbp + 8
// and its %rbp the word at %rbp. Process-wide, preallocated (.bss), lock-free: one relaxed
// atomic word per entry holds the address itself (0: empty), so a reader never sees half an
// entry. A collision overwrites; a libunwind step that disagrees with a frame-pointer step at
// an address clears it. Emptied when an object is unloaded (FlushLibunwindCaches).
constexpr size_t kVerdictSlots = 4096;  // 32 KiB.
std::atomic<uintptr_t> g_frame_pointer_verdicts[kVerdictSlots];
// A verdict was stored since the table was last emptied: an empty table is not emptied again
// (its 8 pages written with zeros at every dlclose, made resident in every process).
std::atomic<bool> g_verdicts_stored{false};
std::atomic<bool> g_verified_frame_pointer_steps{true};

size_t VerdictSlot(uintptr_t pc) {
  return static_cast<size_t>((pc * 0x9E3779B97F4A7C15ull) >> 52) & (kVerdictSlots - 1);
}

bool HasFramePointerVerdict(uintptr_t return_address) {
  return g_frame_pointer_verdicts[VerdictSlot(return_address)].load(std::memory_order_relaxed) ==
         return_address;
}

// Notes what libunwind's step from the frame (pc, sp, fp) gave: (caller_pc, caller_sp,
// caller_fp). Reads only inside the frame's part of the stack (fp in [sp, bounds.high - 16]).
// Uninstrumented, like libunwind's reads of the same stack: fp is only a register's value, and
// where the frame's code keeps something else in rbp (a caller built without frame pointers:
// TSan's poll interceptor kept the program's pollfd pointer there, below a wait wrapper) the
// two words are that data, which the walked thread's own call may be writing while a
// wait-stack walk reads them (TSan reported it in ipc_follow_test). They are only compared
// with what libunwind's step gave; a changing word gives no verdict.
__attribute__((no_sanitize("address", "thread")))
void NoteFramePointerVerdict(uintptr_t pc, uintptr_t sp, uintptr_t fp, uintptr_t caller_pc,
                             uintptr_t caller_sp, uintptr_t caller_fp, const StackBounds& bounds) {
  std::atomic<uintptr_t>& slot = g_frame_pointer_verdicts[VerdictSlot(pc)];
  const bool readable = (fp & 7) == 0 && fp >= sp && bounds.ContainsRange(fp, 16);
  const uintptr_t* record = reinterpret_cast<const uintptr_t*>(fp);
  if (readable && fp + 16 == caller_sp && record[1] == caller_pc && record[0] == caller_fp) {
    if (slot.load(std::memory_order_relaxed) != pc) {
      slot.store(pc, std::memory_order_relaxed);
      // After the verdict: a flush that sees false missed at most this one, as a flush
      // running beside the store always could; the next flush empties it. Read first: the
      // flag is shared by every thread's walks, in their handlers; written once it stays.
      if (!g_verdicts_stored.load(std::memory_order_relaxed)) {
        g_verdicts_stored.store(true, std::memory_order_release);
      }
    }
  } else if (slot.load(std::memory_order_relaxed) == pc) {
    slot.store(0, std::memory_order_relaxed);
  }
}

// For WalkFramePointerCallers in a verified segment: stop at the first return address that
// is not verified (libunwind or the JIT segment takes over there). A noted address was in a
// loaded object when noted, and the table is emptied when an object is unloaded, so no
// _dl_find_object per frame here (the walk loop checks the address it resumes at).
bool NotVerifiedFramePointerFrame(uintptr_t return_address) {
  return !HasFramePointerVerdict(return_address);
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
  SetLibunwindWalkContext(walk_context);  // Its registers: read directly, not checked.
  // Signal frame: the walk starts at the interrupted instruction. Otherwise (flag 0) the pc
  // is a return address, looked up at its call site.
  if (functions->init_local2(&cursor, walk_context, signal_frame ? UNW_INIT_SIGNAL_FRAME : 0) !=
      0) {
    return count;
  }
  const bool verdicts = g_verified_frame_pointer_steps.load(std::memory_order_relaxed);
  // The frame being unwound: `start` first (not learned from when it is the interrupted
  // instruction: a prologue or epilogue there is not a call site).
  FrameRegisters current = start;
  bool learn = !signal_frame;
  uintptr_t lookup = first_lookup;
  while (count < capacity) {
    // The first step unwinds `start`; later ones a return address (its call site).
    SetLibunwindLookupPc(lookup);
    // 0: no caller (the outermost frame, or no unwind information and no frame-pointer
    // guess); < 0: an error.
    if (functions->step(&cursor) <= 0) break;
    unw_word_t pc = 0;
    unw_word_t sp = 0;
    unw_word_t fp = 0;
    if (functions->get_reg(&cursor, UNW_REG_IP, &pc) != 0 ||
        functions->get_reg(&cursor, UNW_REG_SP, &sp) != 0 ||
        functions->get_reg(&cursor, UNW_X86_64_RBP, &fp) != 0) {
      break;
    }
    if (pc == 0) break;
    // The caller's frame must sit above the callee's, on the same stack.
    if (sp <= current.sp || sp >= bounds.high) break;
    if (verdicts && learn) {
      NoteFramePointerVerdict(current.pc, current.sp, current.fp, pc, sp, fp, bounds);
    }
    learn = true;
    frames[count].pc = static_cast<uintptr_t>(pc);
    frames[count].sp = static_cast<uintptr_t>(sp);
    ++count;
    current = {static_cast<uintptr_t>(pc), static_cast<uintptr_t>(sp), static_cast<uintptr_t>(fp)};
    lookup = static_cast<uintptr_t>(pc) - 1;
    // JIT or other foreign code: libunwind is never handed it (it would fall back to reading
    // through %rbp, trusting a cache of pages checked earlier). A verified frame: frame
    // pointers are cheaper from here.
    if (!PcInLoadedObject(lookup) || (verdicts && HasFramePointerVerdict(current.pc))) {
      *next = current;
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
  // Nothing libunwind does in this walk touches a descriptor (libunwind_imports.h), and its
  // reads of memory outside this stack are checked.
  ScopedStrataLibunwindWalk walk;
  SetLibunwindWalkStackBounds(bounds.low, bounds.high);
  size_t count = 1;
  FrameRegisters next = registers;  // The frame to unwind next: frames[count - 1]'s.
  bool signal_frame = true;
  // Alternates between libunwind (code in loaded objects) and frame pointers read inside the
  // stack bounds (code in no loaded object: JIT code). Each segment appends at least one
  // frame or ends the walk, and stack pointers strictly increase, so this terminates.
  bool verified_failed_at_next = false;
  while (count < capacity && next.pc != 0) {
    const uintptr_t lookup = signal_frame ? next.pc : next.pc - 1;
    if (!signal_frame && !verified_failed_at_next &&
        g_verified_frame_pointer_steps.load(std::memory_order_relaxed) &&
        HasFramePointerVerdict(next.pc) && PcInLoadedObject(lookup)) {
      // Frames whose frame-pointer step libunwind confirmed before: ~20 ns a frame against
      // ~0.3-0.6 us for a libunwind step (which takes its cache lock with two system calls).
      FrameRegisters resume;
      const size_t added = WalkFramePointerCallers(next, bounds, frames + count, capacity - count,
                                                   &NotVerifiedFramePointerFrame, &resume);
      if (added == 0) {
        verified_failed_at_next = true;  // This frame's record is not readable: libunwind.
        continue;
      }
      count += added;
      next = resume;
      continue;
    }
    verified_failed_at_next = false;
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
  SetLibunwindWalkContext(nullptr);
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

// The first steps of a walk of the calling thread's stack, which run libunwind's one-time
// set-up (tdep_init: its locks, memory pools, the address space's accessors; its register-state
// cache) and one unwind-table lookup. The rest of the stack (the loader's and libc's frames
// under a constructor, when a session starts at load) is not walked: each object's tables
// are copied when a sample first needs them (unwind_table_copy.h), so a process that ends
// before its first sample never pays for them (issue 38: ~0.4 ms of a recorded /bin/true).
constexpr int kWarmUpSteps = 2;

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
  for (int i = 0; i < kWarmUpSteps && functions->step(&cursor) > 0; ++i) {
    if (functions->get_reg(&cursor, UNW_REG_IP, &pc) != 0 || pc == 0) break;
    // Never hand libunwind a pc in no loaded object (JIT code calling in).
    if (!PcInLoadedObject(static_cast<uintptr_t>(pc) - 1)) break;
    SetLibunwindLookupPc(static_cast<uintptr_t>(pc) - 1);
  }
  SetLibunwindLookupPc(0);
}

}  // namespace

void SetVerifiedFramePointerSteps(bool enabled) {
  g_verified_frame_pointer_steps.store(enabled, std::memory_order_relaxed);
}

bool FramePointerStepVerifiedForTesting(uintptr_t return_address) {
  return HasFramePointerVerdict(return_address);
}

bool WarmUpLibunwind() {
  const LibunwindFunctions* functions = LoadLibunwind();
  if (functions == nullptr) return false;
  const int saved_errno = errno;  // The program's errno is left as it was.
  WarmUpWalk(functions);
  errno = saved_errno;
  return true;
}

void FlushLibunwindCaches() {
  if (g_verdicts_stored.exchange(false, std::memory_order_acq_rel)) {
    for (std::atomic<uintptr_t>& verdict : g_frame_pointer_verdicts) {
      verdict.store(0, std::memory_order_relaxed);
    }
  }
  ForgetLookupsWithoutEntry();
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
