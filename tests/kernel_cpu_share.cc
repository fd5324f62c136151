// kernel_cpu_share: a thread that alternates bursts of pwrite(2) to a tmpfs file (CPU spent
// in the kernel, copying pages) with bursts of user-mode arithmetic, and measures each
// side's CPU itself (CLOCK_THREAD_CPUTIME_ID around each burst). Unmodified program (no
// Strata calls); tests/kernel_cpu_share_test.sh compares the profile's pwrite share of
// samples with the CPU share printed here (issue 34: kernel CPU charged to the call's
// caller).
//
// Usage: kernel_cpu_share [--dir DIR] [--rounds N] [--write-ms W] [--compute-ms C]
//   Each round: pwrite 64 KiB blocks (offsets cycling over 4 MiB) until the thread has used
//   W ms of CPU in the burst, then compute until it has used C ms. Prints
//   `checksum=...` then `write_cpu_ns=... compute_cpu_ns=... calls=... pwrite_cpu_ns=...`
//   (pwrite_cpu_ns: the CPU between the clock reads just before and after each pwrite).
//   With --blocking-reads N instead: N blocking 1-byte reads of a pipe another thread
//   writes every 5 ms, then `blocking_reads=N main_cpu_ns=...`.
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace {

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

constexpr size_t kBlock = 64 * 1024;
constexpr int64_t kBlocksInFile = 64;

// Writes blocks until `budget_ns` of the thread's CPU is used; returns the CPU used and adds
// the part spent inside pwrite calls (the clock read on each side of each call) to
// `pwrite_ns`: the rest of the burst is the loop and its clock reads.
__attribute__((noinline)) int64_t WriteBurst(int fd, const char* block, int64_t budget_ns,
                                             int64_t* calls, int64_t* pwrite_ns) {
  const int64_t start = ThreadCpuNs();
  int64_t used = 0;
  int64_t before = start;
  while (used < budget_ns) {
    const off_t offset = static_cast<off_t>((*calls % kBlocksInFile) * kBlock);
    if (pwrite(fd, block, kBlock, offset) != static_cast<ssize_t>(kBlock)) {
      perror("pwrite");
      exit(1);
    }
    const int64_t after = ThreadCpuNs();
    *pwrite_ns += after - before;
    ++*calls;
    used = after - start;
    before = ThreadCpuNs();
  }
  return used;
}

// Arithmetic until `budget_ns` of the thread's CPU is used; returns the CPU used.
__attribute__((noinline)) int64_t ComputeBurst(int64_t budget_ns, uint64_t* checksum) {
  const int64_t start = ThreadCpuNs();
  int64_t used = 0;
  uint64_t x = *checksum | 1;
  while (used < budget_ns) {
    for (int i = 0; i < 20000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    used = ThreadCpuNs() - start;
  }
  *checksum = x;
  return used;
}

int g_pipe[2];

// Writes a byte into the pipe every 5 ms, `count` times.
void* SlowWriter(void* count) {
  const long n = reinterpret_cast<long>(count);
  for (long i = 0; i < n; ++i) {
    usleep(5000);
    const char c = 'b';
    if (write(g_pipe[1], &c, 1) != 1) break;
  }
  return nullptr;
}

// Reads `count` bytes one by one, each read blocking ~5 ms for the writer: calls that are
// switched out every time and use almost no CPU.
__attribute__((noinline)) void BlockingReads(long count) {
  char c;
  for (long i = 0; i < count; ++i) {
    if (read(g_pipe[0], &c, 1) != 1) break;
  }
}

// --blocking-reads N: the main thread blocks in N reads of a pipe another thread fills slowly;
// prints `blocking_reads=N main_cpu_ns=...` (the main thread's whole CPU clock at the end).
int RunBlockingReads(long count) {
  if (pipe(g_pipe) != 0) {
    perror("pipe");
    return 1;
  }
  pthread_t writer;
  pthread_create(&writer, nullptr, SlowWriter, reinterpret_cast<void*>(count));
  BlockingReads(count);
  pthread_join(writer, nullptr);
  printf("blocking_reads=%ld main_cpu_ns=%lld\n", count, static_cast<long long>(ThreadCpuNs()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  int rounds = 60;
  double write_ms = 4;
  double compute_ms = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
    else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--write-ms")) write_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--compute-ms")) compute_ms = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--blocking-reads")) return RunBlockingReads(atol(argv[i + 1]));
  }
  std::string path = dir + "/kernel_cpu_share." + std::to_string(getpid());
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    perror("open");
    return 1;
  }
  unlink(path.c_str());
  static char block[kBlock];
  memset(block, 'k', sizeof(block));
  int64_t write_cpu = 0, compute_cpu = 0, calls = 0, pwrite_cpu = 0;
  uint64_t checksum = 1;
  for (int r = 0; r < rounds; ++r) {
    write_cpu += WriteBurst(fd, block, static_cast<int64_t>(write_ms * 1e6), &calls, &pwrite_cpu);
    compute_cpu += ComputeBurst(static_cast<int64_t>(compute_ms * 1e6), &checksum);
  }
  close(fd);
  printf("checksum=%llu\n", static_cast<unsigned long long>(checksum));
  printf("write_cpu_ns=%lld compute_cpu_ns=%lld calls=%lld pwrite_cpu_ns=%lld\n",
         static_cast<long long>(write_cpu), static_cast<long long>(compute_cpu),
         static_cast<long long>(calls), static_cast<long long>(pwrite_cpu));
  return 0;
}
