// A program whose allocator, `pthread_mutex_lock` and `write` are its own, guarded by its own
// locks and slow: the memory-tracking pattern of many C++ code bases (a global operator
// new/delete that counts under a std::mutex). It calls no Strata function and includes no
// Strata header.
//
// It watches Strata from inside: its operator new/delete, malloc family, pthread_mutex_lock
// and write note every call whose caller is code of libstrata_base.so on one of the program's own threads (a
// re-entry: docs/host-contract.md forbids it), and every nested entry into its own locked
// operator new on one thread (which would deadlock). Under the old marker path (the "Awaiting
// lock" marker allocated the thread's staging area with operator new) such a program hung.
//
// Workload (its own clock decides how long): --threads N workers for --seconds S, each
// allocating and freeing through the locked operator new (holding the lock ~2 ms every 64th
// time, so others wait on it long enough for a lock marker), writing to /dev/null, sleeping
// briefly, and starting a short-lived thread now and then.
// Prints "locked_allocator: waits_over_1ms=W reentries=R strata_calls=C before_start=B
// unwinder_calls=U ops=N strata_range=F unwinder_range=G" and exits 0 only when R, C, B and U
// are 0 (U: calls from libunwind's code, which Strata loads for its stack walks); a nested
// operator new aborts at once. F and G are 1 when libstrata_base.so's and libunwind's code
// were found (dl_iterate_phdr) before the workload: without a range, C or U counts nothing,
// so a profiled run must find both (locked_allocator_test.sh checks it).
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern "C" void* __libc_malloc(size_t);
extern "C" void __libc_free(void*);
extern "C" void* __libc_calloc(size_t, size_t);
extern "C" void* __libc_realloc(void*, size_t);
extern "C" void* __libc_memalign(size_t, size_t);

