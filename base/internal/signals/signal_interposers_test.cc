// MaskSamplingSignalInAlternateStackHandlers and its undoing (signal_interposers.h) on actions
// installed by raw rt_sigaction system calls, as a language runtime installs them: the scan
// sees them, keeps their own sa_restorer, and never puts back an older action over one the
// program installed during the scan (issue 33, docs/host-contract.md "Stack"). And the
// syscall() wrapper's ProgramRawSigaction while a sampling signal is installed: libc's
// syscall(SYS_rt_sigaction, ...) masked at once, the sampling signal's action recorded.
#include "base/internal/signals/signal_interposers.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "catch2/catch.hpp"
#include "platform/raw_syscall.h"
#include "platform/sampling/sampling_signal.h"

namespace strata {
namespace base_internal {
namespace {

// The kernel's struct sigaction on x86-64.
struct KernelSigaction {
  uintptr_t handler;
  uint64_t flags;
  uintptr_t restorer;
  uint64_t mask;
};

constexpr uint64_t kRestorerFlag = 0x04000000;  // SA_RESTORER
constexpr int kSampling = 40;                   // Any signal the test never raises.

uint64_t Bit(int signal_number) { return uint64_t{1} << (signal_number - 1); }

long RawSigaction(int signal_number, const KernelSigaction* action, KernelSigaction* old) {
  return syscall(SYS_rt_sigaction, signal_number, action, old, sizeof(uint64_t));
}

KernelSigaction ReadAction(int signal_number) {
  KernelSigaction action;
  std::memset(&action, 0, sizeof(action));
  REQUIRE(RawSigaction(signal_number, nullptr, &action) == 0);
  return action;
}

// Handlers and a restorer that are never run (the test raises none of these signals): the
// kernel only stores them.
void NeverRunHandler(int) {}
void NeverRunRestorer() {}

class SavedAction {
 public:
  explicit SavedAction(int signal_number) : signal_number_(signal_number) {
    saved_ = ReadAction(signal_number);
  }
  ~SavedAction() { RawSigaction(signal_number_, &saved_, nullptr); }

