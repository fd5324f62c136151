// The torture matrix's program (issue 33; tests/torture/torture.py runs it): one program whose
// every host-facing habit is chosen by a flag, so that the matrix can combine them. It calls no
// Strata function and includes no Strata header; run plain, it checks itself and prints the
// same lines every time, so that a profiled run must print exactly what the plain run printed
// and end with the same status.
//
//   torture_program --alloc=A --process=P --threads=T --signals=S --rlimit=R --stack=K
//
//   --alloc    system | locked: a global operator new/delete and malloc family of its own,
//              guarded by a pthread mutex held ~1 ms every 64th call (a memory-tracking
//              allocator; atfork handlers for fork()); a nested entry on one thread (which
//              would deadlock) aborts. Every call to it from libstrata_base.so's code on a
//              thread that is not one of Strata's own (named "Strata...") is counted:
//              "alloc=ok" when there is none (docs/host-contract.md: registration, wrappers,
//              the handler and the marker paths never reach the program's allocator).
//   --process  none | fork | _Fork | sysfork | clone | vfork_exec | posix_spawn | exec: three
//              children of that kind (exec: the program's last step execs itself) each work
//              ~20 ms and end with status 7 (exit(), or _exit after clone).
//   --threads  join | pthread_exit | cancel | raw_exit | detach | storm: six workers (~40 ms
//              of CPU each, allocating) ending that way; storm: 200 short threads in bursts.
//   --signals  none | rt_handler (its own handler for SIGRTMAX and SIGRTMIN+2, 20 instances
//              sent with sigqueue) | sigwait (every signal blocked in every thread; a waiter
//              reads 10 SIGRTMIN+2 and 10 SIGRTMAX queued by another process) | altstack (a
//              handler on a 16 KiB alternate stack working 5 ms, 5 times) | altstack_small
//              (the same on a 5 KiB one: killed by the sampling signal's kernel frame before
//              issue 33's fix) | itimer_prof (its
//              own ITIMER_PROF) | sysv (sigset(SIG_DFL) on every signal, sigignore(SIGRTMAX-1)).
//   --rlimit   none | nofile64: soft RLIMIT_NOFILE 64, then 53 descriptors opened at once while
//              the workers run (64 less stdio and a margin of 8, Strata's share included).
//   --stack    default | small_threads (workers on 64 KiB stacks recursing ~24 KiB deep) |
//              deep_main (the main thread works 50 ms within 64 KiB of its RLIMIT_STACK).
//
// stdout: one "torture: ..." line per part, "ok" or what went wrong; status 0 when all are ok.
#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

extern "C" void* __libc_malloc(size_t);
extern "C" void __libc_free(void*);
extern "C" void* __libc_calloc(size_t, size_t);
extern "C" void* __libc_realloc(void*, size_t);
extern "C" void* __libc_memalign(size_t, size_t);
extern char** environ;

namespace {

// --- Options -------------------------------------------------------------------------------
const char* g_self = nullptr;
std::string g_alloc = "system", g_process = "none", g_threads = "join", g_signals = "none",
            g_rlimit = "none", g_stack = "default";
bool g_failed = false;

void Report(const char* part, const std::string& verdict) {
  std::printf("torture: %s=%s\n", part, verdict.c_str());
  std::fflush(stdout);
  if (verdict != "ok") g_failed = true;
}

// --- Work ----------------------------------------------------------------------------------
volatile uint64_t g_sink;

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void Work(double seconds) {
  const double end = ThreadCpuSeconds() + seconds;
  while (ThreadCpuSeconds() < end) {
    for (int i = 0; i < 2000; ++i) g_sink = g_sink + static_cast<uint64_t>(i) * 2654435761u;
  }
}

// Work that allocates through the program's allocator (whichever --alloc chose).
void WorkAllocating(double seconds) {
  const double end = ThreadCpuSeconds() + seconds;
  while (ThreadCpuSeconds() < end) {
    std::vector<std::string> strings;
    for (int i = 0; i < 32; ++i) strings.emplace_back(48 + i, 'x');
    void* block = std::malloc(256);
    g_sink = g_sink + strings.size() + reinterpret_cast<uintptr_t>(block);
    std::free(block);
  }
}

// --- The locked allocator ------------------------------------------------------------------
std::atomic<bool> g_locked_allocator{false};
pthread_mutex_t g_allocator_mutex = PTHREAD_MUTEX_INITIALIZER;
std::atomic<uint64_t> g_allocator_calls{0};
__thread int t_allocator_depth = 0;

void Spin(int64_t ns) {
  timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000000000 + (now.tv_nsec - start.tv_nsec) < ns);
}

