#include "shared/progress/failure_latch.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"

namespace strata {
namespace {

TEST_CASE("a source keeps its first failure only") {
  FailureLatch latch;
  CHECK_FALSE(latch.Failed());
  CHECK(latch.Failure().empty());
  CHECK(latch.SetFailure("write(/tmp/p.json): No space left on device"));
  CHECK(latch.Failed());
  CHECK_FALSE(latch.SetFailure("a later failure"));
  CHECK(latch.Failure() == "write(/tmp/p.json): No space left on device");
}

TEST_CASE("an empty message is still a failure") {
  FailureLatch latch;
  latch.SetFailure("");
  CHECK(latch.Failed());
  CHECK(latch.Failure() == "unknown failure");
}

TEST_CASE("children share the source's state and prefix their context") {
  FailureLatch source;
  FailureLatch threads(source, "threads: ");
  FailureLatch thread12(threads, "thread 12: ");
  FailureLatch plain(source, "");
  CHECK(thread12.context() == "threads: thread 12: ");
  CHECK_FALSE(plain.Failed());

  CHECK(thread12.SetFailure("bad entry"));
  for (const FailureLatch* l : {&source, &threads, &thread12, &plain}) {
    CHECK(l->Failed());
    CHECK(l->Failure() == "threads: thread 12: bad entry");
  }
  CHECK_FALSE(source.SetFailure("too late"));
  CHECK_FALSE(plain.SetFailure("too late"));
  CHECK(source.Failure() == "threads: thread 12: bad entry");
}

TEST_CASE("concurrent failures: exactly one wins, readers see it whole") {
  for (int round = 0; round < 20; ++round) {
    FailureLatch source;
    std::atomic<int> winners{0};
    std::atomic<int> bad_reads{0};  // Catch2's assertions are not thread-safe: count here.
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        FailureLatch child(source, "t" + std::to_string(t) + ": ");
        while (!go.load()) {
        }
        if (child.SetFailure("failure from thread " + std::to_string(t))) ++winners;
        // Any reader sees a complete message once Failed() is true.
        if (!child.Failed() ||
            child.Failure().find("failure from thread ") == std::string::npos) {
          ++bad_reads;
        }
      });
    }
    go = true;
    for (std::thread& t : threads) t.join();
    CHECK(winners == 1);
    CHECK(bad_reads == 0);
    const std::string& message = source.Failure();
    // The prefix and the message come from the same (winning) thread.
    REQUIRE(message.size() > 4);
    CHECK(message.substr(0, 1) == "t");
    CHECK(message.substr(message.size() - 1) == message.substr(1, 1));
  }
}

}  // namespace
}  // namespace strata