 private:
  int signal_number_;
  KernelSigaction saved_;
};

TEST_CASE("Alternate-stack handlers installed by raw rt_sigaction get the sampling signal masked",
          "[base][signals]") {
  SavedAction saved_usr1(SIGUSR1), saved_usr2(SIGUSR2), saved_winch(SIGWINCH);
  const KernelSigaction on_stack{reinterpret_cast<uintptr_t>(&NeverRunHandler),
                                 SA_ONSTACK | kRestorerFlag,
                                 reinterpret_cast<uintptr_t>(&NeverRunRestorer), Bit(SIGHUP)};
  KernelSigaction off_stack = on_stack;
  off_stack.flags = kRestorerFlag;
  KernelSigaction ignored = on_stack;
  ignored.handler = reinterpret_cast<uintptr_t>(SIG_IGN);
  REQUIRE(RawSigaction(SIGUSR1, &on_stack, nullptr) == 0);
  REQUIRE(RawSigaction(SIGUSR2, &off_stack, nullptr) == 0);
  REQUIRE(RawSigaction(SIGWINCH, &ignored, nullptr) == 0);

  MaskSamplingSignalInAlternateStackHandlers(kSampling);
  const KernelSigaction masked = ReadAction(SIGUSR1);
  CHECK(masked.mask == (Bit(SIGHUP) | Bit(kSampling)));
  CHECK(masked.handler == on_stack.handler);
  CHECK(masked.restorer == on_stack.restorer);  // The program's own, not libc's.
  CHECK(masked.flags == on_stack.flags);
  CHECK(ReadAction(SIGUSR2).mask == Bit(SIGHUP));  // Not on the alternate stack.
  CHECK(ReadAction(SIGWINCH).mask == Bit(SIGHUP));  // Ignored.
  // The program reads back its own mask through sigaction.
  struct sigaction read_back;
  REQUIRE(sigaction(SIGUSR1, nullptr, &read_back) == 0);
  CHECK(sigismember(&read_back.sa_mask, SIGHUP) == 1);
  CHECK(sigismember(&read_back.sa_mask, kSampling) == 0);

  UnmaskSamplingSignalInAlternateStackHandlers();
  const KernelSigaction unmasked = ReadAction(SIGUSR1);
  CHECK(unmasked.mask == Bit(SIGHUP));
  CHECK(unmasked.restorer == on_stack.restorer);
}

// The program replaces a handler Strata masked with a raw rt_sigaction (no wrapper sees it)
// whose own mask names the sampling signal (a sigfillset mask): that S is the program's. Its
// sigaction read-back shows it, and the stop leaves it in the kernel's mask.
TEST_CASE("A raw replacement whose own mask names the sampling signal keeps it",
          "[base][signals]") {
  SavedAction saved(SIGUSR1);
  const KernelSigaction on_stack{reinterpret_cast<uintptr_t>(&NeverRunHandler),
                                 SA_ONSTACK | kRestorerFlag,
                                 reinterpret_cast<uintptr_t>(&NeverRunRestorer), Bit(SIGHUP)};
  REQUIRE(RawSigaction(SIGUSR1, &on_stack, nullptr) == 0);
  MaskSamplingSignalInAlternateStackHandlers(kSampling);
  REQUIRE(ReadAction(SIGUSR1).mask == (Bit(SIGHUP) | Bit(kSampling)));

  KernelSigaction replacement = on_stack;
  replacement.handler += 16;
  replacement.mask = ~uint64_t{0};  // Every signal; the kernel drops SIGKILL and SIGSTOP.
  REQUIRE(RawSigaction(SIGUSR1, &replacement, nullptr) == 0);
  const uint64_t installed_mask = ReadAction(SIGUSR1).mask;
  REQUIRE((installed_mask & Bit(kSampling)) != 0);

  struct sigaction read_back;
  REQUIRE(sigaction(SIGUSR1, nullptr, &read_back) == 0);
  CHECK(sigismember(&read_back.sa_mask, kSampling) == 1);
  CHECK(sigismember(&read_back.sa_mask, SIGHUP) == 1);

  UnmaskSamplingSignalInAlternateStackHandlers();
  CHECK(ReadAction(SIGUSR1).mask == installed_mask);
  CHECK(ReadAction(SIGUSR1).handler == replacement.handler);

  // The same through the wrapper: a handler the wrapper masked, then replaced raw by one whose
  // mask names S while the record still names the first.
  struct sigaction through_wrapper;
  std::memset(&through_wrapper, 0, sizeof(through_wrapper));
  through_wrapper.sa_handler = &NeverRunHandler;
  through_wrapper.sa_flags = SA_ONSTACK;
  sigemptyset(&through_wrapper.sa_mask);
  MaskSamplingSignalInAlternateStackHandlers(kSampling);  // Records nothing: S is named.
  REQUIRE(sigaction(SIGUSR1, &through_wrapper, nullptr) == 0);
  // Masked by the wrapper only while a session samples; none here, so mask by a scan.
  MaskSamplingSignalInAlternateStackHandlers(kSampling);
  REQUIRE((ReadAction(SIGUSR1).mask & Bit(kSampling)) != 0);
  REQUIRE(sigaction(SIGUSR1, nullptr, &read_back) == 0);
  CHECK(sigismember(&read_back.sa_mask, kSampling) == 0);  // Strata's, hidden.
  REQUIRE(RawSigaction(SIGUSR1, &replacement, nullptr) == 0);
  REQUIRE(sigaction(SIGUSR1, nullptr, &read_back) == 0);
  CHECK(sigismember(&read_back.sa_mask, kSampling) == 1);  // The program's own.
  UnmaskSamplingSignalInAlternateStackHandlers();
  CHECK(ReadAction(SIGUSR1).mask == installed_mask);
}

// A scanner thread scans without pause while this thread installs two new actions in a row
// (new handler addresses each round, masks without the sampling signal) and waits for two
// more scans: the action installed is the last one written, never the one before that a scan
// read before the second write and wrote back after it.
TEST_CASE("A scan never puts back an action older than one installed during it",
          "[base][signals]") {
  SavedAction saved(SIGUSR2);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> scans{0};
  pthread_t scanner;
  struct Shared {
    std::atomic<bool>* stop;
    std::atomic<uint64_t>* scans;
  } shared{&stop, &scans};
  REQUIRE(pthread_create(
              &scanner, nullptr,
              [](void* argument) -> void* {
                auto* s = static_cast<Shared*>(argument);
                while (!s->stop->load()) {
                  MaskSamplingSignalInAlternateStackHandlers(kSampling);
                  s->scans->fetch_add(1);
                }
                return nullptr;
              },
              &shared) == 0);
  constexpr int kRounds = 1000;
  int older_put_back = 0;
  for (int round = 0; round < kRounds; ++round) {
    // Two actions in a row, the second at a varying delay after the first, so that it falls
    // anywhere in a scan that read the first (a program's handler replaced while the scan
    // runs).
    KernelSigaction action{reinterpret_cast<uintptr_t>(&NeverRunHandler) + 32 * round,
                           SA_ONSTACK | kRestorerFlag,
                           reinterpret_cast<uintptr_t>(&NeverRunRestorer), 0};
    REQUIRE(RawSigaction(SIGUSR2, &action, nullptr) == 0);
    for (volatile int spin = 0; spin < (round * 7919) % 3000; ++spin) {
    }
    action.handler += 16;
    REQUIRE(RawSigaction(SIGUSR2, &action, nullptr) == 0);
    const uint64_t after = scans.load() + 2;
    while (scans.load() < after) sched_yield();  // Two cores, shared with other tests.
    const KernelSigaction now = ReadAction(SIGUSR2);
    if (now.handler != action.handler) ++older_put_back;
    CHECK((now.mask & Bit(kSampling)) != 0);  // And masked by a later scan.
  }
  stop.store(true);
  pthread_join(scanner, nullptr);
  UnmaskSamplingSignalInAlternateStackHandlers();
  CHECK(older_put_back == 0);
}

void NoSample(void*, ucontext_t*, int) {}

// Installs the sampling handler on kSampling for the scope (a session's signal, no session).
class InstalledSampling {
 public:
  InstalledSampling() { REQUIRE(InstallSamplingSignalHandler(kSampling, &NoSample) == 0); }
  ~InstalledSampling() { (void)UninstallSamplingSignalHandler(); }
};

// Through libc's syscall(), which the library wraps (thread_restrictions.cc): before, the
// handler kept the program's mask until the sampler's next scan (<= 100 ms), and a raw
// rt_sigaction of the sampling signal replaced the sampling handler (sampling stopped).
TEST_CASE("syscall(SYS_rt_sigaction) is masked at once and the sampling signal's is recorded",
          "[base][signals]") {
  SavedAction saved_usr1(SIGUSR1), saved_sampling(kSampling);
  InstalledSampling installed;
  REQUIRE(SamplingSignalOfProgramCall() == kSampling);
  const KernelSigaction on_stack{reinterpret_cast<uintptr_t>(&NeverRunHandler),
                                 SA_ONSTACK | kRestorerFlag,
                                 reinterpret_cast<uintptr_t>(&NeverRunRestorer), Bit(SIGHUP)};
  REQUIRE(RawSigaction(SIGUSR1, &on_stack, nullptr) == 0);
  // The kernel holds S in the mask at once, the program's own restorer kept.
  KernelSigaction kernel;
  REQUIRE(RawSyscall(SYS_rt_sigaction, SIGUSR1, 0, reinterpret_cast<long>(&kernel), 8) == 0);
  CHECK(kernel.mask == (Bit(SIGHUP) | Bit(kSampling)));
  CHECK(kernel.restorer == on_stack.restorer);
  CHECK(kernel.flags == on_stack.flags);
  // Read back through syscall() and sigaction: the program's own mask.
  KernelSigaction old{};
  REQUIRE(RawSigaction(SIGUSR1, nullptr, &old) == 0);
  CHECK(old.mask == Bit(SIGHUP));
  CHECK(old.handler == on_stack.handler);
  struct sigaction read_back;
  REQUIRE(sigaction(SIGUSR1, nullptr, &read_back) == 0);
  CHECK(sigismember(&read_back.sa_mask, kSampling) == 0);
  // Replaced: the old action reported is the program's own too.
  KernelSigaction off_stack = on_stack;
  off_stack.flags = kRestorerFlag;
  REQUIRE(RawSigaction(SIGUSR1, &off_stack, &old) == 0);
  CHECK(old.mask == Bit(SIGHUP));
  REQUIRE(RawSyscall(SYS_rt_sigaction, SIGUSR1, 0, reinterpret_cast<long>(&kernel), 8) == 0);
  CHECK(kernel.mask == Bit(SIGHUP));  // Not on the alternate stack: nothing added.

  // The sampling signal itself: recorded as the program's action, the handler stays.
  const KernelSigaction ignore{reinterpret_cast<uintptr_t>(SIG_IGN), kRestorerFlag,
                               reinterpret_cast<uintptr_t>(&NeverRunRestorer), Bit(SIGHUP)};
  REQUIRE(RawSigaction(kSampling, &ignore, &old) == 0);
  CHECK(old.handler == reinterpret_cast<uintptr_t>(SIG_DFL));  // The program's before.
  CHECK(SamplingHandlerInstalled());
  REQUIRE(RawSigaction(kSampling, nullptr, &old) == 0);
  CHECK(old.handler == reinterpret_cast<uintptr_t>(SIG_IGN));
  CHECK(old.mask == Bit(SIGHUP));
  REQUIRE(sigaction(kSampling, nullptr, &read_back) == 0);
  CHECK(read_back.sa_handler == SIG_IGN);

  // The kernel's answers for bad arguments: EFAULT, EINVAL.
  errno = 0;
  CHECK(syscall(SYS_rt_sigaction, kSampling, reinterpret_cast<void*>(8), nullptr, 8) == -1);
  CHECK(errno == EFAULT);
  errno = 0;
  CHECK(syscall(SYS_rt_sigaction, kSampling, nullptr, reinterpret_cast<void*>(8), 8) == -1);
  CHECK(errno == EFAULT);
  errno = 0;
  CHECK(syscall(SYS_rt_sigaction, SIGUSR1, &on_stack, nullptr, 4) == -1);
  CHECK(errno == EINVAL);
  CHECK(SamplingHandlerInstalled());
}

uint64_t KernelMask() {
  uint64_t mask = 0;
  REQUIRE(RawSyscall(SYS_rt_sigprocmask, SIG_BLOCK, 0, reinterpret_cast<long>(&mask), 8) == 0);
  return mask;
}

// The signal mask of a signalfd, from /proc/self/fdinfo ("sigmask:\t<hex>").
uint64_t SignalfdMask(int fd) {
  const std::string path = "/proc/self/fdinfo/" + std::to_string(fd);
  FILE* file = std::fopen(path.c_str(), "r");
  REQUIRE(file != nullptr);
  char line[256];
  unsigned long long mask = ~0ull;
  while (std::fgets(line, sizeof(line), file) != nullptr) {
    if (std::sscanf(line, "sigmask: %llx", &mask) == 1) break;
  }
  std::fclose(file);
  return mask;
}

// The other signal calls a runtime makes through libc's syscall() with the kernel's 8-byte
// sets: before, a raw rt_sigprocmask naming S blocked the samples, and a raw signalfd4 took
// S from the kernel's queue. Now the syscall() wrapper does their wrappers' work.
TEST_CASE("syscall() of rt_sigprocmask, signalfd4 and rt_sigtimedwait keep the sampling signal",
          "[base][signals]") {
  const uint64_t before = KernelMask();
  InstalledSampling installed;
  REQUIRE(SamplingSignalOfProgramCall() == kSampling);
  const uint64_t block = Bit(kSampling) | Bit(SIGUSR2);
  uint64_t old = ~uint64_t{0};
  REQUIRE(syscall(SYS_rt_sigprocmask, SIG_BLOCK, &block, &old, 8) == 0);
  CHECK(old == before);
  // The kernel blocks SIGUSR2 but not S; the program reads back both, by either path.
  CHECK((KernelMask() & Bit(kSampling)) == 0);
  CHECK((KernelMask() & Bit(SIGUSR2)) != 0);
  uint64_t view = 0;
  REQUIRE(syscall(SYS_rt_sigprocmask, SIG_BLOCK, nullptr, &view, 8) == 0);
  CHECK(view == (before | block));
  sigset_t through_libc;
  REQUIRE(pthread_sigmask(SIG_BLOCK, nullptr, &through_libc) == 0);
  CHECK(sigismember(&through_libc, kSampling) == 1);

  // A foreign S (sigqueue's value, not a sample) that arrives while the program's view blocks
  // S is read by a raw rt_sigtimedwait naming S, with its siginfo.
  siginfo_t sent;
  std::memset(&sent, 0, sizeof(sent));
  sent.si_signo = kSampling;
  sent.si_code = SI_QUEUE;
  sent.si_pid = getpid();
  sent.si_value.sival_int = 7;
  REQUIRE(RawSyscall(SYS_rt_tgsigqueueinfo, getpid(), RawSyscall(SYS_gettid), kSampling,
                     reinterpret_cast<long>(&sent)) == 0);
  const uint64_t wait_set = Bit(kSampling);
  siginfo_t got;
  std::memset(&got, 0, sizeof(got));
  const struct timespec second = {1, 0};
  errno = 0;
  CHECK(syscall(SYS_rt_sigtimedwait, &wait_set, &got, &second, 8) == kSampling);
  CHECK(errno == 0);  // A successful system call leaves errno alone.
  CHECK(got.si_code == SI_QUEUE);
  CHECK(got.si_value.sival_int == 7);
  // Another signal of the set, sent by tgkill: read as the kernel gives it, SI_TKILL (glibc's
  // sigtimedwait would say SI_USER).
  REQUIRE(RawSyscall(SYS_tgkill, getpid(), RawSyscall(SYS_gettid), SIGUSR2) == 0);
  const uint64_t both = Bit(kSampling) | Bit(SIGUSR2);
  CHECK(syscall(SYS_rt_sigtimedwait, &both, &got, &second, 8) == SIGUSR2);
  CHECK(got.si_code == SI_TKILL);
  const struct timespec none = {0, 0};
  errno = 0;
  CHECK(syscall(SYS_rt_sigtimedwait, &wait_set, &got, &none, 8) == -1);  // Nothing else.
  CHECK(errno == EAGAIN);

  // A signalfd naming S is given the set without it.
  const int fd = static_cast<int>(syscall(SYS_signalfd4, -1, &block, 8, SFD_CLOEXEC));
  REQUIRE(fd >= 0);
  CHECK(SignalfdMask(fd) == Bit(SIGUSR2));
  close(fd);

  // The kernel's answers for bad arguments: EFAULT, EINVAL; nothing changed.
  errno = 0;
  CHECK(syscall(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<void*>(8), nullptr, 8) == -1);
  CHECK(errno == EFAULT);
  errno = 0;
  CHECK(syscall(SYS_rt_sigprocmask, SIG_BLOCK, nullptr, reinterpret_cast<void*>(8), 8) == -1);
  CHECK(errno == EFAULT);
  errno = 0;
  CHECK(syscall(SYS_rt_sigprocmask, 99, &block, nullptr, 8) == -1);
  CHECK(errno == EINVAL);

  REQUIRE(syscall(SYS_rt_sigprocmask, SIG_SETMASK, &before, nullptr, 8) == 0);
  CHECK(KernelMask() == before);
  REQUIRE(pthread_sigmask(SIG_BLOCK, nullptr, &through_libc) == 0);
  CHECK(sigismember(&through_libc, kSampling) == 0);
}

// The program's handler for S in the case below: counts the foreign instances it is given.
std::atomic<int> g_program_handler_calls{0};
std::atomic<int> g_program_handler_value{0};
void ProgramSamplingSignalHandler(int, siginfo_t* info, void*) {
  g_program_handler_value.store(info->si_value.sival_int, std::memory_order_relaxed);
  g_program_handler_calls.fetch_add(1, std::memory_order_relaxed);
}

// A foreign S sent to the calling thread while its view blocks S: held (never a sample).
void QueueForeignSamplingSignal(int value) {
  siginfo_t sent;
  std::memset(&sent, 0, sizeof(sent));
  sent.si_signo = kSampling;
  sent.si_code = SI_QUEUE;
  sent.si_pid = getpid();
  sent.si_value.sival_int = value;
  REQUIRE(RawSyscall(SYS_rt_tgsigqueueinfo, getpid(), RawSyscall(SYS_gettid), kSampling,
                     reinterpret_cast<long>(&sent)) == 0);
}

uint64_t RawPending() {
  uint64_t pending = 0;
  REQUIRE(syscall(SYS_rt_sigpending, &pending, 8) == 0);
  return pending;
}

// The waits that take a mask for their duration, made through libc's syscall() as a runtime
// makes them: before, a foreign S held while the program blocked S stayed held through a raw
// wait whose mask unblocked it (the wait ran to its timeout), and a raw rt_sigpending did not
// report it. Now each behaves as plain: S delivered to the program's handler inside the call,
// which returns EINTR.
TEST_CASE("syscall() of rt_sigpending and the waits taking a mask see a held foreign S",
          "[base][signals]") {
  const uint64_t before = KernelMask();
  SavedAction saved_sampling(kSampling);
  InstalledSampling installed;
  REQUIRE(SamplingSignalOfProgramCall() == kSampling);
  struct sigaction program;
  std::memset(&program, 0, sizeof(program));
  program.sa_sigaction = &ProgramSamplingSignalHandler;
  program.sa_flags = SA_SIGINFO;
  REQUIRE(sigaction(kSampling, &program, nullptr) == 0);  // The program's action for S.
  const uint64_t block = Bit(kSampling);
  REQUIRE(syscall(SYS_rt_sigprocmask, SIG_BLOCK, &block, nullptr, 8) == 0);
  const uint64_t unblocking = before & ~Bit(kSampling);  // The wait's mask: S unblocked.
  const uint64_t keeping = before | Bit(kSampling);      // The wait's mask: S still blocked.
  const int epoll = epoll_create1(EPOLL_CLOEXEC);
  REQUIRE(epoll >= 0);
  const struct timespec two_seconds = {2, 0};
  const struct timespec short_wait = {0, 20 * 1000 * 1000};

  // Each wait: its number, and a call of it with `mask` and `timeout`.
  struct Wait {
    const char* name;
    long (*call)(const uint64_t* mask, const struct timespec* timeout, int epoll);
  };
  const Wait waits[] = {
      {"rt_sigsuspend",
       [](const uint64_t* mask, const struct timespec*, int) {
         return syscall(SYS_rt_sigsuspend, mask, 8);
       }},
      {"ppoll",
       [](const uint64_t* mask, const struct timespec* timeout, int) {
         return syscall(SYS_ppoll, nullptr, 0, timeout, mask, 8);
       }},
      {"pselect6",
       [](const uint64_t* mask, const struct timespec* timeout, int) {
         const long pair[2] = {reinterpret_cast<long>(mask), 8};
         return syscall(SYS_pselect6, 0, nullptr, nullptr, nullptr, timeout, pair);
       }},
      {"epoll_pwait",
       [](const uint64_t* mask, const struct timespec* timeout, int epoll) {
         epoll_event event;
         return syscall(SYS_epoll_pwait, epoll, &event, 1,
                        static_cast<int>(timeout->tv_sec * 1000 + timeout->tv_nsec / 1000000),
                        mask, 8);
       }},
  };
  int value = 100;
  for (const Wait& wait : waits) {
    INFO(wait.name);
    ++value;
    QueueForeignSamplingSignal(value);
    CHECK((RawPending() & Bit(kSampling)) != 0);  // Held: pending in the program's view.
    const int calls = g_program_handler_calls.load();
    if (std::strcmp(wait.name, "rt_sigsuspend") != 0) {
      // A mask that keeps S blocked: not delivered, the wait runs to its timeout.
      errno = 0;
      CHECK(wait.call(&keeping, &short_wait, epoll) == 0);
      CHECK(g_program_handler_calls.load() == calls);
    }
    errno = 0;
    CHECK(wait.call(&unblocking, &two_seconds, epoll) == -1);
    CHECK(errno == EINTR);
    CHECK(g_program_handler_calls.load() == calls + 1);
    CHECK(g_program_handler_value.load() == value);
    CHECK((RawPending() & Bit(kSampling)) == 0);
    // The program's mask is its own again: S blocked in its view, not in the kernel's.
    uint64_t view = 0;
    REQUIRE(syscall(SYS_rt_sigprocmask, SIG_BLOCK, nullptr, &view, 8) == 0);
    CHECK(view == (before | Bit(kSampling)));
    CHECK((KernelMask() & Bit(kSampling)) == 0);
  }
  close(epoll);
  // rt_sigpending's answers for bad arguments are the kernel's.
  errno = 0;
  CHECK(syscall(SYS_rt_sigpending, reinterpret_cast<void*>(8), 8) == -1);
  CHECK(errno == EFAULT);
  REQUIRE(syscall(SYS_rt_sigprocmask, SIG_SETMASK, &before, nullptr, 8) == 0);
  CHECK(KernelMask() == before);
}

}  // namespace
}  // namespace base_internal
}  // namespace strata
