#include "tools/strata/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace strata {
namespace cli {

bool Progress::Enabled() {
  static const bool enabled = isatty(STDERR_FILENO) == 1 && std::getenv("STRATA_NO_PROGRESS") == nullptr;
  return enabled;
}

Progress::Progress(std::string label, uint64_t total)
    : label_(std::move(label)), total_(total), enabled_(Enabled()) {
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

void Progress::MaybeDraw() {
  const auto now = std::chrono::steady_clock::now();
  // Nothing for the first 300 ms (short steps stay silent), then ~10 redraws a second.
  if (now - start_ < std::chrono::milliseconds(300)) return;
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  constexpr int kWidth = 30;
  const double fraction = total_ > 0 ? std::min(1.0, static_cast<double>(done_) / total_) : 0;
  const int filled = static_cast<int>(fraction * kWidth);
  char bar[kWidth + 1];
  for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
  bar[kWidth] = '\0';
  const double seconds = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\r\033[K%-12s [%s] %3.0f%%  %.1fs", label_.c_str(), bar, fraction * 100, seconds);
  std::fflush(stderr);
}

void Progress::Done() {
  if (drawn_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    drawn_ = false;
  }
  enabled_ = false;
}

}  // namespace cli
}  // namespace strata
