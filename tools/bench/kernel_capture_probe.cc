// kernel_capture_probe: what kernel-side stack capture would cost (issue 38, "another capture
// path"; docs/benchmarks.md, "Kernel-side capture against the signal handler"). Not a
// profiler: benchmark support only.
//
// N worker threads (built with frame pointers) each descend a recursion of the given depth and
// spin a fixed amount of work at its bottom, then report their own CPU time. With
// --capture kernel, each worker opens a perf task-clock event on itself that samples every
// 1/HZ s of its CPU with PERF_SAMPLE_REGS_USER (ip, sp, bp) and PERF_SAMPLE_STACK_USER (the
// top STACK bytes of its stack, copied by the kernel in the interrupt), and no signal; one
// reader thread wakes every 4 ms, drains every worker's ring and unwinds each copied stack
// with frame pointers (what a sampler thread would do; no symbolication, no buffer). The
// same binary with --capture none is the unprofiled program, into which the in-process
// samplers are preloaded (Strata, libsignal_floor.so), so that every variant runs the same
// code.
//
// Usage: kernel_capture_probe [--threads N] [--depth D] [--iterations M] [--capture none|kernel]
//                             [--hz HZ] [--stack BYTES]
//   defaults: 2 threads, depth 10, 300000000 iterations, none, 4000 Hz, 16384 bytes.
// Prints "kernel_capture_probe: capture=C threads=N depth=D worker_cpu_ms=W process_cpu_ms=P
//   samples=S frames=F lost=L truncated=T reader_cpu_ms=R", where W sums the workers' own CPU
// (their thread clocks: the interrupts and copies charged to them), P is the process's CPU
// (the reader included), S the samples read, F the frames unwound, L the records the kernel
// lost, T the samples whose walk ran off the copied bytes before the stack's root.
#include <linux/perf_event.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

long g_iterations = 300000000;
int g_depth = 10;
long g_hz = 4000;
uint32_t g_stack_bytes = 16384;
bool g_kernel_capture = false;

constexpr size_t kRingPages = 1024;  // 4 MiB of samples per worker (60 samples of 64 KiB).
constexpr uint64_t kRegsMask = (1ull << 6) | (1ull << 7) | (1ull << 8);  // bp, sp, ip (x86-64)

struct Worker {
  pthread_t thread;
  int index = 0;
  int perf_fd = -1;
  perf_event_mmap_page* ring = nullptr;
  double cpu_ms = 0;
  uint64_t result = 0;
  std::atomic<bool> ready{false};
};
std::vector<Worker> g_workers;
std::atomic<bool> g_done{false};
uint64_t g_samples = 0, g_frames = 0, g_lost = 0, g_truncated = 0;

