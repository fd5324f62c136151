// A multi-threaded TCP echo server started without Strata, for the attach scenarios
// (attach_test.sh): the main thread accepts, one worker thread per connection replies to
// each line with a checksum of it computed with a busy loop, and, with --waiters, four
// threads wait the ways a program waits: read on a pipe, epoll_wait, pthread_cond_wait, and
// one spins. Each wait counts the EINTRs it sees (the program itself would see none: nothing
// signals it); "STATS" from a client prints "eintr N" and the thread count; "QUIT" ends the
// server with status 0. --only KIND: one waiting thread alone (WaitAlone below).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

std::atomic<int> g_eintr{0};
std::atomic<bool> g_quit{false};
int g_pipe[2];
int g_epoll = -1;
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
bool g_cond_flag = false;

__attribute__((noinline)) uint64_t Checksum(const std::string& line, int rounds) {
  uint64_t h = 1469598103934665603ULL;
  for (int r = 0; r < rounds; ++r) {
    for (char c : line) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  }
  return h;
}

void* ReadWaiter(void*) {
  pthread_setname_np(pthread_self(), "read-waiter");
  char byte;
  for (;;) {
    const ssize_t n = read(g_pipe[0], &byte, 1);
    if (n < 0 && errno == EINTR) { ++g_eintr; continue; }
    return nullptr;  // Written at quit.
  }
}

void* EpollWaiter(void*) {
  pthread_setname_np(pthread_self(), "epoll-waiter");
  epoll_event event;
  for (;;) {
    const int n = epoll_wait(g_epoll, &event, 1, -1);
    if (n < 0 && errno == EINTR) { ++g_eintr; continue; }
    return nullptr;
  }
}

void* CondWaiter(void*) {
  pthread_setname_np(pthread_self(), "cond-waiter");
  pthread_mutex_lock(&g_mutex);
  while (!g_cond_flag) pthread_cond_wait(&g_cond, &g_mutex);  // Never EINTR by contract.
  pthread_mutex_unlock(&g_mutex);
  return nullptr;
}

void* Spinner(void*) {
  pthread_setname_np(pthread_self(), "spinner");
  volatile uint64_t x = 0;
  while (!g_quit.load(std::memory_order_relaxed)) {
    for (int i = 0; i < 100000; ++i) x = x * 31 + i;
  }
  return nullptr;
}

int CountThreads() {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  int threads = 0;
  while (f && fgets(line, sizeof(line), f)) {
    if (strncmp(line, "Threads:", 8) == 0) threads = atoi(line + 8);
  }
  if (f) fclose(f);
  return threads;
}

void* Worker(void* raw) {
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(raw));
  // ECHO_WORKER_NAME_DELAY_MS: the worker names itself that late (attach_test: a thread that
  // strata adopts while it still has its creator's name).
  if (const char* delay = getenv("ECHO_WORKER_NAME_DELAY_MS")) usleep(static_cast<useconds_t>(atoi(delay)) * 1000);
  pthread_setname_np(pthread_self(), "echo-worker");
  std::string pending;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) { ++g_eintr; continue; }
    if (n <= 0) break;
    pending.append(buffer, n);
    size_t newline;
    while ((newline = pending.find('\n')) != std::string::npos) {
      const std::string line = pending.substr(0, newline);
      pending.erase(0, newline + 1);
      std::string reply;
      if (line == "STATS") {
        reply = "eintr " + std::to_string(g_eintr.load()) + " threads " + std::to_string(CountThreads()) + "\n";
      } else if (line == "QUIT") {
        g_quit = true;
        reply = "bye\n";
      } else {
        char text[64];
        snprintf(text, sizeof(text), "%016llx\n", static_cast<unsigned long long>(Checksum(line, 2000)));
        reply = line + " " + text;
      }
      size_t sent = 0;
      while (sent < reply.size()) {
        const ssize_t w = write(fd, reply.data() + sent, reply.size() - sent);
        if (w < 0 && errno == EINTR) { ++g_eintr; continue; }
        if (w <= 0) break;
        sent += w;
      }
      if (g_quit) {
        close(fd);
        exit(0);  // Exit handlers run: an attached session saves here.
      }
    }
  }
  close(fd);
  return nullptr;
}

