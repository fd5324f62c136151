/* docs/api.md, "C entry points": the full tier and the performance monitor from C.
 *   STRATA_SHUTDOWN=profile.json ./c_api        (the profile is saved at shutdown) */
#include <strata/perfmon_c.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The full tier's C entry points. <strata/full.h> declares them too, but it is a C++ header:
 * a C file declares them itself. */
int strata_full_start(void); /* 0: took over a base session, 1: started one, -1: none. */
void strata_full_shutdown(void);
void strata_full_add_text_marker(const char* name, const char* text);

static uint64_t handle_event(uint64_t iterations) {
  uint64_t value = 1;
  for (uint64_t i = 0; i < iterations; ++i) value = value * 6364136223846793005ULL + 1;
  return value;
}

int main(void) {
  if (strata_full_start() < 0) fprintf(stderr, "c_api: the full tier did not start\n");
  strata_perfmon_enable();
  strata_perfmon_group* ui = strata_perfmon_group_create("ui", 0);
  uint64_t result = 0;
  for (int event = 0; event < 10; ++event) {
    strata_perfmon_stopwatch watch;
    strata_perfmon_stopwatch_begin(&watch, &ui, 1);
    result ^= handle_event(1000000);
    strata_perfmon_stopwatch_end(&watch);
    strata_perfmon_iteration_done();
  }
  strata_full_add_text_marker("Done", "C example");
  char* json = strata_perfmon_snapshot_json();
  printf("c_api: ui %lld ns; snapshot %s\n", (long long)strata_perfmon_group_cpu_time_ns(ui),
         json != NULL ? "taken" : "missing");
  free(json);
  strata_perfmon_group_destroy(ui);
  strata_full_shutdown(); /* Saves the profile when STRATA_SHUTDOWN is set. */
  printf("c_api: done (%llu)\n", (unsigned long long)result);
  return 0;
}
