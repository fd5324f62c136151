// gecko_profile_check: validates Gecko profile files (format 36) against
// shared/design/gecko-format.md, catching what the front-end's importer accepts silently.
//
//   gecko_profile_check [--strict] [--allow-js] [--quiet] [--max-per-code=N] FILE...
//
// Prints every error and warning with its JSON path and code, then one summary line per
// file. Exit status: 0 all files valid (warnings allowed unless --strict), 1 some file has
// errors, 2 usage error or unreadable file.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/format/gecko_profile_checker.h"

namespace {

void Usage() {
  fprintf(stderr,
          "usage: gecko_profile_check [--strict] [--allow-js] [--quiet] [--max-per-code=N] "
          "FILE...\n"
          "  --strict        warnings count as errors\n"
          "  --allow-js      accept JavaScript-looking frame locations (JS profiles)\n"
          "  --quiet         print only the summary lines\n");
}

}  // namespace

int main(int argc, char** argv) {
  strata::CheckOptions options;
  bool strict = false;
  bool quiet = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--strict") {
      strict = true;
    } else if (arg == "--allow-js") {
      options.allow_js_looking_locations = true;
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (arg.rfind("--max-per-code=", 0) == 0) {
      options.max_messages_per_code = strtoul(arg.c_str() + 15, nullptr, 10);
    } else if (arg == "-h" || arg == "--help") {
      Usage();
      return 0;
    } else if (!arg.empty() && arg[0] == '-') {
      Usage();
      return 2;
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) {
    Usage();
    return 2;
  }
  int status = 0;
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      fprintf(stderr, "%s: cannot read: %s\n", file.c_str(), strerror(errno));
      status = 2;
      continue;
    }
    std::stringstream text;
    text << in.rdbuf();
    strata::CheckReport report = strata::CheckGeckoProfile(text.str(), options);
    if (!quiet) {
      for (const auto& m : report.errors) printf("%s: error: %s\n", file.c_str(), m.text.c_str());
      for (const auto& m : report.warnings) {
        printf("%s: warning: %s\n", file.c_str(), m.text.c_str());
      }
    }
    bool failed = !report.ok() || (strict && !report.warnings.empty());
    printf("%s: %s: %zu process(es), %zu thread(s), %zu sample(s), %zu marker(s), %zu frame(s); "
           "%zu error(s), %zu warning(s)\n",
           file.c_str(), failed ? "INVALID" : "ok", report.processes, report.threads,
           report.samples, report.markers, report.frames, report.errors.size(),
           report.warnings.size());
    if (failed && status == 0) status = 1;
  }
  return status;
}
