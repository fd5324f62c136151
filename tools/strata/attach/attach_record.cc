// See attach_record.h.
#include "tools/strata/attach/attach_record.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "rapidjson/document.h"
#include "shared/symbols/dwarf_symbolizer.h"
#include "tools/strata/attach/injector.h"
#include "tools/strata/attach/join_session.h"
#include "tools/strata/profile_io.h"
#include "tools/strata/profile_merge.h"
#include "tools/strata/profile_symbolication.h"
#include "tools/strata/recover.h"

namespace strata {
namespace cli {
namespace {

using Clock = std::chrono::steady_clock;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// base/internal/attach/attach.cc's AttachState.
constexpr int kAttachRunning = 2;
constexpr int kAttachSaved = 3;
constexpr int kAttachAbandoned = 4;
// strata_attach_start's kAttachBusy.
constexpr int kAttachBusy = 1;

struct Attached {
  attach::TargetFacts facts;
  attach::InjectionResult injection;
  std::string name;
  int directory_fd = -1;        // O_PATH of the private directory (valid after the process ends).
  int parent_fd = -1;           // O_PATH of the process's /tmp, to remove the directory from.
  std::string host_directory;   // Through /proc/PID/root.
  std::set<pid_t> known_threads;  // Listed, or seen once the session ran (Strata's own included).
  size_t threads_added = 0;        // Started after the attach, handed to the worker.
  bool stop_sent = false;
  bool finished = false;        // Saved, abandoned, or gone.
  // A session already running in the process, joined instead of loading Strata twice.
  std::unique_ptr<attach::RunningSession> joined;
};

std::string FdPath(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

std::string ProcessName(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool CopyFile(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary);
  out << in.rdbuf();
  return in && out.good();
}

// Empties and removes the private directory, through descriptors opened while the process ran
// (its /proc/PID/root is gone once it has exited), and closes them.
void RemoveDirectory(Attached* target) {
  if (target->directory_fd >= 0) {
    const std::string path = FdPath(target->directory_fd);
    if (DIR* dir = opendir(path.c_str())) {
      while (dirent* entry = readdir(dir)) {
        const std::string name = entry->d_name;
        if (name != "." && name != "..") unlink((path + "/" + name).c_str());
      }
      closedir(dir);
    }
    close(target->directory_fd);
    target->directory_fd = -1;
  }
  if (target->parent_fd >= 0) {
    const std::string name = target->host_directory.substr(target->host_directory.rfind('/') + 1);
    unlinkat(target->parent_fd, name.c_str(), AT_REMOVEDIR);
    close(target->parent_fd);
    target->parent_fd = -1;
  }
}

// The settings strata_attach_start reads (base/internal/attach/attach.cc): what `strata record`
// puts in the environment of a command it runs.
std::string SessionSettings(const RecordOptions& options, const std::string& directory) {
  std::string settings = "STRATA_SHUTDOWN=" + directory + "/%p.json\n";
  if (options.flight_recorder) settings += "STRATA_FLIGHT_RECORDER=" + directory + "\n";
  if (options.interval_ms > 0) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", options.interval_ms);
    settings += std::string("STRATA_STARTUP_INTERVAL=") + text + "\n";
  }
  std::string features = options.features;
  if (options.symbolicate) features += std::string(features.empty() ? "" : ",") + "rawaddresses";
  if (!features.empty()) settings += "STRATA_STARTUP_FEATURES=" + features + "\n";
  if (!options.filters.empty()) settings += "STRATA_STARTUP_FILTERS=" + options.filters + "\n";
  if (options.buffer_mb > 0) settings += "STRATA_STARTUP_BUFFER_MB=" + std::to_string(options.buffer_mb) + "\n";
  if (const char* logging = std::getenv("STRATA_LOGGING")) settings += std::string("STRATA_LOGGING=") + logging + "\n";
  settings += "STRATA_ATTACH_WATCHER=" + std::to_string(getpid()) + "\n";
  return settings;
}

// Loads, starts: "" or the refusal/failure message.
std::string Start(Attached* target, const std::string& base, const RecordOptions& options) {
  const pid_t pid = target->facts.pid;
  const std::string root = "/proc/" + std::to_string(pid) + "/root";
  std::string host_directory = root + "/tmp/strata-attach-" + std::to_string(pid) + ".XXXXXX";
  if (mkdtemp(&host_directory[0]) == nullptr) {
    return "cannot create a directory in the /tmp of process " + std::to_string(pid) + ": " + std::strerror(errno);
  }
  target->host_directory = host_directory;
  target->parent_fd = open((root + "/tmp").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  const std::string directory = host_directory.substr(root.size());  // As the process sees it.
  // The process writes its profile there as its own user.
  if (chown(host_directory.c_str(), target->facts.uid, target->facts.gid) != 0) {
    rmdir(host_directory.c_str());
    return "cannot give " + directory + " to the user of process " + std::to_string(pid) + ": " + std::strerror(errno);
  }
  target->directory_fd = open(host_directory.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  // The library as the process sees it: the same path when its mount namespace shows the same
  // file there, else a copy in the private directory.
  std::string library = base;
  if (!SameFile(root + base, base)) {
    library = directory + "/libstrata_base.so";
    if (!CopyFile(base, host_directory + "/libstrata_base.so")) return "cannot copy libstrata_base.so for the process";
  }
  target->injection = attach::InjectAndStart(target->facts, library, base, SessionSettings(options, directory));
  if (!target->injection.ok) return target->injection.error;
  if (target->injection.start_result == kAttachBusy) {
    target->injection.refused = true;
    return "process " + std::to_string(pid) +
           " is already profiled by Strata (preloaded with STRATA_STARTUP=1 or STRATA_SIGNAL, or by the API) in a "
           "session without a flight recorder file, which is all strata can read from outside: stop that session "
           "first (its STRATA_SIGNAL, or the program's own ProfilerStop), or start the program with "
           "STRATA_FLIGHT_RECORDER=DIR so that `strata record -p` can join its session";
  }
  if (target->injection.start_result != 0) {
    return "the attach session could not start in process " + std::to_string(pid) + " (code " +
           std::to_string(target->injection.start_result) + ")";
  }
  return "";
}

// What an attached session's profile says of kernel-mode CPU (profilingLog.<pid>.kernelCpu;
// docs/attach.md, "What an attached profile has"). The library writes the preloaded
// session's text (wrapped calls charge their CPU to their own stack), which is not true of an
// attached one: replaced here, and summed up in the "attached" note that `strata summary`
// prints.
constexpr char kAttachedKernelCpu[] =
    "not sampled: attached, the wrappers that charge a system call's CPU to its own stack in a "
    "preloaded session are not interposed (a library loaded with dlopen comes after libc), and "
    "the perf task-clock event signals user mode only (a signal sent inside a system call would "
    "cut the program's waits short); a thread's kernel-mode CPU is in the CPU delta of its next "
    "user-mode sample, so a thread busy in system calls gets fewer samples than one per interval "
    "of its CPU: about one per interval of its user-mode CPU";
constexpr char kAttachedKernelCpuShort[] =
    "; kernel-mode CPU not sampled (a thread busy in system calls gets about one sample per "
    "interval of its user-mode CPU: kernelCpu)";

void NoteAttachedKernelCpu(rapidjson::Document* document) {
  if (!document->IsObject() || !document->HasMember("profilingLog")) return;
  rapidjson::Value& log = (*document)["profilingLog"];
  if (!log.IsObject()) return;
  auto& allocator = document->GetAllocator();
  for (auto& process : log.GetObject()) {
    rapidjson::Value& entry = process.value;
    if (!entry.IsObject() || !entry.HasMember("attached") || !entry["attached"].IsString()) continue;
    const std::string attached = std::string(entry["attached"].GetString()) + kAttachedKernelCpuShort;
    entry["attached"].SetString(attached.c_str(), static_cast<rapidjson::SizeType>(attached.size()), allocator);
    if (entry.HasMember("kernelCpu")) {
      entry["kernelCpu"].SetString(rapidjson::StringRef(kAttachedKernelCpu));
    } else {
      entry.AddMember("kernelCpu", rapidjson::StringRef(kAttachedKernelCpu), allocator);
    }
  }
}

// Threads the process started since the last look (not Strata's, named Strata*): their
// pointers read as at the attach, and handed to the worker once it took the previous ones.
void AdoptNewThreads(Attached* target) {
  const pid_t pid = target->facts.pid;
  std::vector<pid_t> fresh;
  for (pid_t tid : attach::ThreadsOf(pid)) {
    if (target->known_threads.count(tid) != 0) continue;
    std::ifstream comm("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("Strata", 0) == 0) {
      target->known_threads.insert(tid);
      continue;
    }
    fresh.push_back(tid);
    if (fresh.size() == attach::kMailboxThreads) break;
  }
  if (fresh.empty()) return;
  int32_t full = 1;
  if (!attach::ReadTargetWord(pid, target->injection.mailbox_address, &full) || full != 0) return;
  // From glibc's lists, no thread stopped; those not found there stopped once each.
  const std::map<pid_t, uint64_t> from_memory = attach::GlibcThreadPointers(pid, fresh, target->injection.thread_lists);
  std::vector<pid_t> not_found;
  for (pid_t tid : fresh) {
    if (from_memory.count(tid) == 0) not_found.push_back(tid);
  }
  double longest_stop_ms = target->injection.longest_thread_stop_ms;
  bool denied = false;
  std::vector<attach::ThreadPointer> pointers = attach::ReadThreadPointers(pid, not_found, &longest_stop_ms, &denied);
  for (const auto& [tid, pointer] : from_memory) pointers.push_back({tid, pointer});
  if (attach::OfferNewThreads(pid, target->injection.mailbox_address, pointers)) {
    target->threads_added += pointers.size();
  }
  for (pid_t tid : fresh) target->known_threads.insert(tid);
}

}  // namespace

int AttachRecord(const std::string& pid_list, const RecordOptions& options) {
  if (!options.command.empty()) {
    std::fprintf(stderr, "strata record: give -p PID or a command (-- CMD), not both\n");
    return 2;
  }
  std::vector<pid_t> pids;
  {
    size_t start = 0;
    while (start <= pid_list.size()) {
      size_t comma = pid_list.find(',', start);
      if (comma == std::string::npos) comma = pid_list.size();
      const std::string item = pid_list.substr(start, comma - start);
      char* end = nullptr;
      const long pid = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || pid <= 0 || pid > 4194304) {
        std::fprintf(stderr, "strata record: -p '%s': '%s' is not a process id (give PID[,PID...])\n",
                     pid_list.c_str(), item.c_str());
        return 2;
      }
      if (pid == getpid()) {
        std::fprintf(stderr, "strata record: -p %ld is strata itself\n", pid);
        return 2;
      }
      pids.push_back(static_cast<pid_t>(pid));
      start = comma + 1;
    }
  }
  const std::string base = FindBaseLibrary(options.base_library);
  if (base.empty()) {
    std::fprintf(stderr, "strata record: cannot find libstrata_base.so (give it with --lib PATH or STRATA_BASE_LIB)\n");
    return 2;
  }
  {
    OutputFile probe(options.output, false);
    if (!probe.ok()) {
      std::fprintf(stderr, "strata record: %s\n", probe.error().c_str());
      return 2;
    }
  }
  // Ctrl-C and friends are ours to read (sigtimedwait): never the death of strata while a
  // thread of a process is stopped in our hands.
  sigset_t waited, previous;
  sigemptyset(&waited);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&waited, s);
  sigprocmask(SIG_BLOCK, &waited, &previous);

