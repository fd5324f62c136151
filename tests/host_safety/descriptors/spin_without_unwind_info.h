// A busy loop whose code has no unwind information (no .eh_frame entry): hand-written
// assembly without CFI directives. A stack walker that relies on DWARF call-frame information
// finds nothing for a pc in it and falls back to its own heuristics (libunwind: its
// frame-chain fallback, which validates every address it reads). It keeps a frame pointer, so
// frame-pointer walks get through it. Shared by the descriptor scenarios' programs, which have
// no Strata include. Header-only: include it from exactly one file of a program.
#ifndef STRATA_TESTS_HOST_SAFETY_DESCRIPTORS_SPIN_WITHOUT_UNWIND_INFO_H_
#define STRATA_TESTS_HOST_SAFETY_DESCRIPTORS_SPIN_WITHOUT_UNWIND_INFO_H_

// Decrements `iterations` (must be >= 1) to zero; about one iteration per cycle.
void spin_without_unwind_info(unsigned long iterations);

__asm__(
    ".text\n"
    ".globl spin_without_unwind_info\n"
    ".type spin_without_unwind_info, @function\n"
    "spin_without_unwind_info:\n"
    "  push %rbp\n"
    "  mov %rsp, %rbp\n"
    "1:\n"
    "  dec %rdi\n"
    "  jnz 1b\n"
    "  pop %rbp\n"
    "  ret\n"
    ".size spin_without_unwind_info, . - spin_without_unwind_info\n");

#endif  // STRATA_TESTS_HOST_SAFETY_DESCRIPTORS_SPIN_WITHOUT_UNWIND_INFO_H_