double ClockMs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int OpenCaptureEvent() {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.sample_period = static_cast<uint64_t>(1e9 / g_hz);
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER |
                     PERF_SAMPLE_STACK_USER;
  attr.sample_regs_user = kRegsMask;
  attr.sample_stack_user = g_stack_bytes;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.wakeup_events = 1u << 30;  // Nobody polls: the reader wakes on its own period.
  return static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

// Unwinds one copied stack with frame pointers: [sp, sp + size) is `stack`.
void Unwind(uint64_t ip, uint64_t sp, uint64_t bp, const uint8_t* stack, uint64_t size) {
  uint64_t frames = ip != 0 ? 1 : 0;
  bool truncated = false;
  while (true) {
    if (bp < sp || bp + 16 > sp + size) {
      // A frame pointer outside the copy: the root (0), or the copy was too short.
      truncated = bp != 0;
      break;
    }
    uint64_t next_bp, return_address;
    std::memcpy(&next_bp, stack + (bp - sp), 8);
    std::memcpy(&return_address, stack + (bp - sp) + 8, 8);
    if (return_address == 0) break;
    ++frames;
    if (next_bp <= bp) break;
    bp = next_bp;
  }
  g_frames += frames;
  if (truncated) ++g_truncated;
}

// One sample record (its bytes, contiguous).
void ReadRecord(const uint8_t* record, size_t bytes) {
  const perf_event_header* header = reinterpret_cast<const perf_event_header*>(record);
  if (header->type == PERF_RECORD_LOST) {
    uint64_t lost[2];
    std::memcpy(lost, record + sizeof(*header), sizeof(lost));
    g_lost += lost[1];
    return;
  }
  if (header->type != PERF_RECORD_SAMPLE) return;
  const uint8_t* p = record + sizeof(*header);
  p += 8;  // pid, tid
  p += 8;  // time
  uint64_t abi;
  std::memcpy(&abi, p, 8);
  p += 8;
  uint64_t regs[3] = {0, 0, 0};  // bp, sp, ip (ascending register numbers)
  if (abi != 0) {
    std::memcpy(regs, p, sizeof(regs));
    p += sizeof(regs);
  }
  uint64_t size;
  std::memcpy(&size, p, 8);
  p += 8;
  const uint8_t* stack = p;
  uint64_t dynamic_size = 0;
  if (size != 0) std::memcpy(&dynamic_size, p + size, 8);
  if (p + size + 8 > record + bytes) return;
  ++g_samples;
  Unwind(regs[2], regs[1], regs[0], stack, std::min(size, dynamic_size));
}

void DrainRing(Worker& worker) {
  perf_event_mmap_page* page = worker.ring;
  if (!page) return;
  const uint8_t* data = reinterpret_cast<const uint8_t*>(page) + page->data_offset;
  const uint64_t data_size = page->data_size;
  const uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = page->data_tail;
  static std::vector<uint8_t> copy;
  while (tail < head) {
    perf_event_header header;
    const size_t at = tail % data_size;
    if (at + sizeof(header) <= data_size) {
      std::memcpy(&header, data + at, sizeof(header));
    } else {
      uint8_t h[sizeof(header)];
      for (size_t i = 0; i < sizeof(header); ++i) h[i] = data[(at + i) % data_size];
      std::memcpy(&header, h, sizeof(header));
    }
    if (header.size == 0) break;
    if (at + header.size <= data_size) {
      ReadRecord(data + at, header.size);
    } else {
      copy.resize(header.size);
      const size_t first = data_size - at;
      std::memcpy(copy.data(), data + at, first);
      std::memcpy(copy.data() + first, data, header.size - first);
      ReadRecord(copy.data(), header.size);
    }
    tail += header.size;
  }
  __atomic_store_n(&page->data_tail, tail, __ATOMIC_RELEASE);
}

void* ReaderMain(void*) {
  pthread_setname_np(pthread_self(), "capture-reader");
  const timespec period{0, 4000000};
  while (!g_done.load(std::memory_order_acquire)) {
    nanosleep(&period, nullptr);
    for (Worker& w : g_workers) {
      if (w.ready.load(std::memory_order_acquire)) DrainRing(w);
    }
  }
  for (Worker& w : g_workers) DrainRing(w);
  return nullptr;
}

}  // namespace

extern "C" {

__attribute__((noinline)) uint64_t probe_spin(long iterations, uint64_t x) {
  for (long i = 0; i < iterations; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    __asm__ volatile("" : "+r"(x));
  }
  __asm__ volatile("" : : "r"(&x) : "memory");  // Not a leaf: keeps its frame pointer.
  return x;
}

__attribute__((noinline)) uint64_t probe_recurse(int depth, long iterations, uint64_t seed) {
  uint64_t r = depth <= 1 ? probe_spin(iterations, seed) : probe_recurse(depth - 1, iterations, seed);
  __asm__ volatile("" : "+r"(r) : : "memory");
  return r ^ static_cast<uint64_t>(depth);
}

__attribute__((noinline)) void* probe_worker_main(void* argument) {
  Worker& worker = *static_cast<Worker*>(argument);
  char name[16];
  std::snprintf(name, sizeof(name), "probe-%d", worker.index);
  pthread_setname_np(pthread_self(), name);
  if (g_kernel_capture) {
    worker.perf_fd = OpenCaptureEvent();
    if (worker.perf_fd < 0) {
      std::perror("kernel_capture_probe: perf_event_open");
      std::exit(3);
    }
    void* ring = mmap(nullptr, (kRingPages + 1) * 4096, PROT_READ | PROT_WRITE, MAP_SHARED,
                      worker.perf_fd, 0);
    if (ring == MAP_FAILED) {
      std::perror("kernel_capture_probe: mmap");
      std::exit(3);
    }
    worker.ring = static_cast<perf_event_mmap_page*>(ring);
    worker.ready.store(true, std::memory_order_release);
  }
  const double start = ClockMs(CLOCK_THREAD_CPUTIME_ID);
  worker.result = probe_recurse(g_depth, g_iterations, static_cast<uint64_t>(worker.index) + 1);
  worker.cpu_ms = ClockMs(CLOCK_THREAD_CPUTIME_ID) - start;
  if (worker.perf_fd >= 0) ioctl(worker.perf_fd, PERF_EVENT_IOC_DISABLE, 0);
  return nullptr;
}

}  // extern "C"

