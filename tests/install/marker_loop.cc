// Records text markers in a loop, so that most samples are inside libstrata_base (install_test:
// `strata symbolicate` names those frames with file:line from the split debug info).
#include <strata/markers.h>

#include <cstdio>
#include <string>

int main() {
  for (int i = 0; i < 3000000; ++i) {
    STRATA_MARKER_TEXT("Loop", kOther, {}, std::to_string(i));
  }
  std::puts("marker_loop: done");
  return 0;
}
