// The thread registry of the base tier. See thread_registry.h and docs/session.md.
#include "base/internal/registry/thread_registry.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/internal/settings/log.h"
#include "base/internal/session/tier_extension.h"
#include "base/internal/wait/kernel_cpu_charge.h"
#include "platform/checked_read.h"
#include "platform/never_destroyed.h"
#include "platform/next_definition.h"
#include "platform/raw_syscall.h"
#include "platform/sampling/sampling_signal.h"
#include "platform/tsan_startup.h"

#if STRATA_TSAN_BUILD
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace strata {
namespace base_internal {

__thread RegisteredThread* t_registered_thread __attribute__((tls_model("initial-exec"))) =
    nullptr;

// Leaked: threads may still run (and unregister) during exit, after static destructors.
Registry& GetRegistry() {
  static NeverDestroyed<Registry> registry;
  return registry.get();
}

void OnRegisteredThreadExit(void*);

namespace {

// Sampled thread key: its destructor unregisters a thread that ends while registered.
pthread_key_t g_thread_exit_key;
pthread_once_t g_thread_exit_key_once = PTHREAD_ONCE_INIT;

void CreateThreadExitKey() { pthread_key_create(&g_thread_exit_key, &OnRegisteredThreadExit); }

// libc's own mutex functions for the liveness mutex (never a program's interposer, nor the
// wait wrappers': the mutex is Strata's, uncontended, and must reach the robust list).
struct LibcMutexFunctions {
  int (*trylock)(pthread_mutex_t*) = nullptr;
  int (*unlock)(pthread_mutex_t*) = nullptr;
};
// Looked up once, by the first registration: the main thread's, in the library's constructor
// (dlopen and dlsym allocate; a new thread's registration later only reads the result).
__attribute__((noinline)) LibcMutexFunctions ResolveLibcMutexFunctions() {
  LibcMutexFunctions f;
  void* libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
  if (libc) {
    f.trylock = reinterpret_cast<int (*)(pthread_mutex_t*)>(dlsym(libc, "pthread_mutex_trylock"));
    f.unlock = reinterpret_cast<int (*)(pthread_mutex_t*)>(dlsym(libc, "pthread_mutex_unlock"));
    if (!f.trylock || !f.unlock) f = LibcMutexFunctions();
  }
  return f;
}
const LibcMutexFunctions& LibcMutex() {
  static const LibcMutexFunctions functions = ResolveLibcMutexFunctions();
  return functions;
}

// On the registering thread: takes its liveness mutex (thread_registry.h, alive_mutex).
void HoldAliveMutex(RegisteredThread* thread) {
  const LibcMutexFunctions& libc = LibcMutex();
  if (!libc.trylock) return;
  pthread_mutexattr_t attributes;
  if (pthread_mutexattr_init(&attributes) != 0) return;
  pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
  const bool made = pthread_mutex_init(&thread->alive_mutex, &attributes) == 0;
  pthread_mutexattr_destroy(&attributes);
  thread->alive_mutex_held = made && libc.trylock(&thread->alive_mutex) == 0;
}

// On the thread itself, when it unregisters.
void ReleaseAliveMutex(RegisteredThread* thread) {
  if (!thread->alive_mutex_held) return;
  thread->alive_mutex_held = false;
  LibcMutex().unlock(&thread->alive_mutex);
}

// The kernel's mark on a robust futex whose owner died (linux/futex.h, FUTEX_OWNER_DIED).
constexpr unsigned kFutexOwnerDied = 0x40000000;

bool HasDied(const RegisteredThread* thread) {
  if (thread->adopted) {
    return RawSyscall(SYS_tgkill, RawSyscall(SYS_getpid), thread->tid.ToNumber(), 0) == -ESRCH;
  }
  if (!thread->alive_mutex_held) return false;
  // The futex word, which the kernel writes at the thread's death (glibc's public layout).
  const unsigned word = __atomic_load_n(
      reinterpret_cast<const unsigned*>(&thread->alive_mutex.__data.__lock), __ATOMIC_ACQUIRE);
  return (word & kFutexOwnerDied) != 0;
}

}  // namespace

std::string CurrentThreadName() {
  char name[16];
  CurrentThreadNameInto(name);
  return name;
}

void CurrentThreadNameInto(char (&name)[16]) {
  // The calling thread's own name: prctl(PR_GET_NAME), a system call of its own (glibc's
  // pthread_getname_np on pthread_self() reads no file).
  std::memset(name, 0, sizeof(name));
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) name[0] = '\0';
  name[sizeof(name) - 1] = '\0';
}

std::string ThreadNameFromProc(ThreadId tid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid.ToNumber());
  FILE* f = fopen(path, "re");
  if (!f) return std::string();
  char name[64] = {};
  const size_t n = fread(name, 1, sizeof(name) - 1, f);
  fclose(f);
  std::string s(name, n);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

namespace {
char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Whether `needle` occurs in `haystack`, ignoring ASCII case. No copies (a new thread's
// registration matches its name here, on the program's thread).
bool ContainsIgnoringCase(const char* haystack, size_t haystack_size, const char* needle,
                          size_t needle_size) {
  if (needle_size > haystack_size) return false;
  for (size_t start = 0; start + needle_size <= haystack_size; ++start) {
    size_t i = 0;
    while (i < needle_size && AsciiLower(haystack[start + i]) == AsciiLower(needle[i])) ++i;
    if (i == needle_size) return true;
  }
  return false;
}
}  // namespace

bool NameMatchesFilters(std::string_view name, bool is_main,
                        const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  static constexpr char kMain[] = "main";
  for (const std::string& filter : filters) {
    if (ContainsIgnoringCase(name.data(), name.size(), filter.data(), filter.size())) return true;
    if (is_main && ContainsIgnoringCase(kMain, sizeof(kMain) - 1, filter.data(), filter.size())) {
      return true;
    }
    if (filter == "*") return true;
  }
  return false;
}

// Moves `thread`'s staged markers into the session buffer. Registry mutex held (the thread
// cannot be deleted meanwhile).
void FlushMarkersLocked(RegisteredThread* thread) {
  if (StagingArea* staging = thread->marker_staging.load(std::memory_order_acquire)) {
    staging->FlushInto(SessionBuffer());
  }
}

namespace {
// Applies the session's thread filters to `thread` under its current name. Registry mutex held.
void ApplyFiltersLocked(Registry& registry, RegisteredThread* thread) {
  if (!registry.sampling) return;
  const ThreadInfo& info = registry.infos[thread->info_index];
  if (NameMatchesFilters(info.name, thread->is_main, registry.settings.thread_filters)) {
    StartSamplingLocked(registry, thread);
  } else if (thread->sampling.load(std::memory_order_relaxed)) {
    StopSamplingLocked(thread);
    // What it took while it matched goes into the buffer now (a capture drains only sampled
    // threads), and the CPU it uses from here on is nobody's sample: no copy of its last
    // sample carries it when the thread ends (UnregisterThread).
    DrainRingLocked(thread);
    thread->has_sample = false;
  }
}
}  // namespace

namespace {
// Cancellation held off for the scope (pthread_setcancelstate is no cancellation point, takes
// no lock): a cancellation acted upon inside registration (at a write() of the log, a close()
// of a refused event...) would leave the thread half registered, with a sampling source no
// destructor releases (issue 33: a perf event descriptor leaked per cancelled thread).
class NoCancellation {
 public:
  NoCancellation() { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &previous_); }
  ~NoCancellation() { pthread_setcancelstate(previous_, nullptr); }

 private:
  int previous_ = PTHREAD_CANCEL_ENABLE;
};
}  // namespace

RegisteredThread* RegisterCurrentThreadImpl(const char* name, const StackBounds& given_stack) {
  NoCancellation no_cancellation;
  if (RegisteredThread* registered = CurrentRegisteredThread()) {
    // Registered before (by pthread_create's wrapper, under the kernel name it had then):
    // a name given now names it from here on.
    if (name) {
      Registry& registry = GetRegistry();
      AutoLock lock(registry.mutex);
      ThreadInfo& info = registry.infos[registered->info_index];
      info.name = name;
      info.name_given = true;
      ApplyFiltersLocked(registry, registered);
    }
    return registered;
  }
  // Strata's own pages (RegisteredThread::operator new), never the program's allocator.
  std::unique_ptr<RegisteredThread> thread(new (std::nothrow) RegisteredThread);
  if (!thread) {
    LogError("cannot register thread %d: out of memory", CurrentThreadId().ToNumber());
    return nullptr;
  }
  thread->tid = CurrentThreadId();
  thread->pthread = pthread_self();
  thread->cpu_clock = ThreadCpuClock::ForCurrentThread();
  // The main thread's stack bounds are captured when its sampling starts
  // (StartSamplingLocked): a program that preloads the profiler but never starts it should
  // not pay for reading /proc/self/maps at start-up.
  thread->is_main = thread->tid == MainThreadId();
  if (!thread->ring.ok()) {
    LogError("cannot allocate the sample ring of thread %d", thread->tid.ToNumber());
  }
  // Once the sampler thread has loaded libunwind (g_libunwind_ready), it is warmed on this
  // thread before it can be sampled. Never loaded here: a preloaded but inactive profiler, or
  // a session younger than one sampler period, does not load libunwind (and liblzma) into
  // the program; its samples walk frame pointers until the sampler loads it.
  if (ProfilerIsActive()) WarmUpLoadedLibunwindOnThisThread();

  // The handler's free-stack check (sampling_signal.h) needs the bounds on this thread (the
  // main thread's stack grows on demand: checked against its limit instead). Read without
  // allocating (stack_bounds.h), narrowed to the stack the program gave pthread_create, if any.
  if (!thread->is_main) {
    thread->bounds = StackBounds::OfCurrentThread().NarrowedTo(given_stack);
    SetSamplingThreadStackBounds(thread->bounds.low, thread->bounds.high);
  }

  HoldAliveMutex(thread.get());
  RegisteredThread* raw = thread.release();
  strata_t_profiling_stack_v2 = &raw->profiling_stack;
  t_registered_thread = raw;
  SetSamplingThreadEventDescriptors(&raw->source.descriptors);
  SetSamplingThreadContext(raw);
  pthread_once(&g_thread_exit_key_once, &CreateThreadExitKey);
  pthread_setspecific(g_thread_exit_key, raw);

  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  // Made in place in the list (Strata's own pages): no ThreadInfo on the stack to destroy.
  raw->info_index = registry.infos.size();
  ThreadInfo& info = registry.infos.emplace_back();
  info.tid = raw->tid;
  if (name) {
    info.name = name;  // The program's own request (ProfilerRegisterThread with a name).
  } else {
    // The kernel's name, at most 15 characters: it fits the string's own in-place buffer,
    // so no allocation (the new thread's registration, on the program's thread).
    char kernel_name[16];
    CurrentThreadNameInto(kernel_name);
    info.name = kernel_name;
  }
  info.name_given = name != nullptr;
  info.register_time = TimeStamp::Now();
  info.is_main = raw->is_main;
  registry.live.push_back(raw);
  if (registry.sampling) StartSamplingLocked(registry, raw);
  // Threads that ended without unregistering, also when no sampler loop looks for them (out
  // of session), and their entries pruned in batches: amortised O(1) per registration.
  if (++registry.registered_since_sweep >= std::max(kMinPruneBatch, registry.live_after_sweep)) {
    ReclaimDeadThreadsLocked(registry);
  }
  LogInfo("registered thread %d '%s'", raw->tid.ToNumber(),
          registry.infos[raw->info_index].name.c_str());
  return raw;
}

bool RegisterOtherThread(ThreadId tid, uintptr_t thread_pointer) {
  if (tid == CurrentThreadId() || thread_pointer == 0) return false;
  // glibc's thread control block starts with {tcb, dtv, self}: a live thread's self is its
  // own pointer. Read with a system call, so a wrong pointer is refused, never a fault.
  uintptr_t self = 0;
  if (!CheckedRead(reinterpret_cast<const void*>(thread_pointer + 2 * sizeof(void*)), &self,
                   sizeof(self)) ||
      self != thread_pointer) {
    return false;
  }
  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  for (const RegisteredThread* live : registry.live) {
    if (live->tid == tid) return false;
  }
  // Strata's own pages (RegisteredThread::operator new), as for a thread that registers itself.
  std::unique_ptr<RegisteredThread> thread(new (std::nothrow) RegisteredThread);
  if (!thread) {
    LogError("cannot adopt thread %d: out of memory", static_cast<int>(tid.ToNumber()));
    return false;
  }
  thread->tid = tid;
  thread->pthread = static_cast<pthread_t>(thread_pointer);
  thread->cpu_clock = ThreadCpuClock::ForThreadId(tid);
  thread->is_main = tid == MainThreadId();
  thread->adopted = true;
  if (!thread->is_main) thread->bounds = StackBounds::OfThread(thread->pthread);
  RegisteredThread* raw = thread.release();
  auto in_thread = [thread_pointer](auto* local) {
    return reinterpret_cast<decltype(local)>(ThreadLocalAddressInThread(local, thread_pointer));
  };
#if STRATA_TSAN_BUILD
  // TSan takes a thread's whole static TLS block for written by that thread at its start
  // (glibc wrote it: the creator, and this library's part the dlopen that loaded it), with no
  // happens-before to this thread: every store below was reported as a race (attach_test,
  // "Previous write ... by thread T1: __tsan_tls_initialization"). TSan is told not to
  // record these stores; their release still counts, and the thread's loads of them are
  // acquires (CurrentRegisteredThread, the handler's context and descriptors), except the
  // label stack's pointer, read plainly by the program's inline label code (base/labels.h).
  __tsan_ignore_thread_begin();
#endif
  __atomic_store_n(in_thread(&strata_t_profiling_stack_v2), &raw->profiling_stack, __ATOMIC_SEQ_CST);
  __atomic_store_n(in_thread(&t_registered_thread), raw, __ATOMIC_SEQ_CST);
  SetSamplingStateOfOtherThread(thread_pointer, raw, &raw->source.descriptors, raw->bounds.low,
                                raw->bounds.high);
#if STRATA_TSAN_BUILD
  __tsan_ignore_thread_end();
#endif
  ThreadInfo info;
  info.tid = tid;
  info.name = ThreadNameFromProc(tid);
  info.register_time = TimeStamp::Now();
  info.is_main = raw->is_main;
  raw->info_index = registry.infos.size();
  registry.infos.push_back(std::move(info));
  registry.live.push_back(raw);
  if (registry.sampling) StartSamplingLocked(registry, raw);
  LogInfo("adopted thread %d '%s'", tid.ToNumber(), registry.infos[raw->info_index].name.c_str());
  return true;
}

void RefreshAdoptedThreadName(ThreadId tid) {
  const std::string name = ThreadNameFromProc(tid);
  if (name.empty()) return;
  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  for (const RegisteredThread* live : registry.live) {
    if (live->tid != tid || !live->adopted) continue;
    ThreadInfo& info = registry.infos[live->info_index];
    if (!info.name_given) info.name = name;
    return;
  }
}

void PruneEndedThreadsLocked(Registry& registry) {
  registry.ended_since_prune = 0;
  // Out of session the buffer holds nothing of this registry's threads.
  const BufferIndex oldest_kept = SessionBuffer().GetState().range_start;
  auto keep = [&](const ThreadInfo& info) {
    if (!info.unregister_time) return true;  // Live.
    return registry.sampling && info.recorded && info.buffer_end > oldest_kept;
  };
  constexpr size_t kDropped = SIZE_MAX;
  RegistryList<size_t> new_index(registry.infos.size(), kDropped);
  size_t kept = 0;
  for (size_t i = 0; i < registry.infos.size(); ++i) {
    if (!keep(registry.infos[i])) continue;
    if (kept != i) registry.infos[kept] = std::move(registry.infos[i]);
    new_index[i] = kept++;
  }
  if (kept == registry.infos.size()) return;
  registry.infos.resize(kept);
  if (registry.infos.capacity() > 2 * kept + kMinPruneBatch) registry.infos.shrink_to_fit();
  for (RegisteredThread* thread : registry.live) thread->info_index = new_index[thread->info_index];
}

namespace {

// The registry side of a thread's end (UnregisterThread's, and a dead thread's reclaim):
// sampling stopped, what it recorded moved into the buffer, its entry marked ended, the
// thread out of `live`. `on_thread`: called by the thread itself (its CPU clock and name
// can be read). Registry mutex held.
void EndRegistrationLocked(Registry& registry, RegisteredThread* thread, bool on_thread) {
  const bool was_sampling = thread->sampling.load(std::memory_order_relaxed);
  StopSamplingLocked(thread);
  ReleaseCpuPage(thread->wait);  // Its perf event's page (wait/kernel_cpu_charge.h).
  const TimeStamp now = TimeStamp::Now();
  DrainLocked(thread, now);  // Keep what it took before ending.
  // And the CPU it used after its last sample, on a copy of it (CPU accounting), when it was
  // still sampled: not the CPU of a time the filters had stopped it (ApplyFiltersLocked). A
  // dead thread's clock cannot be read any more.
  if (on_thread && was_sampling && thread->has_sample && !ProfilerIsPaused() &&
      registry.sampling) {
    if (const std::optional<TimeDuration> cpu = thread->cpu_clock.Read();
        cpu && thread->last_sample_cpu_ns >= 0 && cpu->ToNanoseconds() > thread->last_sample_cpu_ns) {
      PutCopyOfLastSampleLocked(thread, *cpu, now);
    }
  }
  FlushMarkersLocked(thread);
  ThreadInfo& info = registry.infos[thread->info_index];
  if (on_thread && !info.name_given) {
    char name[16];  // The kernel's name: fits the string's in-place buffer (no allocation).
    CurrentThreadNameInto(name);
    if (name[0] != '\0') info.name = name;
  }
  info.unregister_time = TimeStamp::Now();
  if (thread->marker_staging.load(std::memory_order_relaxed) != nullptr) info.recorded = true;
  info.buffer_end = SessionBuffer().GetState().range_end;
  registry.dropped_samples += thread->dropped_samples.load(std::memory_order_relaxed);
  registry.handler_cpu_excluded_ns += thread->handler_cpu_ns.load(std::memory_order_relaxed);
  registry.live.erase(std::remove(registry.live.begin(), registry.live.end(), thread),
                      registry.live.end());
  ++registry.ended_since_prune;
}

// A prune walks every entry; it runs once per max(kMinPruneBatch, live threads) ends: at a
// thread's end, a sampler loop, or a new thread's registration (its sweep of dead threads).
// Entries, names included, and the lists are Strata's own memory (thread_name.h,
// PageAllocator): a prune frees nothing through the program's allocator.
void MaybePruneEndedThreadsLocked(Registry& registry) {
  if (registry.ended_since_prune >= std::max(kMinPruneBatch, registry.live.size())) {
    PruneEndedThreadsLocked(registry);
  }
}

// ReclaimDeadThreadsLocked's sweep, before its prune.
size_t ReclaimDeadThreadsWithoutPruneLocked(Registry& registry) {
  registry.registered_since_sweep = 0;
  RegistryList<RegisteredThread*> dead;
  for (RegisteredThread* thread : registry.live) {
    if (HasDied(thread)) dead.push_back(thread);
  }
  for (RegisteredThread* thread : dead) {
    EndRegistrationLocked(registry, thread, /*on_thread=*/false);
    LogInfo("thread %d ended without unregistering (raw exit): reclaimed",
            thread->tid.ToNumber());
    // Nobody else holds it: its own thread is gone, and every other user takes the registry
    // mutex. The staging area's owner is gone too.
    delete thread->marker_staging.load(std::memory_order_relaxed);
    delete thread;
  }
  registry.reclaimed_dead_threads += dead.size();
  registry.live_after_sweep = registry.live.size();
  return dead.size();
}

}  // namespace

size_t ReclaimDeadThreadsLocked(Registry& registry) {
  const size_t reclaimed = ReclaimDeadThreadsWithoutPruneLocked(registry);
  MaybePruneEndedThreadsLocked(registry);
  return reclaimed;
}

void UnregisterThread(RegisteredThread* thread) {
  NoCancellation no_cancellation;
  Registry& registry = GetRegistry();
  {
    AutoLock lock(registry.mutex);
    EndRegistrationLocked(registry, thread, /*on_thread=*/true);
    MaybePruneEndedThreadsLocked(registry);
  }
  ReleaseAliveMutex(thread);
  SetSamplingThreadContext(nullptr);
  SetSamplingThreadEventDescriptors(nullptr);
  SetSamplingThreadStackBounds(0, 0);
  strata_t_profiling_stack_v2 = nullptr;
  t_registered_thread = nullptr;
  delete thread->marker_staging.load(std::memory_order_relaxed);
  delete thread;
}

void OnRegisteredThreadExit(void* value) {
  RegisteredThread* thread = static_cast<RegisteredThread*>(value);
  if (thread && thread == CurrentRegisteredThread() && !IsForkedChild()) UnregisterThread(thread);
}

bool SetCurrentThreadTierData(void* data) {
  RegisteredThread* thread = CurrentRegisteredThread();
  if (!thread || IsForkedChild()) return false;
  thread->tier_data.store(data, std::memory_order_release);
  return true;
}

void* TierDataOf(void* thread_context) {
  return static_cast<RegisteredThread*>(thread_context)->tier_data.load(std::memory_order_acquire);
}

void FlushStagedMarkers() {
  if (IsForkedChild()) return;
  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  for (RegisteredThread* thread : registry.live) FlushMarkersLocked(thread);
}

void FlushStagedMarkersOfThread(ThreadId tid) {
  if (IsForkedChild()) return;
  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  for (RegisteredThread* thread : registry.live) {
    if (thread->tid == tid) FlushMarkersLocked(thread);
  }
}

PthreadCreateFunction RealPthreadCreate() {
  static PthreadCreateFunction real = []() {
    void* symbol = NextDefinition("pthread_create");
    return symbol ? reinterpret_cast<PthreadCreateFunction>(symbol) : &pthread_create;
  }();
  return real;
}

namespace {
__thread bool t_creating_profiler_thread __attribute__((tls_model("initial-exec"))) = false;

// The first definition of `name` in the global lookup order, unless it is our own interposer.
void* FirstForeignDefinition(const char* name) {
  void* symbol = dlsym(RTLD_DEFAULT, name);
  if (!symbol) return nullptr;
  Dl_info symbol_info{}, own_info{};
  if (dladdr(symbol, &symbol_info) == 0 ||
      dladdr(reinterpret_cast<void*>(&FirstForeignDefinition), &own_info) == 0 ||
      symbol_info.dli_fbase == own_info.dli_fbase) {
    return nullptr;  // Ours (or unknown).
  }
  return symbol;
}

PthreadCreateFunction FirstForeignPthreadCreate() {
  return reinterpret_cast<PthreadCreateFunction>(FirstForeignDefinition("pthread_create"));
}
}  // namespace

int JoinProfilerThread(pthread_t thread) {
  using JoinFunction = int (*)(pthread_t, void**);
  // A sanitizer's interceptor if there is one, else libc's: never our own wait wrapper, which
  // would mark the join as the program's wait and walk the stack (issue 38: ~2 % of a
  // recorded short process).
  static const JoinFunction join = [] {
    void* symbol = FirstForeignDefinition("pthread_join");
    if (!symbol) symbol = NextDefinition("pthread_join");
    return symbol ? reinterpret_cast<JoinFunction>(symbol) : &pthread_join;
  }();
  return join(thread, nullptr);
}

int CreateProfilerThread(pthread_t* thread, void* (*routine)(void*), void* argument) {
  static const PthreadCreateFunction create = [] {
    const PthreadCreateFunction foreign = FirstForeignPthreadCreate();
    return foreign ? foreign : RealPthreadCreate();
  }();
  // The profiler's threads block every signal (they inherit this mask): a signal sent to the
  // process (kill, ITIMER_PROF, a terminal's SIGINT) must go to one of the program's threads,
  // to its handler, signalfd or sigwait, as without us -- not to ours, where its default action
  // would kill the program. sigfillset leaves out glibc's internal signals, which every thread
  // must keep taking (setuid broadcasts). The system call, not the interposed pthread_sigmask.
  sigset_t every_signal, previous;
  sigfillset(&every_signal);
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, &every_signal, &previous, _NSIG / 8);
  t_creating_profiler_thread = true;
  const int rc = create(thread, nullptr, routine, argument);
  t_creating_profiler_thread = false;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &previous, nullptr, _NSIG / 8);
  return rc;
}

