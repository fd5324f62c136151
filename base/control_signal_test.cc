#include "base/internal/signals/control_signal.h"

#include <string>

#include "catch2/catch.hpp"

namespace strata {
namespace base_internal {
namespace {

TEST_CASE("NumberedProfilePath puts the number before a final .json, else appends it") {
  CHECK(NumberedProfilePath("/tmp/server.json", 1) == "/tmp/server-1.json");
  CHECK(NumberedProfilePath("/tmp/p.4242.json", 12) == "/tmp/p.4242-12.json");
  CHECK(NumberedProfilePath("/tmp/profile", 2) == "/tmp/profile-2");
  CHECK(NumberedProfilePath("/tmp/profile.json.gz", 3) == "/tmp/profile.json.gz-3");
  CHECK(NumberedProfilePath("/tmp/a.json/b", 4) == "/tmp/a.json/b-4");
  // A name that is only ".json" keeps it whole.
  CHECK(NumberedProfilePath("/tmp/.json", 5) == "/tmp/.json-5");
  CHECK(NumberedProfilePath("x.json", 6) == "x-6.json");
}

TEST_CASE("Without a control signal, the interposers' hook serves nothing") {
  REQUIRE(ControlSignal() == 0);
  struct sigaction old;
  int result = -7;
  CHECK_FALSE(HandleProgramControlSignalAction(SIGUSR2, nullptr, &old, &result));
  CHECK(result == -7);
}

}  // namespace
}  // namespace base_internal
}  // namespace strata