  const Clock::time_point command_start = Clock::now();
  // Until every session runs (attach::RealtimeWindow): the attach's own work is short.
  auto realtime = std::make_unique<attach::RealtimeWindow>();
  std::vector<std::unique_ptr<Attached>> targets;
  int failure = 0;
  for (pid_t pid : pids) {
    auto target = std::make_unique<Attached>();
    target->name = ProcessName(pid);
    if (const std::string why = attach::CheckTarget(pid, &target->facts); !why.empty()) {
      std::fprintf(stderr, "strata record: cannot attach to process %d: %s\n", pid, why.c_str());
      failure = 1;
      break;
    }
    if (target->facts.has_strata) {
      // Strata is in the process already: join its running session when it has one.
      auto session = std::make_unique<attach::RunningSession>();
      std::string refusal;
      if (session->Open(pid, &refusal)) {
        if (!options.quiet) {
          std::fprintf(stderr, "strata record: process %d (%s) is already profiled by Strata: joined its session "
                       "(read from its flight recorder file %s when the recording ends; nothing loaded)\n",
                       pid, target->name.c_str(), session->path().c_str());
        }
        target->joined = std::move(session);
        targets.push_back(std::move(target));
        continue;
      }
      if (!refusal.empty()) {
        std::fprintf(stderr, "strata record: cannot attach to process %d: %s\n", pid, refusal.c_str());
        failure = 1;
        break;
      }
    }
    std::vector<pid_t> threads_before = attach::ThreadsOf(pid);
    const std::string why = Start(target.get(), base, options);
    const double loaded_ms = MillisecondsSince(command_start);
    if (!why.empty()) {
      std::fprintf(stderr, "strata record: cannot attach to process %d: %s\n", pid, why.c_str());
      RemoveDirectory(target.get());
      failure = 1;
      break;
    }
    // The session runs once the worker says so; meanwhile the worker runs at real-time
    // priority when strata does (attach::WorkerBoost).
    int32_t state = 0;
    attach::WorkerBoost boost(std::set<pid_t>(threads_before.begin(), threads_before.end()));
    if (realtime->active()) boost.Raise(pid, target->injection.worker_tid);
    while (MillisecondsSince(command_start) < 10000 &&
           attach::ReadTargetWord(pid, target->injection.state_address, &state) && state < kAttachRunning) {
      int32_t worker = 0;
      if (realtime->active() && target->injection.worker_tid_address != 0 &&
          attach::ReadTargetWord(pid, target->injection.worker_tid_address, &worker) && worker > 0) {
        boost.Raise(pid, worker);
      }
      usleep(200);  // A word in the process's private memory: read, it cannot be waited on.
    }
    boost.Restore();
    if (!options.quiet) {
      std::fprintf(stderr,
                   "strata record: attached to process %d (%s): %zu threads (listed in %.1f ms, %zu stopped for it, "
                   "longest stop %.3f ms); borrowed thread %d after %.1f ms%s, stopped %.2f ms; loaded %.1f ms and "
                   "sampling "
                   "%.1f ms after the command (the borrowed thread's stop: %.2f ms from its report; %s; the "
                   "listing's longest from its report %.3f ms)\n",
                   pid, target->name.c_str(), target->injection.threads_listed, target->injection.list_ms,
                   target->injection.threads_stopped_to_list, target->injection.longest_thread_stop_ms,
                   target->injection.borrowed_tid, target->injection.borrow_wait_ms,
                   target->injection.realtime ? " (strata at real-time priority)" : "", target->injection.borrowed_stop_ms, loaded_ms,
                   MillisecondsSince(command_start), target->injection.borrowed_held_ms,
                   target->injection.borrowed_phases.c_str(), target->injection.longest_thread_held_ms);
    }
    // Every thread now (the program's, and Strata's worker and sampler): only later ones are new.
    for (pid_t tid : attach::ThreadsOf(pid)) target->known_threads.insert(tid);
    targets.push_back(std::move(target));
  }

