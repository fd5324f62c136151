// Loads libstrata_base.so into a running x86-64 glibc process and starts an attach session
// there (docs/attach.md, issue 36), with ptrace, leaving every thread as it was:
//
//   1. Each thread's thread pointer (%fs base: its pthread_t) is read from glibc's thread
//      lists in the target's memory, no thread stopped (glibc_threads.h): the base tier
//      registers these threads from inside (they never ran its pthread_create wrapper). A
//      thread not found there is stopped once (PTRACE_SEIZE + PTRACE_INTERRUPT) for it, and
//      let go with its registers as they were (~tens of microseconds).
//   2. One thread blocked in a blocking system call that holds no lock of libc's (read, poll,
//      accept, recvmsg, a condition-variable or join futex wait...) is borrowed
//      (borrowed_thread.h): stopped, all its registers saved (general ones, the XSAVE area,
//      the signal mask), and made to call, with a private 256 KiB mapping as its stack:
//      dlopen(library, RTLD_NOW) (dlerror on failure), then strata_attach_start(settings)
//      (its address: the library's load bias, read from the handle, plus its .dynsym value).
//      The calls are arranged so that the thread goes back to its call whatever happens to
//      strata, SIGKILL included (a signal frame on its stack, libc's __restore_rt, a
//      trampoline). Signals that arrive meanwhile are passed on (the program's handler runs
//      on top of the call, as under gdb's `call`). Calls run with orig_rax = -1 (no system
//      call restart in the middle of ours).
//      Only a thread on its own stack with 12 KiB below its stack pointer (BorrowedStackProblem)
//      is borrowed; a restart_syscall counts as the call seen before the listing only at the
//      same stack and instruction pointers. A call that does not come back within 10 s is
//      abandoned: the thread is let go as it is and finishes alone (borrowed_thread.h).
//   3. The saved registers are put back exactly, so the kernel restarts the interrupted call
//      as if nothing happened (ERESTARTSYS and friends); a call the kernel ends with a plain
//      EINTR when its thread is merely stopped (epoll_wait, sigtimedwait/sigwaitinfo, semop,
//      msgrcv...: signal(7)) is rewound to its `syscall` instruction instead, unless a signal
//      the thread does not block is pending (then the EINTR may be that signal's), so the
//      program never sees an EINTR of ours (a relative timeout starts again in full). Every
//      path detaches (PTRACE_DETACH, signal 0). PTRACE_O_EXITKILL is never set.
// The loader must be idle (ld.so's _r_debug.r_state == RT_CONSISTENT) so the borrowed thread
// cannot wait for a dlopen another thread is in the middle of.
//
// Thread safety: one injection at a time per target; the caller blocks SIGINT/SIGTERM/SIGHUP
// (they stop the recording once the injection is over). Not for use in a signal handler.
#ifndef STRATA_TOOLS_STRATA_ATTACH_INJECTOR_H_
#define STRATA_TOOLS_STRATA_ATTACH_INJECTOR_H_

#include <sched.h>
#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tools/strata/attach/glibc_threads.h"

