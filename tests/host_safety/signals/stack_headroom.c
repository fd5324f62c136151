#define _GNU_SOURCE
// Code that runs with little stack left where a sampling signal can land (issue 33):
//   stack_headroom main [LEFT]   lowers its soft RLIMIT_STACK to 1 MiB (in main, after any
//       profiler started), recurses on the main thread until only LEFT bytes (default 5120:
//       room for the kernel's signal frame, not for a stack walk) remain above the lowest
//       address that limit allows, and burns 0.6 s of CPU there. Prints "main done".
//   stack_headroom altstack SIZE [MS [COUNT]]   its own SIGUSR1 handler, SA_ONSTACK on a
//       SIZE-byte alternate stack carved out of a heap block with 512 guard bytes below it,
//       burns MS (default 30) ms of CPU per signal, COUNT (default 20) signals; then checks
//       the guard bytes and the handler's mask as sigaction reads it back (the program's:
//       SIGUSR2 only). Prints "altstack SIZE handled=COUNT guard=intact mask=own" (or
//       "guard=overwritten N", "mask=changed").
//   stack_headroom altstack_raw [COUNT]   the same handler on a 16 KiB alternate stack, but
//       installed with a raw rt_sigaction system call (inline assembly, its own sa_restorer:
//       as a language runtime does; no libc function, so no wrapper sees it) after start-up;
//       each run burns 30 ms of CPU at the top of the stack, then 30 ms with only 1.5 KiB
//       left below (room for its own calls, not for the kernel's frame of another signal:
//       AT_MINSIGSTKSZ is 3.6 KiB here), COUNT (default 10) runs. Then it sleeps 300 ms and
//       reads its action back with rt_sigaction: prints "altstack_raw handled=COUNT
//       guard=intact", and on stderr "kernel mask extra: N..." (the signals in the kernel's
//       mask for its handler beyond its own SIGUSR2; "none" plain).
//   stack_headroom altstack_syscall [COUNT [LEFT]]   the same, but installed through libc's
//       syscall(SYS_rt_sigaction, ...) (as language runtimes do), and each run goes down to
//       1.5 KiB above the base at once and burns its 30 ms there: the first sampling signal
//       that lands in a run finds no room for its kernel frame unless the handler's kernel
//       mask blocks it from the start. COUNT (default 3) runs, right after the install. Reads
//       the action back both ways: on stderr "kernel mask extra: ..." (inline rt_sigaction)
//       and "syscall mask extra: ..." (through syscall(): the program's own view). LEFT:
//       the bytes left above the base instead of 1.5 KiB.
// Exit status 0 plain. No Strata include.
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

#include "burn.h"

static uintptr_t g_stack_low;
static size_t g_left = 5120;

static void __attribute__((noinline)) BurnHere(void) { BurnCpu(0.6); }

static int __attribute__((noinline)) Recurse(int depth) {
  volatile char pad[256];
  pad[0] = (char)depth;
  const uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
  if (sp - g_stack_low <= g_left + 512) {
    BurnHere();
    return pad[0];
  }
  return Recurse(depth + 1) + pad[0];
}

static int RunMain(void) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_STACK, &limit) != 0) return 2;
  limit.rlim_cur = 1024 * 1024;
  if (setrlimit(RLIMIT_STACK, &limit) != 0) return 2;
  // glibc reports the main stack's low end from the soft limit (pthread_getattr_np), at or
  // above the lowest address the kernel lets the stack grow to.
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 2;
  void* low;
  size_t size;
  pthread_attr_getstack(&attr, &low, &size);
  pthread_attr_destroy(&attr);
  g_stack_low = (uintptr_t)low;
  Recurse(0);
  printf("main done\n");
  return 0;
}

enum { kGuard = 512 };
static volatile sig_atomic_t g_handled = 0;
static double g_burn_seconds = 0.03;

static void OnUsr1(int signal_number) {
  (void)signal_number;
  BurnCpu(g_burn_seconds);
  g_handled = g_handled + 1;
}

