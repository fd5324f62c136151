// Attach (issue 36, docs/attach.md): the entry point `strata record -p PID` calls inside a
// running process after it loaded libstrata_base.so there with dlopen (tools/strata/attach).
//
// strata_attach_start runs on the program thread the injector borrowed (stopped by ptrace in a
// blocking system call, so it holds no lock of the program's or of libc's): it copies the
// settings and starts the attach worker, a profiler thread, then returns at once, so that the
// borrowed thread goes back to its call after microseconds. The worker, on Strata's own thread:
//   - registers every thread the injector listed (tid and thread pointer, read with ptrace),
//     which existed before the library and never registered itself (RegisterOtherThread);
//   - starts the session with the settings `strata record` would have put in STRATA_* variables
//     (the same parser: env_settings.h), saving to STRATA_SHUTDOWN;
//   - adopts the threads strata hands over while it runs (started after the attach: strata
//     reads their thread pointers as it did the first ones), through strata_attach_new_threads;
//   - waits, polling every 20 ms, for the stop request (strata writes 1 into
//     strata_attach_stop_request with process_vm_writev: no descriptor, no signal), or for the
//     strata process (STRATA_ATTACH_WATCHER) to be gone; then saves and stops the session
//     (ProfilerShutdown), or only stops it when nobody waits for the file, and ends. The
//     program's own exit saves too (the library's exit handler).
// What is left after the worker ended: the library, loaded and inert (no thread, no descriptor,
// the sampling signal's disposition given back), the adopted threads' registrations, reused by
// the next attach, and the ended worker's stack block: the worker is joinable, and the next
// attach's worker joins it before it allocates (so that the previous attach's malloc arenas
// are back on glibc's free list for it). strata runs the worker at SCHED_FIFO 1 from outside
// until the session runs (tools/strata/attach/injector.h, WorkerBoost): its work there is
// bounded (a few ms of CPU; registrations ~0.1 ms a thread).
//
// Thread safety: strata_attach_start refuses (returns kAttachBusy) while an attach worker or
// any session runs. Async-signal safety: none.
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/internal/attach/attach.h"
#include "base/internal/session/core.h"
#include "base/internal/settings/env_settings.h"
#include "base/internal/flight/flight_recorder.h"
#include "base/internal/settings/log.h"
#include "base/internal/registry/thread_registry.h"
#include "base/profiler.h"
#include "platform/private_fd.h"
#include "platform/raw_syscall.h"
#include "platform/tsan_startup.h"

// What the worker is doing, read by strata with process_vm_readv (AttachState below).
extern "C" {
__attribute__((visibility("default"))) std::atomic<int> strata_attach_state{0};
// The attach worker, for strata to run it at real-time priority from outside until the
// session runs (tools/strata/attach/attach_record.cc, WorkerBoost): its pthread_t (glibc's
// struct pthread, whose tid field strata reads as it reads the listed threads'), written by
// strata_attach_start before it returns, so known before the worker first runs; and its thread
// id, written by the worker first thing (0 until then, reset by strata_attach_start), for a
// libc whose thread layout strata cannot read.
__attribute__((visibility("default"))) std::atomic<uint64_t> strata_attach_worker_thread{0};
__attribute__((visibility("default"))) std::atomic<int> strata_attach_worker_tid{0};
// Written by strata with process_vm_writev: 1 asks the worker to save and stop.
__attribute__((visibility("default"))) std::atomic<int> strata_attach_stop_request{0};
// Threads started after the attach, handed over by strata (its injector's OfferNewThreads):
// it writes `threads` and `count`, then `full` = 1; the worker adopts them and sets `full` = 0.
struct StrataAttachMailbox {
  std::atomic<uint32_t> full;
  uint32_t count;
  struct {
    int32_t tid;
    uint32_t unused;
    uint64_t pointer;
  } threads[64];
};
__attribute__((visibility("default"))) StrataAttachMailbox strata_attach_new_threads{};
}

