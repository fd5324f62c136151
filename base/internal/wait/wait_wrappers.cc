// The blocking libc functions wrapped for wait stacks (wait_wrappers.h; docs/sampling.md,
// "Wait stacks"). Each wrapper calls the real function (platform/next_definition.h), so they
// work whether libstrata_base.so is preloaded or linked. Exported with C linkage (see
// libstrata_base.lds).
//
// Fast paths stay fast: a wrapper costs a few stores and one clock read (vDSO, no system
// call); an I/O call (STRATA_IO_CALL) on a perf-event thread also reads its event's page
// twice and the clock once more, to charge its CPU to its stack (kernel_cpu_charge.h);
// pthread_mutex_lock and the rwlock locks try the lock first and mark a wait only when
// it is contended. Nothing here changes what the wrapped function does: same arguments, same
// result, same errno, same cancellation (the wait's mark is undone by a destructor, which also
// runs when the thread is cancelled inside the call). The real functions are looked up in the
// library's constructor (ResolveWaitFunctions), so that a first call from a signal handler
// calls no dlsym.
#include "base/internal/wait/wait_wrappers.h"

#include <dlfcn.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <string_view>

#include "base/internal/session/core.h"
#include "base/internal/wait/kernel_cpu_charge.h"
#include "base/internal/wait/own_samples.h"
#include "base/internal/wait/scoped_wait.h"
#include "base/internal/signals/signal_interposers.h"
#include "base/internal/registry/thread_registry.h"
#include "platform/cpu_time.h"
#include "platform/never_destroyed.h"
#include "platform/next_definition.h"
#include "platform/sampling/held_sampling_signals.h"
#include "platform/sampling/libunwind_imports.h"
#include "platform/sampling/libunwind_loader.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "platform/time_stamp.h"
#include "shared/buffer/chunked_buffer.h"
#include "shared/buffer/staging_area.h"

// decltype(&::read) and the like carry the declarations' attributes (nonnull, access), which
// a template argument cannot: they are not needed for the call through the pointer.
#pragma GCC diagnostic ignored "-Wignored-attributes"

