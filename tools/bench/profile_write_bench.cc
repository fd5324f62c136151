// profile_write_bench: how fast the base tier writes a big profile, and the memory the
// writing takes (issue 9: >= 150 MB/s of JSON; 1 M samples and 1 M markers in <= 2 s).
//
// Starts a session (sampling every 1 s, so the sampler adds next to nothing), fills the
// session buffer with SAMPLES native samples of the main thread and MARKERS markers through
// the public marker API, then times ProfilerSaveProfile(PATH): the capture (symbolication of
// every distinct address from the ELF symbol tables, the Gecko tables) and the JSON written
// through the temporary file and the rename.
//
// Samples are written into the session buffer in the layout the sampler uses
// (shared/profile/sample_entry.h): 512 distinct stacks, 8 to 31 frames deep, of return
// addresses inside libc, libstdc++ and this program, so every frame is symbolicated.
// Markers rotate through four kinds: untyped instant, untyped interval, typed with three
// fields (int64, double, literal string) and text (an 18-character payload).
//
// Usage: profile_write_bench [--samples N] [--markers N] [--out PATH] [--keep]
// Prints one line:
//   profile_write samples=N markers=N bytes=B fill_s=F write_s=W write_cpu_s=C mb_per_s=R
//     mb_per_cpu_s=Q rss_before_mb=X maxrss_before_mb=Y maxrss_after_mb=Z write_peak_extra_mb=D
// write_s is wall time, write_cpu_s the writing thread's own CPU time (on a machine shared
// with other work the wall time also counts the time the thread waited for a CPU);
// mb_per_s and mb_per_cpu_s are 10^6 bytes per wall / CPU second; the *_mb memory figures are MiB. write_peak_extra_mb is
// maxrss after - maxrss before: the extra peak memory of the writing beyond the filled buffer
// (0 when the writing peaked lower).
// Exit status 0, or 1 when the session could not start or the profile could not be written.
#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/internal/session/core.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "base/testing/three_field_marker.h"
#include "shared/buffer/entry_kinds.h"
#include "shared/buffer/entry_serialization.h"
#include "shared/buffer/leb128.h"
#include "shared/profile/sample_entry.h"

namespace {

// A native stack as the sampler writes it: ULEB128 count, then [uint8 kNative][uint64 pc],
// root first.
struct NativeStack {
  const uint64_t* pcs;
  size_t count;
};

}  // namespace

namespace strata {
template <>
struct Serializer<NativeStack> {
  static size_t Bytes(const NativeStack& s) {
    return ULEB128Size(uint64_t{s.count}) + s.count * (1 + sizeof(uint64_t));
  }
  static void Write(EntryWriter& writer, const NativeStack& s) {
    writer.WriteULEB128<uint64_t>(s.count);
    for (size_t i = 0; i < s.count; ++i) {
      writer.WriteObjects(static_cast<uint8_t>(profile::SampleFrame::Kind::kNative), s.pcs[i]);
    }
  }
};
}  // namespace strata

