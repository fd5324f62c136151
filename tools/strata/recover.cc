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
// process that ended without saving.
size_t RecoverUnsavedProcesses(const std::string& directory, const std::map<pid_t, int>& reaped,
                               bool symbolicate, bool quiet) {
  std::vector<std::pair<pid_t, std::string>> files;
  if (DIR* dir = opendir(directory.c_str())) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.rfind("strata-", 0) == 0 && name.size() > 7 &&
          name.compare(name.size() - 7, 7, ".flight") == 0) {
        files.emplace_back(static_cast<pid_t>(std::atol(name.c_str() + 7)), directory + "/" + name);
      }
    }
    closedir(dir);
  }
  size_t recovered = 0;
  for (const auto& [pid, path] : files) {
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
    recovery.crashed = true;
    const auto status = reaped.find(pid);
    if (status != reaped.end() && WIFEXITED(status->second)) {
      // It exited without saving (_exit, as shells do): not a crash. As without the flight
      // recorder, its profile is missing (the merge's note says so for the command itself).
      unlink(path.c_str());
      continue;
    }
    if (status != reaped.end() && WIFSIGNALED(status->second)) {
      recovery.end_reason = "killed by " + SignalName(WTERMSIG(status->second)) +
                            (WCOREDUMP(status->second) ? " (core dumped)" : "");
    } else {
      recovery.end_reason = "ended without saving its profile (crashed or killed)";
    }
    std::string summary, error;
    if (RecoverFlightFile(path, json, recovery, &summary, &error)) {
      ++recovered;
      if (!quiet) {
        std::fprintf(stderr, "strata record: process %d %s: recovered %s\n", pid,
                     recovery.end_reason.c_str(), summary.c_str());
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
