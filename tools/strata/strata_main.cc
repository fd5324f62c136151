// The `strata` command line. Commands grow with issue 7; for now:
//   strata summary FILE [--top N]     a terminal summary of a profile
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "tools/strata/profile_summary.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: strata summary FILE [--top N]\n"
               "  summary   threads, samples, CPU, top functions and markers of a profile\n");
  return 2;
}

bool ReadFile(const char* path, std::string* contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *contents = s.str();
  return true;
}

int Summary(int argc, char** argv) {
  if (argc < 1) return Usage();
  size_t top = 15;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--top") == 0) top = static_cast<size_t>(std::atoi(argv[i + 1]));
  }
  std::string json;
  if (!ReadFile(argv[0], &json)) {
    std::fprintf(stderr, "strata: cannot read %s: %s\n", argv[0], std::strerror(errno));
    return 1;
  }
  std::string error;
  const std::string text = strata::tools::SummarizeProfile(json, top, &error);
  if (text.empty()) {
    std::fprintf(stderr, "strata: %s: %s\n", argv[0], error.c_str());
    return 1;
  }
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  if (std::strcmp(argv[1], "summary") == 0) return Summary(argc - 2, argv + 2);
  return Usage();
}
