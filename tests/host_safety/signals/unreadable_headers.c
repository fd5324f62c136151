#define _GNU_SOURCE
// A program that takes read access away from parts of its own executable's mapping, then
// computes in functions of that executable while sampled (issue 33: the sampling handler's
// unchecked reads of these pages killed it, 3/3 each):
//   unreadable_headers elf        its ELF header page (with the program headers) PROT_NONE
//   unreadable_headers eh_frame_hdr   the page(s) of its .eh_frame_hdr PROT_NONE
//   unreadable_headers personality   the page holding the word that a CIE's indirect
//                                  personality pointer (DW_EH_PE_indirect) names PROT_NONE,
//                                  computing below a frame of that CIE (issue 33: the
//                                  walk read that word unchecked)
//   unreadable_headers code_page   the page of its code just below a loop that starts a page
//                                  PROT_NONE (issue 33: precise mode read the two code bytes
//                                  before the interrupted pc unchecked)
//   unreadable_headers frame_chain  computes below a frame without unwind information whose
//                                  %rbp points into a page of its own, first readable, then
//                                  PROT_NONE (issue 33: libunwind's frame-chain fallback
//                                  validated that page once and then trusted its cache)
//   unreadable_headers race [ROUNDS]  a second thread makes the .eh_frame_hdr and .eh_frame
//                                  pages unreadable and readable again without pause while
//                                  the main thread runs through 512 functions (libunwind's
//                                  128-entry cache misses, so walks look up all along)
//                                  (issue 33: a page made unreadable between Strata's check
//                                  and libunwind's read)
// Linked with -z separate-code -z now: those pages hold no code and nothing the loader reads
// later.
// Prints "<mode> sum=<n>" and exits 0, as plain. No Strata include. x86-64 only (assembly).
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uintptr_t g_elf_header;  // The executable's first mapped byte (its ELF header).
static uintptr_t g_eh_frame_hdr;
static size_t g_eh_frame_hdr_size;
static unsigned long g_iterations = 25000000;  // ~0.6 s in all here.

static int FindExecutable(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  (void)data;
  // The first object is the executable.
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* segment = &info->dlpi_phdr[i];
    if (segment->p_type == PT_LOAD && segment->p_offset == 0 && !g_elf_header) {
      g_elf_header = info->dlpi_addr + segment->p_vaddr;
    } else if (segment->p_type == PT_GNU_EH_FRAME) {
      g_eh_frame_hdr = info->dlpi_addr + segment->p_vaddr;
      g_eh_frame_hdr_size = segment->p_memsz;
    }
  }
  return 1;
}

// A few frames deep in the executable, so that every sample unwinds through it. Integers
// only and no call out of the executable: nothing read from the pages made unreadable
// (constants, PLT relocations).
static unsigned long __attribute__((noinline)) Leaf(unsigned long iterations) {
  volatile unsigned long sink = 0;
  for (unsigned long i = 0; i < iterations; ++i) sink += i * 2654435761u;
  return sink;
}
static unsigned long __attribute__((noinline)) Middle(unsigned long iterations) {
  return Leaf(iterations) + 1;
}
static unsigned long __attribute__((noinline)) Outer(int rounds, unsigned long iterations) {
  unsigned long sum = 0;
  for (int i = 0; i < rounds; ++i) sum += Middle(iterations) & 1;
  return sum;
}

// CallThroughPersonalityFrame(rounds, iterations, function): calls function(rounds,
// iterations) from a frame whose CIE names a personality routine indirectly (encoding 0x9b:
// indirect, pc-relative, sdata4) through strata_test_personality_ref, a word alone on its
// page. The word's value is never used (nothing is thrown); only the unwinder reads it.
unsigned long CallThroughPersonalityFrame(int rounds, unsigned long iterations,
                                          unsigned long (*function)(int, unsigned long));
extern char strata_test_personality_ref[];
__asm__(
    ".section .data.strata_test_personality,\"aw\",@progbits\n"
    ".balign 4096\n"
    "strata_test_personality_ref: .quad 0\n"
    ".fill 4088,1,0\n"
    ".text\n"
    ".globl CallThroughPersonalityFrame\n"
    ".type CallThroughPersonalityFrame, @function\n"
    "CallThroughPersonalityFrame:\n"
    ".cfi_startproc\n"
    ".cfi_personality 0x9b, strata_test_personality_ref\n"
    "  push %rbp\n"
    ".cfi_def_cfa_offset 16\n"
    ".cfi_offset %rbp, -16\n"
    "  mov %rsp, %rbp\n"
    ".cfi_def_cfa_register %rbp\n"
    "  call *%rdx\n"
    "  pop %rbp\n"
    ".cfi_def_cfa %rsp, 8\n"
    "  ret\n"
    ".cfi_endproc\n"
    ".size CallThroughPersonalityFrame, .-CallThroughPersonalityFrame\n");

