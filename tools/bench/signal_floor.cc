// libsignal_floor.so: the floor of ANY in-process, signal-based wall-clock sampler, for the
// precise-mode rows of tools/bench.sh (docs/benchmarks.md, "In-process signal floor").
//
// Preloaded into an unmodified program, it does exactly what such a sampler cannot avoid and
// nothing else: every thread the program creates gets a per-thread POSIX timer on
// CLOCK_MONOTONIC (SIGEV_THREAD_ID, the mechanism of Strata's precise mode) that sends SIGPROF
// at the requested rate, and the handler does (almost) nothing. No sampler thread, no stack
// walk, no buffer, no profile. What a real sampler costs above this is its own work.
//
// Environment:
//   SIGNAL_FLOOR_HZ=N         signals per second per thread (default 1000)
//   SIGNAL_FLOOR_HANDLER=empty|record
//       empty  (default) the handler counts the signal in a thread-local integer, nothing more;
//       record the handler also reads the TSC and writes a 100-byte record (the TSC and the
//              first 92 bytes of the interrupted registers) into the thread's pre-faulted ring:
//              the least a sampler that keeps anything must do.
//   SIGNAL_FLOOR_MAIN=1       also arm a timer on the main thread (at load), as a sampler that
//                             registers every thread does; default 0 (only created threads).
//   SIGNAL_FLOOR_SOURCE=timer|perf
//       timer (default) the per-thread CLOCK_MONOTONIC timer above;
//       perf   instead a perf task-clock event per thread (user-mode CPU, one overflow per
//              period of the thread's CPU, F_SETOWN_EX to the thread, F_SETSIG): the source
//              of Strata's default mode, opened as Strata opens it (perf_task_clock_event.h).
//   SIGNAL_FLOOR_WAKER=1      also start a thread that wakes at the same rate on absolute
//                             CLOCK_MONOTONIC deadlines and does nothing else: the wake-ups of a
//                             sampler thread that drains every interval (as Strata's does).
//   SIGNAL_FLOOR_WAKER_HZ=N   the waker's rate instead (e.g. 250: Strata's sampler wakes every
//                             4 ms with perf events, whatever the sampling rate)
// At exit it prints one line to stderr:
//   "signal_floor: hz=N handler=H source=timer|perf main=M waker=W threads=T signals=S main_signals=X"
// (S: signals handled by the threads the program created, X: by the main thread; counted
// when each thread ends and at exit).
//
// Contracts: the handler is async-signal-safe (no lock, no allocation, no system call; errno
// untouched) and only touches the interrupted thread's own initial-exec TLS and its own ring.
// Thread state is created by the thread itself in the pthread_create trampoline (outside signal
// context) and its timer deleted before the start routine's thread ends, including through
// pthread_exit and cancellation (cleanup handler). Not a profiler: benchmark support only.
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr size_t kRecordBytes = 100;
constexpr size_t kRingBytes = 1 << 20;  // 1 MiB per thread, written round and round.

enum class HandlerKind { kEmpty, kRecord };

struct Config {
  long hz = 1000;
  HandlerKind handler = HandlerKind::kEmpty;
  bool main_thread = false;
  bool waker = false;
  long waker_hz = 0;  // 0: hz.
  bool perf_source = false;
};
Config g_config;
std::atomic<uint64_t> g_signals{0};       // Handled by the threads the program created.
std::atomic<uint64_t> g_main_signals{0};  // Handled by the thread armed at load (main).
std::atomic<uint64_t> g_threads{0};

struct ThreadState {
  bool is_main = false;
  timer_t timer;
  bool timer_created = false;
  int perf_fd = -1;
  uint64_t signals = 0;
  unsigned char* ring = nullptr;
  size_t ring_offset = 0;
};
__attribute__((tls_model("initial-exec"))) thread_local ThreadState* t_state = nullptr;

void OnSignal(int, siginfo_t*, void* context) {
  ThreadState* state = t_state;
  if (state == nullptr) return;
  ++state->signals;
  if (g_config.handler != HandlerKind::kRecord || state->ring == nullptr) return;
  unsigned char* record = state->ring + state->ring_offset;
  const uint64_t tsc = __rdtsc();
  std::memcpy(record, &tsc, sizeof(tsc));
  std::memcpy(record + sizeof(tsc), static_cast<ucontext_t*>(context)->uc_mcontext.gregs,
              kRecordBytes - sizeof(tsc));
  state->ring_offset += kRecordBytes;
  if (state->ring_offset + kRecordBytes > kRingBytes) state->ring_offset = 0;
}