namespace strata {
namespace base_internal {
namespace {
// The wrapped functions (and the try-lock functions the lock wrappers use).
#define STRATA_FOR_EACH_WRAPPED_FUNCTION(X) \
  X(pthread_mutex_lock) \
  X(pthread_mutex_trylock) \
  X(nanosleep) \
  X(clock_nanosleep) \
  X(usleep) \
  X(sleep) \
  X(poll) \
  X(ppoll) \
  X(select) \
  X(pselect) \
  X(epoll_wait) \
  X(epoll_pwait) \
  X(read) \
  X(readv) \
  X(write) \
  X(recv) \
  X(recvfrom) \
  X(recvmsg) \
  X(accept) \
  X(accept4) \
  X(connect) \
  X(fsync) \
  X(fdatasync) \
  X(flock) \
  X(pthread_join) \
  X(pthread_cond_wait) \
  X(pthread_cond_timedwait) \
  X(pthread_cond_clockwait) \
  X(sem_wait) \
  X(sem_timedwait) \
  X(waitpid) \
  X(wait) \
  X(wait4) \
  X(waitid) \
  X(pthread_rwlock_tryrdlock) \
  X(pthread_rwlock_rdlock) \
  X(pthread_rwlock_trywrlock) \
  X(pthread_rwlock_wrlock) \
  X(epoll_pwait2) \
  X(pause) \
  X(wait3) \
  X(pthread_timedjoin_np) \
  X(pthread_clockjoin_np) \
  X(sem_clockwait) \
  X(pthread_mutex_timedlock) \
  X(pthread_mutex_clocklock) \
  X(pthread_rwlock_timedrdlock) \
  X(pthread_rwlock_timedwrlock) \
  X(pthread_rwlock_clockrdlock) \
  X(pthread_rwlock_clockwrlock) \
  X(pthread_once) \
  X(call_once)

STRATA_DEFINE_REAL_TABLE(STRATA_FOR_EACH_WRAPPED_FUNCTION)


// Appends `text` / `value` in `base` (10 or 16) at `length` in `out`, as far as it fits;
// returns the new length. Async-signal-safe.
size_t AppendText(char* out, size_t length, size_t capacity, const char* text) {
  while (*text != '\0' && length < capacity) out[length++] = *text++;
  return length;
}
size_t AppendNumber(char* out, size_t length, size_t capacity, uintptr_t value, unsigned base) {
  char digits[24];
  size_t n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value % base];
    value /= base;
  } while (value != 0 && n < sizeof(digits));
  while (n > 0 && length < capacity) out[length++] = digits[--n];
  return length;
}

// Records an "Awaiting lock" marker for a contended lock that waited [start, end].
// Out of line: the cold part of the lock wrapper (and one place for the host-contract check,
// tests/host_contract/program_thread_calls.py, to find the literal marker name's destructor).
__attribute__((noinline, cold)) void RecordLockMarker(const void* lock, long holder,
                                                      TimeStamp start, TimeStamp end) {
  RegisteredThread* thread = CurrentRegisteredThread();
  if (!thread || thread->wait.in_lock_marker || !ProfilerIsActive()) return;
  // A lock that Strata's own code waited for while this thread holds the session buffer's
  // lock or moves its staged markers into the buffer (a chunk manager's callback under the
  // buffer's lock, such as the IPC link's std::mutex): recording the marker would take those
  // locks again ("locked recursively", an abort: fork_full_test in a CI run). Not recorded.
  // The checks are loads of each mutex's owner compared with this thread's token: no lock,
  // allocation or system call, so they cannot block or be a cancellation point.
  const StagingArea* staging = thread->marker_staging.load(std::memory_order_acquire);
  if (SessionBuffer().IsLockedOnCurrentThread() ||
      (staging != nullptr && staging->IsBeingMovedOnCurrentThread())) {
    return;
  }
  thread->wait.in_lock_marker = true;  // Its own locks, if any, are not measured.
  // Formatted here, not by snprintf (not async-signal-safe; may take locale locks).
  char text[64];
  size_t length = AppendText(text, 0, sizeof(text), "mutex 0x");
  length = AppendNumber(text, length, sizeof(text), reinterpret_cast<uintptr_t>(lock), 16);
  if (holder > 0) {
    length = AppendText(text, length, sizeof(text), ", held by thread ");
    length = AppendNumber(text, length, sizeof(text), static_cast<uintptr_t>(holder), 10);
  }
  // The name outlives every call: no ProfilerString is made or destroyed here.
  static const NeverDestroyed<ProfilerString> kName(ProfilerString::Literal("Awaiting lock"));
  AddTextMarker(const_cast<NeverDestroyed<ProfilerString>&>(kName).get(), Category::kOther,
                MarkerOptions::Interval(start, end), std::string_view(text, length));
  thread->wait.in_lock_marker = false;
}

// glibc keeps the owner's thread id of a normal (or recursive, error-checking) mutex in
// __data.__owner; 0 when unknown. Read racily: a hint for the marker.
long MutexHolder(const pthread_mutex_t* mutex) {
  return __atomic_load_n(&mutex->__data.__owner, __ATOMIC_RELAXED);
}

// [start_ns, end_ns] of a wrapped call's wait.
struct WaitSpan {
  int64_t start_ns;
  int64_t end_ns;
};

// A blocked thread takes no sample of its own (its signal follows its CPU), but its handler
// can run inside the wrapped call: at its start, before the call blocks, or as the call
// returns (a signal delivered as the system call exits, before the wrapper reads the time).
// That sample is in time order with the wait's samples only if the wait is on one side of
// it: the longer side, where the call blocked (at the start, the thread ran; at the return,
// the handler's own time, long under a sanitizer or a loaded machine, is not waiting). Seen
// under ASan at load 15-25: the wait's grid points after such a sample written after it, 3 of
// 30 runs of starved_sampler_test. The handler's times are this thread's own (written by its
// handler, which has returned).
WaitSpan WaitSpanAroundOwnSample(const RegisteredThread* thread, int64_t start_ns,
                                 int64_t end_ns) {
  std::atomic_signal_fence(std::memory_order_acquire);
  const int64_t entry_ns = thread->handler_entry_time_ns;
  const int64_t exit_ns = thread->handler_exit_time_ns;
  if (entry_ns <= start_ns || entry_ns >= end_ns || exit_ns < entry_ns) {
    return WaitSpan{start_ns, end_ns};
  }
  if (entry_ns - start_ns >= end_ns - exit_ns) return WaitSpan{start_ns, entry_ns};
  return WaitSpan{std::min(exit_ns, end_ns), end_ns};
}

}  // namespace