// The allocator's fork protocol (as glibc's malloc has its own): fork() takes the lock in the
// parent so that the child starts with it free.
void AllocatorBeforeFork() {
  if (g_locked_allocator.load()) pthread_mutex_lock(&g_allocator_mutex);
}
void AllocatorAfterForkInParent() {
  if (g_locked_allocator.load()) pthread_mutex_unlock(&g_allocator_mutex);
}
void AllocatorAfterForkInChild() {
  if (g_locked_allocator.load()) pthread_mutex_init(&g_allocator_mutex, nullptr);
}

// Calls from Strata's code (issue 33): libstrata_base.so's executable range, found at start.
std::atomic<bool> g_watch_strata_calls{false};
std::atomic<uintptr_t> g_strata_begin{0};
std::atomic<uintptr_t> g_strata_end{0};
std::atomic<uintptr_t> g_strata_load_address{0};
std::atomic<long> g_strata_allocator_calls{0};

int FindStrata(dl_phdr_info* info, size_t, void*) {
  if (info->dlpi_name == nullptr || strstr(info->dlpi_name, "libstrata_base") == nullptr) return 0;
  uintptr_t begin = UINTPTR_MAX, end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& header = info->dlpi_phdr[i];
    if (header.p_type != PT_LOAD || !(header.p_flags & PF_X)) continue;
    begin = std::min<uintptr_t>(begin, info->dlpi_addr + header.p_vaddr);
    end = std::max<uintptr_t>(end, info->dlpi_addr + header.p_vaddr + header.p_memsz);
  }
  g_strata_load_address.store(info->dlpi_addr);
  g_strata_begin.store(begin);
  g_strata_end.store(end);
  return 1;
}

// Strata's own threads (the sampler, the control thread) name themselves "Strata..." first.
bool OnStrataThread() {
  char name[17] = {};
  if (syscall(SYS_prctl, PR_GET_NAME, name, 0, 0, 0) != 0) return false;
  return strncmp(name, "Strata", 6) == 0;
}

void NoteCaller(const void* return_address) {
  if (!g_watch_strata_calls.load(std::memory_order_relaxed)) return;
  const auto pc = reinterpret_cast<uintptr_t>(return_address);
  if (pc < g_strata_begin.load(std::memory_order_relaxed) ||
      pc >= g_strata_end.load(std::memory_order_relaxed) || OnStrataThread()) {
    return;
  }
  if (g_strata_allocator_calls.fetch_add(1) < 3) {
    char line[128];
    const int n = snprintf(line, sizeof(line),
                           "torture: the allocator called from libstrata_base.so+0x%lx\n",
                           static_cast<unsigned long>(pc - g_strata_load_address.load()));
    syscall(SYS_write, 2, line, n);
  }
}

class AllocatorLock {
 public:
  AllocatorLock() : active_(g_locked_allocator.load(std::memory_order_relaxed)) {
    if (!active_) return;
    if (t_allocator_depth++ > 0) {
      static const char kMessage[] =
          "torture: the allocator was re-entered on a thread holding its lock (deadlock)\n";
      syscall(SYS_write, 2, kMessage, sizeof(kMessage) - 1);
      abort();
    }
    pthread_mutex_lock(&g_allocator_mutex);
    if (g_allocator_calls.fetch_add(1, std::memory_order_relaxed) % 64 == 0) Spin(1000000);
  }
  ~AllocatorLock() {
    if (!active_) return;
    pthread_mutex_unlock(&g_allocator_mutex);
    --t_allocator_depth;
  }

