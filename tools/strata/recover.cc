#include "tools/strata/recover.h"

#include <cstdio>

#include "shared/flight/flight_reader.h"
#include "shared/json/atomic_file.h"
#include "tools/strata/terminal_text.h"

namespace strata {
namespace cli {

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

}  // namespace cli
}  // namespace strata
