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
    pthread_t t;
    pthread_create(&t, nullptr, ReadWaiter, nullptr);
    pthread_create(&t, nullptr, EpollWaiter, nullptr);
    pthread_create(&t, nullptr, CondWaiter, nullptr);
    pthread_create(&t, nullptr, Spinner, nullptr);
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
