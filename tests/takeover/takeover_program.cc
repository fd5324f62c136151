// A program whose base-tier session (started by STRATA_STARTUP=1 at load) is taken over by
// the full tier in the middle of its run: by dlopen (default build) or with the full tier
// linked (TAKEOVER_LINKED). It checks in-process that the buffer was adopted in place, and
// leaves the profile checks to takeover_check.
//
//   takeover_program <profile-after-restart.json>
// The profile of the taken-over session is written through ProfilerSaveProfile to
// $TAKEOVER_PROFILE before the full tier is stopped and restarted (linked build: the
// restarted session is saved at exit by STRATA_SHUTDOWN).
//
// TAKEOVER_REPEAT=N instead runs N hand-overs each way in one session: N times, once the busy
// thread has used TAKEOVER_PHASE_CPU_MS (default 60) more ms of its own CPU time, the full
// tier takes the running session over ("takeover-<i>" ... "taken-over-<i>" markers around
// the call), and after as much CPU again gives it back (ShutdownFull: "detach-<i>" ...
// "detached-<i>"). Phases are measured in the busy thread's CPU time, not in wall time, so a
// loaded machine gives each phase the same number of samples. Each of those markers carries
// the busy thread's CPU clock read around its time, and the second of each pair the CPU clock
// just before and just after the hand-over call (MarkWithBusyCpu): takeover_check places the
// calls among the busy thread's samples with them. The session is saved to
// $TAKEOVER_PROFILE at the end.
// The hand-over must not need another thread to run. The program checks that the sampler
// thread (by tid) and the process's POSIX timers (/proc/self/timers) are the same through
// all hand-overs (no thread restarted, no timer re-created), and counts the takeovers that
// completed while the sampler thread did not run at all (asleep before and after the call,
// no context switch in between, from /proc/self/task/<tid>/status): a takeover that stops
// or joins the sampler never can; at least one of the N must. Samples dropped (a full ring)
// during each hand-over are counted from the session's own count (every ring drained just
// before it): there must be none.
//
// TAKEOVER_SIGNAL_LOG=FILE: the busy thread also notes on its own CPU clock every sampling
// signal its handler took (SamplingSignalsTakenOnCurrentThread, read between rounds of its
// loop: one CPU clock reading per signal, none otherwise), and writes them to FILE as
// "<cpu_ns> <signals>" lines once it stops, then a "# stray_notifications_dropped N
// samples_skipped_low_stack M" line (process-wide counts). takeover_check --signal-log tells with them a gap
// the kernel left (no signal reached the thread) from one Strata made (a signal taken and no
// sample for it).
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "base/internal/session/core.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "platform/sampling/sampling_signal.h"
#include "shared/buffer/entry_kinds.h"
#include "shared/profile/marker_entry.h"
#ifdef TAKEOVER_LINKED
#include "full/full.h"
#endif