// --only regs: the read of `--only read`, made with the syscall instruction in asm so that the
// registers the kernel keeps across a system call (all but rax, rcx, r11) can be checked after
// it: rbx, r8-r10, r12-r15, the arguments and ymm0-ymm15 hold new patterns before each read and
// are compared after it, as are the thread's signal mask (SIGUSR1 blocked) and its alternate
// signal stack. Each byte but 'q' reads again; counted in "regs_changed N".
extern "C" {
struct RegisterImage {
  uint64_t gpr[8];  // rbx, r8, r9, r10, r12, r13, r14, r15
  uint64_t args[3];  // rdi, rsi, rdx
  uint64_t padding[5];
  uint8_t ymm[16][32];
};
RegisterImage strata_test_registers_in, strata_test_registers_out;
}

long ReadWithRegisters(char* byte) {
  long result;
  asm volatile(
#define LOAD_YMM(n) "vmovdqu strata_test_registers_in+128+32*" #n "(%%rip), %%ymm" #n "\n\t"
      LOAD_YMM(0) LOAD_YMM(1) LOAD_YMM(2) LOAD_YMM(3) LOAD_YMM(4) LOAD_YMM(5) LOAD_YMM(6) LOAD_YMM(7)
      LOAD_YMM(8) LOAD_YMM(9) LOAD_YMM(10) LOAD_YMM(11) LOAD_YMM(12) LOAD_YMM(13) LOAD_YMM(14) LOAD_YMM(15)
      "mov strata_test_registers_in+0(%%rip), %%rbx\n\t"
      "mov strata_test_registers_in+8(%%rip), %%r8\n\t"
      "mov strata_test_registers_in+16(%%rip), %%r9\n\t"
      "mov strata_test_registers_in+24(%%rip), %%r10\n\t"
      "mov strata_test_registers_in+32(%%rip), %%r12\n\t"
      "mov strata_test_registers_in+40(%%rip), %%r13\n\t"
      "mov strata_test_registers_in+48(%%rip), %%r14\n\t"
      "mov strata_test_registers_in+56(%%rip), %%r15\n\t"
      "syscall\n\t"
      "mov %%rbx, strata_test_registers_out+0(%%rip)\n\t"
      "mov %%r8, strata_test_registers_out+8(%%rip)\n\t"
      "mov %%r9, strata_test_registers_out+16(%%rip)\n\t"
      "mov %%r10, strata_test_registers_out+24(%%rip)\n\t"
      "mov %%r12, strata_test_registers_out+32(%%rip)\n\t"
      "mov %%r13, strata_test_registers_out+40(%%rip)\n\t"
      "mov %%r14, strata_test_registers_out+48(%%rip)\n\t"
      "mov %%r15, strata_test_registers_out+56(%%rip)\n\t"
      "mov %%rdi, strata_test_registers_out+64(%%rip)\n\t"
      "mov %%rsi, strata_test_registers_out+72(%%rip)\n\t"
      "mov %%rdx, strata_test_registers_out+80(%%rip)\n\t"
#define STORE_YMM(n) "vmovdqu %%ymm" #n ", strata_test_registers_out+128+32*" #n "(%%rip)\n\t"
      STORE_YMM(0) STORE_YMM(1) STORE_YMM(2) STORE_YMM(3) STORE_YMM(4) STORE_YMM(5) STORE_YMM(6) STORE_YMM(7)
      STORE_YMM(8) STORE_YMM(9) STORE_YMM(10) STORE_YMM(11) STORE_YMM(12) STORE_YMM(13) STORE_YMM(14) STORE_YMM(15)
      "vzeroupper\n\t"
      : "=a"(result)
      : "a"(0L), "D"(0L), "S"(byte), "d"(1L)
      : "rcx", "r11", "rbx", "r8", "r9", "r10", "r12", "r13", "r14", "r15", "memory", "xmm0", "xmm1", "xmm2",
        "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
#undef LOAD_YMM
#undef STORE_YMM
  return result;
}

// The kernel's 64 signals (glibc's sigset_t has room for 1024).
bool SameSignals(const sigset_t& a, const sigset_t& b) {
  for (int s = 1; s <= 64; ++s) {
    if (sigismember(&a, s) != sigismember(&b, s)) return false;
  }
  return true;
}

int WaitWithRegisters() {
  if (!__builtin_cpu_supports("avx")) {
    fprintf(stderr, "--only regs needs AVX\n");
    return 3;
  }
  sigset_t usr1, mask;
  sigemptyset(&usr1);
  sigemptyset(&mask);  // The kernel fills 8 bytes of the 128: the rest must compare equal.
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  static char alternate[64 * 1024];
  stack_t altstack{};
  altstack.ss_sp = alternate;
  altstack.ss_size = sizeof(alternate);
  sigaltstack(&altstack, nullptr);
  int changed = 0, eintr = 0;
  uint64_t pattern = 0x9e3779b97f4a7c15ULL;
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    for (uint64_t& word : strata_test_registers_in.gpr) word = pattern = pattern * 6364136223846793005ULL + 1442695040888963407ULL;
    for (auto& lane : strata_test_registers_in.ymm) {
      for (uint8_t& b : lane) b = static_cast<uint8_t>((pattern = pattern * 6364136223846793005ULL + 1) >> 56);
    }
    char byte = 0;
    const long result = ReadWithRegisters(&byte);
    sigset_t now;
    sigemptyset(&now);
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    stack_t now_altstack{};
    sigaltstack(nullptr, &now_altstack);
    const RegisterImage& in = strata_test_registers_in;
    const RegisterImage& out = strata_test_registers_out;
    if (memcmp(in.gpr, out.gpr, sizeof(in.gpr)) != 0 || memcmp(in.ymm, out.ymm, sizeof(in.ymm)) != 0 ||
        out.args[0] != 0 || out.args[1] != reinterpret_cast<uint64_t>(&byte) || out.args[2] != 1 ||
        !SameSignals(now, mask) || now_altstack.ss_sp != altstack.ss_sp ||
        now_altstack.ss_size != altstack.ss_size || now_altstack.ss_flags != 0) {
      ++changed;
      int first_gpr = -1, first_ymm = -1;
      for (int i = 0; i < 8 && first_gpr < 0; ++i) first_gpr = in.gpr[i] != out.gpr[i] ? i : -1;
      for (int i = 0; i < 16 && first_ymm < 0; ++i) first_ymm = memcmp(in.ymm[i], out.ymm[i], 32) != 0 ? i : -1;
      fprintf(stderr,
              "read (result %ld): changed: first general register %d, first ymm %d, arguments %d, mask %d, "
              "altstack %d (mask %#llx, now %#llx)\n",
              result, first_gpr, first_ymm,
              out.args[0] != 0 || out.args[1] != reinterpret_cast<uint64_t>(&byte) || out.args[2] != 1,
              !SameSignals(now, mask),
              now_altstack.ss_sp != altstack.ss_sp || now_altstack.ss_size != altstack.ss_size || now_altstack.ss_flags != 0,
              *reinterpret_cast<unsigned long long*>(&mask), *reinterpret_cast<unsigned long long*>(&now));
    }
    if (result == -EINTR) {
      ++eintr;
      continue;
    }
    if (result != 1) {
      printf("read returned %ld\n", result);
      return 1;
    }
    if (byte == 'q') break;
  }
  printf("eintr %d spurious 0 regs_changed %d\n", eintr, changed);
  return 0;
}

