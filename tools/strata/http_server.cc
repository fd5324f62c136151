#include "tools/strata/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>
#include <thread>

namespace strata {
namespace cli {
namespace {

constexpr int kIdleTimeoutMs = 10000;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && (s[begin] == ' ' || s[begin] == '\t')) ++begin;
  while (end > begin && (s[end - 1] == ' ' || s[end - 1] == '\t' || s[end - 1] == '\r')) --end;
  return s.substr(begin, end - begin);
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Reads more bytes into `buffer`; false on end, error or idle timeout.
bool ReadMore(int fd, std::string* buffer) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    const int ready = poll(&p, 1, kIdleTimeoutMs);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    break;
  }
  char chunk[65536];
  for (;;) {
    const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer->append(chunk, static_cast<size_t>(n));
    return true;
  }
}

bool IsLoopback(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
  }
  return false;
}

void SendResponse(int fd, const HttpResponse& response, bool keep_alive, bool head_only) {
  std::string head = "HTTP/1.1 " + std::to_string(response.status) + " " +
                     HttpStatusText(response.status) + "\r\n";
  if (!response.content_type.empty()) head += "Content-Type: " + response.content_type + "\r\n";
  head += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  head += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [name, value] : response.headers) head += name + ": " + value + "\r\n";
  head += "\r\n";
  if (!WriteAll(fd, head.data(), head.size())) return;
  if (!head_only) WriteAll(fd, response.body.data(), response.body.size());
}

HttpResponse ErrorResponse(int status, const std::string& message) {
  HttpResponse response;
  response.status = status;
  response.content_type = "text/plain; charset=utf-8";
  response.body = message + "\n";
  return response;
}

}  // namespace

const char* HttpStatusText(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

HttpServer::HttpServer() {
  if (pipe2(stop_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) stop_pipe_[0] = stop_pipe_[1] = -1;
}

HttpServer::~HttpServer() {
  if (listen_fd_ >= 0) close(listen_fd_);
  for (int fd : stop_pipe_) {
    if (fd >= 0) close(fd);
  }
}

bool HttpServer::Listen(uint16_t port, std::string* error) {
  if (stop_pipe_[0] < 0) {
    *error = std::string("pipe: ") + strerror(errno);
    return false;
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + strerror(errno);
    return false;
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 64) != 0) {
    *error = "127.0.0.1:" + std::to_string(port) + ": " + strerror(errno);
    close(fd);
    return false;
  }
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  listen_fd_ = fd;
  return true;
}

void HttpServer::Stop() {
  stopping_.store(true, std::memory_order_relaxed);
  if (stop_pipe_[1] >= 0) {
    const char byte = 1;
    const ssize_t ignored = write(stop_pipe_[1], &byte, 1);
    (void)ignored;
  }
}

void HttpServer::Serve(const Handler& handler) {
  std::mutex mutex;  // Guards `connections` and `threads`.
  std::vector<int> connections;
  std::vector<std::thread> threads;
  while (!stopping_.load(std::memory_order_relaxed) && listen_fd_ >= 0) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    const int ready = poll(fds, 2, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents != 0) break;
    if ((fds[0].revents & POLLIN) == 0) continue;
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof(peer);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_length, SOCK_CLOEXEC);
    if (fd < 0) {
      // EMFILE and friends: wait a little rather than spin.
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) poll(nullptr, 0, 50);
      continue;
    }
    if (!IsLoopback(peer)) {
      close(fd);
      continue;
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (static_cast<int>(connections.size()) >= kMaxConnections) {
      SendResponse(fd, ErrorResponse(503, "too many connections"), false, false);
      close(fd);
      continue;
    }
    connections.push_back(fd);
    threads.emplace_back([this, fd, &handler, &mutex, &connections] {
      ServeConnection(fd, handler);
      std::lock_guard<std::mutex> inner(mutex);
      connections.erase(std::find(connections.begin(), connections.end(), fd));
      close(fd);
    });
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (int fd : connections) shutdown(fd, SHUT_RDWR);  // Wakes their reads.
  }
  for (std::thread& thread : threads) thread.join();
  close(listen_fd_);
  listen_fd_ = -1;
}

void HttpServer::ServeConnection(int fd, const Handler& handler) {
  std::string buffer;
  while (!stopping_.load(std::memory_order_relaxed)) {
    size_t header_end;
    while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
      if (buffer.size() > kMaxHeaderBytes) {
        SendResponse(fd, ErrorResponse(431, "request headers too large"), false, false);
        return;
      }
      if (!ReadMore(fd, &buffer)) return;
    }
    HttpRequest request;
    const std::string head = buffer.substr(0, header_end);
    size_t line_end = head.find("\r\n");
    const std::string request_line = head.substr(0, line_end);
    const size_t space1 = request_line.find(' ');
    const size_t space2 = space1 == std::string::npos ? std::string::npos : request_line.find(' ', space1 + 1);
    if (space2 == std::string::npos || request_line.compare(space2 + 1, 5, "HTTP/") != 0) {
      SendResponse(fd, ErrorResponse(400, "malformed request line"), false, false);
      return;
    }
    request.method = request_line.substr(0, space1);
    const std::string target = request_line.substr(space1 + 1, space2 - space1 - 1);
    const size_t question = target.find('?');
    request.path = target.substr(0, question);
    if (question != std::string::npos) request.query = target.substr(question + 1);
    while (line_end != std::string::npos && line_end < head.size()) {
      const size_t next = head.find("\r\n", line_end + 2);
      const std::string line = head.substr(line_end + 2, next == std::string::npos ? std::string::npos : next - line_end - 2);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) request.headers[Lower(Trim(line.substr(0, colon)))] = Trim(line.substr(colon + 1));
      line_end = next;
    }
    buffer.erase(0, header_end + 4);
    const bool http10 = request_line.compare(space2 + 1, 8, "HTTP/1.0") == 0;
    const auto connection = request.headers.find("connection");
    bool keep_alive = !http10;
    if (connection != request.headers.end()) {
      const std::string value = Lower(connection->second);
      if (value.find("close") != std::string::npos) keep_alive = false;
      if (value.find("keep-alive") != std::string::npos) keep_alive = true;
    }
    if (request.headers.count("transfer-encoding") != 0) {
      SendResponse(fd, ErrorResponse(411, "send a Content-Length (chunked bodies are not read)"), false, false);
      return;
    }
    size_t length = 0;
    const auto content_length = request.headers.find("content-length");
    if (content_length != request.headers.end()) {
      char* end = nullptr;
      errno = 0;
      const unsigned long long value = strtoull(content_length->second.c_str(), &end, 10);
      if (errno != 0 || end == content_length->second.c_str() || *end != '\0') {
        SendResponse(fd, ErrorResponse(400, "bad Content-Length"), false, false);
        return;
      }
      if (value > kMaxBodyBytes) {
        SendResponse(fd, ErrorResponse(413, "request body above " + std::to_string(kMaxBodyBytes) + " bytes"),
                     false, false);
        return;
      }
      length = static_cast<size_t>(value);
    }
    while (buffer.size() < length) {
      if (!ReadMore(fd, &buffer)) return;
    }
    request.body = buffer.substr(0, length);
    buffer.erase(0, length);
    HttpResponse response = handler(request);
    SendResponse(fd, response, keep_alive, request.method == "HEAD");
    if (!keep_alive) return;
  }
}

}  // namespace cli
}  // namespace strata