namespace strata {
namespace base_internal {
namespace {

// strata_attach_state values (tools/strata/attach/attach_record.cc has the same).
enum AttachState : int {
  kAttachIdle = 0,
  kAttachStarting = 1,
  kAttachRunning = 2,   // The session runs.
  kAttachSaved = 3,     // Stopped, the profile saved (or the save failed: logged).
  kAttachAbandoned = 4, // Stopped without saving: strata went away.
};

// strata_attach_start's results.
enum AttachResult : int {
  kAttachOk = 0,
  kAttachBusy = 1,       // A session or another attach runs in this process.
  kAttachBadSettings = 2,
  kAttachNoThread = 3,   // The worker could not be created.
};

struct AttachRequest {
  std::map<std::string, std::string> variables;  // STRATA_* name -> value.
  std::vector<std::pair<ThreadId, uintptr_t>> threads;
  pid_t watcher = 0;
  // The previous attach's worker (ended, or ending: it cleared g_worker_running as its last
  // step), joined before this worker's first allocation (below, AttachWorker).
  bool join_previous = false;
  pthread_t previous_worker{};
};

// "NAME=VALUE" lines.
std::map<std::string, std::string> ParseLines(const char* text) {
  std::map<std::string, std::string> result;
  const char* line = text;
  while (*line != '\0') {
    const char* end = std::strchr(line, '\n');
    if (end == nullptr) end = line + std::strlen(line);
    const char* equals = static_cast<const char*>(std::memchr(line, '=', end - line));
    if (equals != nullptr) result[std::string(line, equals)] = std::string(equals + 1, end);
    line = *end == '\0' ? end : end + 1;
  }
  return result;
}

// "tid:hexpointer,tid:hexpointer".
std::vector<std::pair<ThreadId, uintptr_t>> ParseThreads(const std::string& text) {
  std::vector<std::pair<ThreadId, uintptr_t>> threads;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    // Parsed in place: each number ends at the ':' or ',' after it.
    const size_t colon = text.find(':', start);
    if (colon < comma) {
      const long tid = std::strtol(text.c_str() + start, nullptr, 10);
      const uintptr_t pointer = std::strtoull(text.c_str() + colon + 1, nullptr, 16);
      if (tid > 0) threads.emplace_back(ThreadId::FromNumber(static_cast<pid_t>(tid)), pointer);
    }
    start = comma + 1;
  }
  return threads;
}

std::atomic<bool> g_worker_running{false};
// The last worker started (joinable), written by strata_attach_start only (one at a time:
// g_worker_running).
bool g_have_worker = false;
pthread_t g_last_worker{};
std::atomic<bool> g_attached_session{false};

// The process's descriptor table grown to hold Strata's high descriptors (platform/
// private_fd.h: the flight recorder file's, the perf events', at kPrivateDescriptorFloor and
// up), on a thread of its own at the worker's start. A multi-threaded process's table grows
// through an RCU grace period (the kernel's expand_fdtable waits for one: 8-13 ms measured
// here at load ~6, once per process: docs/benchmarks.md, "First attach"), and a first attach
// finds the table at its initial 64 entries. Here that wait overlaps the worker's
// registrations and the session's start, instead of lying on the path to the first sample
// (the first perf event's move above the floor would pay it). A descriptor number that
// another thread asks for during the growth waits for it, as it would for Strata's own move.
void* GrowDescriptorTable(void*) {
  // open: Strata's own wrapper (file_syscall_wrappers.cc), which forwards on a thread that is
  // not registered (a raw openat would cost 8 bytes the code segment does not have: .bazelrc).
  // Refused: -1, nothing is grown.
  close(MoveDescriptorHigh(open("/", O_PATH | O_CLOEXEC)));
  return nullptr;
}

bool WatcherGone(pid_t watcher) {
  return watcher > 0 && RawSyscall(SYS_kill, watcher, 0) == -ESRCH;
}

void* AttachWorker(void* raw) {
  strata_attach_worker_tid.store(static_cast<int>(RawSyscall(SYS_gettid)));
  // Named first: a worker that runs is told from the program's threads by its name (strata
  // skips Strata* threads; attach_test waits for an abandoned attach's worker to end by it).
  prctl(PR_SET_NAME, "StrataAttach", 0, 0, 0);
  std::unique_ptr<AttachRequest> request(static_cast<AttachRequest*>(raw));
  // Strata's threads of the previous attach gone for good before this one allocates: glibc
  // gives a thread's malloc arena back to its free list at the thread's very end (the sampler
  // was joined by the previous stop), and a worker that allocated before the previous one had
  // ended would get a new arena (tens to hundreds of KiB of RSS kept for good, once in a
  // while across attach/detach cycles: docs/attach.md, "RSS across attaches").
  if (request->join_previous) JoinProfilerThread(request->previous_worker);
  // The descriptor table grown beside the worker (GrowDescriptorTable; at later attaches it
  // is already grown, the table never shrinks, and the thread ends at once), by a detached
  // thread that ends on its own (named StrataAttach, as its creator: strata never takes it
  // for a program thread).
  pthread_t grower;
  if (CreateProfilerThread(&grower, &GrowDescriptorTable, nullptr) == 0) pthread_detach(grower);
  const EnvironmentSettings env = ReadEnvironment(
      [&request](const char* name) -> const char* {
        auto found = request->variables.find(name);
        return found == request->variables.end() ? nullptr : found->second.c_str();
      },
      [](const std::string& message) { LogError("attach: %s", message.c_str()); });
  if (env.logging) SetLoggingEnabled(true);
  SetShutdownPath(env.shutdown_path);
  if (!env.flight_recorder_directory.empty()) {
    ConfigureFlightRecorder(env.flight_recorder_directory.c_str());
  }
  size_t adopted = 0;
  for (const auto& [tid, pointer] : request->threads) adopted += RegisterOtherThread(tid, pointer);
  LogInfo("attach: %zu of %zu threads adopted", adopted, request->threads.size());
  strata_attach_stop_request.store(0);
  g_attached_session.store(true);
  ProfilerStart(env.settings);
  strata_attach_state.store(kAttachRunning);
  bool abandoned = false;
  // Threads adopted from the mailbox and the polls since, their name read again after ~100 ms
  // and ~500 ms (RefreshAdoptedThreadName: one adopted before it named itself; a thread still
  // alive at the save is named then anyway).
  constexpr int kFirstRenamePoll = 5;
  constexpr int kLastRenamePoll = 25;
  std::vector<std::pair<ThreadId, int>> to_rename;
  while (strata_attach_stop_request.load() == 0 && ProfilerIsActive()) {
    if (WatcherGone(request->watcher)) {
      abandoned = true;
      break;
    }
    if (strata_attach_new_threads.full.load(std::memory_order_acquire) != 0) {
      const uint32_t count = std::min<uint32_t>(strata_attach_new_threads.count, 64);
      for (uint32_t i = 0; i < count; ++i) {
        const ThreadId tid = ThreadId::FromNumber(strata_attach_new_threads.threads[i].tid);
        if (RegisterOtherThread(tid, strata_attach_new_threads.threads[i].pointer)) {
          to_rename.emplace_back(tid, 0);
        }
      }
      strata_attach_new_threads.full.store(0, std::memory_order_release);
    }
    for (size_t i = 0; i < to_rename.size();) {
      const int polls = ++to_rename[i].second;
      if (polls == kFirstRenamePoll || polls == kLastRenamePoll) RefreshAdoptedThreadName(to_rename[i].first);
      if (polls < kLastRenamePoll) {
        ++i;
        continue;
      }
      to_rename[i] = to_rename.back();
      to_rename.pop_back();
    }
    const struct timespec step = {0, 20 * 1000 * 1000};
    RawSyscall(SYS_futex, reinterpret_cast<long>(&strata_attach_stop_request),
               FUTEX_WAIT_PRIVATE, 0, reinterpret_cast<long>(&step));
  }
  if (abandoned) {
    ProfilerStop();
  } else {
    ProfilerShutdown();  // Saves to STRATA_SHUTDOWN, then stops.
  }
  SetShutdownPath(std::string());  // The program's exit saves nothing more.
  ReleaseStoppedFlightRecorderFiles();  // No mapping of the (removed) file left behind.
  g_attached_session.store(false);
  strata_attach_state.store(abandoned ? kAttachAbandoned : kAttachSaved);
#if STRATA_TSAN_BUILD
  // ThreadSanitizer builds: the worker ends detached, and no later attach joins it (below,
  // strata_attach_start). TSan reports a thread that ended and was never joined as a "thread
  // leak" when the process exits (status 66): the last attach's worker, kept joinable by design
  // for the next attach to join, was reported in every program that exited after a detach.
  // Joining it at the library's unload instead hung a server in _dl_fini (the loader lock).
  pthread_detach(pthread_self());
#endif
  g_worker_running.store(false);
  return nullptr;
}

}  // namespace

bool InAttachedSession() { return g_attached_session.load(std::memory_order_relaxed); }

}  // namespace base_internal
}  // namespace strata