namespace {

std::atomic<bool> g_stop{false};

// Sampling signals the busy thread took, on its CPU clock (TAKEOVER_SIGNAL_LOG). Written by
// the busy thread only, read after it was joined.
struct SignalArrival {
  int64_t cpu_ns;    // The thread's CPU clock when its loop saw the count change.
  uint64_t signals;  // How many were taken since the previous arrival (usually 1).
};
std::vector<SignalArrival> g_arrivals;
bool g_log_signals = false;
bool g_arrivals_overflowed = false;

int64_t ThreadCpuNs(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return now.tv_sec * int64_t{1000000000} + now.tv_nsec;
}

__attribute__((noinline)) uint64_t BusyTakeoverLeaf(uint64_t x) {
  return x * 6364136223846793005ull + 1442695040888963407ull;
}
__attribute__((noinline)) void BusyTakeoverLoop() {
  uint64_t x = 1;
  uint64_t taken = strata::SamplingSignalsTakenOnCurrentThread();
  while (!g_stop.load(std::memory_order_relaxed)) {
    for (int i = 0; i < 1000; ++i) x = BusyTakeoverLeaf(x) ^ (x >> 7);  // ~3 us.
    if (!g_log_signals) continue;
    const uint64_t now = strata::SamplingSignalsTakenOnCurrentThread();
    if (now == taken) continue;
    // The clock read between two equal counts: after the handlers of the signals counted,
    // before the next one's (else it is read again after the next round).
    const int64_t cpu_ns = ThreadCpuNs(CLOCK_THREAD_CPUTIME_ID);
    if (strata::SamplingSignalsTakenOnCurrentThread() != now) continue;
    if (g_arrivals.size() < g_arrivals.capacity()) {  // Never allocates while it runs.
      g_arrivals.push_back({cpu_ns, now - taken});
    } else {
      g_arrivals_overflowed = true;
    }
    taken = now;
  }
  if (x == 42) std::puts("");
}

// Writes the busy thread's signal arrivals to $TAKEOVER_SIGNAL_LOG (after it was joined).
void WriteSignalLog() {
  const char* path = std::getenv("TAKEOVER_SIGNAL_LOG");
  if (path == nullptr) return;
  // A log that stopped early would show no signal where signals came: it is no evidence.
  if (g_arrivals_overflowed) {
    std::fprintf(stderr, "takeover_program: FAIL: the signal log filled up\n");
    std::exit(3);
  }
  std::ofstream out(path);
  for (const SignalArrival& a : g_arrivals) out << a.cpu_ns << ' ' << a.signals << '\n';
  // The process's sampling signals that reached no thread's count or no sample.
  out << "# stray_notifications_dropped " << strata::StrayNotificationsDropped()
      << " samples_skipped_low_stack " << strata::SamplesSkippedForLowStack() << '\n';
  out.close();
  if (!out) {
    std::fprintf(stderr, "takeover_program: cannot write %s\n", path);
    std::exit(3);
  }
  std::printf("signal log: %zu arrivals\n", g_arrivals.size());
}

void Fail(const char* what) {
  std::fprintf(stderr, "takeover_program: FAIL: %s\n", what);
  std::exit(3);
}

void Spin(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// The block index of the first marker named `name` in the session buffer.
strata::BlockIndex FindMarker(const std::string& name) {
  strata::base_internal::FlushStagedMarkers();  // Markers just recorded are still staged.
  strata::BlockIndex found;
  strata::base_internal::SessionBuffer().ReadEach([&](strata::EntryReader& reader) {
    if (found || reader.ReadObject<strata::EntryKind>() != strata::EntryKind::kMarker) return;
    const auto header = reader.ReadObject<strata::profile::MarkerHeader>();
    if (!reader.Failed() && header.name.View() == name) found = reader.CurrentBlockIndex();
  });
  return found;
}

std::string MarkerNameAt(strata::BlockIndex index) {
  return strata::base_internal::SessionBuffer().ReadAt(index, [](strata::EntryReader* reader) {
    if (!reader || reader->ReadObject<strata::EntryKind>() != strata::EntryKind::kMarker) {
      return std::string();
    }
    return std::string(reader->ReadObject<strata::profile::MarkerHeader>().name.View());
  });
}

void PrintState(const char* when) {
  const strata::ChunkedBuffer::State s = strata::base_internal::SessionBuffer().GetState();
  std::printf("buffer %s: range [%llu, %llu) pushed %llu cleared %llu chunks_taken %llu\n", when,
              static_cast<unsigned long long>(s.range_start),
              static_cast<unsigned long long>(s.range_end),
              static_cast<unsigned long long>(s.pushed_block_count),
              static_cast<unsigned long long>(s.cleared_block_count),
              static_cast<unsigned long long>(s.chunks_taken));
}

double ThreadCpuMs(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return now.tv_sec * 1e3 + now.tv_nsec / 1e6;
}

// Sleeps until the thread of `clock` has used `ms` more of its CPU time.
void WaitForThreadCpu(clockid_t clock, double ms) {
  const double until = ThreadCpuMs(clock) + ms;
  while (ThreadCpuMs(clock) < until) std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

// A marker whose text ties the profile's clock to the busy thread's CPU clock: the marker's
// time is read between two readings of that CPU clock ("busy_cpu_ns=<before>..<after>").
// With `handover` (the CPU clock just before and just after a hand-over call) the text also
// says where in the busy thread's CPU time the call lay ("handover_busy_cpu_ns=<a>..<b>"),
// so takeover_check can place the call among the thread's samples.
void MarkWithBusyCpu(const std::string& name, clockid_t busy_clock,
                     const std::pair<int64_t, int64_t>* handover = nullptr) {
  const int64_t before = ThreadCpuNs(busy_clock);
  const strata::TimeStamp at = strata::TimeStamp::Now();
  const int64_t after = ThreadCpuNs(busy_clock);
  std::string text = "busy_cpu_ns=" + std::to_string(before) + ".." + std::to_string(after);
  if (handover) {
    text += " handover_busy_cpu_ns=" + std::to_string(handover->first) + ".." +
            std::to_string(handover->second);
  }
  strata::AddTextMarker(strata::ProfilerString::Dynamic(name), strata::Category::kProfiler,
                        strata::MarkerOptions::Instant(at), text);
}

// The full tier's start and shutdown, linked or through dlopen.
struct FullTier {
  int (*start)() = nullptr;  // 0: took over the running session.
  void (*shutdown)() = nullptr;
};

FullTier LoadFullTier() {
  FullTier tier;
#ifdef TAKEOVER_LINKED
  tier.start = [] { return strata::full::StartFull().took_over_base_session ? 0 : 1; };
  tier.shutdown = [] { strata::full::ShutdownFull(); };
#else
  void* full = dlopen("libstrata_full.so", RTLD_NOW);
  if (!full) Fail(dlerror());
  tier.start = reinterpret_cast<int (*)()>(dlsym(full, "strata_full_start"));
  tier.shutdown = reinterpret_cast<void (*)()>(dlsym(full, "strata_full_shutdown"));
  if (!tier.start || !tier.shutdown) Fail("strata_full_start/strata_full_shutdown missing");
#endif
  return tier;
}

// --- The sampler thread, seen from /proc.

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The tid of the thread named StrataSampler, or 0.
pid_t SamplerTid() {
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return 0;
  pid_t found = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const std::string comm = ReadFile(std::string("/proc/self/task/") + entry->d_name + "/comm");
    if (comm == "StrataSampler\n") found = std::atoi(entry->d_name);
  }
  closedir(dir);
  return found;
}

// The process's POSIX timers: their ids and target threads.
std::string TimerSet() {
  std::stringstream in(ReadFile("/proc/self/timers"));
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.rfind("ID:", 0) == 0 || line.rfind("notify:", 0) == 0) out += line + ";";
  }
  return out;
}

