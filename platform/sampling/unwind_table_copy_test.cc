#include "platform/sampling/unwind_table_copy.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "catch2/catch.hpp"
#include "platform/sampling/libunwind_imports.h"

// A frame whose CIE names its personality routine indirectly (0x9b: indirect, pc-relative,
// sdata4) through strata_copy_test_personality_ref, a word alone on its page.
extern "C" void strata_copy_test_personality_frame();
extern "C" char strata_copy_test_personality_ref[];
__asm__(
    ".section .data.strata_copy_test_personality,\"aw\",@progbits\n"
    ".balign 4096\n"
    "strata_copy_test_personality_ref: .quad 0x123456789a\n"
    ".fill 4088,1,0\n"
    ".text\n"
    ".globl strata_copy_test_personality_frame\n"
    ".type strata_copy_test_personality_frame, @function\n"
    "strata_copy_test_personality_frame:\n"
    ".cfi_startproc\n"
    ".cfi_personality 0x9b, strata_copy_test_personality_ref\n"
    ".cfi_lsda 0x1b, strata_copy_test_personality_frame\n"
    "  push %rbp\n"
    ".cfi_def_cfa_offset 16\n"
    "  pop %rbp\n"
    ".cfi_def_cfa_offset 8\n"
    "  ret\n"
    ".cfi_endproc\n"
    ".size strata_copy_test_personality_frame, .-strata_copy_test_personality_frame\n");

// Code that no unwind entry covers, placed between functions that have one (as a JIT's
// builtins inside an executable are): the nearest entry below it ends before it.
extern "C" void strata_test_function_without_fde();
asm(".text\n"
    ".globl strata_test_function_without_fde\n"
    ".type strata_test_function_without_fde, @function\n"
    "strata_test_function_without_fde:\n"
    "  nop\n"
    "  nop\n"
    "  ret\n"
    ".size strata_test_function_without_fde, . - strata_test_function_without_fde\n");