// SpinAtPageStart(count): counts down from `count` in a two-instruction loop whose first
// instruction starts a page; strata_test_guard_page, the page below, holds no code that runs.
unsigned long SpinAtPageStart(unsigned long count);
extern char strata_test_guard_page[];
__asm__(
    ".section .text.strata_test_guarded,\"ax\",@progbits\n"
    ".balign 4096\n"
    "strata_test_guard_page: .fill 4096,1,0xcc\n"
    ".globl SpinAtPageStart\n"
    ".type SpinAtPageStart, @function\n"
    "SpinAtPageStart:\n"
    ".cfi_startproc\n"
    "1: sub $1, %rdi\n"
    "  jnz 1b\n"
    "  mov %rdi, %rax\n"
    "  ret\n"
    ".cfi_endproc\n"
    ".size SpinAtPageStart, .-SpinAtPageStart\n"
    ".text\n");

// CallWithoutUnwindInfo(rounds, iterations, function, rbp): calls function(rounds,
// iterations) from a frame that has no unwind information (no CFI) and whose %rbp is `rbp`,
// not a frame record: a walk through it takes libunwind's frame-chain fallback, which reads
// the word at %rbp.
unsigned long CallWithoutUnwindInfo(int rounds, unsigned long iterations,
                                    unsigned long (*function)(int, unsigned long), void* rbp);
__asm__(
    ".text\n"
    ".globl CallWithoutUnwindInfo\n"
    ".type CallWithoutUnwindInfo, @function\n"
    "CallWithoutUnwindInfo:\n"
    "  push %rbp\n"
    "  mov %rcx, %rbp\n"
    "  call *%rdx\n"
    "  pop %rbp\n"
    "  ret\n"
    ".size CallWithoutUnwindInfo, .-CallWithoutUnwindInfo\n");
static char g_frame_page[4096] __attribute__((aligned(4096)));

// 512 small functions, each a loop at its own addresses: a walk from any of them is a
// libunwind cache miss most of the time (its cache holds 128 entries).
#define DEFINE_STEP(n)                                                              \
  static unsigned long __attribute__((noinline)) Step##n(unsigned long x) {         \
    volatile unsigned long sink = x;                                                \
    for (int i = 0; i < 2000; ++i) sink = sink * 6364136223846793005u + (n) + i;    \
    return sink;                                                                    \
  }