// Whether a thread is asleep, and its context switches so far.
struct SchedulingState {
  bool sleeping = false;
  long switches = -1;
  bool operator==(const SchedulingState& o) const {
    return sleeping == o.sleeping && switches == o.switches;
  }
};
SchedulingState SchedulingOf(pid_t tid) {
  SchedulingState state;
  std::stringstream in(ReadFile("/proc/self/task/" + std::to_string(tid) + "/status"));
  std::string line;
  long voluntary = -1, involuntary = -1;
  while (std::getline(in, line)) {
    if (line.rfind("State:", 0) == 0) state.sleeping = line.find("S (sleeping)") != std::string::npos;
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) voluntary = std::atol(line.c_str() + 24);
    if (line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) involuntary = std::atol(line.c_str() + 27);
  }
  if (voluntary >= 0 && involuntary >= 0) state.switches = voluntary + involuntary;
  return state;
}

int RepeatTakeovers(int cycles) {
  const char* phase_env = std::getenv("TAKEOVER_PHASE_CPU_MS");
  const double phase_cpu_ms = phase_env ? std::atof(phase_env) : 60;
  if (std::getenv("TAKEOVER_SIGNAL_LOG") != nullptr) {
    // ~2.5 s of the busy thread's CPU at 1 kHz takes ~2 500 entries.
    g_arrivals.reserve(1 << 18);
    g_log_signals = true;
  }
  std::thread busy([] {
    pthread_setname_np(pthread_self(), "busy-worker");
    BusyTakeoverLoop();
  });
  clockid_t busy_clock;
  if (pthread_getcpuclockid(busy.native_handle(), &busy_clock) != 0) Fail("no CPU clock");
  const FullTier tier = LoadFullTier();
  WaitForThreadCpu(busy_clock, phase_cpu_ms);  // Every thread has its timer by now.
  // The sampler names itself once it first runs (late on a loaded machine).
  pid_t sampler = SamplerTid();
  for (int i = 0; i < 5000 && sampler == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    sampler = SamplerTid();
  }
  if (sampler == 0) Fail("no StrataSampler thread");
  const std::string timers = TimerSet();
  std::printf("sampler thread %d, timers %s\n", sampler, timers.c_str());
  int without_sampler = 0, sampler_changed = 0, timers_changed = 0;
  uint64_t dropped_in_handovers = 0;
  auto dropped_so_far = [] { return strata::base_internal::TakeSessionSnapshot().dropped_samples; };
  double worst_takeover_ms = 0, worst_detach_ms = 0;
  for (int i = 1; i <= cycles; ++i) {
    WaitForThreadCpu(busy_clock, phase_cpu_ms);
    const std::string n = std::to_string(i);
    MarkWithBusyCpu("takeover-" + n, busy_clock);
    const SchedulingState sampler_before = SchedulingOf(sampler);
    // Every ring drained right before the call: a sample the busy thread took before the
    // call's first CPU reading is in the buffer (takeover_check relies on it).
    uint64_t dropped_before = dropped_so_far();
    std::pair<int64_t, int64_t> call_cpu;  // The busy thread's CPU clock around the call.
    call_cpu.first = ThreadCpuNs(busy_clock);
    auto t0 = std::chrono::steady_clock::now();
    if (tier.start() != 0) Fail("the full tier did not take over the running session");
    auto t1 = std::chrono::steady_clock::now();
    call_cpu.second = ThreadCpuNs(busy_clock);
    const SchedulingState sampler_after = SchedulingOf(sampler);
    MarkWithBusyCpu("taken-over-" + n, busy_clock, &call_cpu);
    dropped_in_handovers += dropped_so_far() - dropped_before;
    if (sampler_before.sleeping && sampler_before == sampler_after) ++without_sampler;
    if (SamplerTid() != sampler) ++sampler_changed;
    WaitForThreadCpu(busy_clock, phase_cpu_ms);
    MarkWithBusyCpu("detach-" + n, busy_clock);
    dropped_before = dropped_so_far();
    call_cpu.first = ThreadCpuNs(busy_clock);
    auto t2 = std::chrono::steady_clock::now();
    tier.shutdown();
    auto t3 = std::chrono::steady_clock::now();
    call_cpu.second = ThreadCpuNs(busy_clock);
    MarkWithBusyCpu("detached-" + n, busy_clock, &call_cpu);
    dropped_in_handovers += dropped_so_far() - dropped_before;
    if (!strata::ProfilerIsActive()) Fail("the session stopped with the full tier");
    if (SamplerTid() != sampler) ++sampler_changed;
    if (TimerSet() != timers) ++timers_changed;
    const double takeover_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    const double detach_ms = std::chrono::duration<double, std::milli>(t3 - t2).count();
    worst_takeover_ms = std::max(worst_takeover_ms, takeover_ms);
    worst_detach_ms = std::max(worst_detach_ms, detach_ms);
    std::printf("cycle %d: takeover call %.3f ms, detach call %.3f ms\n", i, takeover_ms,
                detach_ms);
  }
  WaitForThreadCpu(busy_clock, phase_cpu_ms);
  std::printf("takeover calls: worst %.3f ms; detach calls: worst %.3f ms\n", worst_takeover_ms,
              worst_detach_ms);
  std::printf("takeovers completed while the sampler thread did not run: %d of %d\n",
              without_sampler, cycles);
  std::printf("hand-overs after which the sampler thread was another: %d of %d\n",
              sampler_changed, 2 * cycles);
  std::printf("detaches after which the timers were not the same: %d of %d\n", timers_changed,
              cycles);
  std::printf("samples dropped during the hand-overs: %llu\n",
              static_cast<unsigned long long>(dropped_in_handovers));
  if (dropped_in_handovers > 0) Fail("samples were dropped during a hand-over");
  if (without_sampler == 0) Fail("every takeover needed the sampler thread to run");
  if (sampler_changed > 0) Fail("the sampler thread was replaced");
  if (timers_changed > 0) Fail("sampling timers were re-created");
  const char* path = std::getenv("TAKEOVER_PROFILE");
  std::string error;
  if (path && !strata::ProfilerSaveProfile(path, &error)) Fail(error.c_str());
  g_stop = true;
  busy.join();
  WriteSignalLog();
  std::printf("takeover_program: ok\n");
  return 0;
}

}  // namespace

