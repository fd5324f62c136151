// The symbol server's two API calls on a real binary (tests/symbols:hot_loop, built with -g),
// and the HTTP server with real sockets: keep-alive, limits, stop.
#include "tools/strata/symbol_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include "catch2/catch.hpp"
#include "rapidjson/document.h"
#include "shared/symbols/elf_symbol_table.h"
#include "tools/strata/http_server.h"
#include "tools/strata/view.h"

namespace strata {
namespace cli {
namespace {

std::string Runfiles() {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  REQUIRE(srcdir != nullptr);
  REQUIRE(workspace != nullptr);
  return std::string(srcdir) + "/" + workspace;
}

std::string HotLoopPath() {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  REQUIRE(srcdir != nullptr);
  REQUIRE(workspace != nullptr);
  return std::string(srcdir) + "/" + workspace + "/tests/symbols/hot_loop";
}

// hot_loop as if loaded with a bias of 0x10000000, and its HotLoop function's file address.
struct Fixture {
  SharedLibrary lib;
  uint64_t hot_loop = 0;
  uint64_t main_function = 0;
  Fixture() {
    const std::string path = HotLoopPath();
    const ElfSymbolTable table = ElfSymbolTable::ReadFile(path);
    REQUIRE(table.has_symtab());
    const auto range = table.LoadedRange();
    REQUIRE(range.has_value());
    for (size_t i = 0; i < table.size(); ++i) {
      const std::string name(table.symbol(i).name);
      if (name.find("HotLoop") != std::string::npos) hot_loop = table.symbol(i).address;
      if (name == "main") main_function = table.symbol(i).address;
    }
    REQUIRE(hot_loop != 0);
    REQUIRE(main_function != 0);
    const uint64_t bias = 0x10000000;
    lib.start = bias + range->first;
    lib.end = bias + range->second;
    lib.offset = range->first;
    lib.name = lib.debug_name = "hot_loop";
    lib.path = lib.debug_path = path;
    lib.code_id = table.code_id();
    lib.breakpad_id = "ABCDEF0123456789ABCDEF01234567890";
  }
};

rapidjson::Document Parse(const std::string& text) {
  rapidjson::Document document;
  document.Parse(text.c_str());
  REQUIRE_FALSE(document.HasParseError());
  return document;
}

char Hex(uint64_t value, char* buffer, size_t size) {
  snprintf(buffer, size, "0x%llx", static_cast<unsigned long long>(value));
  return 0;
}

TEST_CASE("symbolicate/v5 names a binary's functions with file:line, in the front-end's format") {
  Fixture f;
  // Bazel's DWARF names sources relative to the workspace: the runfiles tree has them.
  SymbolServer server({f.lib}, {}, Runfiles());
  char hot[32], main_address[32];
  Hex(f.hot_loop + 4, hot, sizeof(hot));
  Hex(f.main_function, main_address, sizeof(main_address));
  const std::string request = std::string("{\"jobs\": [{\"memoryMap\": [[\"hot_loop\", \"") +
                              f.lib.breakpad_id + "\"], [\"other.so\", \"00\"]], \"stacks\": [[[0, " +
                              std::to_string(f.hot_loop + 4) + "], [0, \"" + main_address +
                              "\"], [1, 16], [-1, 5]]]}]}";
  const SymbolServer::Reply reply = server.Symbolicate(request);
  INFO(reply.body);
  REQUIRE(reply.status == 200);
  const rapidjson::Document response = Parse(reply.body);
  const auto& result = response["results"][0];
  CHECK(result["found_modules"][("hot_loop/" + f.lib.breakpad_id).c_str()].GetBool());
  CHECK_FALSE(result["found_modules"]["other.so/00"].GetBool());
  const auto& frames = result["stacks"][0];
  REQUIRE(frames.Size() == 4);
  CHECK(std::string(frames[0]["function"].GetString()).find("HotLoop") != std::string::npos);
  CHECK(std::string(frames[0]["module_offset"].GetString()) == hot);
  CHECK(std::string(frames[0]["function_offset"].GetString()) == "0x4");
  CHECK(std::string(frames[0]["file"].GetString()).find("hot_loop.cc") != std::string::npos);
  CHECK(frames[0]["line"].GetUint() > 0);
  CHECK(std::string(frames[1]["function"].GetString()) == "main");
  CHECK(frames[1]["frame"].GetUint() == 1);
  CHECK_FALSE(frames[2].HasMember("function"));  // Module not in the profile.
  CHECK(std::string(frames[2]["module"].GetString()) == "other.so");
  CHECK_FALSE(frames[3].HasMember("module"));     // No module at all.

  SECTION("source/v1 serves the file symbolication named, and nothing else") {
    const std::string file = frames[0]["file"].GetString();
    const SymbolServer::Reply source =
        server.Source("{\"debugName\": \"hot_loop\", \"debugId\": \"x\", \"moduleOffset\": \"0x10\", "
                      "\"file\": \"" + file + "\"}");
    REQUIRE(source.status == 200);
    CHECK(std::string(Parse(source.body)["source"].GetString()).find("HotLoop(unsigned long iterations)") !=
          std::string::npos);
    const SymbolServer::Reply passwd = server.Source("{\"file\": \"/etc/passwd\"}");
    CHECK(passwd.status == 403);
    CHECK(Parse(passwd.body).HasMember("error"));
    CHECK(server.Source("{\"file\": \"" + file + "/../../../../etc/passwd\"}").status == 403);
    CHECK(server.Source("{\"file\": \"../x.cc\"}").status == 403);
  }
}

TEST_CASE("symbolicate/v5: a one-job request at the top level, 10 000 addresses, bad input") {
  Fixture f;
  SymbolServer server({f.lib}, {"/src/named/in/profile.cc"});
  std::string stack;
  for (int i = 0; i < 10000; ++i) {
    stack += std::string(i ? "," : "") + "[0," + std::to_string(f.hot_loop + (i % 16)) + "]";
  }
  const SymbolServer::Reply reply = server.Symbolicate("{\"memoryMap\": [[\"hot_loop\", \"" + f.lib.breakpad_id +
                                                       "\"]], \"stacks\": [[" + stack + "]]}");
  REQUIRE(reply.status == 200);
  const rapidjson::Document response = Parse(reply.body);
  REQUIRE(response["results"][0]["stacks"][0].Size() == 10000);
  CHECK(std::string(response["results"][0]["stacks"][0][9999]["function"].GetString()).find("HotLoop") !=
        std::string::npos);

  for (const char* bad : {"", "{", "[1,2]", "{\"jobs\": 3}", "{\"memoryMap\": [], \"stacks\": [[[\"x\", 1]]]}",
                          "{\"memoryMap\": [[1, 2]], \"stacks\": []}", "{\"jobs\": [{\"stacks\": []}]}"}) {
    INFO(bad);
    const SymbolServer::Reply r = server.Symbolicate(bad);
    CHECK(r.status == 400);
    CHECK(Parse(r.body).HasMember("error"));
  }
  CHECK(server.MayReadFile("/src/named/in/profile.cc"));
  CHECK(server.Source("not json").status == 400);
  CHECK(server.Source("{\"file\": \"/src/named/in/profile.cc\"}").status == 404);  // Allowed, absent.
}

TEST_CASE("Source files named by a profile's frame strings") {
  const std::set<std::string> files = SourceFilesNamedInProfile(
      "{\"stringTable\": [\"Run() (in app) (/src/app.cc:12)\", \"x (in libc.so.6)\", "
      "\"inl (in app) (/usr/include/c++/12/bits/vector.h:1123)\", \"(not:a:line)\"]}");
  CHECK(files == std::set<std::string>{"/src/app.cc", "/usr/include/c++/12/bits/vector.h"});
}

TEST_CASE("The front-end address encodes the profile and symbol server URLs") {
  CHECK(FrontEndAddress("https://profiler.firefox.com", "http://127.0.0.1:3030/ab/p.json",
                        "http://127.0.0.1:3030/ab") ==
        "https://profiler.firefox.com/from-url/http%3A%2F%2F127.0.0.1%3A3030%2Fab%2Fp.json/"
        "?symbolServer=http%3A%2F%2F127.0.0.1%3A3030%2Fab");
}

// One client connection.
class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  }
  ~Client() { close(fd_); }
  void Send(const std::string& text) { REQUIRE(write(fd_, text.data(), text.size()) == static_cast<ssize_t>(text.size())); }
  // Reads one response (headers + Content-Length body); "" at end of stream.
  std::string Receive() {
    for (;;) {
      const size_t end = buffer_.find("\r\n\r\n");
      if (end != std::string::npos) {
        const size_t at = buffer_.find("Content-Length: ");
        const size_t length = at < end ? std::stoul(buffer_.substr(at + 16)) : 0;
        if (buffer_.size() >= end + 4 + length) {
          std::string response = buffer_.substr(0, end + 4 + length);
          buffer_.erase(0, end + 4 + length);
          return response;
        }
      }
      char chunk[4096];
      const ssize_t n = read(fd_, chunk, sizeof(chunk));
      if (n <= 0) return std::string();
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  int fd_ = -1;
  std::string buffer_;
};

TEST_CASE("The HTTP server: keep-alive, two clients, limits, loopback, stop") {
  HttpServer server;
  std::string error;
  REQUIRE(server.Listen(0, &error));
  REQUIRE(server.port() != 0);
  std::thread serving([&] {
    server.Serve([](const HttpRequest& request) {
      HttpResponse response;
      response.body = request.method + " " + request.path + " " + request.query + " " + request.body;
      return response;
    });
  });
  {
    Client a(server.port()), b(server.port());
    a.Send("GET /x?y=1 HTTP/1.1\r\nHost: h\r\n\r\n");
    b.Send("POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
    const std::string first = a.Receive();
    CHECK(first.find("HTTP/1.1 200 OK") == 0);
    CHECK(first.find("GET /x y=1 ") != std::string::npos);
    CHECK(b.Receive().find("POST /p  hello") != std::string::npos);
    a.Send("POST /again HTTP/1.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");  // Same connection.
    const std::string second = a.Receive();
    CHECK(second.find("POST /again  ok") != std::string::npos);
    CHECK(second.find("Connection: close") != std::string::npos);
    CHECK(a.Receive().empty());  // Closed after it.
    b.Send("POST /big HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n");
    CHECK(b.Receive().find("HTTP/1.1 413") == 0);
    Client c(server.port());
    c.Send("garbage\r\n\r\n");
    CHECK(c.Receive().find("HTTP/1.1 400") == 0);
    Client d(server.port());
    d.Send("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    CHECK(d.Receive().find("HTTP/1.1 411") == 0);
  }
  Client idle(server.port());  // An open, idle connection does not hold up the stop.
  server.Stop();
  serving.join();
  SUCCEED("Serve returned after Stop");
}

}  // namespace
}  // namespace cli
}  // namespace strata
