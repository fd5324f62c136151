#!/bin/sh
# For record_child_test.sh (run under `strata record`): three children that each exec twice
# (sh -> exec sh -> exec PROGRAM) and then die by SIGSEGV, so each pid leaves three flight
# recorder files (one per image, none saved: exec runs no exit handler; since issue 33 the
# earlier images' files are removed at their exec, which `strata record` must not mind); one
# child that ends its session cleanly (ProfilerStop) and then crashes (its file is kept,
# cleanly ended); and one that ends its session and _exits without saving (its file is
# removed: it did not crash, issue 33). This shell reaps them all, so `strata record` has no
# status for them. Exits 0.
#   exec_children.sh PROGRAM
for i in 1 2 3; do
  sh -c 'exec sh -c '\''exec "$0" --end segv --ms 300'\'' "$0"' "$1"
done
"$1" --end stop-segv --ms 300
"$1" --end stop --ms 300
exit 0