  realtime.reset();
  // Wait: a signal, --duration, or every process gone.
  if (failure == 0) {
    if (!options.quiet) {
      std::fprintf(stderr, "strata record: recording%s; Ctrl-C stops and saves (the processes keep running)\n",
                   options.duration_seconds > 0 ? (" for " + std::to_string(options.duration_seconds) + " s").c_str() : "");
    }
    const Clock::time_point recording_start = Clock::now();
    for (;;) {
      bool all_gone = true;
      for (const auto& target : targets) all_gone = all_gone && ProcessGone(target->facts.pid);
      if (all_gone) break;
      if (options.duration_seconds > 0 && MillisecondsSince(recording_start) >= options.duration_seconds * 1000) break;
      for (const auto& target : targets) {
        if (!target->joined) AdoptNewThreads(target.get());
      }
      siginfo_t info;
      const struct timespec step = {0, 50 * 1000 * 1000};
      const int signal_number = sigtimedwait(&waited, &info, &step);
      if (signal_number > 0) {
        if (!options.quiet) std::fprintf(stderr, "\nstrata record: stopping; the processes keep running\n");
        break;
      }
    }
  }
  // Stop and save.
  for (const auto& target : targets) {
    const pid_t pid = target->facts.pid;
    if (!target->joined && !ProcessGone(pid)) {
      target->stop_sent = attach::WriteTargetWord(pid, target->injection.stop_address, 1);
    }
  }
  const Clock::time_point stop_start = Clock::now();
  for (const auto& target : targets) {
    const pid_t pid = target->facts.pid;
    if (!options.quiet && target->threads_added > 0) {
      std::fprintf(stderr, "strata record: process %d: %zu thread(s) started while attached were sampled from when "
                   "they were seen\n", pid, target->threads_added);
    }
    while (!target->joined) {
      int32_t state = 0;
      if (ProcessGone(pid)) {
        if (!options.quiet) std::fprintf(stderr, "strata record: process %d (%s) has ended\n", pid, target->name.c_str());
        break;
      }
      if (attach::ReadTargetWord(pid, target->injection.state_address, &state) &&
          (state == kAttachSaved || state == kAttachAbandoned)) {
        break;
      }
      if (MillisecondsSince(stop_start) > 120000) {
        std::fprintf(stderr, "strata record: process %d did not save within 120 s\n", pid);
        break;
      }
      usleep(5000);
    }
  }