// --only KIND: the main thread alone waits in one call, so that attach must borrow it there
// (attach_test.sh): read or epoll_wait on stdin until a byte comes, or pthread_cond_wait until
// a helper thread blocked in sigwaitinfo (a call attach never borrows; it counts its EINTRs)
// gets SIGUSR2; or it
// spins for 5 s. Prints "ready" first, then "eintr N spurious M" (spurious: condition-variable wake-ups
// without the flag) or "spun", and exits 0.
int WaitAlone(const std::string& kind) {
  int spurious = 0;
  printf("ready\n");  // The test attaches once this is out (the program has started).
  fflush(stdout);
  if (kind == "read") {
    char byte;
    while (read(0, &byte, 1) < 0) {
      if (errno != EINTR) return 1;
      ++g_eintr;
    }
  } else if (kind == "epoll") {
    const int epoll = epoll_create1(EPOLL_CLOEXEC);
    epoll_event event{};
    event.events = EPOLLIN;
    if (epoll_ctl(epoll, EPOLL_CTL_ADD, 0, &event) != 0) return 1;
    while (epoll_wait(epoll, &event, 1, -1) < 0) {
      if (errno != EINTR) return 1;
      ++g_eintr;
    }
  } else if (kind == "cond") {
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, nullptr);  // Inherited by the helper.
    pthread_t helper;
    pthread_create(&helper, nullptr, [](void*) -> void* {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGUSR2);
      while (sigwaitinfo(&set, nullptr) < 0) {
        if (errno == EINTR) ++g_eintr;  // The kernel's EINTR after a mere stop, if not rewound.
      }
      pthread_mutex_lock(&g_mutex);
      g_cond_flag = true;
      pthread_cond_signal(&g_cond);
      pthread_mutex_unlock(&g_mutex);
      return nullptr;
    }, nullptr);
    pthread_mutex_lock(&g_mutex);
    while (!g_cond_flag) {
      pthread_cond_wait(&g_cond, &g_mutex);
      if (!g_cond_flag) ++spurious;
    }
    pthread_mutex_unlock(&g_mutex);
    pthread_join(helper, nullptr);
  } else if (kind == "spin") {
    timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    volatile uint64_t x = 0;
    do {
      for (int i = 0; i < 100000; ++i) x = x * 31 + i;
      clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - start.tv_sec < 5);
    printf("spun\n");
    return 0;
  } else {
    fprintf(stderr, "unknown --only kind %s\n", kind.c_str());
    return 2;
  }
  printf("eintr %d spurious %d\n", g_eintr.load(), spurious);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--only" && std::string(argv[2]) == "regs") return WaitWithRegisters();
  if (argc > 2 && std::string(argv[1]) == "--only") return WaitAlone(argv[2]);
  bool waiters = argc > 1 && std::string(argv[1]) == "--waiters";
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || listen(listener, 16) != 0) {
    perror("bind/listen");
    return 1;
  }
  socklen_t length = sizeof(address);
  getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  if (waiters) {
    if (pipe(g_pipe) != 0) return 1;
    g_epoll = epoll_create1(EPOLL_CLOEXEC);
    // Detached: never joined (the server ends by exit(0) at quit; joinable, the spinner's end
    // was TSan's "thread leak", status 66, without Strata).
    for (void* (*routine)(void*) : {ReadWaiter, EpollWaiter, CondWaiter, Spinner}) {
      pthread_t t;
      if (pthread_create(&t, nullptr, routine, nullptr) == 0) pthread_detach(t);
    }
  }
  printf("port %d\n", ntohs(address.sin_port));
  fflush(stdout);
  for (;;) {
    const int client = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR) ++g_eintr;
      continue;
    }
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_create(&thread, &attributes, Worker, reinterpret_cast<void*>(static_cast<intptr_t>(client)));
    pthread_attr_destroy(&attributes);
  }
}