 private:
  const bool active_;
};

}  // namespace

namespace {
void* LockedMemalign(size_t alignment, size_t n) {
  AllocatorLock lock;
  return __libc_memalign(alignment, n);
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  NoteCaller(__builtin_return_address(0));
  AllocatorLock lock;
  return __libc_malloc(n);
}
void free(void* p) {
  NoteCaller(__builtin_return_address(0));
  AllocatorLock lock;
  __libc_free(p);
}
void* calloc(size_t n, size_t size) {
  NoteCaller(__builtin_return_address(0));
  AllocatorLock lock;
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  NoteCaller(__builtin_return_address(0));
  AllocatorLock lock;
  return __libc_realloc(p, n);
}
void* memalign(size_t alignment, size_t n) {
  NoteCaller(__builtin_return_address(0));
  return LockedMemalign(alignment, n);
}
void* aligned_alloc(size_t alignment, size_t n) {
  NoteCaller(__builtin_return_address(0));
  return LockedMemalign(alignment, n);
}
int posix_memalign(void** out, size_t alignment, size_t n) {
  NoteCaller(__builtin_return_address(0));
  void* p = LockedMemalign(alignment, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
}  // extern "C"

void* operator new(size_t n) {
  NoteCaller(__builtin_return_address(0));
  void* p = malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t n) {
  NoteCaller(__builtin_return_address(0));
  return operator new(n);
}
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  NoteCaller(__builtin_return_address(0));
  return malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  NoteCaller(__builtin_return_address(0));
  return malloc(n ? n : 1);
}
void operator delete(void* p) noexcept {
  NoteCaller(__builtin_return_address(0));
  free(p);
}
void operator delete[](void* p) noexcept {
  NoteCaller(__builtin_return_address(0));
  free(p);
}
void operator delete(void* p, size_t) noexcept {
  NoteCaller(__builtin_return_address(0));
  free(p);
}
void operator delete[](void* p, size_t) noexcept {
  NoteCaller(__builtin_return_address(0));
  free(p);
}

namespace {

// --- Children ------------------------------------------------------------------------------
constexpr int kChildStatus = 7;
constexpr int kChildren = 3;

// A child works ~20 ms and exits. `allocating`: a child of fork() or a fresh image, whose
// allocator is in a known state (fork runs the allocator's atfork handlers); a child of
// _Fork or a raw fork runs no atfork handler, so another thread of the parent may have held
// the allocator's lock at the fork: such a child allocates nothing (as a real program must
// not), and neither may anything Strata runs in it on exit.
[[noreturn]] void ChildBody(bool allocating) {
  if (allocating) {
    WorkAllocating(0.02);
  } else {
    Work(0.02);
  }
  exit(kChildStatus);
}

int CloneChildEntry(void*) {
  // A clone child shares no atfork handler with its parent: it ends with _exit (its libc
  // state is a copy made without the fork protocol; exit's handlers are not for it).
  Work(0.02);
  _exit(kChildStatus);
}

pid_t StartChild(const std::string& kind) {
  if (kind == "fork") {
    const pid_t pid = fork();
    if (pid == 0) ChildBody(true);
    return pid;
  }
  if (kind == "_Fork") {
    const pid_t pid = _Fork();
    if (pid == 0) ChildBody(false);
    return pid;
  }
  if (kind == "sysfork") {
    const pid_t pid = static_cast<pid_t>(syscall(SYS_fork));
    if (pid == 0) ChildBody(false);
    return pid;
  }
  if (kind == "clone") {
    constexpr size_t kStack = 256 * 1024;
    static char* stack = static_cast<char*>(
        mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    return clone(CloneChildEntry, stack + kStack, SIGCHLD, nullptr);
  }
  char* child_argv[] = {const_cast<char*>(g_self), const_cast<char*>("--child"), nullptr};
  if (kind == "vfork_exec") {
    const pid_t pid = vfork();
    if (pid == 0) {
      execve(g_self, child_argv, environ);
      _exit(127);
    }
    return pid;
  }
  if (kind == "posix_spawn") {
    pid_t pid = -1;
    return posix_spawn(&pid, g_self, nullptr, nullptr, child_argv, environ) == 0 ? pid : -1;
  }
  return -1;
}

void RunChildren() {
  if (g_process == "none" || g_process == "exec") return;
  int good = 0;
  std::string detail;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = StartChild(g_process);
    if (pid < 0) {
      detail = "cannot start a child: " + std::string(strerror(errno));
      continue;
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) {
      detail = "waitpid: " + std::string(strerror(errno));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == kChildStatus) {
      ++good;
    } else {
      char text[96];
      std::snprintf(text, sizeof(text), "a child ended with status 0x%x", status);
      detail = text;
    }
  }
  Report("process", good == kChildren ? "ok" : detail);
}

// --- Threads -------------------------------------------------------------------------------
constexpr int kWorkers = 6;
std::atomic<int> g_detached_done{0};

void Recurse(int depth) {
  volatile char frame[512];
  frame[0] = static_cast<char>(depth);
  if (depth > 0) {
    Recurse(depth - 1);
  } else {
    Work(0.01);
  }
  g_sink = g_sink + frame[0];
}

void* Worker(void*) {
  if (g_threads == "cancel") {
    pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, nullptr);
    for (;;) {
      WorkAllocating(0.001);
      pthread_testcancel();
      const timespec pause{0, 500000};
      nanosleep(&pause, nullptr);  // A cancellation point too.
    }
  }
  if (g_stack == "small_threads") Recurse(40);  // ~24 KiB of a 64 KiB stack.
  WorkAllocating(0.04);
  if (g_threads == "pthread_exit") pthread_exit(nullptr);
  if (g_threads == "raw_exit") {
    for (;;) syscall(SYS_exit, 0);  // The kernel still clears the tid word: join works.
  }
  if (g_threads == "detach") g_detached_done.fetch_add(1);
  return nullptr;
}

void* ShortThread(void*) {
  g_sink = g_sink + 1;
  return nullptr;
}

std::vector<pthread_t> StartWorkers() {
  std::vector<pthread_t> workers;
  if (g_threads == "storm") return workers;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (g_stack == "small_threads") pthread_attr_setstacksize(&attr, 64 * 1024);
  if (g_threads == "detach") pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (int i = 0; i < kWorkers; ++i) {
    pthread_t thread;
    if (pthread_create(&thread, &attr, Worker, nullptr) == 0) workers.push_back(thread);
  }
  pthread_attr_destroy(&attr);
  return workers;
}

void FinishWorkers(const std::vector<pthread_t>& workers) {
  if (g_threads == "storm") {
    int joined = 0;
    for (int burst = 0; burst < 4; ++burst) {
      pthread_t threads[50];
      int started = 0;
      for (; started < 50; ++started) {
        if (pthread_create(&threads[started], nullptr, ShortThread, nullptr) != 0) break;
      }
      for (int i = 0; i < started; ++i) joined += pthread_join(threads[i], nullptr) == 0;
      Work(0.005);
    }
    Report("threads", joined == 200 ? "ok" : "joined " + std::to_string(joined) + " of 200");
    return;
  }
  if (static_cast<int>(workers.size()) != kWorkers) {
    Report("threads", "started " + std::to_string(workers.size()) + " of 6");
    return;
  }
  if (g_threads == "detach") {
    // Bounded by the program's own clock: 60 s.
    for (int i = 0; i < 60000 && g_detached_done.load() < kWorkers; ++i) {
      const timespec pause{0, 1000000};
      nanosleep(&pause, nullptr);
    }
    Report("threads", g_detached_done.load() == kWorkers ? "ok" : "a detached worker never ended");
    return;
  }
  if (g_threads == "cancel") {
    Work(0.03);
    for (pthread_t thread : workers) pthread_cancel(thread);
  }
  int good = 0;
  for (pthread_t thread : workers) {
    void* result = nullptr;
    if (pthread_join(thread, &result) != 0) continue;
    good += g_threads == "cancel" ? result == PTHREAD_CANCELED : result == nullptr;
  }
  Report("threads", good == kWorkers ? "ok" : std::to_string(good) + " of 6 ended as asked");
}

// --- Signals -------------------------------------------------------------------------------
std::atomic<int> g_rt_received{0};
std::atomic<long> g_rt_value_sum{0};
std::atomic<int> g_altstack_handled{0};
std::atomic<int> g_altstack_off_stack{0};
std::atomic<long> g_prof_ticks{0};
char* g_altstack = nullptr;
size_t g_altstack_size = 16 * 1024;  // 5 KiB with --signals altstack_small.
constexpr int kQueued = 10;

void RtHandler(int, siginfo_t* info, void*) {
  g_rt_received.fetch_add(1);
  g_rt_value_sum.fetch_add(info->si_value.sival_int);
}

void AltstackHandler(int) {
  char probe;
  const uintptr_t here = reinterpret_cast<uintptr_t>(&probe);
  const uintptr_t base = reinterpret_cast<uintptr_t>(g_altstack);
  if (here < base || here >= base + g_altstack_size) g_altstack_off_stack.fetch_add(1);
  Work(0.005);
  g_altstack_handled.fetch_add(1);
}

void ProfHandler(int) { g_prof_ticks.fetch_add(1); }

// Every signal blocked in every thread (the sigwait pattern): before any thread starts.
void BlockEverySignal() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
}

