#include "tools/strata/filter_options.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>

#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "tools/strata/profile_io.h"
#include "tools/strata/terminal_text.h"

namespace strata {
namespace cli {
namespace {

// Loads the document and its model; 0, or 1 with the message printed.
int LoadBoth(const std::string& command, const std::string& path, rapidjson::Document* document, Profile* profile) {
  std::string error;
  if (!LoadProfileDocument(path, document, &error)) {
    std::fprintf(stderr, "strata %s: %s\n", command.c_str(), TerminalSafe(error).c_str());
    return 1;
  }
  if (!LoadProfileModel(*document, profile, &error)) {
    std::fprintf(stderr, "strata %s: %s: %s\n", command.c_str(), TerminalSafe(path).c_str(),
                 TerminalSafe(error).c_str());
    return 1;
  }
  return 0;
}

// Resolves the filter; 0, or 2 with the message printed.
int Select(const std::string& command, const std::string& path, const Profile& profile, const ProfileFilter& filter,
           FilterSelection* selection) {
  std::string error;
  if (!SelectWithFilter(profile, filter, selection, &error)) {
    // `error` quotes profile text through TerminalSafe already.
    std::fprintf(stderr, "strata %s: %s: %s\n", command.c_str(), TerminalSafe(path).c_str(), error.c_str());
    return 2;
  }
  return 0;
}

// CLI11 check for --pid and --tid values: whole numbers from 1.
std::string CheckId(const std::string& value) {
  if (!value.empty() && value.size() <= 10 && value.find_first_not_of("0123456789") == std::string::npos &&
      std::stoll(value) > 0) {
    return "";
  }
  return "'" + TerminalSafe(value) + "' is not a process or thread id (a whole number from 1)";
}

}  // namespace

void AddFilterOptions(CLI::App* command, ProfileFilter* filter) {
  command->add_option("--pid", filter->pids, "Only these processes (comma-separated pids)")
      ->delimiter(',')
      ->check(CLI::Validator(CheckId, "ID"))
      ->group("Filters");
  command->add_option("--tid", filter->tids, "Only these threads (comma-separated tids)")
      ->delimiter(',')
      ->check(CLI::Validator(CheckId, "ID"))
      ->group("Filters");
  command->add_option("--process", filter->process_globs,
                      "Only processes whose name matches this glob (repeatable: any of them)")
      ->group("Filters");
  command->add_option("--thread", filter->thread_globs,
                      "Only threads whose name (as summary shows it) matches this glob (repeatable)")
      ->group("Filters");
  command->add_option("--range", filter->range_text,
                      "START,END in ms from the profile's start (either may be left out), or a marker name: "
                      "only the samples in that time (that marker's intervals)")
      ->check(CLI::Validator(CheckRangeText, "START,END|MARKER"))
      ->group("Filters");
}

void AddCallTreeOptions(CLI::App* command, CallTreeOptions* options) {
  winsize size{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col >= 60) {
    options->width = size.ws_col;
  }
  command->add_option("--depth", options->max_depth, "Call tree: levels shown below each thread (0: all)")
      ->check(CLI::Range(size_t{0}, size_t{10000}))
      ->group("Call tree");
  command->add_option("--min-percent", options->min_percent,
                      "Call tree: nodes under this % of the whole are summed into one line (0-100)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0))
      ->group("Call tree");
  command->add_flag("--no-fold", [options](int64_t) { options->fold = false; },
                    "Call tree: one line per function, chains of single callees not folded into 'a > b'")
      ->group("Call tree");
  command->add_option("--width", options->width,
                      "Call tree: columns every line fits (60-1000; default the terminal's, 80 in a pipe)")
      ->check(CLI::Range(size_t{60}, size_t{1000}))
      ->group("Call tree");
}

int LoadFilteredProfile(const std::string& command, const std::string& path, const ProfileFilter& filter,
                        Profile* profile, std::string* note) {
  note->clear();
  rapidjson::Document document;
  Profile whole;
  if (const int status = LoadBoth(command, path, &document, &whole); status != 0) return status;
  document.SetNull();
  if (filter.empty()) {
    *profile = std::move(whole);
    return 0;
  }
  FilterSelection selection;
  if (const int status = Select(command, path, whole, filter, &selection); status != 0) return status;
  *profile = ApplySelection(whole, selection);
  *note = FilterNote(whole, *profile, selection);
  return 0;
}

int FilteredProfileJson(const std::string& command, const std::string& path, const ProfileFilter& filter,
                        std::string* json, std::string* note) {
  note->clear();
  rapidjson::Document document;
  Profile whole;
  if (const int status = LoadBoth(command, path, &document, &whole); status != 0) return status;
  FilterSelection selection;
  if (const int status = Select(command, path, whole, filter, &selection); status != 0) return status;
  const Profile narrowed = ApplySelection(whole, selection);
  *note = FilterNote(whole, narrowed, selection);
  ApplySelectionToDocument(whole, selection, &document);
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  document.Accept(writer);
  json->assign(buffer.GetString(), buffer.GetSize());
  return 0;
}

}  // namespace cli
}  // namespace strata