int main(int argc, char** argv) {
  int threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* value = argv[i + 1];
    if (std::strcmp(argv[i], "--threads") == 0) {
      threads = std::atoi(value);
    } else if (std::strcmp(argv[i], "--depth") == 0) {
      g_depth = std::atoi(value);
    } else if (std::strcmp(argv[i], "--iterations") == 0) {
      g_iterations = std::atol(value);
    } else if (std::strcmp(argv[i], "--capture") == 0) {
      g_kernel_capture = std::strcmp(value, "kernel") == 0;
    } else if (std::strcmp(argv[i], "--hz") == 0) {
      g_hz = std::atol(value);
    } else if (std::strcmp(argv[i], "--stack") == 0) {
      g_stack_bytes = static_cast<uint32_t>(std::atol(value)) & ~7u;
    } else {
      std::fprintf(stderr, "kernel_capture_probe: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (threads < 1 || threads > 64 || g_depth < 1 || g_depth > 100000 || g_hz < 1 ||
      g_hz > 100000 || g_stack_bytes < 8 || g_stack_bytes > 65000) {
    std::fprintf(stderr,
                 "kernel_capture_probe: --threads 1..64, --depth 1..100000, --hz 1..100000, "
                 "--stack 8..65000\n");
    return 2;
  }
  g_workers = std::vector<Worker>(static_cast<size_t>(threads));
  pthread_t reader;
  if (g_kernel_capture) pthread_create(&reader, nullptr, ReaderMain, nullptr);
  for (int i = 0; i < threads; ++i) {
    g_workers[i].index = i;
    pthread_create(&g_workers[i].thread, nullptr, probe_worker_main, &g_workers[i]);
  }
  double worker_cpu_ms = 0;
  uint64_t result = 0;
  for (Worker& w : g_workers) {
    pthread_join(w.thread, nullptr);
    worker_cpu_ms += w.cpu_ms;
    result ^= w.result;
  }
  const double reader_start = ClockMs(CLOCK_PROCESS_CPUTIME_ID);
  double reader_cpu_ms = 0;
  if (g_kernel_capture) {
    g_done.store(true, std::memory_order_release);
    timespec reader_cpu;
    clockid_t clock;
    pthread_getcpuclockid(reader, &clock);
    clock_gettime(clock, &reader_cpu);
    reader_cpu_ms = reader_cpu.tv_sec * 1e3 + reader_cpu.tv_nsec / 1e6;
    pthread_join(reader, nullptr);
  }
  (void)reader_start;
  std::printf(
      "kernel_capture_probe: capture=%s threads=%d depth=%d worker_cpu_ms=%.1f "
      "process_cpu_ms=%.1f samples=%llu frames=%llu lost=%llu truncated=%llu reader_cpu_ms=%.1f "
      "result=%llu\n",
      g_kernel_capture ? "kernel" : "none", threads, g_depth, worker_cpu_ms,
      ClockMs(CLOCK_PROCESS_CPUTIME_ID), static_cast<unsigned long long>(g_samples),
      static_cast<unsigned long long>(g_frames), static_cast<unsigned long long>(g_lost),
      static_cast<unsigned long long>(g_truncated), reader_cpu_ms,
      static_cast<unsigned long long>(result));
  return 0;
}
