#!/usr/bin/env bash
# Issues 38 and 33: under `strata record`, each recorded process's flight recorder file grows
# with what the process has written, never its whole buffer limit up front, and it goes when
# the process ends without a crash (docs/flight-recorder.md). sleeping_children.sh starts 8
# children that wait until it has measured them (flock(1) on a lock it holds: ending by exit();
# and shells ending by _exit), once plain and once under
# `strata record` with its private directory on a tmpfs (/dev/shm when it is one: the files'
# pages are shared memory there, Shmem in /proc/meminfo; else $WORK), and measures while they
# wait:
#   - one file per child, each with the apparent size of the limit (64 MiB + ~2 MiB: sparse)
#     but holding at most 6 MiB of blocks (st_blocks; ~2.1 MB measured: the header, the
#     metadata written, the chunk being written and the next one). Before issue 33 every
#     file had all its 67 MB reserved at start: 8 children, 537 MB;
#   - on a tmpfs, the children's own resident shared memory (RssShmem: the file pages they
#     mapped) at most 6 MiB per child more than in the plain run (the issue saw 8 sleeping
#     children take 618 MB of Shmem). The machine's Shmem is only printed: other work moves
#     it (a loaded CI run saw +131 MB beside 17 MB of the children's files);
#   - after the children ended (exit and _exit): none of their files is left;
# and the status and output of the script as plain, but for the measured figures.
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
SCRIPT="$(binary tests/flight/sleeping_children.sh)"
export STRATA_BASE_LIB="$STRATA_LIB"
export STRATA_NO_PROGRESS=1
children=8
per_file_kb=$((6 * 1024))
limit_kb=$((64 * 1024))  # The default buffer limit.

on_tmpfs=0
if [[ "$(stat -f -c %T /dev/shm 2>/dev/null)" == tmpfs ]] && [[ -w /dev/shm ]]; then
  record_tmp="$(mktemp -d /dev/shm/strata-record-growth.XXXXXX)" && on_tmpfs=1
fi
if ((on_tmpfs == 0)); then
  record_tmp="$WORK/tmp"
  mkdir -p "$record_tmp"
fi
trap 'rm -rf "${record_tmp:?}"' EXIT
result "scenario=record-growth record_dir_on_tmpfs=$on_tmpfs"

field() { sed -n "s/.*\<$1=\([0-9-]*\).*/\1/p" "$2" | head -1; }

timeout -s KILL 120 "$SCRIPT" "$children" >"$WORK/plain.out" 2>"$WORK/plain.err"
plain_status=$?
plain_growth=$(field shmem_growth_kb "$WORK/plain.out")
plain_children_shmem=$(field children_shmem_kb "$WORK/plain.out")
result "scenario=record-growth run=plain status=$plain_status shmem_growth_kb=$plain_growth children_shmem_kb=$plain_children_shmem"

# A hang bound. Under TSan strata record itself is TSan-built: at load 28 its run, merge (39
# processes, 380 000 samples), symbolication and write took 119 s and the 120 s bound killed it.
record_bound=120
((UNDER_TSAN)) && record_bound=600
timeout -s KILL "$record_bound" env TMPDIR="$record_tmp" "${SANITIZER_ENV[@]}" "$STRATA" record -o "$OUT/record.json" -- \
  "$SCRIPT" "$children" >"$WORK/record.out" 2>"$WORK/record.err"
status=$?
sed 's/^/    /' "$WORK/record.out" "$WORK/record.err"
files=$(field files "$WORK/record.out")
allocated=$(field allocated_kb "$WORK/record.out")
apparent=$(field apparent_kb "$WORK/record.out")
growth=$(field shmem_growth_kb "$WORK/record.out")
children_shmem=$(field children_shmem_kb "$WORK/record.out")
left=$(field left "$WORK/record.out")
result "scenario=record-growth run=record status=$status files=$files allocated_kb=$allocated apparent_kb=$apparent shmem_growth_kb=$growth children_shmem_kb=$children_shmem left=$left"

if [[ $status -eq $plain_status ]] && [[ "$(grep -c . "$WORK/record.out")" == "$(grep -c . "$WORK/plain.out")" ]]; then
  pass "strata record: status $status and the script's output as plain"
else
  fail "strata record: status $status (plain $plain_status), or the output differs"
fi
if [[ "$files" == "$children" ]]; then
  pass "one flight recorder file per sleeping child ($files)"
else
  fail "$files flight recorder files for $children sleeping children"
fi
if [[ -n "$apparent" ]] && ((files > 0 && apparent >= files * limit_kb)); then
  pass "each file has the apparent size of the buffer limit ($((apparent / files)) kB >= $limit_kb kB)"
else
  fail "the files' apparent size is $apparent kB for $files files (< $limit_kb kB each)"
fi
if [[ -n "$allocated" ]] && ((files > 0 && allocated <= files * per_file_kb)); then
  pass "the files hold $allocated kB of blocks in all, $((allocated / files)) kB each (<= 6 MiB each; the limit would be $((apparent / files)) kB)"
else
  fail "the files hold $allocated kB of blocks for $files files (> 6 MiB each: reserved up front?)"
fi
if ((on_tmpfs == 1)); then
  extra=$((children_shmem - plain_children_shmem))
  if ((extra <= children * per_file_kb)); then
    pass "the sleeping children hold $extra kB more shared memory than plain (<= $children x 6 MiB; the machine's Shmem moved $((growth - plain_growth)) kB)"
  else
    fail "the sleeping children hold $extra kB more shared memory than plain (> $children x 6 MiB)"
  fi
fi
[[ "$left" == 0 ]] && pass "no child's file left after they ended (exit, _exit)" ||
  fail "$left of the children's files left after they ended"

finish