struct SigwaitResult {
  int low = 0, high = 0;
  long low_sum = 0, high_sum = 0;
};
SigwaitResult g_sigwait_result;

void* SigwaitWaiter(void*) {
  sigset_t wanted;
  sigemptyset(&wanted);
  sigaddset(&wanted, SIGRTMIN + 2);
  sigaddset(&wanted, SIGRTMAX);
  const timespec limit{30, 0};  // The program's own bound: 30 s without a signal.
  while (g_sigwait_result.low + g_sigwait_result.high < 2 * kQueued) {
    siginfo_t info;
    const int sig = sigtimedwait(&wanted, &info, &limit);
    if (sig < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (sig == SIGRTMAX) {
      ++g_sigwait_result.high;
      g_sigwait_result.high_sum += info.si_value.sival_int;
    } else {
      ++g_sigwait_result.low;
      g_sigwait_result.low_sum += info.si_value.sival_int;
    }
  }
  return nullptr;
}

pthread_t g_waiter;

void SetUpSignals() {
  if (g_signals == "rt_handler") {
    struct sigaction action {};
    action.sa_sigaction = RtHandler;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGRTMAX, &action, nullptr);
    sigaction(SIGRTMIN + 2, &action, nullptr);
  } else if (g_signals == "sigwait") {
    BlockEverySignal();
    pthread_create(&g_waiter, nullptr, SigwaitWaiter, nullptr);
  } else if (g_signals == "altstack" || g_signals == "altstack_small") {
    if (g_signals == "altstack_small") g_altstack_size = 5 * 1024;
    g_altstack = static_cast<char*>(std::malloc(g_altstack_size));
    stack_t stack{};
    stack.ss_sp = g_altstack;
    stack.ss_size = g_altstack_size;
    sigaltstack(&stack, nullptr);
    struct sigaction action {};
    action.sa_handler = AltstackHandler;
    action.sa_flags = SA_ONSTACK | SA_RESTART;
    sigaction(SIGUSR1, &action, nullptr);
  } else if (g_signals == "itimer_prof") {
    struct sigaction action {};
    action.sa_handler = ProfHandler;
    action.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &action, nullptr);
    itimerval timer{{0, 1000}, {0, 1000}};
    setitimer(ITIMER_PROF, &timer, nullptr);
  } else if (g_signals == "sysv") {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // The System V calls, on purpose.
    for (int sig = 1; sig <= SIGRTMAX; ++sig) {
      if (sig == SIGKILL || sig == SIGSTOP || sig == SIGCHLD) continue;
      sigset(sig, SIG_DFL);
    }
    sigignore(SIGRTMAX - 1);
#pragma GCC diagnostic pop
  }
}

