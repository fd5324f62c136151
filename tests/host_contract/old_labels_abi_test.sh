#!/bin/bash
# A program built against label ABI 1's header (old_labels_abi_program.cc: the TLS symbol
# strata_t_profiling_stack, renamed _v2 in ABI 2) loads with today's libstrata_base.so, with a
# session (STRATA_STARTUP=1) and without: same status and output, and the old symbol is null
# on every thread (no record of the old size is ever written). Before the old symbol was
# exported again the program could not be linked, nor an old binary loaded (ld.so: undefined
# symbol).
set -u
PROGRAM="$1"
WORK="${TEST_TMPDIR:-/tmp}/old_labels_abi"
mkdir -p "$WORK"
timeout 120 env STRATA_STARTUP=0 "$PROGRAM" >"$WORK/plain.out" 2>"$WORK/plain.err"
plain=$?
timeout 120 env STRATA_STARTUP=1 "$PROGRAM" >"$WORK/session.out" 2>"$WORK/session.err"
session=$?
echo "plain: status $plain, $(cat "$WORK/plain.out")"
echo "session: status $session, $(cat "$WORK/session.out")"
if [[ $plain -ne 0 || $session -ne 0 ]] || ! cmp -s "$WORK/plain.out" "$WORK/session.out"; then
  echo "FAIL"; cat "$WORK/session.err"; exit 1
fi
echo PASS
