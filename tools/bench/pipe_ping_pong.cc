// pipe_ping_pong: two threads pass one byte back and forth over two pipes, N round trips
// (each a blocking write and read on both sides: 4 wrapped calls per round trip). Prints the
// process's CPU time and wall time. Unmodified program (no Strata include): run it plain,
// preloaded with wait stacks on, and preloaded with STRATA_STARTUP_FEATURES=-waitstacks, in
// interleaved rounds (tools/bench/wait_cost.sh; docs/benchmarks.md, "Wait stacks: cost").
//
//   pipe_ping_pong [ROUND_TRIPS]      default 100000
//   pipe_ping_pong --nonblocking N    N reads of an empty O_NONBLOCK pipe in one thread (EAGAIN
//                                     at once): a wrapper's fast path, per call
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int g_to_peer[2];
int g_to_main[2];
long g_round_trips = 100000;

void* Peer(void*) {
  char byte;
  for (long i = 0; i < g_round_trips; ++i) {
    if (read(g_to_peer[0], &byte, 1) != 1 || write(g_to_main[1], &byte, 1) != 1) std::abort();
  }
  return nullptr;
}

double Seconds(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "--nonblocking") == 0) {
    const long calls = std::atol(argv[2]);
    int fds[2];
    if (pipe2(fds, O_NONBLOCK) != 0) return 1;
    char byte;
    const double cpu_start = Seconds(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < calls; ++i) {
      if (read(fds[0], &byte, 1) != -1) std::abort();
    }
    const double cpu = Seconds(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
    std::printf("pipe_ping_pong: nonblocking calls=%ld cpu_s=%.4f ns_per_call=%.1f\n", calls, cpu,
                cpu * 1e9 / calls);
    return 0;
  }
  if (argc > 1) g_round_trips = std::atol(argv[1]);
  if (pipe(g_to_peer) != 0 || pipe(g_to_main) != 0) return 1;
  const double wall_start = Seconds(CLOCK_MONOTONIC);
  const double cpu_start = Seconds(CLOCK_PROCESS_CPUTIME_ID);
  pthread_t peer;
  pthread_create(&peer, nullptr, &Peer, nullptr);
  char byte = 'x';
  for (long i = 0; i < g_round_trips; ++i) {
    if (write(g_to_peer[1], &byte, 1) != 1 || read(g_to_main[0], &byte, 1) != 1) std::abort();
  }
  pthread_join(peer, nullptr);
  const double wall = Seconds(CLOCK_MONOTONIC) - wall_start;
  const double cpu = Seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu_start;
  std::printf("pipe_ping_pong: round_trips=%ld calls=%ld wall_s=%.4f cpu_s=%.4f calls_per_s=%.0f\n",
              g_round_trips, 4 * g_round_trips, wall, cpu, 4 * g_round_trips / wall);
  return 0;
}
