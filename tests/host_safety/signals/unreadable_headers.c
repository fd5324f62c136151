#define _GNU_SOURCE
// A program that takes read access away from parts of its own executable's mapping, then
// computes in functions of that executable while sampled (issue 33: the sampling handler's
// unchecked reads of these pages killed it, 3/3 each):
//   unreadable_headers elf        its ELF header page (with the program headers) PROT_NONE
//   unreadable_headers eh_frame_hdr   the page(s) of its .eh_frame_hdr PROT_NONE
// Linked with -z separate-code -z now: those pages hold no code and nothing the loader reads
// later.
// Prints "<mode> sum=<n>" and exits 0, as plain. No Strata include.
#include <elf.h>
#include <link.h>
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
  } else {
    fprintf(stderr, "usage: unreadable_headers elf|eh_frame_hdr\n");
    return 2;
  }
  if (mprotect((void*)start, length, PROT_NONE) != 0) {
    perror("mprotect");
    return 2;
  }
  const unsigned long sum = Outer(20, g_iterations);
  mprotect((void*)start, length, PROT_READ);  // Back, before exit's own use of the headers.
  printf("%s sum=%lu\n", mode, sum);
  return 0;
}
