#!/usr/bin/env bash
# Scenario: signal-safety stress (issue 10; docs/reliability.md "Signal-safety stress").
#
# `signal_stress` keeps threads in malloc/free, dlopen/dlclose, C++ exceptions through several
# frames and pthread_create/exit as fast as they can, while the base tier samples every
# thread at 5 kHz (STRATA_STARTUP_INTERVAL=0.2 with the `precise` feature: wall-clock timers,
# a real 5 kHz; also the default CPU-clock mode and the frame-pointer walker). Each run has a
# watchdog: a process still alive SECONDS + GRACE seconds after its start is a hang (its
# threads' states and kernel wait channels are printed, then it is killed).
#
# Checks per run: no hang, no crash (exit status 0), the program's own checks (no failed
# dlopen, no exception lost, no corrupted block, every kind made progress), a profile that
# passes the format checker, and samples on every worker thread (precise: at least 1000 per
# second of the run on the malloc thread, i.e. sampling really ran at kHz rates).
#
# Negative control first: the same program under tests/unsafe_sampler.so (a SIGPROF handler
# that calls malloc, signalled every 0.2 ms) must hang or crash within its watchdog; if it did
# not, this scenario could not see a non-async-signal-safe handler.
#
#   signal_stress_test.sh [--runs N] [--seconds S] [--threads-per-kind K] [--no-control]
#
# Defaults (the CI version): 3 runs of 6 s, one thread per kind. tools/stress.sh runs the
# long version (20 runs of 60 s).
source "$(dirname "$0")/scenario_lib.sh"

runs=3
seconds=6
threads_per_kind=1
control=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --threads-per-kind) threads_per_kind="$2"; shift 2 ;;
    --no-control) control=0; shift ;;
    *) echo "usage: $0 [--runs N] [--seconds S] [--threads-per-kind K] [--no-control]"; exit 2 ;;
  esac
done
# Capture of a profile with thousands of short threads takes a few seconds on a busy machine.
GRACE=30

program="$(binary tests/signal_stress)"
plugin="$(binary tests/stress_plugin.so)"
unsafe="$(binary tests/unsafe_sampler.so)"