// Called by the injector on a borrowed program thread. `settings`: "NAME=VALUE" lines of
// STRATA_* variables (STRATA_SHUTDOWN, STRATA_STARTUP_INTERVAL, _FEATURES, _FILTERS,
// _BUFFER_MB, STRATA_FLIGHT_RECORDER, STRATA_LOGGING) plus STRATA_ATTACH_THREADS
// ("tid:hexpointer,...") and STRATA_ATTACH_WATCHER (strata's pid). Returns an AttachResult.
extern "C" __attribute__((visibility("default"))) int strata_attach_start(const char* settings) {
  using namespace strata::base_internal;
  if (settings == nullptr) return kAttachBadSettings;
  if (strata::ProfilerIsActive() || g_worker_running.exchange(true)) return kAttachBusy;
  auto request = std::make_unique<AttachRequest>();
  request->variables = ParseLines(settings);
  request->threads = ParseThreads(request->variables["STRATA_ATTACH_THREADS"]);
  request->watcher = static_cast<pid_t>(std::atoi(request->variables["STRATA_ATTACH_WATCHER"].c_str()));
  request->join_previous = g_have_worker;
  request->previous_worker = g_last_worker;
  if (request->variables["STRATA_SHUTDOWN"].empty()) {
    g_worker_running.store(false);
    return kAttachBadSettings;
  }
  strata_attach_state.store(kAttachStarting);
  strata_attach_worker_tid.store(0);
  strata_attach_worker_thread.store(0);
  pthread_t thread;
  if (CreateProfilerThread(&thread, &AttachWorker, request.get()) != 0) {
    strata_attach_state.store(kAttachIdle);
    g_worker_running.store(false);
    return kAttachNoThread;
  }
  request.release();  // The worker's.
  strata_attach_worker_thread.store(reinterpret_cast<uint64_t>(thread));
  g_last_worker = thread;  // Joined by the next attach's worker.
  // Under TSan the worker detaches itself as it ends (AttachWorker): never joined.
  g_have_worker = !STRATA_TSAN_BUILD;
  return kAttachOk;
}
