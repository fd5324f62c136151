#!/bin/sh
# sleeping_children.sh N: run by record_growth_test.sh, plain and under `strata record`.
# Starts N children that sleep 3 s (half end by exit(), half are shells ending by _exit with
# a status), and prints what they use while they sleep and what is left after they ended:
#   shmem_growth_kb=K   Shmem (/proc/meminfo) now minus before the children started (the
#                       machine's: other work moves it; printed only)
#   children_shmem_kb=C the shared memory the children themselves have resident (RssShmem in
#                       /proc/PID/status: a flight recorder file's pages they mapped on a tmpfs)
#   files=F allocated_kb=A apparent_kb=S   the children's flight recorder files in
#                       $STRATA_FLIGHT_RECORDER (only under `strata record`): how many, the
#                       blocks they hold (st_blocks) and their sizes (st_size)
#   left=L              the children's files still there after every child ended
n="$1"
dir="${STRATA_FLIGHT_RECORDER:-}"
shmem_kb() { awk '/^Shmem:/ { print $2 }' /proc/meminfo; }
before=$(shmem_kb)
pids=""
i=0
while [ "$i" -lt "$n" ]; do
  if [ $((i % 2)) -eq 0 ]; then sleep 3 & else sh -c 'sleep 3; exit 3' & fi
  pids="$pids $!"
  i=$((i + 1))
done
# Every child's session has started (its file exists), bounded at 10 s.
tries=0
while [ -n "$dir" ] && [ "$tries" -lt 100 ]; do
  missing=0
  for pid in $pids; do
    ls "$dir"/strata-"$pid"-*.flight >/dev/null 2>&1 || missing=1
  done
  [ "$missing" -eq 0 ] && break
  sleep 0.1
  tries=$((tries + 1))
done
sleep 0.5  # Past the first sampler loop of each child (it prepares the next chunk).
growth=$(($(shmem_kb) - before))
children_shmem=0
for pid in $pids; do
  kb=$(awk '/^RssShmem:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
  children_shmem=$((children_shmem + ${kb:-0}))
done
files=0 allocated=0 apparent=0
if [ -n "$dir" ]; then
  for pid in $pids; do
    for f in "$dir"/strata-"$pid"-*.flight; do
      [ -f "$f" ] || continue
      set -- $(stat -c '%b %B %s' "$f")
      files=$((files + 1))
      allocated=$((allocated + $1 * $2 / 1024))
      apparent=$((apparent + $3 / 1024))
    done
  done
fi
echo "shmem_growth_kb=$growth children_shmem_kb=$children_shmem files=$files allocated_kb=$allocated apparent_kb=$apparent"
for pid in $pids; do wait "$pid"; done
left=0
if [ -n "$dir" ]; then
  for pid in $pids; do
    for f in "$dir"/strata-"$pid"-*.flight; do [ -f "$f" ] && left=$((left + 1)); done
  done
fi
echo "left=$left"
