#include "shared/json/atomic_file.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tools/testing/test_files.h"

namespace strata {
namespace {

std::string MakeTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string pattern = std::string(base ? base : "/tmp") + "/atomic_file_test.XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  REQUIRE(mkdtemp(buffer.data()) != nullptr);
  return buffer.data();
}

std::vector<std::string> List(const std::string& dir) {
  std::optional<std::vector<std::string>> names = testing::ListDirectory(dir);
  REQUIRE(names.has_value());
  return *names;
}

std::string Read(const std::string& path) { return testing::ReadTextFile(path); }

TEST_CASE("commit renames a complete document into place") {
  std::string dir = MakeTempDir();
  std::string path = dir + "/profile.json";
  {
    AtomicJsonFile file(path);
    REQUIRE(file.ok());
    CHECK(file.temporary_path().rfind(dir + "/.profile.json.tmp-", 0) == 0);
    file.writer().StartObject();
    file.writer().IntProperty("version", 36);
    // Not there yet while writing.
    CHECK(access(path.c_str(), F_OK) != 0);
    file.writer().EndObject();
    REQUIRE(file.Commit());
  }
  CHECK(Read(path) == R"({"version":36})");
  CHECK(List(dir) == std::vector<std::string>{"profile.json"});

  struct stat st;
  REQUIRE(stat(path.c_str(), &st) == 0);
  mode_t mask = umask(0);
  umask(mask);
  CHECK((st.st_mode & 0777) == (0666 & ~mask));
}

TEST_CASE("an incomplete document or an abandoned file never replaces the old one") {
  std::string dir = MakeTempDir();
  std::string path = dir + "/profile.json";
  {
    AtomicJsonFile file(path);
    file.writer().Splice(R"({"old":true})");
    REQUIRE(file.Commit());
  }
  {
    AtomicJsonFile file(path);
    file.writer().StartObject();
    file.writer().IntProperty("version", 36);
    CHECK_FALSE(file.Commit());
    CHECK(file.error().find("incomplete JSON document") != std::string::npos);
  }
  {
    AtomicJsonFile file(path);
    file.writer().StartObject();
    file.writer().EndObject();
    // Destroyed without Commit().
  }
  {
    AtomicJsonFile file(path);
    file.writer().StartArray();
    file.writer().EndObject();  // Misuse.
    CHECK_FALSE(file.Commit());
    CHECK(file.error().find("misuse") != std::string::npos);
  }
  CHECK(Read(path) == R"({"old":true})");
  CHECK(List(dir) == std::vector<std::string>{"profile.json"});
}

TEST_CASE("errors name the step and the file") {
  std::string dir = MakeTempDir();
  std::string path = dir + "/no/such/dir/profile.json";
  AtomicJsonFile file(path);
  CHECK_FALSE(file.ok());
  CHECK(file.error().rfind("cannot create temporary file " + dir + "/no/such/dir/.profile.json",
                           0) == 0);
  CHECK(file.error().find("No such file or directory") != std::string::npos);
  file.writer().StartObject();  // Harmless.
  file.writer().EndObject();
  CHECK_FALSE(file.Commit());

  // Renaming over a directory fails: the temporary file is removed.
  std::string blocked = dir + "/blocked";
  REQUIRE(mkdir(blocked.c_str(), 0755) == 0);
  REQUIRE(mkdir((blocked + "/x").c_str(), 0755) == 0);
  {
    AtomicJsonFile over(blocked);
    over.writer().Splice("[]");
    CHECK_FALSE(over.Commit());
    CHECK(over.error().rfind("rename " + dir + "/.blocked.tmp-", 0) == 0);
  }
  std::vector<std::string> names = List(dir);
  CHECK(names == std::vector<std::string>{"blocked"});
}

TEST_CASE("a pipe (or device, or socket) at the path is never replaced") {
  std::string dir = MakeTempDir();
  std::string pipe_path = dir + "/profile.json";
  REQUIRE(mkfifo(pipe_path.c_str(), 0644) == 0);
  {
    AtomicJsonFile file(pipe_path);
    CHECK_FALSE(file.ok());
    CHECK(file.error() == pipe_path + " is not a regular file (a device, pipe or socket): not replaced");
    file.writer().Splice("[]");
    CHECK_FALSE(file.Commit());
  }
  struct stat st {};
  REQUIRE(stat(pipe_path.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(List(dir) == std::vector<std::string>{"profile.json"});  // No temporary file either.
}

TEST_CASE("AtomicJsonFile: a profile larger than ulimit -f is an error, never SIGXFSZ") {
  // The kernel sends SIGXFSZ (terminate, by default) to a process that writes past its file
  // size limit. The save must fail cleanly instead: in a child, with the limit at 4 KiB, a
  // 100 KB document is refused, the destination untouched, no temporary file left.
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/big.json";
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    rlimit limit{4096, 4096};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(2);
    AtomicJsonFile file(path);
    if (!file.ok()) _exit(3);
    file.writer().StartArray();
    for (int i = 0; i < 10000; ++i) file.writer().String("0123456789");
    file.writer().EndArray();
    if (file.Commit()) _exit(4);
    if (file.error().find("ulimit -f") == std::string::npos) _exit(5);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  INFO("child status " << status << (WIFSIGNALED(status) ? " (signal)" : ""));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  struct stat st {};
  CHECK(stat(path.c_str(), &st) != 0);
  CHECK(List(dir).empty());
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Issue 33: a process killed while it writes (SIGKILL, another thread's _exit) leaves no
// temporary file: the file is unnamed (O_TMPFILE) until Commit().
TEST_CASE("AtomicJsonFile: a process killed in the middle of the write leaves nothing") {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/profile.json";
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    AtomicJsonFile file(path);
    file.writer().StartArray();
    for (int i = 0; i < 100000; ++i) file.writer().Int(i);
    file.writer().Flush();
    raise(SIGKILL);
    _exit(1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(List(dir).empty());
}

}  // namespace
}  // namespace strata