namespace strata {
namespace attach {

// What /proc tells of a target before anything touches it.
struct TargetFacts {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string libc_path;   // As the target sees it (its mount namespace).
  uint64_t libc_base = 0;  // Load address of libc.so.6's first mapping.
  std::string ld_path;
  uint64_t ld_base = 0;
  std::string executable_path;  // /proc/PID/exe (else its first named mapping), as its maps name it.
  bool has_strata = false;  // libstrata_base.so already mapped.
};

// Why `pid` cannot be attached to ("" when it can be tried): gone, not x86-64, static (no
// libc.so.6), already traced (TracerPid), stopped (State T), strict seccomp, Yama's
// ptrace_scope 3, or a thread running with a user shadow stack. Fills `facts`. Each reason
// ends with what to do.
std::string CheckTarget(pid_t pid, TargetFacts* facts);

// True when the text of a /proc/PID/task/TID/status file says its thread runs with a user
// shadow stack: `shstk` among the words of its `x86_Thread_features:` line (Linux 6.6+; absent
// on older kernels: false). Such a thread cannot be borrowed: the return into __restore_rt
// that the borrowed thread's calls are arranged around (borrowed_thread.h) is not on its
// shadow stack and raises a control-protection fault that kills the program. Pure function.
bool StatusShowsShadowStack(const std::string& status_text);

struct InjectionResult {
  bool ok = false;
  std::string error;           // When !ok: why, with what to do.
  bool refused = false;        // A refusal (exit 1), not a failure in the middle.
  int start_result = -1;       // strata_attach_start's return value.
  uint64_t state_address = 0;  // strata_attach_state in the target.
  uint64_t stop_address = 0;   // strata_attach_stop_request in the target.
  uint64_t mailbox_address = 0;  // strata_attach_new_threads in the target.
  uint64_t worker_tid_address = 0;  // strata_attach_worker_tid (0: a library without it).
  // The worker's thread id read right after the start (its pthread_t's tid field, from
  // strata_attach_worker_thread and glibc's layout), 0 when it could not be: then the worker
  // writes it into strata_attach_worker_tid once it runs.
  pid_t worker_tid = 0;
  size_t threads_listed = 0;   // Threads whose pointer was read.
  size_t threads_stopped_to_list = 0;  // Of them, those not found in glibc's lists: stopped once.
  GlibcThreadLists thread_lists;  // Where the pointers of threads started later are read.
  pid_t borrowed_tid = 0;
  bool realtime = false;           // strata ran at real-time priority while it held the thread.
  double borrowed_stop_ms = 0;     // The borrowed thread's whole stop (step 2), PTRACE_INTERRUPT to PTRACE_DETACH.
  double borrowed_held_ms = 0;     // The same from the stop's report (waitpid) to PTRACE_DETACH.
  int borrowed_round_trips = 0;    // ptrace requests on it meanwhile.
  std::string borrowed_phases;     // Where the stop went (BorrowedThread::Phases).
  double longest_thread_stop_ms = 0;  // The longest stop of step 1 (PTRACE_INTERRUPT to PTRACE_DETACH).
  double longest_thread_held_ms = 0;  // The longest of step 1 from the stop's report to PTRACE_DETACH.
  double list_ms = 0;    // Step 1 in all (each thread's stop waits for it to be scheduled).
  double borrow_wait_ms = 0;  // Until a thread was found in a safe call, stopped.
};

// Steps 1-3 for `facts.pid`. `library` is the path the target opens (its namespace),
// `library_file` the same file as this process reads it (for its symbols);
// `settings` the "NAME=VALUE" lines for strata_attach_start, to which the thread list
// (STRATA_ATTACH_THREADS) is added here.
InjectionResult InjectAndStart(const TargetFacts& facts, const std::string& library,
                               const std::string& library_file, const std::string& settings);

// A thread of the target and its thread pointer (%fs base).
struct ThreadPointer {
  pid_t tid;
  uint64_t pointer;
};

// The target's threads (/proc/PID/task).
std::vector<pid_t> ThreadsOf(pid_t pid);

// Step 1 for `tids`: each stopped once (all asked at once, each let go as soon as it stopped,
// registers untouched but for the EINTR rewind), its thread pointer read. Raises
// *longest_stop_ms to the longest stop; *permission_denied when PTRACE_SEIZE said EPERM.
// Threads that ended meanwhile, and pointers two tasks share, are left out.
std::vector<ThreadPointer> ReadThreadPointers(pid_t pid, const std::vector<pid_t>& tids, double* longest_stop_ms,
                                              bool* permission_denied, double* longest_held_ms = nullptr);

// Threads started after the attach: hands (tid, pointer) pairs to the attach worker through
// its mailbox (strata_attach_new_threads, base/internal/attach/attach.cc) when the worker has taken
// the previous ones; false (nothing written) while it has not, or on a write error. At most
// kMailboxThreads per call.
inline constexpr size_t kMailboxThreads = 64;
bool OfferNewThreads(pid_t pid, uint64_t mailbox_address, const std::vector<ThreadPointer>& threads);

// One line of /proc/PID/maps: [start, end), its name ("" for an anonymous mapping), and the
// file offset at `start`.
struct StackMapping {
  uint64_t start = 0;
  uint64_t end = 0;
  std::string name;
  uint64_t offset = 0;
};
// The mappings of process `pid` (empty when its maps cannot be read).
std::vector<StackMapping> ReadMappings(pid_t pid);

// What a borrowed thread needs below its stack pointer: the signal frame (red zone, 1 KiB,
// the XSAVE area, the ucontext: up to ~5 KiB) and the calls made on the program's stack before
// the private stack is mapped, with a margin.
inline constexpr uint64_t kBorrowedStackRoom = 12 * 1024;

// Why a thread whose stack pointer is `sp` may not be borrowed ("" when it may): the frame is
// written below `sp`, which must therefore be on the thread's own stack, with
// kBorrowedStackRoom below it in the same mapping. The thread's own stack is, for the main
// thread (`main_thread`: tid == pid), the mapping the kernel names [stack]; for any other
// thread, the anonymous mapping that holds its thread pointer (%fs base, its struct pthread:
// glibc puts it at the top of the thread's stack block, for the stacks it allocates and for
// those given with pthread_attr_setstack) with `sp` below it. A handler running on an
// alternate signal stack (malloc'd: [heap] or an arena; mmap'd: another mapping) fails this,
// so the frame never lands in the program's data. Pure function.
std::string BorrowedStackProblem(const std::vector<StackMapping>& mappings, bool main_thread,
                                 uint64_t thread_pointer, uint64_t sp);

// Why a thread blocked in a system call whose instruction ends at `pc` may not be borrowed
// ("" when it may): the call must be made by libc's code or the program's own (the mapping
// holding the `syscall` instruction is `libc_path`'s or `executable_path`'s). A thread in a
// raw system call of another library or of anonymous code (a sanitizer runtime's background
// thread, a language runtime's library, JIT code) may hold that runtime's locks or have no
// state of the runtime's for the allocator dlopen calls (a TSan program's background thread,
// in a raw nanosleep of libtsan's, faulted in TSan's allocator, and the attach then left the
// loader's lock held): never borrowed. Pure function.
std::string BorrowedCallProblem(const std::vector<StackMapping>& mappings, const std::string& libc_path,
                                const std::string& executable_path, uint64_t pc);

// strata's own thread at real-time priority (SCHED_FIFO 1, SCHED_RESET_ON_FORK) for the
// object's life, when it may (root, CAP_SYS_NICE): while strata holds a thread of the target
// and waits for the attach, each step waits for strata to be scheduled, and on a busy machine
// its wake-ups would wait behind every runnable task. Its work there is short and its waits
// sleep. Nothing of the program's changes (its threads keep their policies); strata's previous
// policy is given back at the end (nested windows restore in turn).
// STRATA_ATTACH_TEST_NO_REALTIME=1 leaves it out (benchmarks).
class RealtimeWindow {
 public:
  RealtimeWindow();
  ~RealtimeWindow();
  RealtimeWindow(const RealtimeWindow&) = delete;
  RealtimeWindow& operator=(const RealtimeWindow&) = delete;
  bool active() const { return active_; }