void SendSignals() {
  if (g_signals == "rt_handler") {
    for (int i = 1; i <= kQueued; ++i) {
      sigqueue(getpid(), SIGRTMAX, sigval{i});
      sigqueue(getpid(), SIGRTMIN + 2, sigval{i});
      Work(0.001);
    }
  } else if (g_signals == "sigwait") {
    // Another process queues them (foreign instances of both signals).
    const pid_t parent = getpid();
    const pid_t sender = fork();
    if (sender == 0) {
      for (int i = 1; i <= kQueued; ++i) {
        sigqueue(parent, SIGRTMIN + 2, sigval{i});
        sigqueue(parent, SIGRTMAX, sigval{100 + i});
      }
      _exit(0);
    }
    int status;
    waitpid(sender, &status, 0);
  } else if (g_signals == "altstack" || g_signals == "altstack_small") {
    for (int i = 0; i < 5; ++i) syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR1);
  }
}

void CheckSignals() {
  std::string verdict = "ok";
  if (g_signals == "rt_handler") {
    // Real-time signals queue: every instance is delivered (the program's own bound: 10 s).
    for (int i = 0; i < 10000 && g_rt_received.load() < 2 * kQueued; ++i) {
      const timespec pause{0, 1000000};
      nanosleep(&pause, nullptr);
    }
    const long expected_sum = 2 * kQueued * (kQueued + 1) / 2;
    if (g_rt_received.load() != 2 * kQueued || g_rt_value_sum.load() != expected_sum) {
      verdict = "handler got " + std::to_string(g_rt_received.load()) + " of 20, values " +
                std::to_string(g_rt_value_sum.load());
    }
  } else if (g_signals == "sigwait") {
    pthread_join(g_waiter, nullptr);
    const SigwaitResult& r = g_sigwait_result;
    const long low_sum = kQueued * (kQueued + 1) / 2;
    if (r.low != kQueued || r.high != kQueued || r.low_sum != low_sum ||
        r.high_sum != 100 * kQueued + low_sum) {
      verdict = "waiter read SIGRTMIN+2 x" + std::to_string(r.low) + " (sum " +
                std::to_string(r.low_sum) + "), SIGRTMAX x" + std::to_string(r.high) + " (sum " +
                std::to_string(r.high_sum) + ")";
    }
  } else if (g_signals == "altstack" || g_signals == "altstack_small") {
    if (g_altstack_handled.load() != 5 || g_altstack_off_stack.load() != 0) {
      verdict = "handled " + std::to_string(g_altstack_handled.load()) + " of 5, " +
                std::to_string(g_altstack_off_stack.load()) + " off the alternate stack";
    }
  } else if (g_signals == "itimer_prof") {
    itimerval off{};
    setitimer(ITIMER_PROF, &off, nullptr);
    if (g_prof_ticks.load() == 0) verdict = "no SIGPROF tick";
  }
  Report("signals", verdict);
}

