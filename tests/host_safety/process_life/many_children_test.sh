#!/usr/bin/env bash
# Issue 38, item 2: the flight recorder's disk and shared memory grow with what each process
# writes, never its whole buffer limit up front, and each process's file goes when it ends
# without a crash, outside `strata record` (docs/flight-recorder.md). many_children.sh starts
# 24 children at once (sleep, a shell exec'ing sleep, a shell ending with _exit after sleep;
# 24 + 16 preloaded images in all) that live ~2 s; it runs plain, then preloaded with
# STRATA_FLIGHT_RECORDER on a tmpfs (/dev/shm when it is one: its pages are shared memory,
# Shmem in /proc/meminfo) or else on $WORK:
#   - status and output as plain;
#   - while the children run (looked at every 50 ms): a file for each preloaded child over the
#     run, together at most 6 MiB each on the file system at every look (du; a process that fallocated its whole 64 MiB limit,
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

# run NAME [ENV...]: starts the script and, until it ends, looks every 50 ms at the recorder's
# directory and at Shmem. Sets RUN_STATUS, SHMEM_GROWTH_KB (the largest growth seen),
# FILES_SEEN (distinct files over the run), FILES_MOST (the most at one look), and
# DISK_OVER (looks whose files used more than 6 MiB each: "count kB" lines). Looked at all
# along, not once at a fixed time: on a busy machine the 24 children start their sessions
# over seconds, and the first may have ended before the last has started (issue 35).
run() {
  local name="$1"; shift
  local before now files kb
  before=$(shmem_kb)
  SHMEM_GROWTH_KB=0 FILES_MOST=0 DISK_OVER=""
  : >"$WORK/$name.seen"
  timeout -s KILL 120 env "$@" "$script" "$children" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    now=$(shmem_kb)
    ((now - before > SHMEM_GROWTH_KB)) && SHMEM_GROWTH_KB=$((now - before))
    # Names and allocated blocks of 512 bytes in one pass (a separate du would also count
    # files made after the listing).
    find "$flight_dir" -name '*.flight' -printf '%b %p\n' >"$WORK/$name.look" 2>/dev/null
    cut -d' ' -f2- "$WORK/$name.look" >>"$WORK/$name.seen"
    files=$(wc -l <"$WORK/$name.look")
    ((files > FILES_MOST)) && FILES_MOST=$files
    if ((files > 0)); then
      kb=$(awk '{ blocks += $1 } END { print int(blocks / 2) }' "$WORK/$name.look")
      ((kb > files * per_process_kb)) && DISK_OVER+="$files files ${kb} kB; "
    fi
    sleep 0.05
  done
  wait "$pid"
  RUN_STATUS=$?
  FILES_SEEN=$(sort -u "$WORK/$name.seen" | wc -l)
}

run plain
plain_status=$RUN_STATUS
plain_growth=$SHMEM_GROWTH_KB
result "scenario=many-children run=plain status=$RUN_STATUS shmem_growth_kb=$SHMEM_GROWTH_KB"

run preloaded LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 STRATA_FLIGHT_RECORDER="$flight_dir"
left=$(find "$flight_dir" -name '*.flight' | wc -l)
result "scenario=many-children run=preloaded status=$RUN_STATUS files_seen=$FILES_SEEN files_most=$FILES_MOST shmem_growth_kb=$SHMEM_GROWTH_KB left_after=$left"

if [[ $RUN_STATUS -eq $plain_status ]] && cmp -s "$WORK/plain.out" "$WORK/preloaded.out"; then
  pass "status $RUN_STATUS and output as plain"
else
  fail "status $RUN_STATUS (plain $plain_status) or output differs"
  diff "$WORK/plain.out" "$WORK/preloaded.out" | head -5
  head -5 "$WORK/preloaded.err"
fi
# The script's shell, every sleep, and the shells of the exec and _exit children while they
# wait: at least one file per child over the run.
if ((FILES_SEEN >= children)); then
  pass "$FILES_SEEN flight recorder files while the children ran (>= $children; at most $FILES_MOST at once)"
else
  fail "$FILES_SEEN flight recorder files while the children ran (>= $children expected)"
fi
if [[ -z "$DISK_OVER" ]]; then
  pass "at every look the files used at most 6 MiB each"
else
  fail "files used more than 6 MiB each: $DISK_OVER"
fi
if ((on_tmpfs == 1)); then
  limit_kb=$((FILES_MOST * per_process_kb))
  extra=$((SHMEM_GROWTH_KB - plain_growth))
  if ((extra <= limit_kb + 64 * 1024)); then
    pass "Shmem grew at most $extra kB more than plain (<= $FILES_MOST x 6 MiB = $limit_kb kB + 64 MiB)"
  else
    fail "Shmem grew $extra kB more than plain (> $FILES_MOST x 6 MiB = $limit_kb kB + 64 MiB)"
  fi
fi
((left == 0)) && pass "no flight recorder file left after the run" ||
  fail "$left flight recorder files left: $(ls "$flight_dir" | head -3 | tr '\n' ' ')"

finish