  // Gather, merge, symbolicate, write.
  rapidjson::MemoryPoolAllocator<> allocator;
  std::vector<rapidjson::Document> documents;
  for (const auto& target : targets) {
    if (target->joined) {
      rapidjson::Document document(&allocator);
      std::string error;
      if (target->joined->ReadWindow(options.symbolicate, &document, &error)) {
        documents.push_back(std::move(document));
      } else {
        std::fprintf(stderr, "strata record: skipping the joined session of process %d: %s\n", target->facts.pid,
                     error.c_str());
      }
      continue;
    }
    const std::string directory = FdPath(target->directory_fd);
    RecoverUnsavedProcesses(directory, {}, !options.symbolicate, options.quiet);
    if (DIR* dir = opendir(directory.c_str())) {
      while (dirent* entry = readdir(dir)) {
        const std::string name = entry->d_name;
        if (name.size() <= 5 || name.compare(name.size() - 5, 5, ".json") != 0 || name[0] == '.') continue;
        rapidjson::Document document(&allocator);
        std::string error;
        if (LoadProfileDocument(directory + "/" + name, &document, &error)) {
          NoteAttachedKernelCpu(&document);
          documents.push_back(std::move(document));
        } else {
          std::fprintf(stderr, "strata record: skipping the profile of process %d: %s\n", target->facts.pid,
                       error.c_str());
        }
      }
      closedir(dir);
    }
    RemoveDirectory(target.get());
  }
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  if (failure != 0 && documents.empty()) return failure;
  if (documents.empty()) {
    std::fprintf(stderr, "strata record: error: no process saved a profile, nothing written to %s\n",
                 options.output.c_str());
    return 1;
  }
  rapidjson::Document root = std::move(documents[0]);
  std::vector<rapidjson::Document> children;
  for (size_t i = 1; i < documents.size(); ++i) children.push_back(std::move(documents[i]));
  MergeProfiles(&root, &children);
  if (options.symbolicate && HasAddressesToSymbolicate(root)) {
    auto cache = std::make_shared<DwarfModuleCache>();
    SymbolicateStats stats;
    SymbolicateProfile(&root, [&](std::vector<SharedLibrary> libs) -> std::unique_ptr<Symbolizer> {
      return std::make_unique<DwarfSymbolizer>(std::move(libs), cache);
    }, &stats);
  }
  uint64_t bytes = 0;
  std::string error;
  if (!WriteJsonAtomically(options.output, root, &bytes, &error)) {
    std::fprintf(stderr, "strata record: %s\n", error.c_str());
    return 1;
  }
  if (!options.quiet) {
    std::fprintf(stderr, "strata record: saved %s: %zu process(es), %zu thread(s), %zu samples, %s\n",
                 options.output.c_str(), documents.size(), CountThreads(root), CountSamples(root),
                 HumanBytes(bytes).c_str());
    std::fprintf(stderr, "strata record: next: strata view %s   |   strata summary %s\n", options.output.c_str(),
                 options.output.c_str());
  }
  return failure;
}

}  // namespace cli
}  // namespace strata
