#!/usr/bin/env bash
# Each wait charged to the call that waited (issue 34; docs/sampling.md "Unknown waits"):
# wait_kinds waits ~1 s in turn in select, an unknown call (an inline-syscall nanosleep), poll,
# sem_timedwait, the unknown call again, sem_clockwait, pthread_cond_timedwait, a futex wait
# through syscall(), the fortified __poll_chk, C11's thrd_sleep and mtx_timedlock, timing each
# with its own clock, then 400 short clock_nanosleep waits (2.5 ms, under the sampler's 4 ms
# period), then sigwaitinfo, sigsuspend and sigpause ended by another thread's signal,
# pthread_once and call_once while another thread runs the initializer (its own pthread_once
# is not charged with the initializer's sleep), fgets, getc and getline (-O2: __getdelim) on a
# pipe written ~1 s later,
# and many getrandom and ioctl calls. Recorded with `strata record` (wait stacks on, the default):
#   - each wrapped call's self wall time in the profile is the time the program measured for
#     it, within 2 % (before the fix the unknown call's second was added to the call before
#     it: select 2 s);
#   - the unknown calls' time is an "Unknown wait" of the same total, within 2 %, or of one of
#     the two calls (the other shown as copies of a CPU sample taken just before it: a
#     documented limit, docs/sampling.md; the program prints its measures at its end to make
#     that rarer), or more by at most the time main was preempted (the same limit after a
#     wrapped wait; the program reads it from the kernel's schedstat);
#   - no frame of Strata's own code (the format checker's strata-frame rule).
source "$(dirname "$0")/scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
program="$(binary tests/wait_kinds)"
env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$OUT/waits.json" -- "$program" \
  >"$WORK/run.out" 2>"$WORK/run.err"
status=$?
sed 's/^/    /' "$WORK/run.out"
[[ $status -eq 0 ]] || { fail "strata record: status $status: $(tail -3 "$WORK/run.err")"; finish; }
check_format waits
"$STRATA" summary --top 40 "$OUT/waits.json" >"$WORK/summary.txt" 2>&1 || fail "summary"
# The unknown waits are main's (the kernel_calls thread's preemptions under load are its own).
"$STRATA" summary --top 40 --thread wait_kinds "$OUT/waits.json" >"$WORK/summary_main.txt" 2>&1 ||
  fail "summary --thread wait_kinds"

# self_wall NAME: the self wall ms the summary's self table gives the function NAME.
self_wall() {
  local summary="$WORK/summary.txt"
  [[ $1 == "Unknown wait" ]] && summary="$WORK/summary_main.txt"
  sed -n '/^Top functions by self time/,/^$/p' "$summary" |
    awk -v name="$1" '{ line = $0; sub(/^ *[0-9.]+ +[0-9.]+ +[0-9.]+% +[0-9.]+ +[0-9.]+ +[0-9.]+% +[0-9]+  /, "", line);
                        sub(/  \[.*\]$/, "", line); if (line == name) { print $1; exit } }'
}
# measured KIND: the program's own total for KIND.
measured() { awk -v kind="$1" '$1 == "wait" && $2 == kind { s += $3 } END { print s + 0 }' "$WORK/run.out"; }

