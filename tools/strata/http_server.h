// A small HTTP/1.1 server for `strata view`: loopback only, one thread per connection
// (keep-alive), bounded request sizes, stopped from a signal handler or another thread.
//
// It serves trusted local tools (the Firefox Profiler page in the user's browser, the
// front-end's command-line import) and nothing else: it binds 127.0.0.1 only and refuses a
// peer that is not a loopback address. Requests: a request line, headers up to 64 KiB, a
// body of Content-Length bytes up to kMaxBodyBytes (no chunked bodies: 411/413 otherwise).
// Each response carries Content-Length; connections stay open for further requests unless
// the client says "Connection: close" or stays idle for 10 s.
//
// Thread safety: Listen and Serve from one thread; Stop from any thread or a signal
// handler (async-signal-safe: it writes one byte to a pipe). The handler is called from
// connection threads concurrently: it must be thread-safe.
#ifndef STRATA_TOOLS_STRATA_HTTP_SERVER_H_
#define STRATA_TOOLS_STRATA_HTTP_SERVER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace strata {
namespace cli {

struct HttpRequest {
  std::string method;                         // "GET", "POST", "OPTIONS", ...
  std::string path;                           // Without the query: "/abc/profile.json".
  std::string query;                          // After '?', "" when none.
  std::map<std::string, std::string> headers;  // Names in lower case.
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // Extra headers.
};

class HttpServer {
 public:
  static constexpr size_t kMaxHeaderBytes = 64 * 1024;
  static constexpr size_t kMaxBodyBytes = 64 * 1024 * 1024;
  static constexpr int kMaxConnections = 64;

  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  HttpServer();
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds 127.0.0.1:`port` (0: a free port the kernel picks). False with `error` when the
  // port is taken or the socket cannot be made.
  bool Listen(uint16_t port, std::string* error);
  uint16_t port() const { return port_; }

  // Serves until Stop(); returns after every connection thread has ended.
  void Serve(const Handler& handler);

  // Ends Serve(). Async-signal-safe.
  void Stop();

 private:
  void ServeConnection(int fd, const Handler& handler);

  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
};

// "200 OK", "404 Not Found", ... for the codes this server uses.
const char* HttpStatusText(int status);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_HTTP_SERVER_H_
