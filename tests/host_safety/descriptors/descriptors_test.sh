#!/usr/bin/env bash
# Scenarios: Strata never harms the host program's descriptors, stacks or threads (issue 16;
# docs/reliability.md). Each real program (no Strata include) runs plain and with Strata, and
# everything the program can see must be the same: exit status, stdout, the files it wrote.
#
#   daemon  descriptor_daemon (close_range(3, ~0U, 0), its own files reopened on the freed
#           numbers 3-6, busy threads in code without unwind information started after),
#           both opening orders (input-first: input 3, output 4, journals 5, 6;
#           output-first: output 3, journal 4, input 5, journal 6), plain,
#           preloaded with the default features, preloaded with framepointers, and under
#           `strata record`: same status and stdout (bytes read, no failed read or write,
#           checksum), output and journal files byte-identical. Before the fix libunwind's
#           memory-check pipe sat on 3-4 (5-6 under `strata record`): input bytes lost, stack
#           bytes in the output, or both numbers closed and reused under the program.
#   jit     jit_frames (a hand-assembled function in an anonymous executable page whose %rbp
#           points into a page the program unmaps or remaps PROT_NONE): preloaded with the
#           default features and with framepointers: no crash, same status and stdout. Before
#           the fix libunwind was handed the JIT pc and faulted in the signal handler.
#   cancel  cancel_busy (busy threads cancelled with deferred cancellation while sampled),
#           preloaded with STRATA_STARTUP=1 and a STRATA_SHUTDOWN path, under `timeout`:
#           same status and stdout, a profile written. Before the fix a thread was cancelled
#           inside the handler (libunwind's read/write were cancellation points) and exit()
#           waited for it forever.
#   own     own_libunwind (the program links libunwind itself and walks its own stack through
#           code without unwind information, at 16 depths): plain, preloaded with the default
#           features and with framepointers: same status and stdout (every walk reaches main
#           with the same frames). Strata shares that very libunwind object and redirects its
#           imports (docs/sampling.md); the program's own validations must keep working.
# Usage: descriptors_test.sh daemon|jit|cancel|own
source "$(dirname "$0")/../../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
export STRATA_BASE_LIB="$STRATA_LIB"  # `strata record` preloads the same library.
export STRATA_NO_PROGRESS=1
WATCHDOG_S=120
FRAMEPOINTERS="stackwalk,threads,cpu,framepointers"

# run_plain NAME PROGRAM ARGS...: the program alone; stdout to $WORK/NAME.out.
run_plain() {
  local name="$1"
  shift
  timeout -s KILL "$WATCHDOG_S" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  RUN_STATUS=$?
}

# run_preloaded NAME FEATURES PROGRAM ARGS...: preloaded, STRATA_STARTUP=1, profile at
# $OUT/NAME.json (FEATURES empty: the defaults).
run_preloaded() {
  local name="$1" features="$2"
  shift 2
  timeout -s KILL "$WATCHDOG_S" env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
    STRATA_SHUTDOWN="$OUT/$name.json" ${features:+STRATA_STARTUP_FEATURES=$features} \
    "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  RUN_STATUS=$?
  cp "$WORK/$name.out" "$WORK/$name.err" "$OUT/" 2>/dev/null || true
}

# run_recorded NAME PROGRAM ARGS...: under `strata record -o $OUT/NAME.json`.
run_recorded() {
  local name="$1"
  shift
  timeout -s KILL "$WATCHDOG_S" env "${SANITIZER_ENV[@]}" "$STRATA" record \
    -o "$OUT/$name.json" -- "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  RUN_STATUS=$?
  # `strata record` reports on stderr; the program's stdout is the first lines of stdout.
  cp "$WORK/$name.out" "$WORK/$name.err" "$OUT/" 2>/dev/null || true
}

# same_as_plain NAME PLAIN_NAME PLAIN_STATUS: status and stdout as in the plain run.
same_as_plain() {
  local name="$1" plain="$2" plain_status="$3"
  if [[ "$RUN_STATUS" -eq 137 ]]; then
    fail "$name: killed by the ${WATCHDOG_S} s watchdog (a hang)"
  elif [[ "$RUN_STATUS" -ne "$plain_status" ]]; then
    fail "$name: exit status $RUN_STATUS, the plain run's was $plain_status"
  else
    pass "$name: exit status $RUN_STATUS, as plain"
  fi
  local plain_line line
  plain_line="$(grep "^${PROGRAM_PREFIX}" "$WORK/$plain.out")"
  line="$(grep "^${PROGRAM_PREFIX}" "$WORK/$name.out")"
  if [[ -n "$line" && "$line" == "$plain_line" ]]; then
    pass "$name: stdout as plain ($line)"
  else
    fail "$name: stdout differs from the plain run's:"
    echo "    plain: $plain_line"
    echo "    this:  $line"
    sed 's/^/    /' "$WORK/$name.err" | head -10
  fi
  if grep -q "could not save\|Bad file descriptor" "$WORK/$name.err"; then
    fail "$name: errors on stderr:"
    sed 's/^/    /' "$WORK/$name.err" | head -10
  fi
}

