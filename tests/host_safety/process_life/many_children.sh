#!/bin/sh
# many_children.sh N: starts N children at once that end in the usual ways (exit from sleep,
# exec of sleep by a shell, a shell's own _exit with a status), prints ready when they all
# run, waits for them and prints each one's status in order. Each child lives ~2 s, long
# enough for the test to measure what they use while they run.
n="$1"
i=0
while [ "$i" -lt "$n" ]; do
  case $((i % 3)) in
    0) sleep 2 & ;;
    1) sh -c 'exec sleep 2' & ;;
    2) sh -c 'sleep 2; exit 3' & ;;
  esac
  eval "pid_$i=\$!"
  i=$((i + 1))
done
echo ready
i=0
while [ "$i" -lt "$n" ]; do
  eval "wait \$pid_$i"
  echo "child $i: $?"
  i=$((i + 1))
done
