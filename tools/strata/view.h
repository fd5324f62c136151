// `strata view PROFILE`: serves one profile to the Firefox Profiler on this machine, with the
// symbol and source API it calls (symbol_server.h), and prints (and, with a display, opens)
// the profiler.firefox.com address that loads it.
//
//   http://127.0.0.1:PORT/TOKEN/PROFILE-NAME      the profile file's bytes (gzip as is)
//   http://127.0.0.1:PORT/TOKEN/symbolicate/v5    POST, Tecken format
//   http://127.0.0.1:PORT/TOKEN/source/v1         POST, source of the profile's files
//   https://profiler.firefox.com/from-url/<profile URL>/?symbolServer=<http://127.0.0.1:PORT/TOKEN>
//
// TOKEN is 128 random bits: another local user's page or process cannot guess the paths.
// Every response allows any origin (CORS, with the private-network preflight header Chrome
// asks for): the token is the access check. Runs until SIGINT/SIGTERM (Ctrl-C), then exits
// 0; the program's output says where it serves and how to stop.
#ifndef STRATA_TOOLS_STRATA_VIEW_H_
#define STRATA_TOOLS_STRATA_VIEW_H_

#include <cstdint>
#include <string>

namespace strata {
namespace cli {

struct ViewOptions {
  std::string profile;        // Path of a .json or .json.gz profile.
  int port = 3030;            // First port tried (then the next 9); 0: any free port.
  bool open_browser = true;   // xdg-open the address when a display exists.
  std::string frontend_url = "https://profiler.firefox.com";
  std::string source_root;    // Relative source names are read under it ("" : here).
  // Not empty: the profile narrowed by filters (filter_options.h), served instead of the
  // file's bytes, under the file's name.
  std::string served_json;
};

// Serves until interrupted. 0 on a clean stop; 1 on errors (message on stderr).
int RunView(const ViewOptions& options);

// The front-end address that loads `profile_url` with `symbol_server_url`.
std::string FrontEndAddress(const std::string& frontend_url, const std::string& profile_url,
                            const std::string& symbol_server_url);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_VIEW_H_