namespace strata {
namespace {

struct Decoded {
  uint64_t fde_start = 0;
  uint64_t fde_range = 0;
  uint64_t personality = 0;
  bool has_personality = false;
  uint64_t lsda = 0;
};

uint64_t ReadU64(const uint8_t* at) {
  uint64_t value;
  std::memcpy(&value, at, 8);
  return value;
}

// Reads the copy the way libunwind's callback and FDE parser do (through info's headers).
Decoded DecodeCopy(const dl_phdr_info& info) {
  Decoded decoded;
  const ElfW(Phdr)* eh = nullptr;
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    if (info.dlpi_phdr[i].p_type == PT_GNU_EH_FRAME) eh = &info.dlpi_phdr[i];
  }
  REQUIRE(eh != nullptr);
  const auto* hdr = reinterpret_cast<const uint8_t*>(info.dlpi_addr + eh->p_vaddr);
  REQUIRE(hdr[0] == 1);
  REQUIRE(hdr[1] == 0x04);  // udata8
  REQUIRE(hdr[3] == 0xff);  // no table
  const auto* fde = reinterpret_cast<const uint8_t*>(ReadU64(hdr + 4));
  uint32_t cie_pointer;
  std::memcpy(&cie_pointer, fde + 4, 4);
  const uint8_t* cie = fde + 4 - cie_pointer;
  // CIE: length, id 0, version, augmentation string.
  const char* augmentation = reinterpret_cast<const char*>(cie + 9);
  const uint8_t* at = cie + 9 + std::strlen(augmentation) + 1;
  at += 3;  // code alignment 1, data alignment -8, return column 16: one byte each.
  bool has_lsda = false;
  if (augmentation[0] == 'z') {
    ++at;  // Augmentation length.
    for (const char* letter = augmentation + 1; *letter; ++letter) {
      if (*letter == 'P') {
        REQUIRE(*at == 0x00);
        decoded.personality = ReadU64(at + 1);
        decoded.has_personality = true;
        at += 9;
      } else if (*letter == 'L') {
        has_lsda = *at != 0xff;
        ++at;
      } else if (*letter == 'R') {
        REQUIRE(*at == 0x00);
        ++at;
      }
    }
  }
  decoded.fde_start = ReadU64(fde + 8);
  decoded.fde_range = ReadU64(fde + 16);
  if (has_lsda) decoded.lsda = ReadU64(fde + 25);
  return decoded;
}

UnwindCopyResult CopyFor(uintptr_t pc, UnwindTableCopy* copy, dl_phdr_info* info) {
  dl_find_object found;
  REQUIRE(_dl_find_object(reinterpret_cast<void*>(pc), &found) == 0);
  return BuildUnwindTableCopy(found, pc, copy, info);
}

__attribute__((noinline)) int LocalFunction(int x) { return x * 3 + 1; }

UnwindTableCopy g_copy;

TEST_CASE("the copy of a lookup describes the function around the pc, in this binary, libc and libstdc++",
          "[platform][sampling]") {
  const uintptr_t pcs[] = {
      reinterpret_cast<uintptr_t>(&LocalFunction) + 1,
      reinterpret_cast<uintptr_t>(&getpid) + 1,
      reinterpret_cast<uintptr_t>(&std::set_terminate) + 1,
  };
  for (uintptr_t pc : pcs) {
    dl_phdr_info info;
    REQUIRE(CopyFor(pc, &g_copy, &info) == UnwindCopyResult::kCopied);
    CHECK(info.dlpi_phdr == g_copy.headers);
    const Decoded decoded = DecodeCopy(info);
    CHECK(decoded.fde_start <= pc - 1);
    CHECK(pc - 1 < decoded.fde_start + decoded.fde_range);
    CHECK(decoded.fde_range < 1 << 20);
  }
}

TEST_CASE("a CIE's indirect personality pointer is read checked: its value, or a refusal when unreadable",
          "[platform][sampling]") {
  const uintptr_t pc = reinterpret_cast<uintptr_t>(&strata_copy_test_personality_frame) + 1;
  dl_phdr_info info;
  REQUIRE(CopyFor(pc, &g_copy, &info) == UnwindCopyResult::kCopied);
  const Decoded decoded = DecodeCopy(info);
  CHECK(decoded.has_personality);
  CHECK(decoded.personality == 0x123456789aull);
  CHECK(decoded.lsda == reinterpret_cast<uintptr_t>(&strata_copy_test_personality_frame));
  CHECK(decoded.fde_start == reinterpret_cast<uintptr_t>(&strata_copy_test_personality_frame));

  const long page = sysconf(_SC_PAGESIZE);
  REQUIRE(mprotect(strata_copy_test_personality_ref, page, PROT_NONE) == 0);
  const UnwindCopyResult unreadable = CopyFor(pc, &g_copy, &info);
  REQUIRE(mprotect(strata_copy_test_personality_ref, page, PROT_READ | PROT_WRITE) == 0);
  CHECK(unreadable == UnwindCopyResult::kUnreadable);
}

// --- The window between a check and libunwind's read (issue 33), injected: the callback that
// ServeDlIteratePhdrDuringWalk calls (libunwind's, in a walk) makes the object's unwind pages
// unreadable first, then reads everything it was handed as libunwind's callback and FDE
// parser do. Reading the object's own pages there faulted (the check came before); the copy
// is Strata's memory.
uintptr_t g_protect_start;
size_t g_protect_length;
uint64_t g_read_sum;

int FindUnwindPages(dl_phdr_info* info, size_t, void* data) {
  const uintptr_t pc = reinterpret_cast<uintptr_t>(data);
  const long page = sysconf(_SC_PAGESIZE);
  uintptr_t hdr = 0;
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    const uintptr_t from = info->dlpi_addr + segment.p_vaddr;
    if (segment.p_type == PT_LOAD && from <= pc && pc < from + segment.p_memsz) mine = true;
    if (segment.p_type == PT_GNU_EH_FRAME) hdr = from;
  }
  if (!mine || hdr == 0) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    const uintptr_t from = info->dlpi_addr + segment.p_vaddr;
    if (segment.p_type == PT_LOAD && from <= hdr && hdr < from + segment.p_memsz) {
      g_protect_start = hdr & ~static_cast<uintptr_t>(page - 1);
      g_protect_length = ((from + segment.p_memsz + page - 1) & ~static_cast<uintptr_t>(page - 1)) -
                         g_protect_start;
    }
  }
  return 1;
}