# run_watched NAME LIMIT_S COMMAND...: runs COMMAND in the background, stdout/stderr to
# $WORK/NAME.out/.err; after LIMIT_S seconds it is a hang: prints every thread's name, state
# and wait channel, kills it, and sets WATCH_STATUS=hang. Otherwise WATCH_STATUS is the exit
# status. Sets WATCH_WALL_S.
run_watched() {
  local name="$1" limit="$2"
  shift 2
  local start pid now
  start=$(date +%s.%N)
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  pid=$!
  WATCH_STATUS=""
  while kill -0 "$pid" 2>/dev/null; do
    now=$(date +%s.%N)
    if ge "$(awk -v a="$start" -v b="$now" 'BEGIN { print b - a }')" "$limit"; then
      {
        echo "watchdog: $name still running after ${limit}s; its threads:"
        local task
        for task in /proc/"$pid"/task/*; do
          echo "  tid=$(basename "$task") name=$(cat "$task/comm" 2>/dev/null)" \
            "state=$(awk '{ print $3 }' "$task/stat" 2>/dev/null)" \
            "wchan=$(cat "$task/wchan" 2>/dev/null)"
        done
      } >"$WORK/$name.hang"
      kill -KILL "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      WATCH_STATUS=hang
      break
    fi
    sleep 0.2
  done
  if [[ -z "$WATCH_STATUS" ]]; then
    wait "$pid"
    WATCH_STATUS=$?
  fi
  WATCH_WALL_S=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  cp "$WORK/$name.out" "$WORK/$name.err" "$OUT/" 2>/dev/null || true
  [[ -f "$WORK/$name.hang" ]] && cp "$WORK/$name.hang" "$OUT/"
}

if ((control)); then
  name=control_unsafe
  run_watched "$name" 12 env LD_PRELOAD="$(preload_value "$unsafe")" "$program" --plugin "$plugin" --seconds 3
  result "scenario=signal_stress mode=control-unsafe-handler status=$WATCH_STATUS wall_s=$WATCH_WALL_S"
  if [[ "$WATCH_STATUS" == hang || "$WATCH_STATUS" -ge 128 ]]; then
    pass "control: a malloc-calling SIGPROF handler is caught (status $WATCH_STATUS)"
    [[ -f "$WORK/$name.hang" ]] && sed 's/^/    /' "$WORK/$name.hang" | head -12
  elif [[ "$SANITIZER" == tsan* ]] && grep -q 'ThreadSanitizer: signal-unsafe call inside of a signal' "$WORK/$name.err"; then
    # TSan runs the handler at a safe point of its own (so it cannot deadlock there), but
    # reports the malloc in it and exits: the unsafe handler is caught all the same.
    pass "control: TSan reports the malloc-calling SIGPROF handler (status $WATCH_STATUS)"
  else
    fail "control: the unsafe handler neither hung nor crashed the stress program (status $WATCH_STATUS); the scenario cannot detect one"
    sed 's/^/    /' "$WORK/$name.out" | tail -6
  fi
fi

# Modes, in turn: precise 5 kHz with libunwind (the default walker), precise with frame
# pointers, and the default CPU-clock mode at a 0.2 ms request.
modes=("precise" "precise,framepointers" "default")
hangs=0
crashes=0
ok_runs=0
for ((run = 1; run <= runs; run++)); do
  mode="${modes[$(((run - 1) % ${#modes[@]}))]}"
  name="run${run}_${mode//,/_}"
  features="stackwalk,threads,cpu"
  [[ "$mode" != default ]] && features="$features,$mode"
  run_watched "$name" $((seconds + GRACE)) env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
    STRATA_STARTUP_INTERVAL=0.2 STRATA_STARTUP_FEATURES="$features" \
    STRATA_SHUTDOWN="$OUT/$name.json" \
    "$program" --plugin "$plugin" --seconds "$seconds" --threads-per-kind "$threads_per_kind"
  ops=$(sed -n 's/^signal_stress: result .* ops=\([0-9]*\).*/\1/p' "$WORK/$name.out")
  kinds=$(grep '^signal_stress: kind=' "$WORK/$name.out" | awk '{ printf "%s:%s ", $2, $4 }' |
    sed 's/kind=//g; s/ops=//g')
  if [[ "$WATCH_STATUS" == hang ]]; then
    hangs=$((hangs + 1))
    fail "$name: hang (watchdog after $((seconds + GRACE)) s):"
    sed 's/^/    /' "$WORK/$name.hang"
    continue
  fi
  if [[ "$WATCH_STATUS" -ne 0 ]]; then
    [[ "$WATCH_STATUS" -ge 128 ]] && crashes=$((crashes + 1))
    fail "$name: exit status $WATCH_STATUS"
    sed 's/^/    /' "$WORK/$name.out" "$WORK/$name.err" | tail -20
    continue
  fi
  if [[ ! -s "$OUT/$name.json" ]]; then
    fail "$name: no profile written"
    sed 's/^/    /' "$WORK/$name.err" | tail -10
    continue
  fi
  if ! stats "$name" >/dev/null; then continue; fi
  threads=$(field "$name" profile "" threads)
  line="mode=$mode wall_s=$WATCH_WALL_S ops=$ops [$kinds] profile_threads=$threads samples:"
  run_ok=1
  for worker in st-malloc st-dlopen st-throw st-spawn; do
    samples=$(field "$name" thread "name=$worker" samples)
    line="$line $worker=${samples:-none}"
    if [[ -z "$samples" || "$samples" -eq 0 ]]; then
      fail "$name: no samples on $worker"
      run_ok=0
    fi
  done
  malloc_samples=$(field "$name" thread "name=st-malloc" samples)
  malloc_cpu_ms=$(field "$name" thread "name=st-malloc" cpu_all_ms)
  if [[ "$mode" == precise* && -n "$malloc_samples" ]]; then
    # Per second of st-malloc's own CPU time (its samples' CPU deltas), not per wall second:
    # a loaded machine gives the thread a fraction of a CPU, and its timer's signals wait
    # for it to run (issue 35). A thread that runs takes 5000 per CPU second at 0.2 ms.
    rate=$(awk -v s="$malloc_samples" -v d="$seconds" 'BEGIN { printf "%.0f", s / d }')
    cpu_rate=$(awk -v s="$malloc_samples" -v c="${malloc_cpu_ms:-0}" \
      'BEGIN { printf "%.0f", (c > 0 ? s * 1000 / c : 0) }')
    line="$line malloc_rate_hz=$rate malloc_cpu_ms=${malloc_cpu_ms:-none} malloc_per_cpu_s=$cpu_rate"
    if ((cpu_rate < 1000)); then
      fail "$name: st-malloc sampled $cpu_rate times per second of its CPU; 5 kHz sampling did not happen"
      run_ok=0
    fi
  fi
  result "scenario=signal_stress run=$run $line"
  if "$GECKO_CHECK" --max-per-code=3 "$OUT/$name.json" >"$WORK/$name.check" 2>&1; then
    :
  else
    fail "$name: the profile checker rejects the profile"
    sed 's/^/    /' "$WORK/$name.check" | head -10
    run_ok=0
  fi
  ((run_ok)) && ok_runs=$((ok_runs + 1))
  rm -f "$OUT/$name.json"  # Large (thousands of threads); the numbers above are what matters.
done
result "scenario=signal_stress runs=$runs seconds=$seconds ok=$ok_runs hangs=$hangs crashes=$crashes"
if ((ok_runs == runs)); then
  pass "$runs runs of $seconds s: 0 hangs, 0 crashes, every check passed"
fi
finish
