#include "tools/strata/view.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "rapidjson/document.h"
#include "tools/strata/http_server.h"
#include "tools/strata/profile_io.h"
#include "tools/strata/profile_merge.h"
#include "tools/strata/profile_symbolication.h"
#include "tools/strata/symbol_server.h"
#include "tools/strata/terminal_text.h"

extern char** environ;

namespace strata {
namespace cli {
namespace {

std::string RandomToken() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  std::string token;
  char hex[3];
  for (unsigned char b : bytes) {
    snprintf(hex, sizeof(hex), "%02x", b);
    token += hex;
  }
  return token;
}

std::string UrlEncode(const std::string& text) {
  std::string out;
  char hex[4];
  for (unsigned char c : text) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The libs of the profile and of every sub-process.
void CollectLibs(const rapidjson::Value& profile, std::vector<SharedLibrary>* libs) {
  std::vector<SharedLibrary> own = ReadLibs(profile);
  libs->insert(libs->end(), own.begin(), own.end());
  if (profile.HasMember("processes") && profile["processes"].IsArray()) {
    for (const rapidjson::Value& child : profile["processes"].GetArray()) {
      if (child.IsObject()) CollectLibs(child, libs);
    }
  }
}

void AddCors(HttpResponse* response) {
  response->headers.emplace_back("Access-Control-Allow-Origin", "*");
  response->headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  response->headers.emplace_back("Access-Control-Allow-Headers", "Content-Type");
  response->headers.emplace_back("Access-Control-Allow-Private-Network", "true");
  response->headers.emplace_back("Access-Control-Max-Age", "600");
  response->headers.emplace_back("Cache-Control", "no-store");
}

bool HasDisplay() {
  const char* x = getenv("DISPLAY");
  const char* wayland = getenv("WAYLAND_DISPLAY");
  return (x != nullptr && *x != '\0') || (wayland != nullptr && *wayland != '\0');
}

void OpenInBrowser(const std::string& address) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  char* argv[] = {const_cast<char*>("xdg-open"), const_cast<char*>(address.c_str()), nullptr};
  pid_t pid;
  if (posix_spawnp(&pid, "xdg-open", &actions, nullptr, argv, environ) != 0) {
    std::fprintf(stderr, "strata view: could not run xdg-open; open the address above yourself\n");
  }
  posix_spawn_file_actions_destroy(&actions);
}


}  // namespace

std::string FrontEndAddress(const std::string& frontend_url, const std::string& profile_url,
                            const std::string& symbol_server_url) {
  return frontend_url + "/from-url/" + UrlEncode(profile_url) + "/?symbolServer=" +
         UrlEncode(symbol_server_url);
}

int RunView(const ViewOptions& options) {
  std::string raw = options.served_json;  // The file's bytes, served as they are, or the narrowed profile.
  if (raw.empty()) {
    std::ifstream in(options.profile, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "strata view: %s: %s\n", TerminalSafe(options.profile).c_str(), strerror(errno));
      return 1;
    }
    std::ostringstream bytes;
    bytes << in.rdbuf();
    raw = bytes.str();
  }
  std::string text, error;
  rapidjson::Document document;
  if (!options.served_json.empty()) {
    text = options.served_json;
  } else if (!ReadFileContents(options.profile, &text, &error)) {
    std::fprintf(stderr, "strata view: %s\n", TerminalSafe(error).c_str());
    return 1;
  }
  if (!ParseProfileJson(options.profile, text, &document, &error)) {
    std::fprintf(stderr, "strata view: %s\n", TerminalSafe(error).c_str());
    return 1;
  }
  std::vector<SharedLibrary> libs;
  CollectLibs(document, &libs);
  SymbolServer symbols(std::move(libs), SourceFilesNamedInProfile(text), options.source_root);
  document.SetNull();
  text.clear();
  text.shrink_to_fit();

  HttpServer server;
  bool listening = false;
  const int tries = options.port == 0 ? 1 : 10;
  for (int i = 0; i < tries && !listening; ++i) {
    listening = server.Listen(static_cast<uint16_t>(options.port == 0 ? 0 : options.port + i), &error);
  }
  if (!listening) {
    std::fprintf(stderr, "strata view: cannot listen on %s%s\n", error.c_str(),
                 tries > 1 ? " (nor the next 9 ports; choose one with --port, 0 for any)" : "");
    return 1;
  }
  const std::string token = RandomToken();
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port()) + "/" + token;
  const std::string name = UrlEncode(BaseName(options.profile));
  const std::string profile_path = "/" + token + "/" + name;
  const bool gzip = raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f &&
                    static_cast<unsigned char>(raw[1]) == 0x8b;

  const HttpServer::Handler handler = [&](const HttpRequest& request) {
    HttpResponse response;
    AddCors(&response);
    if (request.method == "OPTIONS") {
      response.status = 204;
      response.content_type.clear();
      return response;
    }
    if (request.path == profile_path && (request.method == "GET" || request.method == "HEAD")) {
      response.content_type = gzip ? "application/gzip" : "application/json";
      response.body = raw;
      return response;
    }
    if (request.path == "/" + token + "/symbolicate/v5" || request.path == "/" + token + "/source/v1") {
      if (request.method != "POST") {
        response.status = 405;
        response.body = "{\"error\":\"use POST\"}";
        return response;
      }
      const SymbolServer::Reply reply = request.path.back() == '5' ? symbols.Symbolicate(request.body)
                                                                   : symbols.Source(request.body);
      response.status = reply.status;
      response.body = reply.body;
      return response;
    }
    response.status = 404;
    response.body = "{\"error\":\"not found\"}";
    return response;
  };

  // Ctrl-C / SIGTERM end the server: blocked here, waited for by this thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &stop_signals, &previous);
  std::thread serving([&] { server.Serve(handler); });

  const std::string address = FrontEndAddress(options.frontend_url, base + "/" + name, base);
  std::printf("strata view: serving %s and its symbols on %s\n", TerminalSafe(options.profile).c_str(),
              ("http://127.0.0.1:" + std::to_string(server.port())).c_str());
  std::printf("Profile: %s%s\n", base.c_str(), ("/" + name).c_str());
  std::printf("Symbol server: %s\n", base.c_str());
  std::printf("Open: %s\n", address.c_str());
  std::printf("Press Ctrl-C to stop.\n");
  std::fflush(stdout);
  if (options.open_browser && HasDisplay()) OpenInBrowser(address);

  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) != 0) {
  }
  server.Stop();
  serving.join();
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  std::fprintf(stderr, "strata view: stopped (%s)\n", strsignal(signal_number));
  return 0;
}

}  // namespace cli
}  // namespace strata
