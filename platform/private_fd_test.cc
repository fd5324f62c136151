#include "platform/private_fd.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "catch2/catch.hpp"

namespace strata {
namespace {

int OpenDevNull() { return open("/dev/null", O_RDONLY); }

bool IsCloseOnExec(int fd) { return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0; }

TEST_CASE("MoveDescriptorHigh moves above the floor, close-on-exec, and closes the original") {
  const int low = OpenDevNull();
  REQUIRE(low >= 0);
  REQUIRE(low < kPrivateDescriptorFloor);
  const int high = MoveDescriptorHigh(low);
  CHECK(high >= kPrivateDescriptorFloor);
  CHECK(IsCloseOnExec(high));
  CHECK(fcntl(low, F_GETFD) == -1);  // The low number is free for the program again.
  close(high);
  CHECK(MoveDescriptorHigh(-1) == -1);
}

TEST_CASE("MoveDescriptorHigh stays under a low soft limit") {
  struct rlimit saved;
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  struct rlimit low_limit = saved;
  low_limit.rlim_cur = 64;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low_limit) == 0);
  const int fd = OpenDevNull();
  REQUIRE(fd >= 0);
  const int moved = MoveDescriptorHigh(fd);
  CHECK(moved >= 32);
  CHECK(moved < 64);
  CHECK(IsCloseOnExec(moved));
  close(moved);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
}

TEST_CASE("PrivateDescriptor is checked by identity: a reused number is never touched") {
  PrivateDescriptor ours(OpenDevNull());
  REQUIRE_FALSE(ours.empty());
  const int number = ours.UncheckedNumber();
  CHECK(ours.IsStillOurs());
  CHECK(ours.Get() == number);

  // The program closes every descriptor and reopens one of its own files on our number.
  close(number);
  char path[] = "/tmp/strata-private-fd-XXXXXX";
  const int program_file = mkstemp(path);
  REQUIRE(program_file >= 0);
  REQUIRE(dup2(program_file, number) == number);
  close(program_file);

  CHECK_FALSE(ours.IsStillOurs());
  CHECK(ours.Get() == -1);
  ours.Close();  // Must not close the program's file.
  CHECK(fcntl(number, F_GETFD) != -1);
  CHECK(write(number, "x", 1) == 1);
  close(number);
  unlink(path);
}

TEST_CASE("PrivateDescriptor closes what it still owns, and moves") {
  PrivateDescriptor first(OpenDevNull());
  const int number = first.UncheckedNumber();
  PrivateDescriptor second(std::move(first));
  CHECK(first.empty());
  CHECK(second.Get() == number);
  second.Close();
  CHECK(fcntl(number, F_GETFD) == -1);
  CHECK(second.empty());

  PrivateDescriptor released(OpenDevNull());
  const int kept = released.Release();
  CHECK(released.empty());
  CHECK(fcntl(kept, F_GETFD) != -1);
  close(kept);
}

}  // namespace
}  // namespace strata
