#define _GNU_SOURCE
// A thread with the smallest stack (PTHREAD_STACK_MIN) recurses until only LEFT bytes of it
// remain (default 4608: room for the kernel's signal frame, not for a stack walk) and burns
// CPU there. Prints "done left=L" and exits 0. With --measure, it instead runs on a 1 MiB
// stack, paints 64 KiB below its deepest frame, burns CPU there and prints how many bytes below
// that frame signal handling used ("used_below=B").
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "burn.h"

static uintptr_t g_stack_low;
static size_t g_left = 4608;
static int g_measure = 0;
static int g_depth = 0;
enum { kPaint = 64 * 1024 };

static void __attribute__((noinline)) BurnHere(void) {
  if (!g_measure) {
    BurnCpu(0.6);
    return;
  }
  volatile char* here = (volatile char*)__builtin_frame_address(0);
  // Below the red zone and this frame's callees' frames (BurnCpu: < 512 bytes).
  volatile char* top = here - 1024;
  for (size_t i = 0; i < kPaint; ++i) top[-(long)i] = (char)0xa5;
  BurnCpu(0.6);
  size_t used = 0;
  for (size_t i = kPaint; i-- > 0;) {
    if (top[-(long)i] != (char)0xa5) {
      used = i + 1024;
      break;
    }
  }
  printf("used_below=%zu\n", used);
}

static int __attribute__((noinline)) Recurse(int depth) {
  volatile char pad[256];
  pad[0] = (char)depth;
  const uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  const size_t left = g_measure ? 2 * kPaint : g_left;
  if (sp - g_stack_low <= left + 512) {
    g_depth = depth;
    BurnHere();
    return pad[0];
  }
  return Recurse(depth + 1) + pad[0];
}

static void* Thread(void* arg) {
  (void)arg;
  pthread_attr_t attr;
  pthread_getattr_np(pthread_self(), &attr);
  void* low;
  size_t size;
  pthread_attr_getstack(&attr, &low, &size);
  pthread_attr_destroy(&attr);
  g_stack_low = (uintptr_t)low;
  Recurse(0);
  return NULL;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--measure") == 0) g_measure = 1;
    else g_left = (size_t)atol(argv[i]);
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, g_measure ? 1024 * 1024 : PTHREAD_STACK_MIN);
  pthread_t thread;
  if (pthread_create(&thread, &attr, &Thread, NULL) != 0) return 2;
  pthread_join(thread, NULL);
  // (Not the depth: a profiler's thread-start trampoline may take a frame of the stack.)
  printf("done left=%zu\n", g_measure ? (size_t)2 * kPaint : g_left);
  return 0;
}