// No string constant, no Catch2 call while the pages are unreadable (they may hold .rodata).
int ReadAllWhileUnreadable(dl_phdr_info* info, size_t, void*) {
  mprotect(reinterpret_cast<void*>(g_protect_start), g_protect_length, PROT_NONE);
  uint64_t sum = 0;
  const ElfW(Phdr)* headers = info->dlpi_phdr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    sum += headers[i].p_type + headers[i].p_vaddr;
    if (headers[i].p_type != PT_GNU_EH_FRAME) continue;
    const auto* hdr = reinterpret_cast<const uint8_t*>(info->dlpi_addr + headers[i].p_vaddr);
    sum += hdr[0] + hdr[1] + hdr[2] + hdr[3];
    if (hdr[1] == 0x04) {  // The copy's absolute FDE pointer: the FDE and its CIE.
      const auto* fde = reinterpret_cast<const uint8_t*>(ReadU64(hdr + 4));
      uint32_t length, cie_pointer;
      std::memcpy(&length, fde, 4);
      std::memcpy(&cie_pointer, fde + 4, 4);
      for (uint32_t j = 0; j < length; ++j) sum += fde[4 + j];
      const uint8_t* cie = fde + 4 - cie_pointer;
      std::memcpy(&length, cie, 4);
      for (uint32_t j = 0; j < length; ++j) sum += cie[4 + j];
    } else {
      sum += ReadU64(hdr + 4);  // The object's own table (the library before the copy).
    }
  }
  mprotect(reinterpret_cast<void*>(g_protect_start), g_protect_length, PROT_READ);
  g_read_sum = sum;
  return 1;
}

TEST_CASE("what a walk's lookup hands libunwind stays readable when the program makes its unwind pages unreadable",
          "[platform][sampling]") {
  const uintptr_t pc = reinterpret_cast<uintptr_t>(&LocalFunction) + 1;
  dl_iterate_phdr(&FindUnwindPages, reinterpret_cast<void*>(pc));
  REQUIRE(g_protect_length > 0);
  SetLibunwindLookupPc(pc);
  int result = 0;
  const bool served = ServeDlIteratePhdrDuringWalk(&ReadAllWhileUnreadable, nullptr, &result);
  SetLibunwindLookupPc(0);
  CHECK(served);
  CHECK(result == 1);
  CHECK(g_read_sum != 0);
}


int CountCalls(dl_phdr_info*, size_t, void* data) {
  ++*static_cast<int*>(data);
  return 1;
}

TEST_CASE("a lookup pc that no unwind entry covers is answered with no object, and remembered",
          "[platform][sampling]") {
  const uintptr_t pc = reinterpret_cast<uintptr_t>(&strata_test_function_without_fde) + 1;
  dl_iterate_phdr(&FindUnwindPages, reinterpret_cast<void*>(pc));
  REQUIRE(g_protect_length > 0);
  ForgetLookupsWithoutEntry();
  int calls = 0;
  int result = -1;
  SetLibunwindLookupPc(pc);
  const bool served = ServeDlIteratePhdrDuringWalk(&CountCalls, &calls, &result);
  const int first_result = result;
  // Asked again with the object's unwind pages unreadable: answered from memory, no table read
  // (a read would be refused and counted); once forgotten, the tables are read again. No
  // Catch2 call while the pages are unreadable (they may hold .rodata).
  const uint64_t refused = UnwindLookupsRefusedAsUnreadable();
  mprotect(reinterpret_cast<void*>(g_protect_start), g_protect_length, PROT_NONE);
  const bool served_remembered = ServeDlIteratePhdrDuringWalk(&CountCalls, &calls, &result);
  const uint64_t refused_remembered = UnwindLookupsRefusedAsUnreadable();
  ForgetLookupsWithoutEntry();
  const bool served_forgotten = ServeDlIteratePhdrDuringWalk(&CountCalls, &calls, &result);
  const uint64_t refused_forgotten = UnwindLookupsRefusedAsUnreadable();
  mprotect(reinterpret_cast<void*>(g_protect_start), g_protect_length, PROT_READ);
  SetLibunwindLookupPc(0);
  CHECK(served);
  CHECK(first_result == 0);  // No object handed to libunwind's callback...
  CHECK(calls == 0);         // ...which is not called.
  CHECK(served_remembered);
  CHECK(refused_remembered == refused);
  CHECK(served_forgotten);
  CHECK(refused_forgotten == refused + 1);
  CHECK(result == 0);
}

}  // namespace
}  // namespace strata