 private:
  int policy_ = -1;
  struct sched_param param_ = {};
  bool active_ = false;
};

// The attach worker in the target (a thread of Strata's, base/internal/attach/attach.cc) at
// real-time priority (SCHED_FIFO 1), set from outside by strata from the moment its thread id
// is known (right after strata_attach_start returned) until the session runs: on a busy
// machine the worker's start (registrations, libunwind, the flight recorder file, the sampling
// sources: a few ms of CPU) would otherwise queue behind every runnable task, and the first
// sample with it. What the worker starts meanwhile inherits the policy (no
// SCHED_RESET_ON_FORK): the short-lived helper process that moves a descriptor above the soft
// RLIMIT_NOFILE (platform/private_fd.h), which the worker waits for (at the default policy it
// queued for up to 300 ms beside tools/load.sh), and the sampler thread. Raise() also raises
// the Strata* threads not in `before_attach` that it finds at the default policy (the
// worker's descriptor-table grower, started before the worker was raised). Restore() gives the
// worker its policy back, and the same to every thread of the process that is not in
// `before_attach`, is named Strata* (named by Strata, or still the worker's name it inherited)
// and runs SCHED_FIFO: Strata's threads the worker started. Only when strata itself may (its
// RealtimeWindow is active: root or CAP_SYS_NICE); the program's threads keep their policies.
// If strata dies in between, Strata's threads keep SCHED_FIFO 1 until they end (the worker
// sees strata gone within 20 ms and stops the session).
class WorkerBoost {
 public:
  explicit WorkerBoost(std::set<pid_t> before_attach) : before_attach_(std::move(before_attach)) {}
  ~WorkerBoost() { Restore(); }
  WorkerBoost(const WorkerBoost&) = delete;
  WorkerBoost& operator=(const WorkerBoost&) = delete;
  // Raises thread `tid` of `pid` once (later calls do nothing); false when it could not.
  bool Raise(pid_t pid, pid_t tid);
  void Restore();
  bool raised() const { return tid_ > 0; }

 private:
  std::set<pid_t> before_attach_;
  pid_t pid_ = 0;
  pid_t tid_ = 0;
  bool tried_ = false;
  int policy_ = -1;
  struct sched_param param_ = {};
};

// Reads `length` bytes of the target's memory (process_vm_readv); false unless all were read.
bool ReadTargetBytes(pid_t pid, uint64_t address, void* buffer, size_t length);

// Reads or writes one 32-bit word of the target's memory (process_vm_readv/writev).
bool ReadTargetWord(pid_t pid, uint64_t address, int32_t* value);
bool WriteTargetWord(pid_t pid, uint64_t address, int32_t value);

}  // namespace attach
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_ATTACH_INJECTOR_H_