// --- Limits and stacks ---------------------------------------------------------------------
void OpenManyFiles() {
  if (g_rlimit != "nofile64") return;
  std::vector<int> fds;
  std::string verdict = "ok";
  for (int i = 0; i < 53; ++i) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      verdict = "open #" + std::to_string(i + 1) + " of 53 failed: " + strerror(errno);
      break;
    }
    fds.push_back(fd);
  }
  for (int fd : fds) close(fd);
  Report("files", verdict);
}

uintptr_t MainStackTop() {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (!maps) return 0;
  char line[512];
  uintptr_t top = 0;
  while (std::fgets(line, sizeof(line), maps)) {
    if (std::strstr(line, "[stack]")) {
      unsigned long low, high;
      if (std::sscanf(line, "%lx-%lx", &low, &high) == 2) top = high;
    }
  }
  std::fclose(maps);
  return top;
}

uintptr_t g_deep_target = 0;
bool g_deep_reached = false;

__attribute__((noinline)) void DeepDescend() {
  volatile char frame[1024];
  frame[0] = 1;
  if (reinterpret_cast<uintptr_t>(&frame[0]) > g_deep_target) {
    DeepDescend();
  } else {
    g_deep_reached = true;
    Work(0.05);
  }
  g_sink = g_sink + frame[0];
}

