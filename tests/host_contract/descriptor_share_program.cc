// Threads that stay alive while the main thread opens /dev/null until the process runs out of
// descriptors. No Strata include, no Strata call.
//   descriptor_share_program THREADS [idle]
// With "idle" the threads only sleep (many threads on a busy machine); otherwise each spins
// briefly every millisecond (sampled).
// Prints "descriptor_share: opened=N" (N: how many opens succeeded) and exits 0.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 20;
  const bool idle = argc > 2 && strcmp(argv[2], "idle") == 0;
  std::atomic<bool> done{false};
  std::atomic<int> started{0};
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&] {
      started.fetch_add(1);
      volatile unsigned long spin = 0;
      while (!done.load()) {
        if (!idle) {
          for (int k = 0; k < 100000; ++k) spin = spin + k;  // CPU: sampled.
        }
        usleep(idle ? 20000 : 1000);
      }
    });
  }
  while (started.load() < threads) usleep(1000);
  usleep(50000);  // Every thread has run (and, profiled, been given its sampling source).
  int opened = 0;
  std::vector<int> fds;
  for (;;) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno != EMFILE) perror("open");
      break;
    }
    fds.push_back(fd);
    ++opened;
  }
  for (int fd : fds) close(fd);
  done.store(true);
  for (std::thread& t : workers) t.join();
  printf("descriptor_share: opened=%d\n", opened);
  return 0;
}