static int RunAltstack(size_t size, int signals) {
  unsigned char* block = malloc(kGuard + size);
  if (!block) return 2;
  memset(block, 0x5a, kGuard);
  stack_t alternate = {.ss_sp = block + kGuard, .ss_size = size, .ss_flags = 0};
  if (sigaltstack(&alternate, NULL) != 0) {
    perror("sigaltstack");
    return 2;
  }
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = &OnUsr1;
  action.sa_flags = SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, SIGUSR2);
  if (sigaction(SIGUSR1, &action, NULL) != 0) return 2;
  for (int i = 0; i < signals; ++i) raise(SIGUSR1);
  int overwritten = 0;
  for (int i = 0; i < kGuard; ++i) overwritten += block[i] != 0x5a;
  struct sigaction read_back;
  if (sigaction(SIGUSR1, NULL, &read_back) != 0) return 2;
  int own_mask = sigismember(&read_back.sa_mask, SIGUSR2) == 1;
  for (int s = 1; s < NSIG; ++s) own_mask &= s == SIGUSR2 || sigismember(&read_back.sa_mask, s) != 1;
  const char* mask = own_mask ? "own" : "changed";
  if (overwritten == 0) {
    printf("altstack %zu handled=%d guard=intact mask=%s\n", size, (int)g_handled, mask);
  } else {
    printf("altstack %zu handled=%d guard=overwritten %d mask=%s\n", size, (int)g_handled,
           overwritten, mask);
  }
  return 0;
}

// The kernel's struct sigaction (x86-64) and a raw rt_sigaction, as a runtime makes them.
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)(void);
  uint64_t mask;
};
void RawRestorer(void);
__asm__(".text\n.p2align 4\nRawRestorer:\n  movl $15, %eax\n  syscall\n  hlt\n");

static long RawRtSigaction(int signal_number, const struct KernelSigaction* action,
                           struct KernelSigaction* old) {
  long result;
  register long r10 __asm__("r10") = 8;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "0"(13L), "D"((long)signal_number), "S"(action), "d"(old), "r"(r10)
                   : "rcx", "r11", "memory");
  return result;
}

// Bytes left above the alternate stack's base where the raw handlers burn (1.5 KiB by default;
// altstack_syscall's LEFT argument sets it).
static size_t g_raw_left = 1536;
static uintptr_t g_raw_stack_low;

static int __attribute__((noinline)) RecurseOnAltstack(int depth) {
  volatile char pad[256];
  pad[0] = (char)depth;
  if ((uintptr_t)__builtin_frame_address(0) - g_raw_stack_low <= g_raw_left + 256) {
    BurnCpu(0.03);
    return pad[0];
  }
  return RecurseOnAltstack(depth + 1) + pad[0];
}

static void OnUsr1Raw(int signal_number) {
  (void)signal_number;
  BurnCpu(0.03);
  RecurseOnAltstack(0);
  g_handled = g_handled + 1;
}

static void OnUsr1Low(int signal_number) {
  (void)signal_number;
  RecurseOnAltstack(0);
  g_handled = g_handled + 1;
}

static void PrintExtra(const char* what, uint64_t extra) {
  fprintf(stderr, "%s mask extra:", what);
  for (int s = 1; s <= 64; ++s) {
    if (extra & ((uint64_t)1 << (s - 1))) fprintf(stderr, " %d", s);
  }
  fprintf(stderr, "%s\n", extra == 0 ? " none" : "");
}

// A 16 KiB alternate stack for this thread with kGuard bytes of 0x5a below it (the guard the
// runs check); null when it cannot be set. ReleaseAlternateStack disables and frees it.
static unsigned char* GuardedAlternateStack(void) {
  enum { kSize = 16384 };
  unsigned char* block = malloc(kGuard + kSize);
  if (!block) return NULL;
  memset(block, 0x5a, kGuard);
  g_raw_stack_low = (uintptr_t)(block + kGuard);
  stack_t alternate = {.ss_sp = block + kGuard, .ss_size = kSize, .ss_flags = 0};
  if (sigaltstack(&alternate, NULL) != 0) {
    free(block);
    return NULL;
  }
  return block;
}
static void ReleaseAlternateStack(unsigned char* block) {
  stack_t disable = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
  sigaltstack(&disable, NULL);
  free(block);
}

