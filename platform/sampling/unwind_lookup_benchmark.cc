// Cost of one walk lookup as libunwind makes it on a cache miss: ServeDlIteratePhdrDuringWalk
// (the object found with _dl_find_object, its unwind information copied with checked reads,
// unwind_table_copy.h) and a callback that reads what it was handed. For a pc in this binary,
// in libc and in libstdc++; p50 and p90 of 20 000 lookups each, in ns (CLOCK_MONOTONIC).
// Manual (docs/benchmarks.md):
//   bazel run -c opt //platform/sampling:unwind_lookup_benchmark
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include "platform/sampling/libunwind_imports.h"

namespace {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

volatile uint64_t g_sink;

int ReadHeaders(dl_phdr_info* info, size_t, void*) {
  uint64_t sum = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) sum += info->dlpi_phdr[i].p_vaddr;
  g_sink = sum;
  return 1;
}

__attribute__((noinline)) int LocalFunction(int x) { return x * 3 + 1; }

void Measure(const char* name, uintptr_t pc) {
  constexpr int kLookups = 20000;
  std::vector<int64_t> costs;
  costs.reserve(kLookups);
  for (int i = 0; i < kLookups; ++i) {
    const int64_t start = NowNs();
    strata::SetLibunwindLookupPc(pc);
    int result = 0;
    strata::ServeDlIteratePhdrDuringWalk(&ReadHeaders, nullptr, &result);
    strata::SetLibunwindLookupPc(0);
    costs.push_back(NowNs() - start);
  }
  std::sort(costs.begin(), costs.end());
  std::printf("%-10s lookup p50 %6lld ns  p90 %6lld ns\n", name,
              static_cast<long long>(costs[kLookups / 2]),
              static_cast<long long>(costs[kLookups * 9 / 10]));
}

}  // namespace

int main() {
  Measure("binary", reinterpret_cast<uintptr_t>(&LocalFunction) + 1);
  Measure("libc", reinterpret_cast<uintptr_t>(&getpid) + 1);
  Measure("libstdc++", reinterpret_cast<uintptr_t>(&std::set_terminate) + 1);
  return 0;
}
