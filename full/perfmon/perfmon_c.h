/* C entry points of the performance monitor (full/perfmon/perfmon.h, docs/perfmon.md),
 * exported by libstrata_full.so: for C programs and for programs that dlopen the full tier
 * and look the functions up with dlsym.
 *
 *   strata_perfmon_enable();
 *   strata_perfmon_group* ui = strata_perfmon_group_create("ui", 0);
 *   for (;;) {
 *     strata_perfmon_stopwatch watch;              // on the stack, LIFO like the C++ RAII
 *     strata_perfmon_stopwatch_begin(&watch, &ui, 1);
 *     run_event();
 *     strata_perfmon_stopwatch_end(&watch);
 *     strata_perfmon_iteration_done();
 *   }
 *   char* json = strata_perfmon_snapshot_json();  // free() it
 *
 * Thread safety and contracts are those of the C++ API: a group records on one thread and
 * is destroyed on it outside a stopwatch; stopwatches of a thread end in reverse order of
 * their begin, on the thread that began them. Not async-signal-safe. */
#ifndef STRATA_FULL_PERFMON_PERFMON_C_H_
#define STRATA_FULL_PERFMON_PERFMON_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct strata_perfmon_group strata_perfmon_group;

/* Storage for one stopwatch (a strata::perfmon::AutoStopwatch inside). */
typedef struct strata_perfmon_stopwatch {
  union {
    unsigned char bytes[128];
    uint64_t align;
  } opaque;
} strata_perfmon_stopwatch;

/* Turns monitoring on (calibrates the cycle counter the first time, ~20 ms) / off. */
void strata_perfmon_enable(void);
void strata_perfmon_disable(void);

/* A named group; per_item != 0: a per-item group, inactive until activated. NULL name: "". */
strata_perfmon_group* strata_perfmon_group_create(const char* name, int per_item);
void strata_perfmon_group_destroy(strata_perfmon_group* group);
void strata_perfmon_group_set_active(strata_perfmon_group* group, int active);
/* The group's committed CPU time (ns) and jank count over 2^bucket ms (bucket 0..9). */
int64_t strata_perfmon_group_cpu_time_ns(const strata_perfmon_group* group);
uint64_t strata_perfmon_group_jank_count(const strata_perfmon_group* group, int bucket);

/* Measures from begin to end for `count` groups (NULL entries ignored; at most 8 used). */
void strata_perfmon_stopwatch_begin(strata_perfmon_stopwatch* watch,
                                    strata_perfmon_group* const* groups, size_t count);
void strata_perfmon_stopwatch_end(strata_perfmon_stopwatch* watch);

void strata_perfmon_iteration_done(void);
void strata_perfmon_nested_loop_entered(void);

/* Every live group's statistics as JSON (Snapshot::ToJson), malloc'ed: free() it. */
char* strata_perfmon_snapshot_json(void);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_FULL_PERFMON_PERFMON_C_H_ */
