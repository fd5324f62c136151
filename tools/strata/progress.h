// A one-line progress bar on stderr for the long steps of the `strata` command (reading,
// merging, symbolicating, writing). Shown only when stderr is a terminal (and
// STRATA_NO_PROGRESS is unset); otherwise every call is a cheap no-op, so output that goes
// to a file or a pipe stays quiet.
//
//   Progress progress("symbolicate", total_addresses);
//   for (...) progress.Advance(1);     // redraws at most ~10 times a second
//   progress.Done();                   // clears the line (also on destruction)
//
// Thread safety: one object per thread.
#ifndef STRATA_TOOLS_STRATA_PROGRESS_H_
#define STRATA_TOOLS_STRATA_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace strata {
namespace cli {

class Progress {
 public:
  Progress(std::string label, uint64_t total);
  ~Progress() { Done(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Whether anything is drawn at all (stderr is a terminal).
  static bool Enabled();

  // Cheap when disabled; otherwise reads the clock, so call it at most every ~10 µs of work.
  void Set(uint64_t done) {
    done_ = done;
    if (enabled_) MaybeDraw();
  }
  void Advance(uint64_t by) { Set(done_ + by); }
  void SetTotal(uint64_t total) { total_ = total; }
  // Clears the bar. Idempotent.
  void Done();

 private:
  void MaybeDraw();

  std::string label_;
  uint64_t total_;
  uint64_t done_ = 0;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_PROGRESS_H_