void DeepMainStack() {
  if (g_stack != "deep_main") return;
  rlimit limit;
  const uintptr_t top = MainStackTop();
  if (getrlimit(RLIMIT_STACK, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || top == 0 ||
      limit.rlim_cur > (64u << 20)) {
    Report("stack", "ok");  // No bound to come near.
    return;
  }
  // The lowest address the stack may reach is top - limit (less the environment and
  // argument pages above the stack's start, which the limit also counts: a margin).
  g_deep_target = top - limit.rlim_cur + 64 * 1024 + 16 * 1024;
  DeepDescend();
  Report("stack", g_deep_reached ? "ok" : "did not descend");
}

// --- Main ----------------------------------------------------------------------------------
bool TakeOption(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  g_self = argv[0];
  if (argc == 2 && std::strcmp(argv[1], "--child") == 0) ChildBody(true);
  if (argc == 2 && std::strcmp(argv[1], "--exec-tail") == 0) {
    Work(0.02);
    std::printf("torture: exec=ok\n");
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    if (!TakeOption(argv[i], "--alloc", &g_alloc) &&
        !TakeOption(argv[i], "--process", &g_process) &&
        !TakeOption(argv[i], "--threads", &g_threads) &&
        !TakeOption(argv[i], "--signals", &g_signals) &&
        !TakeOption(argv[i], "--rlimit", &g_rlimit) && !TakeOption(argv[i], "--stack", &g_stack)) {
      std::fprintf(stderr, "torture_program: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (g_alloc == "locked") {
    g_locked_allocator.store(true);
    pthread_atfork(AllocatorBeforeFork, AllocatorAfterForkInParent, AllocatorAfterForkInChild);
    dl_iterate_phdr(&FindStrata, nullptr);  // Not preloaded: the range stays empty.
    g_watch_strata_calls.store(true);
  }
  if (g_rlimit == "nofile64") {
    rlimit limit;
    getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = 64;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) std::perror("torture: setrlimit");
  }
  SetUpSignals();
  const std::vector<pthread_t> workers = StartWorkers();
  OpenManyFiles();
  SendSignals();
  WorkAllocating(0.03);
  RunChildren();
  DeepMainStack();
  FinishWorkers(workers);
  CheckSignals();
  if (g_alloc == "locked") {
    g_watch_strata_calls.store(false);  // The exit save runs next: the program's request.
    const long calls = g_strata_allocator_calls.load();
    Report("alloc", calls == 0 ? "ok" : std::to_string(calls) + " calls from Strata's code");
  }
  if (g_process == "exec") {
    char* tail_argv[] = {const_cast<char*>(g_self), const_cast<char*>("--exec-tail"), nullptr};
    std::fflush(nullptr);
    execve(g_self, tail_argv, environ);
    Report("exec", std::string("execve: ") + strerror(errno));
  }
  return g_failed ? 1 : 0;
}
