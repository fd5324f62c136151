#include "platform/sampling/libunwind_walker.h"

#include <link.h>

#include <elf.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
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
  SetLibunwindLookupPc(registers.pc);
  if (functions->init_local2(&cursor, context, UNW_INIT_SIGNAL_FRAME) != 0) {
    SetLibunwindLookupPc(0);
    return 1;
  }

  size_t count = 1;
  uintptr_t previous_sp = registers.sp;
  while (count < capacity) {
    // The first step unwinds the interrupted pc; later ones a return address (its call site).
    SetLibunwindLookupPc(count == 1 ? registers.pc : frames[count - 1].pc - 1);
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
  SetLibunwindLookupPc(0);
  return count;
}

}  // namespace libunwind_walker_internal

namespace {
// Depth of dl_iterate_phdr calls on this thread (ScopedDlIteratePhdrCall). Initial-exec: read
// in signal handlers, where a dynamic TLS access could allocate.
__thread int t_dl_iterate_phdr_depth __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace

namespace {
__thread uintptr_t t_lookup_pc __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace

void SetLibunwindLookupPc(uintptr_t pc) {
  t_lookup_pc = pc;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

// Not instrumented (called through the dl_iterate_phdr wrapper while sanitizers initialise).
__attribute__((no_sanitize("address", "undefined", "thread"))) bool ServeDlIteratePhdrDuringWalk(
    int (*callback)(dl_phdr_info*, size_t, void*), void* data, int* result) {
  const uintptr_t pc = t_lookup_pc;
  if (pc == 0) return false;
  *result = 0;
  dl_find_object found;
  if (_dl_find_object(reinterpret_cast<void*>(pc), &found) != 0 || !found.dlfo_link_map) {
    return true;
  }
  // The program headers, from the ELF header at the start of the object's mapping (the first
  // PT_LOAD segment maps file offset 0 in every object the loader maps).
  const auto* header = static_cast<const ElfW(Ehdr)*>(found.dlfo_map_start);
  if (header->e_ident[EI_MAG0] != ELFMAG0 || header->e_ident[EI_MAG1] != ELFMAG1 ||
      header->e_ident[EI_MAG2] != ELFMAG2 || header->e_ident[EI_MAG3] != ELFMAG3 ||
      header->e_phentsize != sizeof(ElfW(Phdr))) {
    return true;
  }
  dl_phdr_info info = {};
  info.dlpi_addr = found.dlfo_link_map->l_addr;
  info.dlpi_name = found.dlfo_link_map->l_name;
  info.dlpi_phdr = reinterpret_cast<const ElfW(Phdr)*>(
      static_cast<const char*>(found.dlfo_map_start) + header->e_phoff);
  info.dlpi_phnum = header->e_phnum;
  // Only the classic fields: libunwind's callback reads no further (dlpi_adds, TLS ...).
  *result = callback(&info, offsetof(dl_phdr_info, dlpi_adds), data);
  return true;
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
  // The walk's lookups go through ServeDlIteratePhdrDuringWalk(), as in a handler.
  unw_word_t pc = 0;
  functions->get_reg(&cursor, UNW_REG_IP, &pc);
  SetLibunwindLookupPc(static_cast<uintptr_t>(pc));
  for (int i = 0; i < 256 && functions->step(&cursor) > 0; ++i) {
    if (functions->get_reg(&cursor, UNW_REG_IP, &pc) != 0 || pc == 0) break;
    SetLibunwindLookupPc(static_cast<uintptr_t>(pc) - 1);
  }
  SetLibunwindLookupPc(0);
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