# The short waits (400 of 2.5 ms): each gets 2 or 3 samples (the interval grid's points
# inside it), 2.5 on average, so their total has a spread of about 1 % (sqrt(400 x 0.25)
# samples of 1 000): checked within 5 %, and above by at most 5 % more than their total with
# the wall time between them (0.2 ms spins: the program prints it, clock_nanosleep_between):
# a sample's wall weight is the time to the thread's next sample, so a spin whose CPU sample
# a starved sampler never took goes to the wait before it (the front-end's rule too). Under
# load most are missed: 5.6-7.4 % over the waits alone when four loaded copies ran at once,
# 2.9-3.2 % in CI at load 5-7. Before the thread wrote the samples of the waits the sampler
# did not see, about two thirds of their time was missing.
for kind in select poll sem_timedwait sem_clockwait pthread_cond_timedwait syscall __poll_chk \
  thrd_sleep mtx_timedlock sigwaitinfo sigsuspend sigpause pthread_once call_once fgets getc getline unknown \
  clock_nanosleep getrandom ioctl; do
  name="$kind"
  [[ $kind == unknown ]] && name="Unknown wait"
  [[ $kind == sigpause ]] && name="__xpg_sigpause"  # <signal.h>'s sigpause (X/Open)
  # getline, inlined at -O2 into __getdelim (<bits/stdio.h>), which libc names getdelim too.
  [[ $kind == getline ]] && name="getdelim"
  # Under TSan the wrapper's next definition is libtsan's own __getdelim interceptor, a symbol
  # of its own (libc's getdelim alias is not there): the same call, named so.
  [[ $kind == getline ]] && ((UNDER_TSAN)) && name="__getdelim"
  tolerance=2
  [[ $kind == clock_nanosleep ]] && tolerance=5
  # Under TSan a wrapped call's own bookkeeping costs ~10x and the sampling handler runs late
  # (at the next intercepted call): under load a wait's total moved by up to 3.5 % (getc:
  # 1043.2 ms in the profile for 1007.9 measured, load ~30). Still far below the errors this
  # test was written for (a whole second charged to the wrong call).
  ((UNDER_TSAN)) && ((tolerance < 10)) && tolerance=10
  # getrandom (64 calls of a few ms) and ioctl (200 000 calls of a few microseconds) do not
  # wait here: their time is the kernel's CPU, charged to the call (kernel_cpu_charge.h), whose
  # known limits (a call's CPU before its first switch-out under load is not charged; the
  # wrapper's own cost goes to the caller, Strata's frames being elided) make it short by up to
  # ~10 % under load. That they are charged their time at all is checked: between half and
  # all of what the program measured (unwrapped, their kernel CPU went to the caller: 0).
  if [[ $kind == getrandom || $kind == ioctl ]]; then
    want=$(measured "$kind")
    got=$(self_wall "$kind")
    result "scenario=wait-kinds kind=$kind measured_ms=$want profile_ms=${got:-none}"
    if awk -v g="${got:-0}" -v w="$want" 'BEGIN { exit !(w > 0 && g >= w / 2 && g <= w * 1.02) }'; then
      pass "$kind: ${got} ms in the profile, ${want} ms measured by the program (between half and all)"
    else
      fail "$kind: ${got:-no} ms in the profile, ${want} ms measured by the program (want between half and all)"
    fi
    continue
  fi
  want=$(measured "$kind")
  got=$(self_wall "$name")
  result "scenario=wait-kinds kind=$kind measured_ms=$want profile_ms=${got:-none}"
  if [[ $kind == unknown ]] && ((UNDER_TSAN)); then
    # Under TSan main's own code between the waits costs ~10x its CPU, and a loaded machine
    # preempts it there: time off CPU outside a wrapped call, which is an Unknown wait too
    # (at load 16: 2200 ms for the 2000 ms the program measured, samples from 1.1 s to
    # 13.2 s). So the unknown waits are checked as not missing (-2 %), with at most 25 % more.
    if awk -v g="${got:-0}" -v w="$want" 'BEGIN { exit !(w > 0 && g >= 0.98 * w && g <= 1.25 * w) }'; then
      pass "$name: ${got} ms in the profile, ${want} ms measured by the program (under TSan: -2 % to +25 %)"
    else
      fail "$name: ${got:-no} ms in the profile, ${want} ms measured by the program (under TSan: want -2 % to +25 %)"
    fi
    continue
  fi
  # Main preempted right after a wrapped wait reads as an unknown wait too (the same limit:
  # runnable and blocked look alike to the sampler; at load 19, 70 ms of it once, between two
  # of the short waits): the program prints its time runnable but not running (run_queue,
  # the kernel's schedstat), the most that can add.
  preempted=$(measured run_queue)
  if [[ $kind == unknown ]] && awk -v g="${got:-0}" -v w="$want" -v t="$tolerance" -v p="$preempted" \
       'BEGIN { exit !(w > 0 && p > 0 && g > (1 + t / 100) * w && g <= (1 + t / 100) * w + p) }'; then
    pass "$name: ${got} ms in the profile, ${want} ms measured by the program, and at most the ${preempted} ms main was preempted (a known limit)"
  elif [[ $kind == unknown ]] &&
     awk -v g="${got:-0}" -v w="$want" -v t="$tolerance" 'BEGIN { h = w / 2; d = g - h; if (d < 0) d = -d; exit !(w > 0 && d <= t / 100 * h) }'; then
    # One of the two raw sleeps shown as copies of a CPU sample taken just before it: the
    # documented limit (docs/sampling.md, "Unknown waits": the sampler cannot tell a blocked
    # thread from a runnable one cheaply). The sample can fall in the previous wrapper's own
    # end (CI, 2026-12-07: `__errno_location` 1 000.8 ms; ci5: the program's printf, since
    # moved to its end), a few % of runs under load. The other sleep, and every wrapped call
    # above, are still exact: the defect this test was written for (a raw sleep's second
    # added to the wrapped call before it) fails those.
    pass "$name: ${got} ms in the profile, ${want} ms measured by the program: one of the two raw sleeps (the other shown as copies of the CPU sample taken before it, a known limit)"
  elif [[ $kind == clock_nanosleep ]]; then
    between=$(measured clock_nanosleep_between)
    if awk -v g="${got:-0}" -v w="$want" -v b="$between" -v t="$tolerance" \
         'BEGIN { exit !(w > 0 && g >= (1 - t / 100) * w && g <= (1 + t / 100) * (w + b)) }'; then
      pass "$name: ${got} ms in the profile, ${want} ms measured by the program, $between ms between the waits (want from -${tolerance} % of the waits to +${tolerance} % of both)"
    else
      fail "$name: ${got:-no} ms in the profile, ${want} ms measured by the program, ${between} ms between the waits (want from -${tolerance} % of the waits to +${tolerance} % of both)"
    fi
  elif awk -v g="${got:-0}" -v w="$want" -v t="$tolerance" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(w > 0 && d <= t / 100 * w) }'; then
    pass "$name: ${got} ms in the profile, ${want} ms measured by the program"
  else
    fail "$name: ${got:-no} ms in the profile, ${want} ms measured by the program (want within ${tolerance} %)"
  fi
done
finish