namespace {

std::mutex g_allocator_mutex;  // The program's own lock (pthread_mutex_lock underneath).
std::atomic<long> g_waits_over_1ms{0};
std::atomic<long> g_reentries{0};
std::atomic<long> g_strata_calls{0};
std::atomic<long> g_ops{0};
std::atomic<bool> g_watching{false};
std::atomic<uintptr_t> g_strata_begin{0};
std::atomic<uintptr_t> g_strata_end{0};
std::atomic<uintptr_t> g_strata_load_address{0};
// libunwind's code (loaded by Strata for its stack walks, in the signal handler and at each
// thread's registration): its calls into the program's pthread_mutex_lock, write or allocator
// count too (`unwinder_calls`): Strata's handler reaching the program through a library it uses.
std::atomic<uintptr_t> g_unwinder_begin{0};
std::atomic<uintptr_t> g_unwinder_end{0};
std::atomic<long> g_unwinder_calls{0};

thread_local bool t_program_thread = false;  // Set by the program's own threads only.
// Set first thing by each of the program's threads and never cleared: a call into the
// allocator on a thread of the program's before that (its registration, from any caller,
// glibc's code included: pthread_getattr_np's CPU set was one) is counted apart.
thread_local bool t_routine_started = false;
std::atomic<long> g_before_start{0};
thread_local int t_in_operator_new = 0;

template <typename... Args>
std::thread StartThread(Args&&... args) {
  return std::thread(std::forward<Args>(args)...);
}

// Strata's own threads (the sampler, the control thread) name themselves "Strata..." first
// thing; they may allocate. Every other thread is the program's: its pthread_create call
// (Strata's wrapper), its registration before its body runs, its body, its unregistration
// after: none may reach the program's allocator from Strata's code (docs/host-contract.md).
bool OnStrataThread() {
  char name[17] = {};
  if (syscall(SYS_prctl, PR_GET_NAME, name, 0, 0, 0) != 0) return false;
  return strncmp(name, "Strata", 6) == 0;
}

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// A call from libstrata_base.so's code on a program thread.
void NoteCaller(const void* return_address, bool allocator = true) {
  if (!g_watching.load(std::memory_order_relaxed)) return;
  if (allocator && !t_routine_started && syscall(SYS_gettid) != getpid() && !OnStrataThread()) {
    if (g_before_start.fetch_add(1) < 5) {
      char line[128];
      const int n = snprintf(line, sizeof(line),
                             "locked_allocator: a new thread called the allocator before its "
                             "start routine (caller %p)\n", return_address);
      syscall(SYS_write, 2, line, n);
    }
  }
  const auto pc = reinterpret_cast<uintptr_t>(return_address);
  if (pc >= g_unwinder_begin.load(std::memory_order_relaxed) &&
      pc < g_unwinder_end.load(std::memory_order_relaxed)) {
    g_unwinder_calls.fetch_add(1);  // Maybe in a signal handler: counted only.
  }
  if (pc >= g_strata_begin.load(std::memory_order_relaxed) &&
      pc < g_strata_end.load(std::memory_order_relaxed) && !OnStrataThread()) {
    if (g_strata_calls.fetch_add(1) < 5) {
      char line[128];
      const int n = snprintf(line, sizeof(line),
                             "locked_allocator: called from libstrata_base.so+0x%lx\n",
                             static_cast<unsigned long>(pc - g_strata_load_address.load()));
      syscall(SYS_write, 2, line, n);
    }
  }
}

// The code range of a loaded object, by name (dl_iterate_phdr's callback; 0 when not it).
struct CodeRange {
  const char* name;
  std::atomic<uintptr_t>* begin;
  std::atomic<uintptr_t>* end;
  std::atomic<uintptr_t>* load_address;
};
int FindObject(dl_phdr_info* info, size_t, void* data) {
  const CodeRange& range = *static_cast<const CodeRange*>(data);
  if (info->dlpi_name == nullptr || strstr(info->dlpi_name, range.name) == nullptr) return 0;
  uintptr_t begin = UINTPTR_MAX, end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    begin = std::min<uintptr_t>(begin, info->dlpi_addr + ph.p_vaddr);
    end = std::max<uintptr_t>(end, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  if (range.load_address != nullptr) range.load_address->store(info->dlpi_addr);
  range.begin->store(begin);
  range.end->store(end);
  return 1;
}

void* LockedAllocate(size_t bytes, const void* caller) {
  NoteCaller(caller);
  if (t_in_operator_new > 0) {
    // Re-entered while this thread holds the program's allocator lock: plain, a deadlock.
    g_reentries.fetch_add(1);
    static const char kMessage[] =
        "locked_allocator: operator new re-entered on a thread holding its lock (deadlock)\n";
    syscall(SYS_write, 2, kMessage, sizeof(kMessage) - 1);
    abort();
  }
  const int64_t start = NowNs();
  std::lock_guard<std::mutex> lock(g_allocator_mutex);
  if (NowNs() - start > 1000000) g_waits_over_1ms.fetch_add(1, std::memory_order_relaxed);
  ++t_in_operator_new;
  void* p = __libc_malloc(bytes == 0 ? 1 : bytes);
  // Slow now and then: the others wait on the lock (>= 1 ms: a lock marker's threshold).
  static std::atomic<unsigned> count{0};
  if (t_program_thread && (count.fetch_add(1, std::memory_order_relaxed) & 63) == 0) {
    const timespec hold{0, 2000000};
    nanosleep(&hold, nullptr);
  }
  --t_in_operator_new;
  return p;
}

void LockedFree(void* p, const void* caller) {
  NoteCaller(caller);
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(g_allocator_mutex);
  __libc_free(p);
}

void Worker(double seconds, int index) {
  t_routine_started = true;
  t_program_thread = true;
  const int64_t end = NowNs() + static_cast<int64_t>(seconds * 1e9);
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  std::vector<std::string*> kept;
  for (long i = 0; NowNs() < end; ++i) {
    kept.push_back(new std::string(100 + (i % 300), 'x'));
    if (kept.size() > 32) {
      for (std::string* s : kept) delete s;
      kept.clear();
    }
    if ((i & 15) == 0 && devnull >= 0) {
      if (write(devnull, "x", 1) != 1) abort();
    }
    if ((i & 255) == 0) {
      const timespec nap{0, 100000};
      nanosleep(&nap, nullptr);
    }
    if ((i & 1023) == index) {
      StartThread([] {
        t_routine_started = true;
        t_program_thread = true;
        delete new int(1);
        t_program_thread = false;
      }).join();
    }
    g_ops.fetch_add(1, std::memory_order_relaxed);
  }
  for (std::string* s : kept) delete s;
  if (devnull >= 0) close(devnull);
  t_program_thread = false;
}

}  // namespace

void* operator new(size_t bytes) { return LockedAllocate(bytes, __builtin_return_address(0)); }
void* operator new[](size_t bytes) { return LockedAllocate(bytes, __builtin_return_address(0)); }
void* operator new(size_t bytes, const std::nothrow_t&) noexcept {
  return LockedAllocate(bytes, __builtin_return_address(0));
}
void* operator new[](size_t bytes, const std::nothrow_t&) noexcept {
  return LockedAllocate(bytes, __builtin_return_address(0));
}
void operator delete(void* p) noexcept { LockedFree(p, __builtin_return_address(0)); }
void operator delete[](void* p) noexcept { LockedFree(p, __builtin_return_address(0)); }
void operator delete(void* p, size_t) noexcept { LockedFree(p, __builtin_return_address(0)); }
void operator delete[](void* p, size_t) noexcept { LockedFree(p, __builtin_return_address(0)); }

// The C allocator: glibc's underneath, every caller checked.
extern "C" {
void* malloc(size_t bytes) {
  NoteCaller(__builtin_return_address(0));
  return __libc_malloc(bytes);
}
void free(void* p) {
  NoteCaller(__builtin_return_address(0));
  __libc_free(p);
}
void* calloc(size_t n, size_t bytes) {
  NoteCaller(__builtin_return_address(0));
  return __libc_calloc(n, bytes);
}
void* realloc(void* p, size_t bytes) {
  NoteCaller(__builtin_return_address(0));
  return __libc_realloc(p, bytes);
}
void* memalign(size_t alignment, size_t bytes) {
  NoteCaller(__builtin_return_address(0));
  return __libc_memalign(alignment, bytes);
}
void* aligned_alloc(size_t alignment, size_t bytes) {
  NoteCaller(__builtin_return_address(0));
  return __libc_memalign(alignment, bytes);
}
int posix_memalign(void** out, size_t alignment, size_t bytes) {
  NoteCaller(__builtin_return_address(0));
  void* p = __libc_memalign(alignment, bytes);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
// The program's own pthread_mutex_lock, slow now and then (a lock-profiling shim, as some
// programs have): every caller checked. Its definition in the executable comes first in the
// lookup order (std::mutex reaches it too); it calls the next one, Strata's wait wrapper when
// preloaded (which then records its "Awaiting lock" markers), else libc's.
int pthread_mutex_lock(pthread_mutex_t* mutex) {
  using Lock = int (*)(pthread_mutex_t*);
  // The next definition (the loader's own locks do not come through here).
  static std::atomic<Lock> real{nullptr};
  Lock next = real.load(std::memory_order_acquire);
  if (next == nullptr) {
    next = reinterpret_cast<Lock>(dlsym(RTLD_NEXT, "pthread_mutex_lock"));
    real.store(next, std::memory_order_release);
  }
  NoteCaller(__builtin_return_address(0), /*allocator=*/false);
  static std::atomic<unsigned> calls{0};
  if ((calls.fetch_add(1, std::memory_order_relaxed) & 63) == 0) {
    for (volatile int spin = 0; spin < 20000; spin = spin + 1) {
    }
  }
  return next(mutex);
}

// The program's own write, slow and locked (its log lock), as some programs have.
ssize_t write(int fd, const void* data, size_t bytes) {
  NoteCaller(__builtin_return_address(0), /*allocator=*/false);
  static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&log_lock);
  const ssize_t n = syscall(SYS_write, fd, data, bytes);
  pthread_mutex_unlock(&log_lock);
  return n;
}
}  // extern "C"

int main(int argc, char** argv) {
  int threads = 4;
  double seconds = 1.5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--threads") == 0) threads = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--seconds") == 0) seconds = atof(argv[i + 1]);
  }
  t_routine_started = true;
  t_program_thread = true;
  // Not preloaded: the ranges stay empty. libunwind is loaded by Strata's sampler thread at
  // its first loop (one sampler period after the session's start, docs/sampling.md): when
  // Strata is here, wait for it (at most 5 s, looking every millisecond) before the workload.
  CodeRange strata{"libstrata_base", &g_strata_begin, &g_strata_end, &g_strata_load_address};
  dl_iterate_phdr(&FindObject, &strata);
  const bool strata_range_found = g_strata_begin.load() < g_strata_end.load();
  CodeRange unwinder{"libunwind.so", &g_unwinder_begin, &g_unwinder_end, nullptr};
  dl_iterate_phdr(&FindObject, &unwinder);
  for (int waited_ms = 0; strata_range_found && waited_ms < 5000 &&
                          g_unwinder_begin.load() >= g_unwinder_end.load();
       ++waited_ms) {
    const timespec millisecond{0, 1000000};
    nanosleep(&millisecond, nullptr);
    dl_iterate_phdr(&FindObject, &unwinder);
  }
  const bool unwinder_range_found = g_unwinder_begin.load() < g_unwinder_end.load();
  g_watching.store(true);
  std::vector<std::thread> workers;
  workers.reserve(threads);
  for (int t = 0; t < threads; ++t) workers.push_back(StartThread(Worker, seconds, t));
  for (std::thread& w : workers) w.join();
  g_watching.store(false);  // The exit save runs on this thread: an explicit, documented case.
  printf("locked_allocator: waits_over_1ms=%ld reentries=%ld strata_calls=%ld before_start=%ld "
         "unwinder_calls=%ld ops=%ld strata_range=%d unwinder_range=%d\n",
         g_waits_over_1ms.load(), g_reentries.load(), g_strata_calls.load(),
         g_before_start.load(), g_unwinder_calls.load(), g_ops.load() > 0 ? 1L : 0L,
         strata_range_found ? 1 : 0, unwinder_range_found ? 1 : 0);
  return g_reentries.load() == 0 && g_strata_calls.load() == 0 && g_before_start.load() == 0 &&
                 g_unwinder_calls.load() == 0
             ? 0 : 1;
}