// Outside signal context, on the thread itself: allocates its state and arms its timer.
void StartCurrentThread(bool is_main) {
  ThreadState* state = new ThreadState;
  state->is_main = is_main;
  if (g_config.handler == HandlerKind::kRecord) {
    void* ring = mmap(nullptr, kRingBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (ring != MAP_FAILED) state->ring = static_cast<unsigned char*>(ring);
  }
  t_state = state;
  const long period_ns = 1000000000L / g_config.hz;
  if (g_config.perf_source) {
    perf_event_attr attr = {};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.sample_period = static_cast<uint64_t>(period_ns);
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.disabled = 1;
    const int fd = static_cast<int>(
        syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      std::perror("signal_floor: perf_event_open");
      return;
    }
    f_owner_ex owner = {F_OWNER_TID, static_cast<pid_t>(syscall(SYS_gettid))};
    if (fcntl(fd, F_SETSIG, SIGPROF) != 0 || fcntl(fd, F_SETOWN_EX, &owner) != 0 ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) != 0 ||
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
      std::perror("signal_floor: perf event set-up");
      close(fd);
      return;
    }
    state->perf_fd = fd;
    g_threads.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  sigevent event = {};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = SIGPROF;
  event._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (timer_create(CLOCK_MONOTONIC, &event, &state->timer) != 0) {
    std::perror("signal_floor: timer_create");
    return;
  }
  state->timer_created = true;
  itimerspec spec = {};
  spec.it_interval.tv_sec = period_ns / 1000000000L;
  spec.it_interval.tv_nsec = period_ns % 1000000000L;
  spec.it_value = spec.it_interval;
  timer_settime(state->timer, 0, &spec, nullptr);
  g_threads.fetch_add(1, std::memory_order_relaxed);
}

// Outside signal context, on the thread itself: no signal is generated after timer_delete.
void StopCurrentThread(void*) {
  ThreadState* state = t_state;
  if (state == nullptr) return;
  if (state->timer_created) timer_delete(state->timer);
  if (state->perf_fd >= 0) close(state->perf_fd);  // No overflow is signalled after it.
  t_state = nullptr;
  std::atomic<uint64_t>& total = state->is_main ? g_main_signals : g_signals;
  total.fetch_add(state->signals, std::memory_order_relaxed);
  if (state->ring != nullptr) munmap(state->ring, kRingBytes);
  delete state;
}

// The do-nothing sampler thread: absolute deadlines one period apart; a late one is skipped.
void* WakerMain(void*) {
  const long period_ns = 1000000000L / (g_config.waker_hz > 0 ? g_config.waker_hz : g_config.hz);
  timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  for (;;) {
    next.tv_nsec += period_ns;
    while (next.tv_nsec >= 1000000000L) {
      next.tv_nsec -= 1000000000L;
      ++next.tv_sec;
    }
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec)) {
      next = now;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr) != 0) {
    }
  }
  return nullptr;
}

struct StartArguments {
  void* (*routine)(void*);
  void* argument;
};

void* Trampoline(void* raw) {
  StartArguments arguments = *static_cast<StartArguments*>(raw);
  delete static_cast<StartArguments*>(raw);
  StartCurrentThread(/*is_main=*/false);
  void* result;
  pthread_cleanup_push(&StopCurrentThread, nullptr);
  result = arguments.routine(arguments.argument);
  pthread_cleanup_pop(1);
  return result;
}

using PthreadCreate = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

PthreadCreate RealPthreadCreate() {
  static PthreadCreate real = [] {
    void* symbol = dlvsym(RTLD_NEXT, "pthread_create", "GLIBC_2.34");
    if (symbol == nullptr) symbol = dlsym(RTLD_NEXT, "pthread_create");
    return reinterpret_cast<PthreadCreate>(symbol);
  }();
  return real;
}

__attribute__((constructor)) void Load() {
  if (const char* hz = getenv("SIGNAL_FLOOR_HZ")) g_config.hz = std::max(1L, atol(hz));
  if (const char* handler = getenv("SIGNAL_FLOOR_HANDLER")) {
    g_config.handler = strcmp(handler, "record") == 0 ? HandlerKind::kRecord : HandlerKind::kEmpty;
  }
  if (const char* source = getenv("SIGNAL_FLOOR_SOURCE")) {
    g_config.perf_source = strcmp(source, "perf") == 0;
  }
  if (const char* main_thread = getenv("SIGNAL_FLOOR_MAIN")) {
    g_config.main_thread = strcmp(main_thread, "1") == 0;
  }
  struct sigaction action = {};
  action.sa_sigaction = &OnSignal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGPROF, &action, nullptr);
  if (const char* waker = getenv("SIGNAL_FLOOR_WAKER")) g_config.waker = strcmp(waker, "1") == 0;
  if (const char* waker_hz = getenv("SIGNAL_FLOOR_WAKER_HZ")) {
    g_config.waker_hz = std::max(1L, atol(waker_hz));
  }
  if (g_config.main_thread) StartCurrentThread(/*is_main=*/true);
  if (g_config.waker) {
    // Created with the real pthread_create: the waker gets no timer of its own, and it blocks
    // the sampling signal, as a sampler thread does.
    sigset_t block, previous;
    sigemptyset(&block);
    sigaddset(&block, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &block, &previous);
    pthread_t waker;
    if (RealPthreadCreate()(&waker, nullptr, &WakerMain, nullptr) == 0) pthread_detach(waker);
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }
}

__attribute__((destructor)) void Unload() {
  StopCurrentThread(nullptr);  // The thread running exit (the main thread, usually).
  std::fprintf(stderr,
               "signal_floor: hz=%ld handler=%s source=%s main=%d waker=%d threads=%llu "
               "signals=%llu main_signals=%llu\n",
               g_config.hz, g_config.handler == HandlerKind::kRecord ? "record" : "empty",
               g_config.perf_source ? "perf" : "timer",
               g_config.main_thread ? 1 : 0, g_config.waker ? 1 : 0,
               static_cast<unsigned long long>(g_threads.load()),
               static_cast<unsigned long long>(g_signals.load()),
               static_cast<unsigned long long>(g_main_signals.load()));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int pthread_create(
    pthread_t* thread, const pthread_attr_t* attributes, void* (*routine)(void*),
    void* argument) {
  PthreadCreate real = RealPthreadCreate();
  StartArguments* arguments = new StartArguments{routine, argument};
  const int error = real(thread, attributes, &Trampoline, arguments);
  if (error != 0) delete arguments;
  return error;
}
