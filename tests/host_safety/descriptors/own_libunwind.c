// A program that uses libunwind itself (linked with -lunwind; no Strata include): it walks
// its own stack with libunwind's cursor from inside code without unwind information
// (spin_without_unwind_info.h's neighbour below), where libunwind falls back to its
// validating frame-chain walk, many times while busy. A profiler that loads the same
// libunwind.so.8 shares that very object with it: the program's walks must find the same
// frames as without the profiler.
//
// Prints "own_libunwind: walks=N frames=F reached_main=M frames_differ=0|1" and exits 0 when
// every walk reached main with the same number of frames.
// Usage: own_libunwind [WALKS]   (default 2000)
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <alloca.h>
#include <libunwind.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/host_safety/descriptors/spin_without_unwind_info.h"

// Calls `callback` from a frame without unwind information that keeps a frame pointer.
void call_without_unwind_info(void (*callback)(void));
__asm__(
    ".text\n"
    ".globl call_without_unwind_info\n"
    ".type call_without_unwind_info, @function\n"
    "call_without_unwind_info:\n"
    "  push %rbp\n"
    "  mov %rsp, %rbp\n"
    "  call *%rdi\n"
    "  pop %rbp\n"
    "  ret\n"
    ".size call_without_unwind_info, . - call_without_unwind_info\n");

static int g_frames;
static int g_reached_main;

static void WalkOwnStack(void) {
  unw_context_t context;
  unw_cursor_t cursor;
  unw_getcontext(&context);
  unw_init_local(&cursor, &context);
  int frames = 0;
  int reached_main = 0;
  while (frames < 64 && unw_step(&cursor) > 0) {
    ++frames;
    char name[64];
    unw_word_t offset;
    if (unw_get_proc_name(&cursor, name, sizeof name, &offset) == 0 && strcmp(name, "main") == 0) {
      reached_main = 1;
    }
  }
  g_frames = frames;
  g_reached_main = reached_main;
}

// The walk `pages` pages deeper in the stack: libunwind caches the last 4 pages it found
// readable, so walks from different depths check pages again.
__attribute__((noinline)) static void WalkAtDepth(int pages) {
  volatile char* pad = alloca(pages * 4096 + 64);
  pad[0] = 1;
  call_without_unwind_info(&WalkOwnStack);
  __asm__ volatile("" ::: "memory");  // Not a tail call.
}

int main(int argc, char** argv) {
  const long walks = argc > 1 ? atol(argv[1]) : 2000;
  long reached = 0;
  int frames = -1;
  int frames_differ = 0;
  for (long i = 0; i < walks; ++i) {
    spin_without_unwind_info(200000);  // Busy: a profiler samples here.
    WalkAtDepth((int)(i % 16));
    reached += g_reached_main;
    if (frames >= 0 && g_frames != frames) frames_differ = 1;
    frames = g_frames;
  }
  printf("own_libunwind: walks=%ld frames=%d reached_main=%ld frames_differ=%d\n", walks, frames,
         reached, frames_differ);
  return reached == walks && !frames_differ ? 0 : 3;
}
