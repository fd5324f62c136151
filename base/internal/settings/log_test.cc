// Strata's diagnostics reach descriptor 2 by a raw system call, past every interposer of
// write(): this test program defines its own write(), as a program may, and counts its calls.
#include "base/internal/settings/log.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

#include "catch2/catch.hpp"

namespace {
std::atomic<int> g_program_write_calls{0};
}  // namespace

// The program's write(): counted, then done by the kernel. Strata's log is linked into this
// program, so a plain write() in it binds here, as it binds to an interposer in a preloaded
// library.
extern "C" ssize_t write(int fd, const void* data, size_t size) {
  g_program_write_calls.fetch_add(1, std::memory_order_relaxed);
  return syscall(SYS_write, fd, data, size);
}

namespace strata {
namespace base_internal {
namespace {

// Runs LOG with descriptor 2 on a pipe; returns what it wrote there.
template <typename Log>
std::string StderrOf(Log log) {
  int pipe_fds[2];
  REQUIRE(pipe2(pipe_fds, O_CLOEXEC) == 0);
  const int saved = dup(STDERR_FILENO);
  REQUIRE(saved >= 0);
  REQUIRE(dup2(pipe_fds[1], STDERR_FILENO) == STDERR_FILENO);
  log();
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(pipe_fds[1]);
  std::string text;
  char buffer[2048];
  ssize_t got;
  while ((got = read(pipe_fds[0], buffer, sizeof(buffer))) > 0) text.append(buffer, got);
  close(pipe_fds[0]);
  return text;
}

TEST_CASE("A message reaches stderr without the program's write()") {
  const int before = g_program_write_calls.load();
  const std::string text = StderrOf([] { LogError("cannot write %s", "/x/profile.json"); });
  CHECK(text == "strata[" + std::to_string(getpid()) + "]: cannot write /x/profile.json\n");
  CHECK(g_program_write_calls.load() == before);
}

TEST_CASE("LogInfo prints only with logging enabled, also past the program's write()") {
  const int before = g_program_write_calls.load();
  SetLoggingEnabled(false);
  CHECK(StderrOf([] { LogInfo("quiet"); }).empty());
  SetLoggingEnabled(true);
  CHECK(StderrOf([] { LogInfo("said %d", 7); }) ==
        "strata[" + std::to_string(getpid()) + "]: said 7\n");
  SetLoggingEnabled(false);
  CHECK(g_program_write_calls.load() == before);
}

TEST_CASE("A message longer than a line is cut and still ends the line") {
  const std::string long_value(3000, 'v');
  const std::string text = StderrOf([&] { LogError("%s", long_value.c_str()); });
  REQUIRE(text.size() == 1023);
  CHECK(text.substr(text.size() - 4) == "...\n");
}

}  // namespace
}  // namespace base_internal
}  // namespace strata