int main() {
  if (!strata::ProfilerIsActive()) Fail("the base session is not running (STRATA_STARTUP=1?)");
  if (const char* repeat = std::getenv("TAKEOVER_REPEAT")) return RepeatTakeovers(std::atoi(repeat));
  const double before_s = std::getenv("TAKEOVER_BEFORE_S") ? std::atof(std::getenv("TAKEOVER_BEFORE_S")) : 0.6;
  const int filler_markers = std::getenv("TAKEOVER_FILLER") ? std::atoi(std::getenv("TAKEOVER_FILLER")) : 0;

  std::thread busy([] {
    pthread_setname_np(pthread_self(), "busy-worker");
    BusyTakeoverLoop();
  });

  STRATA_MARKER_TEXT("base-before-1", kOther, {}, "base API before takeover");
  // Optionally fill the buffer until it recycles its oldest chunks.
  for (int i = 0; i < filler_markers; ++i) {
    STRATA_MARKER_TEXT("filler", kOther, {}, std::string(200, 'x'));
  }
  Spin(before_s);
  STRATA_MARKER_TEXT("base-before-2", kOther, {}, "base API just before takeover");
  const strata::BlockIndex before_index = FindMarker("base-before-2");
  if (!before_index) Fail("marker base-before-2 not found in the buffer");
  PrintState("before takeover");
  const uint64_t chunks_before = strata::base_internal::SessionBuffer().GetState().chunks_taken;

  // --- The takeover ---
  STRATA_MARKER_UNTYPED("takeover", kProfiler);
#ifdef TAKEOVER_LINKED
  const strata::full::StartReport report = strata::full::StartFull();
  if (!report.took_over_base_session) Fail("StartFull did not take over the base session");
  std::printf("takeover: linked, sampler hand-over %.3f ms\n", report.sampler_handover_ms);
  auto add_full_marker = [](const char* name, const char* text) {
    strata_full_add_text_marker(name, text);
  };
#else
  void* full = dlopen("libstrata_full.so", RTLD_NOW);
  if (!full) Fail(dlerror());
  auto start = reinterpret_cast<int (*)()>(dlsym(full, "strata_full_start"));
  auto add_full_marker =
      reinterpret_cast<void (*)(const char*, const char*)>(dlsym(full, "strata_full_add_text_marker"));
  if (!start || !add_full_marker) Fail("strata_full_* entry points missing");
  if (start() != 0) Fail("strata_full_start did not take over the base session");
  std::printf("takeover: dlopen\n");
#endif
  PrintState("after takeover");
  // In place: the block written before the takeover is still at the same index, and the
  // buffer did not take a batch of new chunks to hold a copy.
  if (MarkerNameAt(before_index) != "base-before-2") Fail("pre-takeover block moved or lost");
  const uint64_t chunks_after = strata::base_internal::SessionBuffer().GetState().chunks_taken;
  if (chunks_after > chunks_before + 1) Fail("the takeover took new chunks: data was copied");

  STRATA_MARKER_TEXT("base-after-1", kOther, {}, "base API after takeover");
  add_full_marker("full-after-1", "full API after takeover");
  Spin(0.6);
  STRATA_MARKER_TEXT("base-after-2", kOther, {}, "base API at the end");
  add_full_marker("full-after-2", "full API at the end");
  // Some allocations for the memory counter.
  std::vector<std::vector<char>> blocks;
  for (int i = 0; i < 200; ++i) blocks.emplace_back(64 * 1024, 'm');
  Spin(0.1);
  blocks.clear();
  Spin(0.05);

  const char* path = std::getenv("TAKEOVER_PROFILE");
  std::string error;
  if (path && !strata::ProfilerSaveProfile(path, &error)) Fail(error.c_str());

#ifdef TAKEOVER_LINKED
  // Stop and restart the full tier: a fresh session, saved at exit by STRATA_SHUTDOWN.
  strata::full::StopFull();
  if (strata::ProfilerIsActive()) Fail("StopFull left the session running");
  strata::full::StartFull();
  if (!strata::ProfilerIsActive()) Fail("StartFull did not restart a session");
  STRATA_MARKER_TEXT("restarted", kOther, {}, "after StopFull + StartFull");
  Spin(0.4);
#endif
  g_stop = true;
  busy.join();
  std::printf("takeover_program: ok\n");
  return 0;
}
