// Checked copies of the unwind information that libunwind reads for one lookup, so that a
// walk never dereferences the program's headers or unwind tables (issue 33).
//
// Why: Debian's libunwind 1.6.2 is the local-only build (UNW_LOCAL_ONLY), whose DWARF readers
// dereference memory directly (dwarf_i.h), as does its dl_iterate_phdr callback (program
// headers, dynamic section, .eh_frame_hdr, the binary-search table). Probing those bytes
// first (the design before this file) left a window: a page the program makes unreadable on
// another thread between the probe and libunwind's read (mprotect, munmap) killed the
// process in the handler; and a CIE's indirect personality pointer (DW_EH_PE_indirect, a
// word in the object's data) was never probed.
//
// What: BuildUnwindTableCopy() reads, with CheckedRead() (process_vm_readv on oneself: the
// kernel copies, an unreadable page fails the call, nothing faults), the .eh_frame_hdr
// header, the binary-search entries on the path to `pc`, the FDE found and its CIE, and
// writes into `copy` what libunwind's callback then reads instead of the object:
//   - three program headers: a PT_LOAD spanning the object's mapping (so the pc is found in
//     it), a PT_LOAD spanning `copy` (libunwind's linear search ends at the highest loaded
//     address) and a PT_GNU_EH_FRAME whose .eh_frame_hdr is in `copy`; no PT_DYNAMIC (gp 0,
//     unused: every pointer in the copy is absolute);
//   - an .eh_frame_hdr with no search table (table_enc DW_EH_PE_omit), an absolute pointer
//     to the copied FDE and an FDE count of 1: libunwind's linear search reads that one FDE;
//   - the CIE and the FDE re-encoded with absolute 8-byte pointers (the originals are mostly
//     pc-relative, meaningless at another address): the FDE's start and range, its LSDA, and
//     the CIE's personality routine, whose indirect pointer is read here, checked. The CFA
//     instructions are copied as they are.
// libunwind's callback and FDE parser then read only `copy`; the only program memory left
// to a libunwind step is the stack words its rules name (through its access_mem accessor).
//
// Not copied (the lookup is refused, the walk ends at that frame): an .eh_frame_hdr whose
// encodings are not the standard ones every linker writes (version 1, pcrel|sdata4,
// udata4, datarel|sdata4), pointer encodings other than absolute and pc-relative (with or
// without indirect), a CIE augmentation with letters other than z, P, L, R, S, an FDE plus
// CIE longer than kUnwindCopySourceBytes, the 64-bit DWARF format. A DW_CFA_set_loc
// instruction (never emitted into .eh_frame by GCC or Clang) would be read with the copy's
// 8-byte encoding. Where process_vm_readv is refused (a seccomp filter), CheckedRead()
// probes and then copies: the window above is back for that process only.
//
// Thread safety: thread-safe (each call writes only `copy`). Async-signal safety:
// async-signal-safe (raw system calls, no lock, no allocation, errno untouched).
#ifndef STRATA_PLATFORM_SAMPLING_UNWIND_TABLE_COPY_H_
#define STRATA_PLATFORM_SAMPLING_UNWIND_TABLE_COPY_H_

#include <dlfcn.h>
#include <link.h>

#include <cstddef>
#include <cstdint>

namespace strata {

// The most bytes of FDE and CIE (with their length words) one lookup copies. The longest
// FDE in Debian's libstdc++ is 756 bytes, in libc 192.
inline constexpr size_t kUnwindCopySourceBytes = 2048;

struct UnwindTableCopy {
  ElfW(Phdr) headers[3];
  uint8_t eh_frame_hdr[16];
  // The re-encoded CIE, then the FDE; a little longer than the originals (8-byte pointers).
  uint8_t entries[kUnwindCopySourceBytes + 128];
  // The originals as read (scratch).
  uint8_t source[kUnwindCopySourceBytes];
  // Set by BuildUnwindTableCopy: the original FDE's address, and whether the CIE's or the
  // FDE's CFA program holds a DWARF expression (DW_CFA_def_cfa_expression, DW_CFA_expression,
  // DW_CFA_val_expression, or an opcode it does not know). libunwind's cache keeps a pointer
  // to an expression's bytes, read at later steps: such a copy must stay where it is for
  // good (libunwind_imports.cc, PermanentCopyFor), not in a slot reused at the next step.
  uintptr_t fde_address;
  bool has_expression;
  // The code the FDE covers: [pc_begin, pc_end).
  uintptr_t pc_begin;
  uintptr_t pc_end;
};

enum class UnwindCopyResult {
  kCopied,       // `copy` holds the lookup's information; hand libunwind `info`.
  kNoEntry,      // The object has no FDE at or below `pc`: nothing to hand libunwind.
  kUnreadable,   // Some byte on the way was unreadable.
  kUnsupported,  // Not copied (see above).
};

// Builds `copy` for the lookup of `pc` in the object `found` (from _dl_find_object) and, on
// kCopied, fills `info` (dlpi_addr, dlpi_name, dlpi_phdr = copy->headers, dlpi_phnum).
// Async-signal-safe.
UnwindCopyResult BuildUnwindTableCopy(const dl_find_object& found, uintptr_t pc,
                                      UnwindTableCopy* copy, dl_phdr_info* info);

}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_UNWIND_TABLE_COPY_H_
