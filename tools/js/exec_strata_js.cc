#include "tools/js/exec_strata_js.h"

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#define STRATA_JS_MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define STRATA_JS_MULTIARCH "aarch64-linux-gnu"
#else
#define STRATA_JS_MULTIARCH "unknown-linux-gnu"
#endif

namespace strata {
namespace tools {

int ExecStrataJs(int argc, char** argv) {
  std::vector<char*> args;
  args.push_back(const_cast<char*>("strata_js"));
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);

  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    std::string dir(self);
    dir.erase(dir.rfind('/'));
    // Next to strata (the install tree), in the Bazel tree, or where the Debian package
    // libstrata-spidermonkey0 puts it (tools/make_deb.sh).
    for (const std::string& candidate : {dir + "/strata_js", dir + "/../js/strata_js",
                                         dir + "/../lib/" STRATA_JS_MULTIARCH "/strata/strata_js"}) {
      if (access(candidate.c_str(), X_OK) == 0) {
        execv(candidate.c_str(), args.data());
        std::fprintf(stderr, "strata js: cannot run %s: %s\n", candidate.c_str(), std::strerror(errno));
        return 127;
      }
    }
  }
  execvp("strata_js", args.data());
  std::fprintf(stderr, "strata js: strata_js is neither next to strata, nor in /usr/lib/<multiarch>/strata "
                       "(Debian: libstrata-spidermonkey0), nor on PATH: %s\n",
               std::strerror(errno));
  return 127;
}

}  // namespace tools
}  // namespace strata
