#include "tools/strata/recover.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "shared/flight/flight_reader.h"
#include "shared/json/atomic_file.h"
#include "tools/strata/terminal_text.h"

namespace strata {
namespace cli {
namespace {

std::string SignalName(int signal_number) {
  const char* name = sigabbrev_np(signal_number);
  return name != nullptr ? std::string("SIG") + name : "signal " + std::to_string(signal_number);
}

}  // namespace


bool RecoverFlightFile(const std::string& flight_path, const std::string& json_path,
                       const flight::RecoveryOptions& options, std::string* summary,
                       std::string* error) {
  flight::FlightContents contents;
  if (!flight::ReadFlightFile(flight_path, &contents, error)) return false;
  AtomicJsonFile file(json_path);
  if (!file.ok()) {
    *error = file.error();
    return false;
  }
  size_t samples = 0;
  if (!flight::WriteRecoveredProfile(contents, options, file.writer(), error, &samples)) {
    *error = flight_path + ": " + *error;
    return false;
  }
  if (!file.Commit()) {
    *error = file.error();
    return false;
  }
  char text[256];
  std::snprintf(text, sizeof(text), "%zu samples, %zu entries from %zu chunk(s); ends with \"%s\"",
                samples, contents.entries.size(), contents.chunks_read,
                flight::EndMarkerName(contents, options).c_str());
  *summary = text;
  for (const std::string& problem : contents.problems) *summary += "; " + problem;
  return true;
}

int RunRecover(const RecoverOptions& options) {
  std::string output = options.output;
  if (output.empty()) {
    output = options.input;
    const std::string suffix = ".flight";
    if (output.size() > suffix.size() &&
        output.compare(output.size() - suffix.size(), suffix.size(), suffix) == 0) {
      output.resize(output.size() - suffix.size());
    }
    output += ".json";
  }
  flight::RecoveryOptions recovery;
  recovery.symbolicate = !options.raw;
  recovery.end_reason = options.reason;
  recovery.crashed = !options.reason.empty();
  std::string summary, error;
  if (!RecoverFlightFile(options.input, output, recovery, &summary, &error)) {
    std::fprintf(stderr, "strata recover: %s\n", TerminalSafe(error).c_str());
    return 1;
  }
  if (!options.quiet) {
    std::fprintf(stderr, "strata recover: wrote %s: %s\n", output.c_str(), TerminalSafe(summary).c_str());
  }
  return 0;
}

// (recover.h) A process that saved its profile removed its own file: every file left is a
// process that ended without saving. One pid may have left several (an exec, or a stop and a
// new start): only its newest session's file is the image that ended.
size_t RecoverUnsavedProcesses(const std::string& directory, const std::map<pid_t, int>& reaped,
                               bool symbolicate, bool quiet) {
  struct Newest {
    long long start_ns = -1;
    std::string path;
  };
  std::map<pid_t, Newest> newest;
  std::vector<std::string> older;
  if (DIR* dir = opendir(directory.c_str())) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.rfind("strata-", 0) != 0 || name.size() <= 7 + 7 ||
          name.compare(name.size() - 7, 7, ".flight") != 0) {
        continue;
      }
      // strata-<pid>-<session start ns>.flight
      char* after_pid = nullptr;
      const pid_t pid = static_cast<pid_t>(std::strtol(name.c_str() + 7, &after_pid, 10));
      const long long start_ns = *after_pid == '-' ? std::strtoll(after_pid + 1, nullptr, 10) : 0;
      Newest& n = newest[pid];
      std::string path = directory + "/" + name;
      if (start_ns > n.start_ns) {
        if (!n.path.empty()) older.push_back(std::move(n.path));
        n = {start_ns, std::move(path)};
      } else {
        older.push_back(std::move(path));
      }
    }
    closedir(dir);
  }
  for (const std::string& path : older) unlink(path.c_str());  // Images replaced by an exec.
  size_t recovered = 0;
  for (const auto& [pid, file] : newest) {
    const std::string& path = file.path;
    const std::string json = directory + "/" + std::to_string(pid) + ".json";
    struct stat st {};
    // Saved after all (the record hook saves on SIGINT/SIGTERM/SIGHUP, then dies by the
    // signal): nothing to recover.
    if (stat(json.c_str(), &st) == 0) {
      unlink(path.c_str());
      continue;
    }
    flight::RecoveryOptions recovery;
    recovery.symbolicate = symbolicate;
    const auto status = reaped.find(pid);
    if (status != reaped.end() && WIFEXITED(status->second)) {
      // It exited without saving (_exit, as shells do): not a crash. As without the flight
      // recorder, its profile is missing (the merge's note says so for the command itself).
      unlink(path.c_str());
      continue;
    }
    std::string reason = "ended without saving its profile";
    if (status != reaped.end() && WIFSIGNALED(status->second)) {
      recovery.crashed = true;
      recovery.end_reason = "killed by " + SignalName(WTERMSIG(status->second)) +
                            (WCOREDUMP(status->second) ? " (core dumped)" : "");
      reason = recovery.end_reason;
    }
    // Else the status is unknown (reaped by its own parent): a file without a clean end is
    // marked "Process crashed" by the recovery, one whose session ended cleanly
    // (ProfilerStop) "Recording ended".
    std::string summary, error;
    if (RecoverFlightFile(path, json, recovery, &summary, &error)) {
      ++recovered;
      if (!quiet) {
        std::fprintf(stderr, "strata record: process %d %s: recovered %s\n", pid, reason.c_str(),
                     summary.c_str());
      }
    } else if (!quiet) {
      std::fprintf(stderr, "strata record: process %d saved no profile and its flight recorder file could not "
                   "be recovered: %s\n", pid, error.c_str());
    }
    unlink(path.c_str());
  }
  return recovered;
}

}  // namespace cli
}  // namespace strata
