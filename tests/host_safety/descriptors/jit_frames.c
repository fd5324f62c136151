// A program with "JIT" code (no Strata include): it maps an executable page, writes a small
// function into it by hand (machine code bytes) and calls it in a loop. The function keeps a
// frame pointer, but like a JIT's frames it points %rbp into memory of the program's own
// (here: a data page of its own), spins, and returns. Between calls the program takes that
// page away, alternately by munmap() and by remapping it PROT_NONE, and maps it back, so
// that many calls run with %rbp pointing into a page that is not readable, and the others
// into the same, readable, page.
//
// The code page is anonymous memory: no loaded object contains it, so no unwind information
// exists for it. A stack walker interrupting it may only read memory it knows to be there.
//
// Prints "jit_frames: calls=N result=X" and exits 0.
// Usage: jit_frames [ROUNDS]   (default 400; each round is two calls of ~2.5 ms of CPU)
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// jit_spin(frame, iterations) returns iterations:
//   push %rbp; mov %rdi, %rbp; mov %rsi, %rcx; 1: dec %rcx; jnz 1b; mov %rsi, %rax;
//   pop %rbp; ret
static const unsigned char kJitSpin[] = {
    0x55,              // push %rbp
    0x48, 0x89, 0xfd,  // mov %rdi, %rbp
    0x48, 0x89, 0xf1,  // mov %rsi, %rcx
    0x48, 0xff, 0xc9,  // 1: dec %rcx
    0x75, 0xfb,        // jnz 1b
    0x48, 0x89, 0xf0,  // mov %rsi, %rax
    0x5d,              // pop %rbp
    0xc3,              // ret
};

typedef unsigned long (*JitSpin)(void* frame, unsigned long iterations);

int main(int argc, char** argv) {
  const long rounds = argc > 1 ? atol(argv[1]) : 400;
  const long page = sysconf(_SC_PAGESIZE);
  void* code = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (code == MAP_FAILED) return 2;
  memcpy(code, kJitSpin, sizeof kJitSpin);
  if (mprotect(code, page, PROT_READ | PROT_EXEC) != 0) return 2;
  const JitSpin spin = (JitSpin)code;

  // The frame page: fixed address, remapped in place.
  char* frame = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (frame == MAP_FAILED) return 2;
  unsigned long result = 0;
  long calls = 0;
  for (long round = 0; round < rounds; ++round) {
    // Readable: a plausible frame record (saved %rbp, return address) in the page.
    memset(frame, 0x11, 64);
    result += spin(frame + 16, 5000000);
    ++calls;
    // Taken away: unmapped on even rounds, PROT_NONE on odd ones.
    if (round % 2 == 0) {
      if (munmap(frame, page) != 0) return 2;
    } else if (mmap(frame, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
               frame) {
      return 2;
    }
    result += spin(frame + 16, 5000000);
    ++calls;
    if (mmap(frame, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
             0) != frame) {
      return 2;
    }
  }
  printf("jit_frames: calls=%ld result=%lx\n", calls, result);
  return 0;
}
