#!/usr/bin/env bash
# Issue 38, item 2: the flight recorder's disk and shared memory grow with what each process
# writes, never its whole buffer limit up front, and each process's file goes when it ends
# without a crash, outside `strata record` (docs/flight-recorder.md). many_children.sh starts
# 24 children at once (sleep, a shell exec'ing sleep, a shell ending with _exit after sleep;
# 24 + 16 preloaded images in all) that live ~2 s; it runs plain, then preloaded with
# STRATA_FLIGHT_RECORDER on a tmpfs (/dev/shm when it is one: its pages are shared memory,
# Shmem in /proc/meminfo) or else on $WORK:
#   - status and output as plain;
#   - while the children run: one file per live preloaded process, together at most
#     6 MiB each on the file system (du; a process that fallocated its whole 64 MiB limit,
#     as before issue 33, takes 67 MB: 24 of them 1.6 GB), and on a tmpfs Shmem grown by at
#     most that plus 64 MiB over the plain run's growth (Shmem is the whole machine's: the
#     slack is for other work);
#   - after the run, no file left (exit, exec and _exit all remove theirs).
source "$(dirname "$0")/../../scenario_lib.sh"

script="$(binary tests/host_safety/process_life/many_children.sh)"
children=24
per_process_kb=$((6 * 1024))

shmem_kb() { awk '/^Shmem:/ { print $2 }' /proc/meminfo; }

# The recorder's directory: on a tmpfs when there is one, so that Shmem is measured.
flight_dir=""
on_tmpfs=0
if [[ "$(stat -f -c %T /dev/shm 2>/dev/null)" == tmpfs ]] && [[ -w /dev/shm ]]; then
  flight_dir="$(mktemp -d /dev/shm/strata-many-children.XXXXXX)" && on_tmpfs=1
fi
if ((on_tmpfs == 0)); then
  flight_dir="$WORK/flight"
  mkdir -p "$flight_dir"
fi
trap 'rm -rf "${flight_dir:?}"' EXIT
result "scenario=many-children flight_dir_on_tmpfs=$on_tmpfs"

# run NAME [ENV...]: starts the script, measures once every child runs, waits. Sets
# RUN_STATUS, SHMEM_GROWTH_KB, FILES_WHILE_RUNNING, DISK_KB_WHILE_RUNNING.
run() {
  local name="$1"; shift
  local before
  before=$(shmem_kb)
  timeout -s KILL 120 env "$@" "$script" "$children" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  local pid=$!
  # "ready": every child is started (bounded: the run is killed at 120 s).
  while kill -0 "$pid" 2>/dev/null && ! grep -q '^ready$' "$WORK/$name.out"; do sleep 0.05; done
  sleep 1  # Every child has loaded the library and started its session by now.
  SHMEM_GROWTH_KB=$(($(shmem_kb) - before))
  FILES_WHILE_RUNNING=$(find "$flight_dir" -name '*.flight' | wc -l)
  DISK_KB_WHILE_RUNNING=$(du -sk "$flight_dir" | cut -f1)
  wait "$pid"
  RUN_STATUS=$?
}

run plain
plain_status=$RUN_STATUS
plain_growth=$SHMEM_GROWTH_KB
result "scenario=many-children run=plain status=$RUN_STATUS shmem_growth_kb=$SHMEM_GROWTH_KB"

run preloaded LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 STRATA_FLIGHT_RECORDER="$flight_dir"
left=$(find "$flight_dir" -name '*.flight' | wc -l)
result "scenario=many-children run=preloaded status=$RUN_STATUS files=$FILES_WHILE_RUNNING disk_kb=$DISK_KB_WHILE_RUNNING shmem_growth_kb=$SHMEM_GROWTH_KB left_after=$left"

if [[ $RUN_STATUS -eq $plain_status ]] && cmp -s "$WORK/plain.out" "$WORK/preloaded.out"; then
  pass "status $RUN_STATUS and output as plain"
else
  fail "status $RUN_STATUS (plain $plain_status) or output differs"
  diff "$WORK/plain.out" "$WORK/preloaded.out" | head -5
  head -5 "$WORK/preloaded.err"
fi
# The script's shell, every sleep, and the shells of the exec and _exit children while they
# wait: at least one file per child.
if ((FILES_WHILE_RUNNING >= children)); then
  pass "$FILES_WHILE_RUNNING flight recorder files while the children run (>= $children)"
else
  fail "$FILES_WHILE_RUNNING flight recorder files while the children run (>= $children expected)"
fi
limit_kb=$((FILES_WHILE_RUNNING * per_process_kb))
if ((DISK_KB_WHILE_RUNNING <= limit_kb)); then
  pass "files use $DISK_KB_WHILE_RUNNING kB in all (<= $FILES_WHILE_RUNNING x 6 MiB = $limit_kb kB)"
else
  fail "files use $DISK_KB_WHILE_RUNNING kB in all (> $FILES_WHILE_RUNNING x 6 MiB = $limit_kb kB)"
fi
if ((on_tmpfs == 1)); then
  extra=$((SHMEM_GROWTH_KB - plain_growth))
  if ((extra <= limit_kb + 64 * 1024)); then
    pass "Shmem grew $extra kB more than plain (<= $limit_kb kB + 64 MiB)"
  else
    fail "Shmem grew $extra kB more than plain (> $limit_kb kB + 64 MiB)"
  fi
fi
((left == 0)) && pass "no flight recorder file left after the run" ||
  fail "$left flight recorder files left: $(ls "$flight_dir" | head -3 | tr '\n' ' ')"

finish