void ScopedWait::Begin(const void* function, const void* wrapper_frame, bool measure_cpu) {
  const CallerRegisters caller = CallerRegistersFromFrame(wrapper_frame);
  RegisteredThread* thread = CurrentRegisteredThread();
  if (!MayMarkWait(thread, caller.pc)) return;
  WaitState& wait = thread->wait;
  if (wait.depth != 0 && OuterWaitWasAbandoned(thread, caller.sp)) EndAbandonedWait(wait);
  const bool outermost = wait.depth++ == 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  thread_ = thread;
  if (!outermost) return;
  marked_ = true;
  wait.function.store(reinterpret_cast<uintptr_t>(function), std::memory_order_relaxed);
  wait.caller_pc.store(caller.pc, std::memory_order_relaxed);
  wait.caller_sp.store(caller.sp, std::memory_order_relaxed);
  wait.caller_fp.store(caller.fp, std::memory_order_relaxed);
  // Kernel CPU charged to this call (kernel_cpu_charge.h): its CPU clock or its page's lock,
  // before the start time (a switch in between then shows at the end as a switch).
  if (measure_cpu && wait.charges_kernel_cpu.load(std::memory_order_relaxed)) {
    NoteMeasuredCallStart(wait);
  } else {
    wait.start_cpu_ns.store(kCpuNotMeasured, std::memory_order_relaxed);
  }
  wait.start_ns.store(TimeStamp::Now().ToNanoseconds(), std::memory_order_relaxed);
  wait.sequence.store(wait.sequence.load(std::memory_order_relaxed) + 1,
                      std::memory_order_release);
}

void ScopedWait::End() {
  WaitState& wait = thread_->wait;
  if (marked_) {
    const int saved_errno = errno;  // The wrapped call's, for the program.
    const uint64_t sequence = wait.sequence.load(std::memory_order_relaxed);
    const bool measured = wait.start_cpu_ns.load(std::memory_order_relaxed) != kCpuNotMeasured;
    // No walk of this wait begins from here on, and the sampler leaves the thread's ring
    // alone until the wait has ended; a walk under way ends first (wait_state.h).
    wait.ending_sequence.store(sequence, std::memory_order_seq_cst);
    const int64_t end_ns = TimeStamp::Now().ToNanoseconds();
    const int64_t start_ns = wait.start_ns.load(std::memory_order_relaxed);
    const int64_t call_cpu_ns = measured ? MeasuredCallCpu(wait, start_ns, end_ns) : -1;
    wait.AwaitWalkEnd();
    const CallerRegisters caller{wait.caller_pc.load(std::memory_order_relaxed),
                                 wait.caller_sp.load(std::memory_order_relaxed),
                                 wait.caller_fp.load(std::memory_order_relaxed)};
    const void* function =
        reinterpret_cast<const void*>(wait.function.load(std::memory_order_relaxed));
    // A measured call's CPU is taken as its last part (kernel_cpu_charge.h): the wait is
    // what comes before it, so that no time is both waited and charged, in time order.
    const int64_t blocked_end_ns =
        call_cpu_ns > 0 ? std::max(start_ns, end_ns - call_cpu_ns) : end_ns;
    // The wait's own span, without a sample this thread's handler took inside the call.
    const WaitSpan span = WaitSpanAroundOwnSample(thread_, start_ns, blocked_end_ns);
    // Not walked by the sampler, and it cannot be now: the wait's samples are this thread's
    // to write. Both records go into the ring before the sequence moves on.
    if (wait.walked_sequence.load(std::memory_order_acquire) != sequence) {
      WriteMissedWaitSamples(thread_, function, caller, span.start_ns, span.end_ns);
    }
    if (call_cpu_ns > 0) {
      ChargeWrappedCallCpu(thread_, function, caller, blocked_end_ns, end_ns, call_cpu_ns);
    }
    if (wait.tracked_sequence.load(std::memory_order_relaxed) == sequence) {
      // The sampler's samples of this wait end there too (FinishEndedWaitLocked). It counts
      // them from the start it read when the wait began, and leaves out the points up to a
      // sample of the thread's that it drained meanwhile (wait_sampling.cc).
      wait.end_ns.store(span.end_ns < blocked_end_ns ? span.end_ns : end_ns,
                        std::memory_order_relaxed);
      wait.end_sequence.store(sequence, std::memory_order_release);
    }
    wait.sequence.store(sequence + 1, std::memory_order_seq_cst);
    errno = saved_errno;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (wait.depth > 0) --wait.depth;
}

void* RealAt(std::atomic<void*>* slots, const char* names, int index) {
  void* real = slots[index].load(std::memory_order_acquire);
  if (real) return real;
  const char* name = names;
  for (int i = 0; i < index; ++i) {
    while (*name != '\0') ++name;
    ++name;
  }
  // No libc string function here: a wrapper may call this on its first call.
  const auto same = [](const char* a, const char* b) {
    while (*a != '\0' && *a == *b) ++a, ++b;
    return *a == *b;
  };
  const bool condition_wait =
      same(name, "pthread_cond_wait") || same(name, "pthread_cond_timedwait");
  real = NextDefinition(name, condition_wait ? "GLIBC_2.3.2" : nullptr);
  slots[index].store(real, std::memory_order_release);
  return real;
}

void ResolveWaitFunctions() {
  STRATA_RESOLVE_TABLE();
  ResolveBlockingIoFunctions();
  ResolveFileSyscallFunctions();
  ResolveStdioFunctions();
}

}  // namespace base_internal
}  // namespace strata