# has_profile NAME: a profile was written.
has_profile() {
  if [[ -s "$OUT/$1.json" ]]; then
    pass "$1: profile written"
  else
    fail "$1: no profile at $OUT/$1.json"
  fi
}

scenario_daemon() {
  local program input size order name
  program="$(binary tests/host_safety/descriptors/descriptor_daemon)"
  PROGRAM_PREFIX="descriptor_daemon:"
  input="$WORK/daemon.in"
  # ~200 kB of deterministic text: 3 000 lines.
  awk 'BEGIN { for (i = 0; i < 3000; i++) printf "line %05d of the daemon input, some words: alpha beta gamma %d\n", i, i * 7919 % 10007 }' >"$input"
  size=$(stat -c %s "$input")
  for order in input-first output-first; do
    run_plain "plain-$order" "$program" "$input" "$WORK/plain-$order.data" "$order" "$size"
    local plain_status=$RUN_STATUS
    if [[ $plain_status -ne 0 ]]; then
      fail "plain-$order: the program fails on its own (status $plain_status)"
      sed 's/^/    /' "$WORK/plain-$order.out" "$WORK/plain-$order.err"
      continue
    fi
    for name in "preload-$order" "framepointers-$order" "record-$order"; do
      case "$name" in
        preload-*) run_preloaded "$name" "" "$program" "$input" "$WORK/$name.data" "$order" "$size" ;;
        framepointers-*) run_preloaded "$name" "$FRAMEPOINTERS" "$program" "$input" "$WORK/$name.data" "$order" "$size" ;;
        record-*) run_recorded "$name" "$program" "$input" "$WORK/$name.data" "$order" "$size" ;;
      esac
      same_as_plain "$name" "plain-$order" "$plain_status"
      local suffix
      for suffix in "" .journal1 .journal2; do
        if cmp -s "$WORK/plain-$order.data$suffix" "$WORK/$name.data$suffix"; then
          pass "$name: output file$suffix byte-identical ($(stat -c %s "$WORK/$name.data$suffix") bytes)"
        else
          fail "$name: output file$suffix differs from the plain run's: $(cmp "$WORK/plain-$order.data$suffix" "$WORK/$name.data$suffix" 2>&1 | head -1)"
          cp "$WORK/$name.data$suffix" "$OUT/" 2>/dev/null || true
        fi
      done
      has_profile "$name"
    done
  done
}

scenario_jit() {
  local program name features
  program="$(binary tests/host_safety/descriptors/jit_frames)"
  PROGRAM_PREFIX="jit_frames:"
  run_plain plain-jit "$program"
  local plain_status=$RUN_STATUS
  for name in preload-jit framepointers-jit; do
    features=""
    [[ "$name" == framepointers-* ]] && features="$FRAMEPOINTERS"
    run_preloaded "$name" "$features" "$program"
    same_as_plain "$name" plain-jit "$plain_status"
    has_profile "$name"
    if [[ -s "$OUT/$name.json" ]] && stats "$name" >/dev/null; then
      result "$name main_thread_samples=$(field "$name" thread name=GeckoMain samples)"
    fi
  done
  run_recorded record-jit "$program"
  same_as_plain record-jit plain-jit "$plain_status"
  has_profile record-jit
}

scenario_cancel() {
  local program
  program="$(binary tests/host_safety/descriptors/cancel_busy)"
  PROGRAM_PREFIX="cancel_busy:"
  # Under TSan a round took ~1.7 s of wall time at a load average of 50 (2026-12-06), so the
  # default 80 rounds passed the 120 s watchdog even without Strata: 10 rounds there.
  local rounds=80
  ((UNDER_TSAN)) && rounds=10
  run_plain plain-cancel "$program" "$rounds"
  local plain_status=$RUN_STATUS
  run_preloaded preload-cancel "" "$program" "$rounds"
  same_as_plain preload-cancel plain-cancel "$plain_status"
  has_profile preload-cancel
  run_recorded record-cancel "$program" "$rounds"
  same_as_plain record-cancel plain-cancel "$plain_status"
  has_profile record-cancel
}

scenario_own() {
  local program name features
  program="$(binary tests/host_safety/descriptors/own_libunwind)"
  PROGRAM_PREFIX="own_libunwind:"
  run_plain plain-own "$program"
  local plain_status=$RUN_STATUS
  for name in preload-own framepointers-own; do
    features=""
    [[ "$name" == framepointers-* ]] && features="$FRAMEPOINTERS"
    run_preloaded "$name" "$features" "$program"
    same_as_plain "$name" plain-own "$plain_status"
    has_profile "$name"
  done
}

case "${1:-}" in
  daemon) scenario_daemon ;;
  jit) scenario_jit ;;
  cancel) scenario_cancel ;;
  own) scenario_own ;;
  *)
    echo "usage: $0 daemon|jit|cancel|own" >&2
    exit 2
    ;;
esac
finish
