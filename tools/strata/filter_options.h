// The filter options of `strata summary`, `report`, `convert` and `view` (--pid, --tid,
// --process, --thread, --range; profile_filter.h) as CLI11 options, and loading a profile
// narrowed by them.
//
// Exit statuses (docs/cli.md): a file that cannot be read or is not a profile is 1; a filter
// that selects nothing (no such pid, thread name or marker) is a usage error, 2. Messages go
// to stderr as "strata COMMAND: ...", with profile text made terminal-safe.
//
// Thread safety: none needed (the command line's main thread).
#ifndef STRATA_TOOLS_STRATA_FILTER_OPTIONS_H_
#define STRATA_TOOLS_STRATA_FILTER_OPTIONS_H_

#include <string>

#include "CLI/CLI.hpp"
#include "tools/strata/call_tree.h"
#include "tools/strata/profile_filter.h"
#include "tools/strata/profile_model.h"

namespace strata {
namespace cli {

// Adds the five options to `command`, filling `filter` when parsed (bad numbers and ranges
// are CLI11 usage errors naming the accepted forms).
void AddFilterOptions(CLI::App* command, ProfileFilter* filter);

// Adds the call tree's options (--depth, --min-percent, --no-fold, --width) to `command`.
// The width defaults to the terminal's columns when standard output is one, else 80.
void AddCallTreeOptions(CLI::App* command, CallTreeOptions* options);

// Loads `path` into *profile, narrowed by `filter`. 0 on success, with *note the summary's
// "Filtered: ..." line ("" without filters); else 1 or 2 as above, message printed.
int LoadFilteredProfile(const std::string& command, const std::string& path, const ProfileFilter& filter,
                        Profile* profile, std::string* note);

// The Gecko document at `path` narrowed by `filter`, as JSON text (for `strata view`); same
// statuses and note.
int FilteredProfileJson(const std::string& command, const std::string& path, const ProfileFilter& filter,
                        std::string* json, std::string* note);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_FILTER_OPTIONS_H_