namespace {

using strata::testing::ThreeFieldMarker;

double MaxRssMb() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // KiB -> MiB.
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

double CurrentRssMb() {
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = -1;
  std::fclose(f);
  return pages_resident * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

__attribute__((noinline)) uint64_t OwnCodeAddress() {
  return reinterpret_cast<uint64_t>(__builtin_return_address(0));
}

// Code addresses to build stacks from: entry points of libc and libstdc++ functions plus
// small offsets (as return addresses inside them would be), and this program's own code.
std::vector<uint64_t> CodeAddressPool() {
  const char* names[] = {"malloc",     "free",      "memcpy",      "memset",     "strlen",
                         "qsort",      "fopen",     "fclose",      "fwrite",     "fread",
                         "printf",     "snprintf",  "strtol",      "strtod",     "getenv",
                         "pthread_create", "pthread_mutex_lock", "pthread_mutex_unlock",
                         "nanosleep",  "read",      "write",       "open",       "close",
                         "mmap",       "munmap",    "bsearch",     "strcmp",     "memmove",
                         "_Znwm",      "_ZdlPv",    "_ZNSt6thread4joinEv",
                         "_ZNSs6appendEPKcm", "_ZSt9terminatev"};
  std::vector<uint64_t> pool;
  for (const char* name : names) {
    if (void* p = dlsym(RTLD_DEFAULT, name)) {
      for (uint64_t offset : {5, 17, 33}) pool.push_back(reinterpret_cast<uint64_t>(p) + offset);
    }
  }
  pool.push_back(OwnCodeAddress());
  pool.push_back(reinterpret_cast<uint64_t>(&CurrentRssMb) + 9);
  pool.push_back(reinterpret_cast<uint64_t>(&MaxRssMb) + 7);
  return pool;
}

}  // namespace

int main(int argc, char** argv) {
  long samples = 1000000, markers = 1000000;
  std::string path = "/tmp/strata-profile-write-bench.json";
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--samples") == 0 && i + 1 < argc) {
      samples = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--markers") == 0 && i + 1 < argc) {
      markers = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      path = argv[++i];
    } else if (std::strcmp(argv[i], "--keep") == 0) {
      keep = true;
    } else {
      std::fprintf(stderr, "usage: %s [--samples N] [--markers N] [--out PATH] [--keep]\n",
                   argv[0]);
      return 2;
    }
  }

  strata::ProfilerSettings settings;
  settings.interval_ms = 1000;
  settings.buffer_megabytes = 1024;
  strata::ProfilerStart(settings);
  if (!strata::ProfilerIsActive()) {
    std::fprintf(stderr, "profile_write_bench: the session did not start\n");
    return 1;
  }

  const auto fill_start = std::chrono::steady_clock::now();
  // 512 stacks from a fixed pseudo-random sequence (the same profile every run).
  const std::vector<uint64_t> pool = CodeAddressPool();
  std::vector<std::vector<uint64_t>> stacks(512);
  uint64_t rng = 88172645463325252ull;
  auto next = [&rng] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  for (auto& stack : stacks) {
    const size_t depth = 8 + next() % 24;
    for (size_t d = 0; d < depth; ++d) stack.push_back(pool[next() % pool.size()]);
  }
  strata::ChunkedBuffer& buffer = strata::base_internal::SessionBuffer();
  const strata::ThreadId self = strata::CurrentThreadId();
  long written_samples = 0;
  for (long i = 0; i < samples; ++i) {
    const std::vector<uint64_t>& stack = stacks[next() % stacks.size()];
    if (buffer.PutObjects(strata::EntryKind::kSample, self, strata::TimeStamp::Now(),
                          int64_t{1000000}, int32_t{0}, NativeStack{stack.data(), stack.size()})) {
      ++written_samples;
    }
  }
  const strata::TimeStamp marker_start = strata::TimeStamp::Now();
  for (long i = 0; i < markers; ++i) {
    switch (i % 4) {
      case 0:
        STRATA_MARKER_UNTYPED("instant", kOther);
        break;
      case 1:
        STRATA_MARKER_UNTYPED("interval", kOther,
                              strata::MarkerOptions::Interval(marker_start,
                                                              strata::TimeStamp::Now()));
        break;
      case 2:
        STRATA_MARKER("typed", kOther, {}, ThreeFieldMarker, int64_t{i}, 0.5 * i,
                      strata::ProfilerString::Literal("literal"));
        break;
      default:
        STRATA_MARKER_TEXT("text", kOther, {}, "payload text 18 ch");
        break;
    }
  }
  const double fill_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - fill_start).count();
  const strata::ChunkedBuffer::State state = buffer.GetState();
  if (state.cleared_block_count != 0 || written_samples != samples) {
    std::fprintf(stderr, "profile_write_bench: the buffer dropped data (%ld of %ld samples kept)\n",
                 written_samples, samples);
    return 1;
  }

  const double rss_before = CurrentRssMb();
  const double maxrss_before = MaxRssMb();
  const auto write_start = std::chrono::steady_clock::now();
  const double write_cpu_start = ThreadCpuSeconds();
  std::string error;
  const bool ok = strata::ProfilerSaveProfile(path, &error);
  const double write_cpu_s = ThreadCpuSeconds() - write_cpu_start;
  const double write_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - write_start).count();
  const double maxrss_after = MaxRssMb();
  if (!ok) {
    std::fprintf(stderr, "profile_write_bench: ProfilerSaveProfile failed: %s\n", error.c_str());
    return 1;
  }
  struct stat st;
  const long long bytes = stat(path.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
  if (!keep) unlink(path.c_str());
  strata::ProfilerStop();
  std::printf("profile_write samples=%ld markers=%ld bytes=%lld fill_s=%.3f write_s=%.3f "
              "write_cpu_s=%.3f mb_per_s=%.1f mb_per_cpu_s=%.1f rss_before_mb=%.1f "
              "maxrss_before_mb=%.1f maxrss_after_mb=%.1f write_peak_extra_mb=%.1f\n",
              samples, markers, bytes, fill_s, write_s, write_cpu_s, bytes / 1e6 / write_s,
              bytes / 1e6 / write_cpu_s, rss_before,
              maxrss_before, maxrss_after, std::max(0.0, maxrss_after - maxrss_before));
  return 0;
}
