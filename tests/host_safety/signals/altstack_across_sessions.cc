// The program's own SA_ONSTACK handler on a small alternate stack, installed BEFORE any
// session starts, then run long while one samples (review of issue 33: the sampling signal S
// was kept out of such handlers only when the sigaction call came during a session, from a
// thread whose own alternate stack was small). Checks, exiting 1 with the reason on the
// first failure (0 and "altstack_across_sessions ok" otherwise):
//   - the handler runs every time it is raised, with the guard bytes below its stack intact
//     (a sample inside it killed the process: "overflowed sigaltstack");
//   - the kernel's mask of that handler has S while the session runs, not after it stops;
//   - sigaction queries read back exactly the program's own masks before, during and after
//     two sessions with different sampling signals, also for a handler whose own mask names
//     the second session's signal and that was installed during the first session.
#include <signal.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/profiler.h"
#include "tests/host_safety/signals/burn.h"

namespace {

// The alternate stack: the kernel's signal frame (AT_MINSIGSTKSZ: 3 376 bytes on this kind of
// machine, with AVX-512 state) plus 3 KiB for the handler's own frames, which ASan's builds
// need (a fixed 5 KiB overflowed by the same 40 bytes in every ASan run: the handler's own
// frames). A sample landing on it while the handler runs (a second kernel frame, then
// Strata's handler) would still overflow it: the check below keeps its power.
size_t AlternateStackSize() {
  const unsigned long kernel_frame = getauxval(AT_MINSIGSTKSZ);
  return (kernel_frame != 0 ? kernel_frame : 2048) + 3 * 1024;
}
constexpr int kGuard = 512;
constexpr int kRaises = 10;
volatile sig_atomic_t g_handled = 0;

void OnUsr1(int) {
  BurnCpu(0.05);
  g_handled = g_handled + 1;
}
void OnHup(int) {}

uint64_t Word(const sigset_t& set) {
  uint64_t word;
  std::memcpy(&word, &set, sizeof(word));
  return word;
}
uint64_t Bit(int signal_number) { return uint64_t{1} << (signal_number - 1); }

[[noreturn]] void Fail(const char* what, int signal_number, uint64_t got, uint64_t want) {
  std::printf("FAIL %s (signal %d): mask %#llx, expected %#llx\n", what, signal_number,
              static_cast<unsigned long long>(got), static_cast<unsigned long long>(want));
  std::exit(1);
}

// What sigaction (the program's view) reads back.
void ExpectQuery(const char* when, int signal_number, uint64_t own) {
  struct sigaction read_back;
  if (sigaction(signal_number, nullptr, &read_back) != 0) Fail(when, signal_number, 0, own);
  if (Word(read_back.sa_mask) != own) Fail(when, signal_number, Word(read_back.sa_mask), own);
}

// The kernel's own mask for the handler: an inline rt_sigaction system call, which no wrapper
// sees (libc's syscall() is wrapped, and reads back the program's own mask, S hidden).
uint64_t KernelMask(int signal_number) {
  struct {
    void* handler;
    unsigned long flags;
    void* restorer;
    uint64_t mask;
  } kernel_action{};
  long result;
  register long r10 __asm__("r10") = 8;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "0"(long{SYS_rt_sigaction}), "D"(long{signal_number}), "S"(nullptr),
                     "d"(&kernel_action), "r"(r10)
                   : "rcx", "r11", "memory");
  (void)result;
  return kernel_action.mask;
}

void Install(int signal_number, void (*handler)(int), uint64_t own) {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = handler;
  action.sa_flags = SA_ONSTACK;
  std::memcpy(&action.sa_mask, &own, sizeof(own));
  if (sigaction(signal_number, &action, nullptr) != 0) Fail("install", signal_number, 0, own);
}

}  // namespace

int main() {
  const int first = SIGRTMAX - 3;
  const int second = SIGRTMAX - 4;
  const uint64_t usr1_own = Bit(SIGUSR2);
  const uint64_t hup_own = Bit(SIGUSR2) | Bit(second);  // Names the second session's S.

  const size_t alternate_size = AlternateStackSize();
  auto* block = static_cast<unsigned char*>(std::malloc(kGuard + alternate_size));
  std::memset(block, 0x5a, kGuard);
  stack_t alternate{};
  alternate.ss_sp = block + kGuard;
  alternate.ss_size = alternate_size;
  if (sigaltstack(&alternate, nullptr) != 0) return 2;
  Install(SIGUSR1, &OnUsr1, usr1_own);  // Before any session.
  ExpectQuery("before the sessions", SIGUSR1, usr1_own);

  strata::ProfilerSettings settings;
  settings.interval_ms = 1;
  settings.sampling_signal = first;
  strata::ProfilerStart(settings);
  if (!strata::ProfilerIsActive()) return 2;
  if ((KernelMask(SIGUSR1) & Bit(first)) == 0) {
    Fail("kernel mask in session 1 lacks S", SIGUSR1, KernelMask(SIGUSR1), usr1_own | Bit(first));
  }
  ExpectQuery("session 1", SIGUSR1, usr1_own);
  Install(SIGHUP, &OnHup, hup_own);  // During session 1.
  ExpectQuery("session 1", SIGHUP, hup_own);
  for (int i = 0; i < kRaises; ++i) raise(SIGUSR1);
  strata::ProfilerStop();
  ExpectQuery("after session 1", SIGUSR1, usr1_own);
  ExpectQuery("after session 1", SIGHUP, hup_own);
  if (KernelMask(SIGUSR1) != usr1_own) {
    Fail("kernel mask after session 1", SIGUSR1, KernelMask(SIGUSR1), usr1_own);
  }

  settings.sampling_signal = second;
  strata::ProfilerStart(settings);
  ExpectQuery("session 2", SIGUSR1, usr1_own);
  ExpectQuery("session 2", SIGHUP, hup_own);
  for (int i = 0; i < kRaises; ++i) raise(SIGUSR1);
  strata::ProfilerStop();
  ExpectQuery("after session 2", SIGUSR1, usr1_own);
  ExpectQuery("after session 2", SIGHUP, hup_own);

  int overwritten = 0;
  for (int i = 0; i < kGuard; ++i) overwritten += block[i] != 0x5a;
  stack_t disable{};
  disable.ss_flags = SS_DISABLE;
  sigaltstack(&disable, nullptr);  // No handler runs on it any more: the block can go.
  std::free(block);
  if (g_handled != 2 * kRaises || overwritten != 0) {
    std::printf("FAIL handled %d of %d, %d guard bytes overwritten\n", static_cast<int>(g_handled),
                2 * kRaises, overwritten);
    return 1;
  }
  std::printf("altstack_across_sessions ok\n");
  return 0;
}
