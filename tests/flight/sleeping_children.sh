#!/bin/sh
# sleeping_children.sh N: run by record_growth_test.sh, plain and under `strata record`.
# Starts N children that wait (half are flock(1), ending by exit() once the lock is free; half
# are shells ending by _exit with a status after the same wait) until this script has measured
# what they use, then lets them go and prints what is left after they ended:
#   shmem_growth_kb=K   Shmem (/proc/meminfo) now minus before the children started (the
#                       machine's: other work moves it; printed only)
#   children_shmem_kb=C the shared memory the children themselves have resident (RssShmem in
#                       /proc/PID/status: a flight recorder file's pages they mapped on a tmpfs)
#   files=F allocated_kb=A apparent_kb=S   the children's flight recorder files in
#                       $STRATA_FLIGHT_RECORDER (only under `strata record`): how many, the
#                       blocks they hold (st_blocks) and their sizes (st_size)
#   left=L              the children's files still there after every child ended
# The children wait for a lock this script holds, not a fixed time (issue 35): with the TSan
# build every process under `strata record` (each `ls`, `awk`, `stat` here) took ~1 s, so a
# poll of 8 children outlived children that slept 3 s, and their files were gone before the
# poll saw them all (the test killed at its 120 s).
n="$1"
dir="${STRATA_FLIGHT_RECORDER:-}"
shmem_kb() { awk '/^Shmem:/ { print $2 }' /proc/meminfo; }
before=$(shmem_kb)
gate=$(mktemp)
exec 9>"$gate"
flock 9  # Held (by this shell's descriptor 9) until the children have been measured.
pids=""
i=0
while [ "$i" -lt "$n" ]; do
  if [ $((i % 2)) -eq 0 ]; then
    flock "$gate" true 9>&- &
  else
    sh -c 'flock "$1" true; exit 3' sh "$gate" 9>&- &
  fi
  pids="$pids $!"
  i=$((i + 1))
done
# Every child's session has started (its file exists), bounded at 600 polls (a shell glob:
# no process per poll).
tries=0
while [ -n "$dir" ] && [ "$tries" -lt 600 ]; do
  missing=0
  for pid in $pids; do
    set -- "$dir"/strata-"$pid"-*.flight
    [ -e "$1" ] || missing=1
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
exec 9>&-  # The lock's last descriptor: the children go on and end.
rm -f "$gate"
for pid in $pids; do wait "$pid"; done
left=0
if [ -n "$dir" ]; then
  for pid in $pids; do
    for f in "$dir"/strata-"$pid"-*.flight; do [ -f "$f" ] && left=$((left + 1)); done
  done
fi
echo "left=$left"
