#include "platform/sampling/frame_pointer_walker.h"

#include <cstdint>

namespace strata {
namespace {

// A frame record on x86-64: what `push %rbp; mov %rsp, %rbp` leaves at %rbp.
struct FrameRecord {
  uintptr_t caller_fp;
  uintptr_t return_address;
};

// Return addresses below the first page are never code; 0 ends glibc's chains.
constexpr uintptr_t kMinCodeAddress = 4096;

}  // namespace

// The walk reads other frames' memory, which AddressSanitizer would report as redzone
// accesses: the reads are bounds-checked by hand instead. Uninstrumented for ThreadSanitizer
// too: the first fp is a register's value, and below a caller built without frame pointers it
// points at that caller's data (libtsan's read interceptor kept the program's buffer address
// in rbp below a wait wrapper), which the waiting call itself writes while a wait-stack walk
// on the sampler thread reads it (ipc_follow_test under TSan). A word read there is only a
// candidate record: the checks below end the walk on anything that is not a chain.
__attribute__((no_sanitize("address", "thread")))
size_t WalkFramePointerCallers(const FrameRegisters& registers, const StackBounds& bounds,
                               NativeFrame* frames, size_t capacity,
                               bool (*is_resume_point)(uintptr_t return_address),
                               FrameRegisters* resume) {
  *resume = FrameRegisters();
  size_t count = 0;
  if (!bounds.Contains(registers.sp)) return count;
  uintptr_t fp = registers.fp;
  uintptr_t lowest_allowed = registers.sp;  // Nothing below the live stack pointer is read.
  while (count < capacity) {
    if ((fp & (alignof(FrameRecord) - 1)) != 0 || fp < lowest_allowed ||
        !bounds.ContainsRange(fp, sizeof(FrameRecord))) {
      break;
    }
    const FrameRecord* record = reinterpret_cast<const FrameRecord*>(fp);
    const uintptr_t caller_fp = record->caller_fp;
    const uintptr_t return_address = record->return_address;
    if (return_address < kMinCodeAddress) break;
    // The caller's stack pointer right after the call returns: just above the record.
    frames[count].pc = return_address;
    frames[count].sp = fp + sizeof(FrameRecord);
    ++count;
    if (is_resume_point != nullptr && is_resume_point(return_address)) {
      *resume = {return_address, fp + sizeof(FrameRecord), caller_fp};
      break;
    }
    if (caller_fp <= fp) break;  // Records must strictly increase: no loops.
    lowest_allowed = fp + sizeof(FrameRecord);
    fp = caller_fp;
  }
  return count;
}

size_t WalkFramePointers(const FrameRegisters& registers, const StackBounds& bounds,
                         NativeFrame* frames, size_t capacity) {
  if (capacity == 0) return 0;
  frames[0].pc = registers.pc;
  frames[0].sp = registers.sp;
  FrameRegisters unused;
  return 1 + WalkFramePointerCallers(registers, bounds, frames + 1, capacity - 1, nullptr,
                                     &unused);
}

size_t WalkFramePointers(const ucontext_t& context, const StackBounds& bounds,
                         NativeFrame* frames, size_t capacity) {
  return WalkFramePointers(FrameRegistersFromSignalContext(context), bounds, frames, capacity);
}

}  // namespace strata