bool IsCreatingProfilerThread() { return t_creating_profiler_thread; }

void OnThreadRenamed(pthread_t pthread, const char* name) {
  if (IsForkedChild()) return;
  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  for (RegisteredThread* thread : registry.live) {
    if (!pthread_equal(thread->pthread, pthread)) continue;
    ThreadInfo& info = registry.infos[thread->info_index];
    if (info.name_given) return;  // The program's own name for it stays.
    info.name = name;
    ApplyFiltersLocked(registry, thread);
    return;
  }
}

}  // namespace base_internal

// ---------------------------------------------------------------------------------------
// Public API (profiler.h): thread registration.

using namespace base_internal;

void ProfilerRegisterThread(const char* name) {
  if (IsForkedChild()) return;
  ProfilerInit();
  RegisterCurrentThreadImpl(name);
}

namespace base_internal {
void RegisterNewThread(const StackBounds& given_stack) {
  if (IsForkedChild()) return;
  ProfilerInit();
  RegisterCurrentThreadImpl(nullptr, given_stack);
}
}  // namespace base_internal

void ProfilerUnregisterThread() {
  if (IsForkedChild()) return;
  RegisteredThread* thread = CurrentRegisteredThread();
  if (!thread) return;
  pthread_setspecific(g_thread_exit_key, nullptr);
  UnregisterThread(thread);
}

bool ProfilerIsThreadRegistered() { return CurrentRegisteredThread() != nullptr; }

}  // namespace strata