static int RunAltstackSyscall(int signals) {
  unsigned char* block = GuardedAlternateStack();
  if (!block) return 2;
  const uint64_t own_mask = (uint64_t)1 << (SIGUSR2 - 1);
  struct KernelSigaction action = {&OnUsr1Low, SA_ONSTACK | 0x04000000 /* SA_RESTORER */,
                                   &RawRestorer, own_mask};
  if (syscall(SYS_rt_sigaction, SIGUSR1, &action, NULL, 8) != 0) return 2;
  for (int i = 0; i < signals; ++i) raise(SIGUSR1);
  int overwritten = 0;
  for (int i = 0; i < kGuard; ++i) overwritten += block[i] != 0x5a;
  struct KernelSigaction kernel, program;
  if (RawRtSigaction(SIGUSR1, NULL, &kernel) != 0) return 2;
  if (syscall(SYS_rt_sigaction, SIGUSR1, NULL, &program, 8) != 0) return 2;
  PrintExtra("kernel", kernel.mask & ~own_mask);
  PrintExtra("syscall", program.mask & ~own_mask);
  printf("altstack_syscall handled=%d guard=%s handler=%s\n", (int)g_handled,
         overwritten == 0 ? "intact" : "overwritten",
         program.handler == &OnUsr1Low && program.restorer == &RawRestorer ? "own" : "changed");
  ReleaseAlternateStack(block);
  return 0;
}

static int RunAltstackRaw(int signals) {
  unsigned char* block = GuardedAlternateStack();
  if (!block) return 2;
  const uint64_t own_mask = (uint64_t)1 << (SIGUSR2 - 1);
  struct KernelSigaction action = {&OnUsr1Raw, SA_ONSTACK | 0x04000000 /* SA_RESTORER */,
                                   &RawRestorer, own_mask};
  if (RawRtSigaction(SIGUSR1, &action, NULL) != 0) return 2;
  for (int i = 0; i < signals; ++i) raise(SIGUSR1);
  int overwritten = 0;
  for (int i = 0; i < kGuard; ++i) overwritten += block[i] != 0x5a;
  const struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
  struct KernelSigaction read_back;
  if (RawRtSigaction(SIGUSR1, NULL, &read_back) != 0) return 2;
  PrintExtra("kernel", read_back.mask & ~own_mask);
  if (overwritten == 0) {
    printf("altstack_raw handled=%d guard=intact\n", (int)g_handled);
  } else {
    printf("altstack_raw handled=%d guard=overwritten %d\n", (int)g_handled, overwritten);
  }
  ReleaseAlternateStack(block);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "main") == 0) {
    if (argc > 2) g_left = (size_t)atol(argv[2]);
    return RunMain();
  }
  if (argc > 2 && strcmp(argv[1], "altstack") == 0) {
    if (argc > 3) g_burn_seconds = atof(argv[3]) / 1000;
    return RunAltstack((size_t)atol(argv[2]), argc > 4 ? atoi(argv[4]) : 20);
  }
  if (argc > 1 && strcmp(argv[1], "altstack_syscall") == 0) {
    if (argc > 3) g_raw_left = (size_t)atol(argv[3]);
    return RunAltstackSyscall(argc > 2 ? atoi(argv[2]) : 3);
  }
  if (argc > 1 && strcmp(argv[1], "altstack_raw") == 0) {
    return RunAltstackRaw(argc > 2 ? atoi(argv[2]) : 10);
  }
  fprintf(stderr,
          "usage: stack_headroom main [LEFT] | altstack SIZE [MS [COUNT]] | altstack_raw [COUNT] | altstack_syscall [COUNT [LEFT]]\n");
  return 2;
}