#define DEFINE_8(n) DEFINE_STEP(n##0) DEFINE_STEP(n##1) DEFINE_STEP(n##2) DEFINE_STEP(n##3) \
  DEFINE_STEP(n##4) DEFINE_STEP(n##5) DEFINE_STEP(n##6) DEFINE_STEP(n##7)
#define DEFINE_64(n) DEFINE_8(n##0) DEFINE_8(n##1) DEFINE_8(n##2) DEFINE_8(n##3) \
  DEFINE_8(n##4) DEFINE_8(n##5) DEFINE_8(n##6) DEFINE_8(n##7)
DEFINE_64(1) DEFINE_64(2) DEFINE_64(3) DEFINE_64(4) DEFINE_64(5) DEFINE_64(6) DEFINE_64(7)
DEFINE_64(0)
#define LIST_8(n) Step##n##0, Step##n##1, Step##n##2, Step##n##3, Step##n##4, Step##n##5, \
  Step##n##6, Step##n##7
#define LIST_64(n) LIST_8(n##0), LIST_8(n##1), LIST_8(n##2), LIST_8(n##3), LIST_8(n##4), \
  LIST_8(n##5), LIST_8(n##6), LIST_8(n##7)
static unsigned long (*const kSteps[512])(unsigned long) = {
    LIST_64(0), LIST_64(1), LIST_64(2), LIST_64(3),
    LIST_64(4), LIST_64(5), LIST_64(6), LIST_64(7)};

static atomic_int g_toggling = 1;
static uintptr_t g_toggle_start;
static size_t g_toggle_length;
static atomic_ulong g_toggles;

static void* Toggle(void* unused) {
  (void)unused;
  while (atomic_load(&g_toggling)) {
    mprotect((void*)g_toggle_start, g_toggle_length, PROT_NONE);
    mprotect((void*)g_toggle_start, g_toggle_length, PROT_READ);
    atomic_fetch_add(&g_toggles, 1);
  }
  return NULL;
}

// The pages from the .eh_frame_hdr's to the end of the read-only segment that holds it
// (.eh_frame follows .eh_frame_hdr there).
static int FindUnwindSegment(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  (void)data;
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* segment = &info->dlpi_phdr[i];
    const uintptr_t from = info->dlpi_addr + segment->p_vaddr;
    if (segment->p_type == PT_LOAD && from <= g_eh_frame_hdr &&
        g_eh_frame_hdr < from + segment->p_memsz) {
      g_toggle_start = g_eh_frame_hdr & ~(page - 1);
      g_toggle_length = ((from + segment->p_memsz + page - 1) & ~(page - 1)) - g_toggle_start;
    }
  }
  return 1;
}

// Runs the 512 steps over and over for `rounds` rounds while another thread toggles the
// unwind pages.
static unsigned long RunRace(int rounds) {
  dl_iterate_phdr(&FindUnwindSegment, NULL);
  pthread_t toggler;
  if (!g_toggle_start || pthread_create(&toggler, NULL, Toggle, NULL) != 0) return 0;
  unsigned long sum = 0;
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < 512; ++i) sum += kSteps[i](sum) & 1;
  }
  atomic_store(&g_toggling, 0);
  pthread_join(toggler, NULL);
  return sum;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  dl_iterate_phdr(&FindExecutable, NULL);
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t start;
  size_t length;
  if (strcmp(mode, "elf") == 0 && g_elf_header) {
    start = g_elf_header;
    length = page;
  } else if (strcmp(mode, "eh_frame_hdr") == 0 && g_eh_frame_hdr) {
    start = g_eh_frame_hdr & ~(page - 1);
    length = ((g_eh_frame_hdr + g_eh_frame_hdr_size + page - 1) & ~(page - 1)) - start;
  } else if (strcmp(mode, "personality") == 0) {
    start = (uintptr_t)strata_test_personality_ref;
    length = page;
  } else if (strcmp(mode, "code_page") == 0) {
    start = (uintptr_t)strata_test_guard_page;
    length = page;
  } else if (strcmp(mode, "frame_chain") == 0) {
    // Readable first (libunwind validates the page and caches it as good), then not.
    unsigned long sum = CallWithoutUnwindInfo(8, g_iterations, Outer, g_frame_page + 2048);
    if (mprotect(g_frame_page, page, PROT_NONE) != 0) {
      perror("mprotect");
      return 2;
    }
    sum += CallWithoutUnwindInfo(12, g_iterations, Outer, g_frame_page + 2048);
    mprotect(g_frame_page, page, PROT_READ | PROT_WRITE);
    printf("%s sum=%lu\n", mode, sum);
    return 0;
  } else if (strcmp(mode, "race") == 0) {
    const unsigned long sum = RunRace(argc > 2 ? atoi(argv[2]) : 60);
    if (atomic_load(&g_toggles) == 0) {
      fprintf(stderr, "race: the pages were never toggled\n");
      return 2;
    }
    printf("%s sum=%lu\n", mode, sum);
    return 0;
  } else {
    fprintf(stderr,
            "usage: unreadable_headers elf|eh_frame_hdr|personality|code_page|frame_chain|race\n");
    return 2;
  }
  // Decided before the mprotect: the strings compared may share a page with .eh_frame_hdr.
  const int personality = strcmp(mode, "personality") == 0;
  const int code_page = strcmp(mode, "code_page") == 0;
  const int restored = code_page ? PROT_READ | PROT_EXEC
                       : personality ? PROT_READ | PROT_WRITE
                                     : PROT_READ;
  if (mprotect((void*)start, length, PROT_NONE) != 0) {
    perror("mprotect");
    return 2;
  }
  unsigned long sum;
  if (personality) {
    sum = CallThroughPersonalityFrame(20, g_iterations, Outer);
  } else if (code_page) {
    sum = SpinAtPageStart(20 * g_iterations);
  } else {
    sum = Outer(20, g_iterations);
  }
  // Back, before exit's own use of the headers.
  mprotect((void*)start, length, restored);
  printf("%s sum=%lu\n", mode, sum);
  return 0;
}
