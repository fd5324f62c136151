// Unmodified test program (no Strata include or call): a parent that spins in parent_work,
// fork+execs itself as a child that spins in child_work (or, with a third argument, a chain of
// that many generations, each spawning the next), waits for it, spins again and exits 0. One
// line of output per process, without pids.
//   spawn_child [iterations [generations]]
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void parent_work(unsigned long iterations) {
  for (unsigned long i = 0; i < iterations; ++i) sink = sink * 31 + i;
}

__attribute__((noinline)) static void child_work(unsigned long iterations) {
  for (unsigned long i = 0; i < iterations; ++i) sink = sink * 37 + i;
}

int main(int argc, char** argv) {
  const unsigned long iterations = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000000UL;
  const long generations = argc > 2 ? strtol(argv[2], NULL, 10) : 1;
  const int is_child = argc > 3;
  if (is_child) {
    child_work(iterations);
  } else {
    parent_work(iterations);
  }
  if (generations > 0) {
    char iterations_text[32], generations_text[32];
    snprintf(iterations_text, sizeof(iterations_text), "%lu", iterations);
    snprintf(generations_text, sizeof(generations_text), "%ld", generations - 1);
    fflush(stdout);
    const pid_t child = fork();
    if (child < 0) return 3;
    if (child == 0) {
      execl("/proc/self/exe", argv[0], iterations_text, generations_text, "child", (char*)NULL);
      _exit(127);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
    if (!is_child) parent_work(iterations);
  }
  printf("spawn_child: %s done\n", is_child ? "child" : "parent");
  return 0;
}