using strata::base_internal::ScopedWait;


// A lock wrapper: the lock (the first of the arguments) is tried first with `try_function`;
// only a contended lock marks a wait, around the real blocking call.
#define STRATA_LOCK_ARGUMENT(lock, ...) lock
#define STRATA_LOCK_WAIT_CALL(try_function, function, ...)                                \
  const auto real = STRATA_REAL(function);                                                \
  const int tried = STRATA_REAL(try_function)(STRATA_LOCK_ARGUMENT(__VA_ARGS__, ~));      \
  if (tried != EBUSY) return tried; /* Taken, or the lock's own error. */                  \
  STRATA_WAIT_CALL(function, __VA_ARGS__)

extern "C" {

// --- Sleeps.
int nanosleep(const timespec* duration, timespec* remaining) {
  const auto real = STRATA_REAL(nanosleep);
  STRATA_WAIT_CALL(nanosleep, duration, remaining);
}
int clock_nanosleep(clockid_t clock, int flags, const timespec* duration, timespec* remaining) {
  const auto real = STRATA_REAL(clock_nanosleep);
  STRATA_WAIT_CALL(clock_nanosleep, clock, flags, duration, remaining);
}
int usleep(useconds_t microseconds) {
  const auto real = STRATA_REAL(usleep);
  STRATA_WAIT_CALL(usleep, microseconds);
}
unsigned int sleep(unsigned int seconds) {
  const auto real = STRATA_REAL(sleep);
  STRATA_WAIT_CALL(sleep, seconds);
}

// --- Waiting for descriptors.
int poll(pollfd* fds, nfds_t count, int timeout_ms) {
  const auto real = STRATA_REAL(poll);
  STRATA_WAIT_CALL(poll, fds, count, timeout_ms);
}
int ppoll(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask) {
  const auto real = STRATA_REAL(ppoll);
  const strata::TemporarySamplingSignalMask temporary(
      strata::base_internal::SamplingSignalOfProgramCall(), mask);  // signal_interposers.h
  STRATA_WAIT_CALL(ppoll, fds, count, timeout, mask);
}
int select(int count, fd_set* readable, fd_set* writable, fd_set* exceptional, timeval* timeout) {
  const auto real = STRATA_REAL(select);
  STRATA_WAIT_CALL(select, count, readable, writable, exceptional, timeout);
}
int pselect(int count, fd_set* readable, fd_set* writable, fd_set* exceptional,
            const timespec* timeout, const sigset_t* mask) {
  const auto real = STRATA_REAL(pselect);
  const strata::TemporarySamplingSignalMask temporary(
      strata::base_internal::SamplingSignalOfProgramCall(), mask);  // signal_interposers.h
  STRATA_WAIT_CALL(pselect, count, readable, writable, exceptional, timeout, mask);
}
int epoll_wait(int epoll, epoll_event* events, int capacity, int timeout_ms) {
  const auto real = STRATA_REAL(epoll_wait);
  STRATA_WAIT_CALL(epoll_wait, epoll, events, capacity, timeout_ms);
}
int epoll_pwait(int epoll, epoll_event* events, int capacity, int timeout_ms,
                const sigset_t* mask) {
  const auto real = STRATA_REAL(epoll_pwait);
  const strata::TemporarySamplingSignalMask temporary(
      strata::base_internal::SamplingSignalOfProgramCall(), mask);  // signal_interposers.h
  STRATA_WAIT_CALL(epoll_pwait, epoll, events, capacity, timeout_ms, mask);
}

// --- Blocking I/O.
ssize_t read(int fd, void* data, size_t size) {
  const auto real = STRATA_REAL(read);
  STRATA_IO_CALL(read, fd, data, size);
}
ssize_t readv(int fd, const iovec* vectors, int count) {
  const auto real = STRATA_REAL(readv);
  STRATA_IO_CALL(readv, fd, vectors, count);
}
ssize_t write(int fd, const void* data, size_t size) {
  const auto real = STRATA_REAL(write);
  STRATA_IO_CALL(write, fd, data, size);
}
ssize_t recv(int fd, void* data, size_t size, int flags) {
  const auto real = STRATA_REAL(recv);
  STRATA_IO_CALL(recv, fd, data, size, flags);
}
ssize_t recvfrom(int fd, void* data, size_t size, int flags, sockaddr* from,
                 socklen_t* from_size) {
  const auto real = STRATA_REAL(recvfrom);
  STRATA_IO_CALL(recvfrom, fd, data, size, flags, from, from_size);
}
ssize_t recvmsg(int fd, msghdr* message, int flags) {
  const auto real = STRATA_REAL(recvmsg);
  STRATA_IO_CALL(recvmsg, fd, message, flags);
}
int accept(int fd, sockaddr* address, socklen_t* address_size) {
  const auto real = STRATA_REAL(accept);
  STRATA_WAIT_CALL(accept, fd, address, address_size);
}
int accept4(int fd, sockaddr* address, socklen_t* address_size, int flags) {
  const auto real = STRATA_REAL(accept4);
  STRATA_WAIT_CALL(accept4, fd, address, address_size, flags);
}
int connect(int fd, const sockaddr* address, socklen_t address_size) {
  const auto real = STRATA_REAL(connect);
  STRATA_WAIT_CALL(connect, fd, address, address_size);
}
int fsync(int fd) {
  const auto real = STRATA_REAL(fsync);
  STRATA_IO_CALL(fsync, fd);
}
int fdatasync(int fd) {
  const auto real = STRATA_REAL(fdatasync);
  STRATA_IO_CALL(fdatasync, fd);
}
int flock(int fd, int operation) {
  const auto real = STRATA_REAL(flock);
  STRATA_WAIT_CALL(flock, fd, operation);
}

// --- Threads and processes.
int pthread_join(pthread_t thread, void** result) {
  const auto real = STRATA_REAL(pthread_join);
  STRATA_WAIT_CALL(pthread_join, thread, result);
}
// The condition variables' current symbol version (an unversioned lookup may find the
// GLIBC_2.2.5 compatibility one).
int pthread_cond_wait(pthread_cond_t* condition, pthread_mutex_t* mutex) {
  const auto real = STRATA_REAL(pthread_cond_wait);
  STRATA_WAIT_CALL(pthread_cond_wait, condition, mutex);
}
int pthread_cond_timedwait(pthread_cond_t* condition, pthread_mutex_t* mutex,
                           const timespec* deadline) {
  const auto real = STRATA_REAL(pthread_cond_timedwait);
  STRATA_WAIT_CALL(pthread_cond_timedwait, condition, mutex, deadline);
}
int pthread_cond_clockwait(pthread_cond_t* condition, pthread_mutex_t* mutex, clockid_t clock,
                           const timespec* deadline) {
  const auto real = STRATA_REAL(pthread_cond_clockwait);
  STRATA_WAIT_CALL(pthread_cond_clockwait, condition, mutex, clock, deadline);
}
int sem_wait(sem_t* semaphore) {
  const auto real = STRATA_REAL(sem_wait);
  STRATA_WAIT_CALL(sem_wait, semaphore);
}
int sem_timedwait(sem_t* semaphore, const timespec* deadline) {
  const auto real = STRATA_REAL(sem_timedwait);
  STRATA_WAIT_CALL(sem_timedwait, semaphore, deadline);
}
pid_t waitpid(pid_t pid, int* status, int options) {
  const auto real = STRATA_REAL(waitpid);
  STRATA_WAIT_CALL(waitpid, pid, status, options);
}
pid_t wait(int* status) {
  const auto real = STRATA_REAL(wait);
  STRATA_WAIT_CALL(wait, status);
}
pid_t wait4(pid_t pid, int* status, int options, struct rusage* usage) {
  const auto real = STRATA_REAL(wait4);
  STRATA_WAIT_CALL(wait4, pid, status, options, usage);
}
int waitid(idtype_t type, id_t id, siginfo_t* info, int options) {
  const auto real = STRATA_REAL(waitid);
  STRATA_WAIT_CALL(waitid, type, id, info, options);
}

// --- Locks: the lock is tried first; only a contended one marks a wait.
int pthread_mutex_lock(pthread_mutex_t* mutex) {
  using namespace strata::base_internal;
  const auto real_try = STRATA_REAL(pthread_mutex_trylock);
  const auto real = STRATA_REAL(pthread_mutex_lock);
  RegisteredThread* thread = CurrentRegisteredThread();
  if (!thread || !WaitStacksOn() || thread->wait.in_lock_marker ||
      !MayMarkWait(thread, reinterpret_cast<uintptr_t>(__builtin_return_address(0)))) {
    return real(mutex);
  }
  const int tried = real_try(mutex);
  if (tried != EBUSY) return tried;  // Taken (or an error the lock would also report).
  const long holder = MutexHolder(mutex);
  const strata::TimeStamp start = strata::TimeStamp::Now();
  int rc;
  {
    ScopedWait wait(reinterpret_cast<const void*>(real), STRATA_WRAPPER_FRAME());
    rc = real(mutex);
  }
  const strata::TimeStamp end = strata::TimeStamp::Now();
  if ((end - start).ToNanoseconds() >= kLockMarkerThresholdNs) {
    const int saved_errno = errno;
    RecordLockMarker(mutex, holder, start, end);
    errno = saved_errno;
  }
  return rc;
}
int pthread_rwlock_rdlock(pthread_rwlock_t* lock) {
  STRATA_LOCK_WAIT_CALL(pthread_rwlock_tryrdlock, pthread_rwlock_rdlock, lock);
}
int pthread_rwlock_wrlock(pthread_rwlock_t* lock) {
  STRATA_LOCK_WAIT_CALL(pthread_rwlock_trywrlock, pthread_rwlock_wrlock, lock);
}


// --- More blocking calls (issue 34): every blocking function glibc exports is wrapped (the
// I/O and IPC ones in blocking_io_wrappers.cc); a wait in a call not wrapped is an "Unknown
// wait" (docs/sampling.md).
int epoll_pwait2(int epoll, epoll_event* events, int capacity, const timespec* timeout,
                 const sigset_t* mask) {
  const auto real = STRATA_REAL(epoll_pwait2);
  const strata::TemporarySamplingSignalMask temporary(
      strata::base_internal::SamplingSignalOfProgramCall(), mask);  // signal_interposers.h
  STRATA_WAIT_CALL(epoll_pwait2, epoll, events, capacity, timeout, mask);
}
int pause() {
  const auto real = STRATA_REAL(pause);
  STRATA_WAIT_CALL(pause);
}
pid_t wait3(int* status, int options, struct rusage* usage) {
  const auto real = STRATA_REAL(wait3);
  STRATA_WAIT_CALL(wait3, status, options, usage);
}
int pthread_timedjoin_np(pthread_t thread, void** result, const timespec* deadline) {
  const auto real = STRATA_REAL(pthread_timedjoin_np);
  STRATA_WAIT_CALL(pthread_timedjoin_np, thread, result, deadline);
}
int pthread_clockjoin_np(pthread_t thread, void** result, clockid_t clock,
                         const timespec* deadline) {
  const auto real = STRATA_REAL(pthread_clockjoin_np);
  STRATA_WAIT_CALL(pthread_clockjoin_np, thread, result, clock, deadline);
}
int sem_clockwait(sem_t* semaphore, clockid_t clock, const timespec* deadline) {
  const auto real = STRATA_REAL(sem_clockwait);
  STRATA_WAIT_CALL(sem_clockwait, semaphore, clock, deadline);
}
// Timed locks: tried first, as the untimed ones (an uncontended lock marks nothing).
int pthread_mutex_timedlock(pthread_mutex_t* mutex, const timespec* deadline) {
  STRATA_LOCK_WAIT_CALL(pthread_mutex_trylock, pthread_mutex_timedlock, mutex, deadline);
}
int pthread_mutex_clocklock(pthread_mutex_t* mutex, clockid_t clock, const timespec* deadline) {
  STRATA_LOCK_WAIT_CALL(pthread_mutex_trylock, pthread_mutex_clocklock, mutex, clock, deadline);
}
int pthread_rwlock_timedrdlock(pthread_rwlock_t* lock, const timespec* deadline) {
  STRATA_LOCK_WAIT_CALL(pthread_rwlock_tryrdlock, pthread_rwlock_timedrdlock, lock, deadline);
}
int pthread_rwlock_timedwrlock(pthread_rwlock_t* lock, const timespec* deadline) {
  STRATA_LOCK_WAIT_CALL(pthread_rwlock_trywrlock, pthread_rwlock_timedwrlock, lock, deadline);
}
int pthread_rwlock_clockrdlock(pthread_rwlock_t* lock, clockid_t clock, const timespec* deadline) {
  STRATA_LOCK_WAIT_CALL(pthread_rwlock_tryrdlock, pthread_rwlock_clockrdlock, lock, clock, deadline);
}
int pthread_rwlock_clockwrlock(pthread_rwlock_t* lock, clockid_t clock, const timespec* deadline) {
  STRATA_LOCK_WAIT_CALL(pthread_rwlock_trywrlock, pthread_rwlock_clockwrlock, lock, clock, deadline);
}

// pthread_once and C11's call_once (glibc's calls its internal __pthread_once; libstdc++'s
// std::call_once calls pthread_once): a wait only while another thread runs the initializer.
// A done control (glibc's fast path: its __PTHREAD_ONCE_DONE bit, 2) marks nothing. Otherwise
// the wait is marked and the initializer is run through RunOnceInitializer, which ends the
// mark first when this thread is the one that runs it: the initializer's CPU and its own waits
// are its own, not pthread_once's. The program's initializer is kept in a thread-local chain
// (an initializer may call pthread_once itself), restored by a destructor, which also runs
// when the initializer throws (std::call_once) or the thread is cancelled in it.
namespace strata {
namespace base_internal {
namespace {
struct OnceCall {
  void (*initializer)();
  ScopedWait* wait;
  OnceCall* outer;
};
__thread OnceCall* t_once_call __attribute__((tls_model("initial-exec"))) = nullptr;

void RunOnceInitializer() {
  OnceCall* call = t_once_call;
  call->wait->EndNow();
  call->initializer();
}

class ScopedOnceCall {
 public:
  ScopedOnceCall(void (*initializer)(), ScopedWait* wait) : call_{initializer, wait, t_once_call} {
    t_once_call = &call_;
  }
  ~ScopedOnceCall() { t_once_call = call_.outer; }

 private:
  OnceCall call_;
};

bool OnceDone(const int* control) { return (__atomic_load_n(control, __ATOMIC_ACQUIRE) & 2) != 0; }
}  // namespace
}  // namespace base_internal
}  // namespace strata

int pthread_once(pthread_once_t* control, void (*initializer)()) {
  const auto real = STRATA_REAL(pthread_once);
  if (strata::base_internal::OnceDone(control)) return real(control, initializer);
  ScopedWait wait(reinterpret_cast<const void*>(real), STRATA_WRAPPER_FRAME());
  const strata::base_internal::ScopedOnceCall call(initializer, &wait);
  return real(control, &strata::base_internal::RunOnceInitializer);
}
void call_once(once_flag* flag, void (*initializer)()) {
  const auto real = STRATA_REAL(call_once);
  if (strata::base_internal::OnceDone(&flag->__data)) return real(flag, initializer);
  ScopedWait wait(reinterpret_cast<const void*>(real), STRATA_WRAPPER_FRAME());
  const strata::base_internal::ScopedOnceCall call(initializer, &wait);
  real(flag, &strata::base_internal::RunOnceInitializer);
}

// The 64-bit-offset names a program built with _FILE_OFFSET_BITS=64 calls (pread64 and
// pwrite64 are above).

}  // extern "C"
