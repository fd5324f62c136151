#include "shared/progress/progress_logger.h"

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"

namespace strata {
namespace {

using PV = ProportionValue;

std::string Location(const SharedProgress& p) {
  const char* l = p.LastLocation();
  return l ? l : "<null>";
}

TEST_CASE("a top-level logger reports 0 when made and 1 when destroyed") {
  SharedProgress progress;
  CHECK(progress.Progress().IsExactlyZero());
  CHECK(progress.LastLocation() == nullptr);
  {
    ProgressLogger logger(&progress, "start", "end");
    CHECK(logger.IsActive());
    CHECK(progress.Progress().IsExactlyZero());
    CHECK(Location(progress) == "start");
    logger.SetLocalProgress(PV(0.25), "quarter");
    CHECK(progress.Progress() == PV(0.25));
    CHECK(logger.GlobalProgress() == PV(0.25));
    CHECK(Location(progress) == "quarter");
    logger.SetLocalProgress(PV(0.5));  // No location: the last one stays.
    CHECK(Location(progress) == "quarter");
    logger.SetLocalProgress(PV(0.6), "");  // Empty: same.
    CHECK(Location(progress) == "quarter");
    CHECK(std::string(logger.LastGlobalLocation()) == "quarter");
    logger.SetLocalProgress(PV::Invalid(), "ignored progress");  // Location still taken.
    CHECK(progress.Progress() == PV(0.6));
    logger.SetLocalProgress(3, 4);
    CHECK(progress.Progress() == PV(0.75));
    logger.SetLocalProgress(5, 4);  // Clamped to 1.
    CHECK(progress.Progress().IsExactlyOne());
    logger.SetLocalProgress(1, 0);  // Nothing.
    CHECK(progress.Progress().IsExactlyOne());
  }
  CHECK(progress.Progress().IsExactlyOne());
  CHECK(Location(progress) == "end");
  progress.Reset();
  CHECK(progress.Progress().IsExactlyZero());
  CHECK(progress.LastLocation() == nullptr);
}

TEST_CASE("sub-loggers map their local 0..1 onto their parent's sub-range") {
  SharedProgress progress;
  ProgressLogger top(&progress);
  {
    ProgressLogger sub = top.CreateSubLogger(PV(0.2), PV(0.6), "sub start", "sub end");
    CHECK(progress.Progress() == PV(0.2));
    CHECK(Location(progress) == "sub start");
    sub.SetLocalProgress(PV(0.5));
    CHECK(std::abs(progress.Progress().ToDouble() - 0.4) < 1e-9);
    {
      // Three levels: [0.5, 1] of [0.2, 0.6] = [0.4, 0.6]; its half is 0.5.
      ProgressLogger subsub = sub.CreateSubLogger(PV(0.5), PV::One());
      subsub.SetLocalProgress(PV(0.5), "deep");
      CHECK(std::abs(progress.Progress().ToDouble() - 0.5) < 1e-9);
      CHECK(Location(progress) == "deep");
    }
    CHECK(progress.Progress() == PV(0.6));  // subsub's end = sub's end.
  }
  CHECK(progress.Progress() == PV(0.6));
  CHECK(Location(progress) == "sub end");
  top.Finish();
  CHECK(progress.Progress().IsExactlyOne());
  CHECK_FALSE(top.IsActive());
  top.SetLocalProgress(PV(0.1));  // Finished: nothing.
  CHECK(progress.Progress().IsExactlyOne());
}

TEST_CASE("loop sub-loggers tile the range exactly, in order") {
  SharedProgress progress;
  ProgressLogger top(&progress);
  const PV from(0.1), to(0.9);
  PV last = PV();
  const uint64_t n = 7;
  for (uint64_t i = 0; i < n; ++i) {
    ProgressLogger part = top.CreateLoopSubLogger(from, to, i, n);
    const PV start = progress.Progress();
    CHECK(start >= last);
    CHECK(start == PV::SplitPoint(from, to, i, n));
    part.SetLocalProgress(PV(0.5));
    CHECK(progress.Progress() >= start);
    last = progress.Progress();
  }
  CHECK(progress.Progress() == to);  // The last part ends exactly at `to`.
}

TEST_CASE("inactive loggers do nothing; moved-from loggers report nothing more") {
  ProgressLogger none;
  CHECK_FALSE(none.IsActive());
  none.SetLocalProgress(PV(0.5), "x");
  CHECK(none.GlobalProgress().IsInvalid());
  CHECK(none.LastGlobalLocation() == nullptr);
  CHECK_FALSE(none.CreateSubLogger(PV(), PV::One()).IsActive());
  ProgressLogger null_global(nullptr, "x");
  CHECK_FALSE(null_global.IsActive());

  SharedProgress progress;
  ProgressLogger top(&progress);
  CHECK_FALSE(top.CreateSubLogger(PV(0.6), PV(0.5)).IsActive());  // Reversed range.
  CHECK_FALSE(top.CreateSubLogger(PV::Invalid(), PV(0.5)).IsActive());
  {
    ProgressLogger a = top.CreateSubLogger(PV(0.1), PV(0.3), nullptr, "a end");
    ProgressLogger b(std::move(a));
    CHECK_FALSE(a.IsActive());  // NOLINT(bugprone-use-after-move): checking the contract.
    CHECK(b.IsActive());
    b.SetLocalProgress(PV(0.5));
    CHECK(std::abs(progress.Progress().ToDouble() - 0.2) < 1e-9);
    ProgressLogger c;
    c = std::move(b);
    CHECK(c.IsActive());
  }  // a and b report nothing; c reports its end once.
  CHECK(progress.Progress() == PV(0.3));
  CHECK(Location(progress) == "a end");
  {
    // Move-assigning over an active logger drops its range without an end report (which
    // would come after the new range's start and make the progress go back).
    ProgressLogger d = top.CreateSubLogger(PV(0.4), PV(0.5), nullptr, "d end");
    d = top.CreateSubLogger(PV(0.6), PV(0.7));
    CHECK(progress.Progress() == PV(0.6));
    CHECK(Location(progress) == "a end");
    ProgressLogger e = top.CreateSubLogger(PV(0.3), PV(0.4), nullptr, "e end");
    e.Finish();  // Reported when asked.
    CHECK(progress.Progress() == PV(0.4));
    CHECK(Location(progress) == "e end");
    d.SetLocalProgress(PV(0.5));
  }
  CHECK(progress.Progress() == PV(0.7));
}

TEST_CASE("another thread polls a monotonic progress, and sees 1 last") {
  SharedProgress progress;
  std::atomic<bool> done{false};
  std::vector<double> seen;
  std::thread poller([&] {
    while (!done.load(std::memory_order_acquire)) {
      seen.push_back(progress.Progress().ToDouble());
    }
    seen.push_back(progress.Progress().ToDouble());
  });
  {
    ProgressLogger top(&progress, "start", "done");
    for (uint64_t i = 0; i < 50; ++i) {
      ProgressLogger part = top.CreateLoopSubLogger(PV(), PV::One(), i, 50);
      for (uint64_t k = 0; k <= 1000; ++k) part.SetLocalProgress(k, 1000);
    }
  }
  done.store(true, std::memory_order_release);
  poller.join();
  REQUIRE(!seen.empty());
  for (size_t i = 1; i < seen.size(); ++i) REQUIRE(seen[i] >= seen[i - 1]);
  CHECK(seen.back() == 1.0);
  CHECK(Location(progress) == "done");
}

}  // namespace
}  // namespace strata
