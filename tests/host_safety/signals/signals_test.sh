#!/usr/bin/env bash
# Signal ownership (issue 16, docs/sampling.md "Signal ownership"): real programs that use
# signals the way daemons, self-profilers and signal threads do, run three ways -- plain,
# preloaded (LD_PRELOAD=libstrata_base.so STRATA_STARTUP=1) and under `strata record` -- must
# keep their exit status, their output and their own signal counts, and Strata must still
# sample them where it can:
#   reset_dispositions   every disposition reset to SIG_DFL (signal(), then sigaction()), every
#                        signal unblocked; was killed by the next sample (status 155)
#   itimer_prof          its own SIGPROF handler and ITIMER_PROF; got ~250 extra SIGPROFs per
#                        CPU second and Strata recorded 0 samples
#   signalfd_reader      reads SIGPROF by signalfd; read Strata's signals
#   GNU sort             `seq 1 300000 | sort -r`: its cleanup handler re-raises SIGPROF; was
#                        killed (0 lines)
#   sigwait_workers      sigfillset + pthread_sigmask before creating workers, a sigwait thread;
#                        was killed by SIGUSR1 (it reached the profiler's thread) and its
#                        workers were not sampled
#   tiny_stack           a PTHREAD_STACK_MIN thread deep in recursion; crashed in the handler
#   unreadable_headers   its own ELF header or .eh_frame_hdr page PROT_NONE, the word of an
#                        indirect personality pointer, the code page below a loop (precise
#                        mode), a page a frame-chain walk trusted, unwind pages toggled by
#                        another thread; crashed in the walk
#   stack_headroom       the main thread near its RLIMIT_STACK, and the program's own handler
#                        on a small alternate signal stack (4-16 KiB, issue 33): crashed, or
#                        heap bytes below the alternate stack overwritten
#   raw_ignore           SIG_IGN for SIGPROF and every real-time signal by raw system call;
#                        sampling silently stopped (now: through libc's syscall(), recorded
#                        as the program's action and sampled on; by an inline system call,
#                        stopped and said in the profile)
#   foreign_rtmax        blocks every signal everywhere, reads SIGRTMAX sent by another
#                        process (sigwaitinfo, sigtimedwait, sigwait, to one thread, at an
#                        unblock, signalfd) or takes it in its handler (sigsuspend, ppoll, a
#                        main thread that blocks nothing); was killed by it (issue 33)
#   thread_start_rtmax   the same pattern, SIGRTMAX queued while main starts thread after thread;
#                        was killed by it (a new thread before its view was set, issue 33)
#   signal_all_tasks     tgkills every task in /proc/self/task and waits for each handler's
#                        acknowledgement; timed out on Strata's threads (issue 33); also
#                        linked with the full tier, its IPC threads running
# plus STRATA_SAMPLING_SIGNAL (called STRATA_SIGNAL before issue 20, which gave that name to
# the control signal): a bad value is refused with the accepted range, a good one is used, and
# STRATA_SIGNAL no longer chooses the sampling signal.
source "$(dirname "$0")/../../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
export STRATA_BASE_LIB="$STRATA_LIB"
export STRATA_NO_PROGRESS=1
DIR=tests/host_safety/signals

# run_three NAME PROGRAM [ARGS...]: plain, preloaded and recorded runs of PROGRAM (60 s at
# most each); stdout in $WORK/NAME.{plain,preload,record}.out, statuses in STATUS_* (and
# RUN_STATUS: the preloaded run's), the preloaded run's profile in $OUT/NAME.json.
run_three() {
  local name="$1"
  shift
  timeout -k 10 60 "$@" >"$WORK/$name.plain.out" 2>"$WORK/$name.plain.err"
  STATUS_PLAIN=$?
  timeout -k 10 60 env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 STRATA_SHUTDOWN="$OUT/$name.json" \
    ${STRATA_SAMPLING_SIGNAL:+STRATA_SAMPLING_SIGNAL="$STRATA_SAMPLING_SIGNAL"} \
    ${STRATA_SIGNAL:+STRATA_SIGNAL="$STRATA_SIGNAL"} "$@" >"$WORK/$name.preload.out" 2>"$WORK/$name.preload.err"
  STATUS_PRELOAD=$?
  RUN_STATUS=$STATUS_PRELOAD
  env "${SANITIZER_ENV[@]}" timeout -k 10 60 "$STRATA" record -o "$OUT/$name.record.json" -- "$@" \
    >"$WORK/$name.record.out" 2>"$WORK/$name.record.err"
  STATUS_RECORD=$?
}

# same_as_plain NAME: status and stdout of the preloaded and recorded runs equal the plain one.
same_as_plain() {
  local name="$1" way status
  for way in preload record; do
    status=$([[ $way == preload ]] && echo "$STATUS_PRELOAD" || echo "$STATUS_RECORD")
    if [[ "$status" != "$STATUS_PLAIN" ]]; then
      fail "$name ($way): status $status, plain $STATUS_PLAIN"
      sed 's/^/    /' "$WORK/$name.$way.err" | head -10
    elif ! cmp -s "$WORK/$name.plain.out" "$WORK/$name.$way.out"; then
      fail "$name ($way): output differs from plain:"
      diff "$WORK/$name.plain.out" "$WORK/$name.$way.out" | head -10 | sed 's/^/    /'
    else
      pass "$name ($way): status $status and output as plain ($(tr '\n' ' ' <"$WORK/$name.$way.out"))"
    fi
  done
}

# meta_number NAME KEY: a number from the profile's meta.profilingLog (e.g. samplingSignal).
meta_number() {
  grep -o "\"$2\":[0-9]*" "$OUT/$1.json" | head -1 | cut -d: -f2
}

# main_samples NAME: samples of the main thread in $OUT/NAME.json.
main_samples() {
  stats "$1" >/dev/null && field "$1" thread name=GeckoMain samples
}

# The cases run in three parts, one per test target (BUILD.bazel: signals_test takes part 1,
# signals_stack_test part 2, signals_memory_test part 3: unreadable program memory), so that
# none nears its timeout on a loaded machine; no argument runs all.
PART="${1:-all}"
in_part() { [[ "$PART" == all || "$PART" == "$1" ]]; }

if in_part 1; then
# --- The reset-every-disposition daemon.
for variant in signal sigaction; do
  name=reset_$variant
  run_three "$name" "$(binary $DIR/reset_dispositions)" --$variant
  same_as_plain "$name"
  samples=$(main_samples "$name")
  if [[ "$RUN_STATUS" -eq 0 && "${samples:-0}" -gt 0 ]]; then
    pass "$name: sampled after the reset ($samples samples)"
  else
    fail "$name: status $RUN_STATUS, ${samples:-no} samples"
    sed "s/^/    /" "$WORK/$name.preload.err" | head -10
  fi
done

# --- A self-profiling program: its own ITIMER_PROF and SIGPROF handler.
name=itimer_prof
run_three "$name" "$(binary $DIR/itimer_prof)"
for way in plain preload record; do
  line=$(cat "$WORK/$name.$way.out")
  count=$(sed -n 's/^sigprof=\([0-9]*\) .*/\1/p' <<<"$line")
  expected=$(sed -n 's/.* expected=\([0-9]*\)$/\1/p' <<<"$line")
  # Its own timer's count: one signal per 10 ms of process CPU time at most. The kernel checks
  # ITIMER_PROF only at a tick that finds one of the process's threads running, and sends at
  # most one signal per check (check_cpu_itimer, kernel/time/posix-cpu-timers.c): a process
  # that runs in short slices on a busy machine, or whose ticks come late, gets fewer. Plain
  # runs, with no Strata: 0.95-1.26 times the CPU-time count on a lightly loaded machine,
  # 0.32 once beside a CI run and 4 busy processes (ci91), 0.37-1.06 with a starved CPU
  # share. So the bounds are what Strata could do to it: a sampler sharing SIGPROF adds ~2.5
  # per expected one (250 per CPU second: over the upper bound), and one that took the
  # program's SIGPROFs leaves it (next to) none (under the lower bound, a tenth).
  if [[ -n "$count" && -n "$expected" ]] && ge "$count" "$(( expected / 10 > 1 ? expected / 10 : 1 ))" &&
      ge "$((expected * 16 / 10 + 2))" "$count"; then
    pass "$name ($way): $count SIGPROFs for $expected expected"
  else
    fail "$name ($way): '$line' (status $STATUS_PLAIN/$STATUS_PRELOAD/$STATUS_RECORD)"
  fi
done
samples=$(main_samples "$name")
if [[ "${samples:-0}" -gt 0 ]]; then
  pass "$name: Strata sampled too ($samples samples)"
else
  fail "$name: no samples"
fi

# --- signalfd for SIGPROF: reads only its own.
name=signalfd_reader
run_three "$name" "$(binary $DIR/signalfd_reader)"
same_as_plain "$name"
grep -qx 'reads=20 foreign=0 late=0' "$WORK/$name.plain.out" ||
  fail "$name: the plain run itself is off: $(cat "$WORK/$name.plain.out")"

# --- GNU sort, whose cleanup handler re-raises SIGPROF.
if command -v sort >/dev/null && sort --version 2>/dev/null | grep -q GNU; then
  plain=$(seq 1 300000 | timeout 60 sort -r | tee >(wc -l >"$WORK/sort.plain.lines") | md5sum)
  preload=$(seq 1 300000 | timeout 60 env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
    STRATA_SHUTDOWN="$OUT/sort.json" sort -r | md5sum)
  recorded=$(seq 1 300000 | env "${SANITIZER_ENV[@]}" timeout 60 "$STRATA" record \
    -o "$OUT/sort.record.json" -- sort -r 2>"$WORK/sort.record.err" | md5sum)
  lines=$(seq 1 300000 | timeout 60 env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 sort -r | wc -l)
  [[ "$lines" -eq 300000 ]] && pass "sort (preload): 300000 lines" ||
    fail "sort (preload): $lines lines instead of 300000"
  [[ "$preload" == "$plain" ]] && pass "sort (preload): checksum as plain" ||
    fail "sort (preload): checksum $preload, plain $plain"
  [[ "$recorded" == "$plain" ]] && pass "sort (record): checksum as plain" ||
    { fail "sort (record): checksum $recorded, plain $plain"; head -5 "$WORK/sort.record.err"; }
else
  echo "skipped: GNU sort not installed"
fi

# --- Workers that block every signal, a sigwait thread.
name=sigwait_workers
run_three "$name" "$(binary $DIR/sigwait_workers)"
same_as_plain "$name"
if stats "$name" >/dev/null; then
  sampled=$(awk '$1 == "thread" && / name=sigwait_workers / {
      for (i = 2; i <= NF; i++) if ($i ~ /^samples=/ && substr($i, 9) + 0 > 0) n++ }
    END { print n + 0 }' "$WORK/$name.stats")
  [[ "$sampled" -ge 2 ]] && pass "$name: both workers sampled with every signal blocked" ||
    fail "$name: $sampled worker(s) with samples, expected 2"
fi

# Under TSan the two SIGRTMAX sections below cannot hold, by nature: TSan runs a handler
# late and keeps ONE pending instance per signal number and thread, so a foreign SIGRTMAX
# that reaches a thread while one of Strata's samples is still pending there in TSan is
# dropped inside TSan before any handler (strace: a sample, then 0.6 ms later sigqueue's
# value 1 delivered to the same worker, never handed on; the reader then waits for ever).
# The kernel queues both; plain and under ASan/UBSan these sections run (docs/reliability.md).
if ((UNDER_TSAN)); then
  echo "skipped under TSan: foreign_rtmax_* and thread_start_rtmax_* (TSan merges a foreign SIGRTMAX with a pending sample of the same signal number; docs/reliability.md)"
else
  # --- SIGRTMAX (the default sampling signal) sent by another process to a program that blocks
  # every signal in all its threads and reads them (issue 33): before, Strata had removed it
  # from the program's masks and wait sets, and the program was killed (status 192, 3 of 3).
  # Now it reaches the program's wait with its siginfo (si_code, si_pid, sigqueue's value), or
  # stays pending until the program unblocks it, as plain; the profile says what happened.
  # raw: the mask and the wait through libc's syscall() (the syscall wrapper does the wrappers'
  # work; before, the raw mask blocked the samples and the raw wait dequeued them).
  for mode in sigwaitinfo sigtimedwait sigwait thread unblock raw; do
    name=foreign_rtmax_$mode
    run_three "$name" "$(binary $DIR/foreign_rtmax)" "$mode"
    same_as_plain "$name"
    if grep -q '"foreignSamplingSignals":"[^"]*[1-9]' "$OUT/$name.json"; then
      pass "$name: the profile says: $(grep -o '"foreignSamplingSignals":"[^"]*"' "$OUT/$name.json")"
    else
      fail "$name: no foreignSamplingSignals in the profile"
    fi
    if stats "$name" >/dev/null; then
      sampled=$(awk '$1 == "thread" && / name=foreign_rtmax / {
          for (i = 2; i <= NF; i++) if ($i ~ /^samples=/ && substr($i, 9) + 0 > 0) n++ }
        END { print n + 0 }' "$WORK/$name.stats")
      [[ "$sampled" -ge 2 ]] && pass "$name: both workers sampled" ||
        fail "$name: $sampled worker(s) with samples, expected 2"
    fi
  done
  # The program's handler takes them: inside sigsuspend / ppoll with a mask that unblocks
  # SIGRTMAX (main blocks it otherwise), or on main, which blocks nothing while its workers block
  # every signal.
  for mode in sigsuspend ppoll acceptor; do
    name=foreign_rtmax_$mode
    run_three "$name" "$(binary $DIR/foreign_rtmax)" "$mode"
    same_as_plain "$name"
  done
  # The same with CPU-clock timers, and in precise mode, whose wall-clock timers keep firing
  # while a thread waits: the waits dequeue Strata's samples, which must never reach the program.
  for config in "timer STRATA_SAMPLING_SOURCE=timer" "precise STRATA_STARTUP_FEATURES=stackwalk,threads,cpu,precise"; do
    for mode in sigwaitinfo sigwait thread unblock sigsuspend; do
      name=foreign_rtmax_${mode}_${config%% *}
      timeout 60 env ${config#* } LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
        STRATA_SHUTDOWN="$OUT/$name.json" "$(binary $DIR/foreign_rtmax)" "$mode" \
        >"$WORK/$name.out" 2>"$WORK/$name.err"
      status=$?
      if [[ $status -eq 0 ]] && cmp -s "$WORK/foreign_rtmax_$mode.plain.out" "$WORK/$name.out"; then
        pass "$name: status 0 and output as plain"
      else
        fail "$name: status $status, output '$(tr '\n' ' ' <"$WORK/$name.out")'"
        sed 's/^/    /' "$WORK/$name.err" | head -5
      fi
    done
  done
  # `strata summary` repeats it.
  note=$("$STRATA" summary "$OUT/foreign_rtmax_unblock.record.json" 2>&1 | grep 'Sampling note' | head -1)
  if [[ "$note" == *foreignSamplingSignals:*held* ]]; then
    pass "foreign_rtmax_unblock: strata summary says: $note"
  else
    fail "foreign_rtmax_unblock: no sampling note in strata summary ('$note')"
  fi
  grep -qx 'mode=sigwaitinfo got=5 codes_ok=5 pids_ok=5 values=1 2 3 4 5 ' \
    "$WORK/foreign_rtmax_sigwaitinfo.plain.out" ||
    fail "foreign_rtmax: the plain run itself is off: $(cat "$WORK/foreign_rtmax_sigwaitinfo.plain.out")"
  # The signalfd variant cannot be exact (docs/host-contract.md, "Signals"): a SIGRTMAX held
  # while the program blocks it is not readable from its signalfd. Never fatal, and said.
  # raw_signalfd: the same through syscall(SYS_signalfd4) after a raw rt_sigprocmask.
  for name in foreign_rtmax_signalfd foreign_rtmax_raw_signalfd; do
    run_three "$name" "$(binary $DIR/foreign_rtmax)" "${name#foreign_rtmax_}"
    for way in preload record; do
      status=$([[ $way == preload ]] && echo "$STATUS_PRELOAD" || echo "$STATUS_RECORD")
      if [[ "$status" == "$STATUS_PLAIN" ]] && grep -q '^sender_status=0$' "$WORK/$name.$way.out"; then
        pass "$name ($way): status $status as plain, not killed ($(head -1 "$WORK/$name.$way.out"); plain: $(head -1 "$WORK/$name.plain.out"))"
      else
        fail "$name ($way): status $status, plain $STATUS_PLAIN"
      fi
    done
    if grep -q '"foreignSamplingSignals":"[^"]*signalfd' "$OUT/$name.json"; then
      pass "$name: the profile says the signalfd did not get them"
    else
      fail "$name: no signalfd note in foreignSamplingSignals"
    fi
  done

  # --- SIGRTMAX queued by another process while the program, which blocks every signal, starts
  # thread after thread (issue 33): a new thread took one between glibc's restoring its mask and
  # Strata's setting its view of the mask, and the program was killed (status 192; 10 of 10
  # runs before the fix, 1 in 5-8 in the torture matrix's sigwait runs). Repeated: a window.
  for round in 1 2 3 4 5; do
    name=thread_start_rtmax_$round
    run_three "$name" "$(binary $DIR/thread_start_rtmax)"
    same_as_plain "$name"
  done
  grep -qx 'got=200 sum=20100' "$WORK/thread_start_rtmax_1.plain.out" ||
    fail "thread_start_rtmax: the plain run itself is off: $(cat "$WORK/thread_start_rtmax_1.plain.out")"
  for round in 1 2 3; do
    name=thread_start_rtmax_timer_$round
    timeout 60 env STRATA_SAMPLING_SOURCE=timer LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
      STRATA_SHUTDOWN="$OUT/$name.json" "$(binary $DIR/thread_start_rtmax)" \
      >"$WORK/$name.out" 2>"$WORK/$name.err"
    status=$?
    if [[ $status -eq 0 ]] && cmp -s "$WORK/thread_start_rtmax_1.plain.out" "$WORK/$name.out"; then
      pass "$name: status 0 and output as plain"
    else
      fail "$name: status $status, output '$(tr '\n' ' ' <"$WORK/$name.out")'"
    fi
  done
fi

# --- Every task in /proc/self/task signalled, each acknowledging from the program's handler
# (issue 33): Strata's threads blocked every signal, and the program timed out (3 of 3). Its
# process-directed SIGUSR2, blocked by the program, still reaches main's sigtimedwait.
# Under TSan, TSan's own background thread is a task that never acknowledges (it blocks every
# signal): the plain TSan-built program says "4 of 5 tasks acknowledged" each round and exits
# 1. What must hold there is the same shortfall with Strata (each of Strata's threads
# acknowledges): the rounds are compared as shortfalls, and statuses with the plain run's.
as_shortfalls() {  # FILE...: "round N: A of T tasks acknowledged" -> "round N: T-A unacknowledged"
  local file
  for file in "$@"; do
    awk '/^round [0-9]+: [0-9]+ of [0-9]+ tasks acknowledged$/ {
        print $1, $2, $5 - $3, "unacknowledged"; next } { print }' "$file" >"$file.shortfall" &&
      mv "$file.shortfall" "$file"
  done
}
for sig in usr1 rt; do
  name=signal_all_tasks_$sig
  run_three "$name" "$(binary $DIR/signal_all_tasks)" "$sig"
  ((UNDER_TSAN)) && as_shortfalls "$WORK/$name".{plain,preload,record}.out
  [[ $sig == usr1 ]] && FULL_STATUS_WANTED=$( ((UNDER_TSAN)) && echo "$STATUS_PLAIN" || echo 0)
  same_as_plain "$name"
done

# The same in a program linked with the full tier, its IPC parent listening (threads
# StrataIpcParent and StrataIpcWork): before, 5 of 7 tasks acknowledged each round.
name=signal_all_tasks_full
timeout -k 10 60 "$(binary $DIR/signal_all_tasks_full)" usr1 >"$WORK/$name.out" 2>"$WORK/$name.err"
status=$?
((UNDER_TSAN)) && as_shortfalls "$WORK/$name.out"
if [[ $status -eq $FULL_STATUS_WANTED ]] && grep -qx 'ipc_threads=1' "$WORK/$name.out" &&
    [[ "$(grep -v '^ipc_threads=' "$WORK/$name.out")" == "$(cat "$WORK/signal_all_tasks_usr1.plain.out")" ]]; then
  pass "$name: every task acknowledged, the IPC threads too ($(tr '\n' ' ' <"$WORK/$name.out"))"
else
  fail "$name: status $status, output '$(tr '\n' ' ' <"$WORK/$name.out")'"
  sed 's/^/    /' "$WORK/$name.err" | head -5
fi

fi  # part 1

if in_part 2; then
# Under TSan the program's own code goes deeper than its deepest frame: the burn loop's
# clock_gettime is TSan's interceptor (ScopedInterceptor, FuncEntry, TraceSwitch), not the
# vDSO. Measured by the TSan-built tiny_stack alone (--measure, no Strata): 1672 bytes below
# its deepest frame (2026-12-07), where the plain build uses < 512. With only 4608 bytes left
# (or AT_MINSIGSTKSZ + 256) the kernel then cannot push the sampling signal's frame below TSan's
# frames: SIGSEGV with si_code SI_KERNEL in TraceSwitch, before any handler runs (gdb, sixth
# round). So under TSan the bytes left are counted from where TSan's own frames reach: the
# tiny stack's and the tight cases' LEFT get that plain run's figure added (main_stack's 5 KiB
# passes as it is); the skips and the exit status are still checked. Plain builds: 0.
tsan_extra_left=0
if ((UNDER_TSAN)); then
  tsan_extra_left=$("$(binary $DIR/tiny_stack)" --measure | sed -n 's/^used_below=//p')
  echo "under TSan: $tsan_extra_left bytes more left on the small stacks (TSan's frames below the program's deepest, measured without Strata)"
  [[ "$tsan_extra_left" =~ ^[0-9]+$ ]] || { fail "tiny_stack --measure: no used_below"; tsan_extra_left=0; }
fi
# --- A thread on the smallest stack, deep in recursion.
name=tiny_stack
if ((UNDER_TSAN)); then
  run_three "$name" "$(binary $DIR/tiny_stack)" $((4608 + tsan_extra_left))
else
  run_three "$name" "$(binary $DIR/tiny_stack)"
fi
same_as_plain "$name"
skipped=$(meta_number "$name" samplesSkippedLowStack)
if [[ "$RUN_STATUS" -eq 0 && "${skipped:-0}" -gt 0 ]]; then
  pass "$name: no crash; $skipped samples skipped for want of stack (in the profile)"
else
  fail "$name: status $RUN_STATUS, samplesSkippedLowStack=${skipped:-missing}"
fi

# --- Little stack left where a sampling signal lands (issue 33): the main thread 5 KiB above
# the lowest address its soft RLIMIT_STACK (lowered by the program to 1 MiB) allows: was
# SIGSEGV 6/6 (the check covered threads, not the growable main stack).
name=main_stack
run_three "$name" "$(binary $DIR/stack_headroom)" main
same_as_plain "$name"
where=$(grep -o '"samplesSkippedLowStackWhere":{[^}]*}' "$OUT/$name.json")
skipped=$(grep -o '"mainStack":[0-9]*' <<<"$where" | cut -d: -f2)
if [[ "$RUN_STATUS" -eq 0 && "${skipped:-0}" -gt 0 ]]; then
  pass "$name: no crash; $skipped samples skipped on the main stack (in the profile: $where)"
else
  fail "$name: status $RUN_STATUS, ${where:-no samplesSkippedLowStackWhere}"
fi
# Just enough stack for the kernel's signal frame (the kernel's AT_MINSIGSTKSZ + 256 bytes
# above the thread's guard page or the main stack's limit): the handler's very first C++
# frames did not fit (SIGSEGV); its assembly entry skips there, writing nothing.
minsig=$(LD_SHOW_AUXV=1 /bin/true 2>/dev/null | awk '/AT_MINSIGSTKSZ/ { print $2 }')
tight=$(( ${minsig:-4096} + 256 + tsan_extra_left ))
name=tiny_stack_tight
run_three "$name" "$(binary $DIR/tiny_stack)" "$tight"
same_as_plain "$name"
name=main_stack_tight
run_three "$name" "$(binary $DIR/stack_headroom)" main "$tight"
same_as_plain "$name"
for name in tiny_stack_tight main_stack_tight; do
  where=$(grep -o '"samplesSkippedLowStackWhere":{[^}]*}' "$OUT/$name.json")
  [[ -n "$where" ]] && pass "$name ($tight bytes left): skips counted ($where)" ||
    fail "$name ($tight bytes left): no samplesSkippedLowStackWhere in the profile"
done
# The program's SIGUSR1 handler burning CPU on its own SA_ONSTACK alternate stack, with guard
# bytes below it, 20 times 30 ms, and once 600 ms: 7 KiB had 32-272 heap bytes below it
# overwritten (3/3); 4-6 KiB were killed (SIGSEGV, 9/9: the kernel's frame for the sampling
# signal no longer fits below the program's handler, "overflowed sigaltstack"). Now the
# sampling signal stays blocked while any program handler runs on an alternate stack, whatever
# its size (added to its sa_mask; the mask read back is the program's: mask=own): as plain, no
# sample there, 16 KiB included (docs/host-contract.md, "Stack").
# Under TSan the sizes where the TSan-built program itself holds (plain, without Strata, TSan's
# own signal frames overflow 4-6 KiB: SIGSEGV or guard bytes overwritten).
if ((UNDER_TSAN)); then
  altstack_sizes=(7168 8192 16384) altstack_long_sizes=(7168)
  altstack_sampled=(altstack_7168 altstack_long_7168 altstack_16384)
  echo "skipped under TSan: alternate stacks of 4-6 KiB (TSan's own signal frames overflow them in the plain TSan-built program)"
else
  altstack_sizes=(4096 5120 6144 7168 8192 16384) altstack_long_sizes=(4096 5120 6144 7168)
  altstack_sampled=(altstack_4096 altstack_long_6144 altstack_16384)
fi
for size in "${altstack_sizes[@]}"; do
  name=altstack_$size
  run_three "$name" "$(binary $DIR/stack_headroom)" altstack "$size"
  same_as_plain "$name"
  grep -q "guard=intact mask=own" "$WORK/$name.plain.out" ||
    fail "$name: the plain run itself is off: $(cat "$WORK/$name.plain.out")"
done
for size in "${altstack_long_sizes[@]}"; do
  name=altstack_long_$size
  run_three "$name" "$(binary $DIR/stack_headroom)" altstack "$size" 600 1
  same_as_plain "$name"
done
# The same kind of handler installed by a raw rt_sigaction system call after the session
# started (a runtime's way: no wrapper sees it, so its sa_mask was never extended), each run
# going down to 1.5 KiB above the base of its 16 KiB alternate stack: killed (SIGSEGV, 3/3:
# "overflowed sigaltstack") by a sample landing there. Now the first sample that lands on the
# alternate stack blocks the sampling signal for the rest of that run (its uc_sigmask), and the
# sampler adds it to the handler's kernel mask for the later runs (read back raw on stderr).
# sampling_signal_added NAME WAY: what the kernel's mask of a raw handler should add in run
# WAY of NAME: nothing plain, the session's sampling signal preloaded and recorded.
sampling_signal_added() {
  case $2 in
    plain) echo none ;;
    preload) meta_number "$1" samplingSignal ;;
    record) meta_number "$1.record" samplingSignal ;;
  esac
}
name=altstack_raw
if ((UNDER_TSAN)); then
  # Not under TSan: what keeps this case alive is the first sample that lands on the alternate
  # stack (at the top of the handler, with room) blocking the sampling signal in the interrupted
  # frame's uc_sigmask. TSan's own handler takes the signal and runs Strata's later, at an
  # interceptor, with a copy of the context: the mask edit is lost, and the next sampling signal
  # that arrives 1.1-1.2 KiB above the stack's base finds no room for the kernel's frame
  # (SIGSEGV, si_code SI_KERNEL, in the program's BurnCpu with g_handled 0: gdb, 3 of 3, sixth
  # round of docs/reliability.md "Sanitizers"). The TSan-built program alone also overwrites
  # its guard bytes there (TSan's interceptor frames: "guard=overwritten 376").
  echo "skipped under TSan: altstack_raw (TSan runs the sampling handler deferred, on a copy of the context: the first sample's mask edit cannot hold)"
else
  run_three "$name" "$(binary $DIR/stack_headroom)" altstack_raw
  same_as_plain "$name"
  for way in plain preload record; do
    extra=$(sed -n 's/^kernel mask extra: //p' "$WORK/$name.$way.err")
    expected=$(sampling_signal_added "$name" "$way")
    if [[ "$extra" == "$expected" && -n "$extra" ]]; then
      pass "$name ($way): the kernel's mask for the raw handler adds: $extra"
    else
      fail "$name ($way): the kernel's mask for the raw handler adds: '${extra}', expected $expected"
    fi
  done
fi
# The same handler installed through libc's syscall(SYS_rt_sigaction, ...), each run going
# straight down to 1.5 KiB above the base: before, killed in the window before the sampler's
# scan (the first sample's kernel frame did not fit: SIGSEGV); now the syscall() wrapper adds
# the sampling signal to the handler's kernel mask at once, and the program reads its own
# mask back through syscall().
name=altstack_syscall
if ((UNDER_TSAN)); then
  # The TSan-built program alone overwrote the guard bytes below its alternate stack at 1.5 KiB
  # left (TSan's interceptor frames below the burn loop): the bytes left are counted from there.
  run_three "$name" "$(binary $DIR/stack_headroom)" altstack_syscall 3 $((1536 + tsan_extra_left))
else
  run_three "$name" "$(binary $DIR/stack_headroom)" altstack_syscall
fi
same_as_plain "$name"
grep -q "guard=intact handler=own" "$WORK/$name.plain.out" ||
  fail "$name: the plain run itself is off: $(cat "$WORK/$name.plain.out")"
for way in plain preload record; do
  kernel=$(sed -n 's/^kernel mask extra: //p' "$WORK/$name.$way.err")
  own=$(sed -n 's/^syscall mask extra: //p' "$WORK/$name.$way.err")
  expected=$(sampling_signal_added "$name" "$way")
  if [[ "$kernel" == "$expected" && -n "$kernel" && "$own" == none ]]; then
    pass "$name ($way): the kernel's mask adds: $kernel; read back through syscall(): own"
  else
    fail "$name ($way): kernel mask adds '${kernel}' (expected $expected), syscall() reads '${own}'"
  fi
done
for name in "${altstack_sampled[@]}"; do
  if grep -q OnUsr1 "$OUT/$name.json"; then
    fail "$name: samples inside the program's handler on a small alternate stack"
  else
    pass "$name: no sample inside the program's handler on its small alternate stack"
  fi
done

fi  # part 2, first half

if in_part 3; then
# --- Program memory that the stack walk reads, made unreadable by the program (issue 33:
# SIGSEGV 3/3 each in the handler): its ELF header page, its .eh_frame_hdr page, the word a
# CIE's indirect personality pointer names, the code page below the interrupted pc (precise
# mode reads the bytes around it), a page that libunwind's frame-chain fallback (a frame
# without unwind information) validated once and then trusted (139 in 3 of 3 before), and the
# unwind pages toggled by another thread while the walks look up (a page made unreadable
# between a check and libunwind's read: 139 in 3 of 5 runs of the library that probed, then
# let libunwind read). Walks read checked copies now (platform/sampling/unwind_table_copy.h)
# and libunwind's other reads go through a checked accessor: a lookup whose bytes are
# unreadable ends the walk at that object, counted; the ELF header is no longer read at all.
for mode in elf eh_frame_hdr personality code_page frame_chain race; do
  name=unreadable_$mode
  case $mode in
    code_page) STRATA_STARTUP_FEATURES=stackwalk,threads,cpu,precise \
                 run_three "$name" "$(binary $DIR/unreadable_headers)" "$mode" ;;
    race) STRATA_STARTUP_INTERVAL=0.1 run_three "$name" "$(binary $DIR/unreadable_headers)" race 300 ;;
    *) run_three "$name" "$(binary $DIR/unreadable_headers)" "$mode" ;;
  esac
  same_as_plain "$name"
  refused=$(meta_number "$name" unwindLookupsUnreadable)
  samples=$(main_samples "$name")
  # The ELF header is not read by lookups any more; precise mode's code read is not a lookup.
  [[ $mode == elf || $mode == code_page || $mode == frame_chain ]] && needs_refused=0 ||
    needs_refused=1
  if ((UNDER_TSAN)) && [[ "$RUN_STATUS" -eq 0 && "${samples:-0}" -gt 0 ]]; then
    pass "$name: no crash; $samples samples"
    skip_under_tsan "$name: the unwind lookups refused as unreadable (the spinning main thread is sampled at TSan's safe points only: ${refused:-no} refused)"
  elif [[ "$RUN_STATUS" -eq 0 && "${samples:-0}" -gt 0 ]] &&
      ((needs_refused == 0 || ${refused:-0} > 0)); then
    pass "$name: no crash; $samples samples, ${refused:-0} unwind lookups refused as unreadable"
  elif [[ "$RUN_STATUS" -eq 0 && "${samples:-0}" -gt 0 ]] &&
      grep -q '"unwinder":"frame pointers only: libunwind was not loaded' "$OUT/$name.json"; then
    # libunwind is loaded by the sampler at its first loop; a program that made its ELF header
    # unreadable before then would make the dynamic loader fault: not loaded, and said.
    pass "$name: no crash; $samples samples by frame pointers, libunwind not loaded (said in the profile)"
  else
    fail "$name: status $RUN_STATUS, ${samples:-no} samples, unwindLookupsUnreadable=${refused:-missing}"
  fi
done

fi  # part 3

if in_part 2; then
# --- A raw rt_sigaction by an inline system call replaces the sampling handler: sampling
# stops, the profile says why.
name=raw_ignore_asm
run_three "$name" "$(binary $DIR/raw_ignore)" asm
same_as_plain "$name"
samples=$(main_samples "$name")
if grep -q '"samplingStopped":"the program replaced the handler' "$OUT/$name.json" &&
    [[ "${samples:-0}" -gt 0 ]]; then
  pass "$name: the profile says why sampling stopped ($samples samples before)"
else
  fail "$name: no samplingStopped note in the profile (${samples:-no} samples)"
fi
note=$("$STRATA" summary "$OUT/$name.record.json" 2>&1 | grep 'Sampling note' | head -1)
if [[ "$note" == *samplingStopped:* ]]; then
  pass "$name: strata summary says: $note"
else
  fail "$name: no samplingStopped note in strata summary ('$note')"
fi
# --- The same through libc's syscall(): the syscall() wrapper records SIG_IGN as the
# program's action for the sampling signal, as sigaction's wrapper does, and sampling goes on
# (before: stopped, as above).
name=raw_ignore
run_three "$name" "$(binary $DIR/raw_ignore)"
same_as_plain "$name"
for json in "$OUT/$name.json" "$OUT/$name.record.json"; do
  if grep -q '"samplingStopped"' "$json"; then
    fail "$name: sampling stopped ($(basename "$json"))"
  elif grep -q 'BurnAfter' "$json"; then
    pass "$name: sampled after the raw SIG_IGN, no samplingStopped ($(basename "$json"))"
  else
    fail "$name: no sample in BurnAfter ($(basename "$json"))"
  fi
done

# --- STRATA_SAMPLING_SIGNAL.
name=signal_bad
STRATA_SAMPLING_SIGNAL=SIGSEGV run_three "$name" "$(binary $DIR/reset_dispositions)"
same_as_plain "$name"
if [[ "$RUN_STATUS" -eq 0 ]] && grep -q "STRATA_SAMPLING_SIGNAL='SIGSEGV' is not valid: expected SIGRTMIN+n" "$WORK/$name.preload.err" &&
    [[ "$(meta_number "$name" samplingSignal)" -eq "$(kill -l SIGRTMAX)" ]]; then
  pass "$name: refused with the accepted range, default used: $(head -1 "$WORK/$name.preload.err")"
else
  fail "$name: status $RUN_STATUS, stderr: $(head -2 "$WORK/$name.preload.err")"
fi
name=signal_chosen
STRATA_SAMPLING_SIGNAL=SIGRTMIN+5 run_three "$name" "$(binary $DIR/reset_dispositions)"
same_as_plain "$name"
want=$(kill -l SIGRTMIN+5)
got=$(meta_number "$name" samplingSignal)
samples=$(main_samples "$name")
if [[ "$RUN_STATUS" -eq 0 && "$got" -eq "$want" && "${samples:-0}" -gt 0 ]]; then
  pass "$name: STRATA_SAMPLING_SIGNAL=SIGRTMIN+5 samples with signal $got ($samples samples)"
else
  fail "$name: status $RUN_STATUS, signal $got (wanted $want), ${samples:-no} samples"
fi
# The old name now means the control signal: SIGRTMIN+5 there is a control signal, never the
# sampling signal (the default one is used); reset_dispositions sets SIG_DFL for every signal,
# which the control records (it stays on), so the run is as plain. With a control signal the
# exit save goes to the next numbered file, <path>-1.json.
name=signal_old_name
STRATA_SIGNAL=SIGRTMIN+5 run_three "$name" "$(binary $DIR/reset_dispositions)"
same_as_plain "$name"
got=$(meta_number "$name-1" samplingSignal)
samples=$(main_samples "$name-1")
if [[ "$RUN_STATUS" -eq 0 && "$got" -eq "$(kill -l SIGRTMAX)" && "${samples:-0}" -gt 0 ]] &&
    ! grep -q "STRATA_SIGNAL" "$WORK/$name.preload.err"; then
  pass "$name: STRATA_SIGNAL=SIGRTMIN+5 is a control signal; sampling with signal $got ($samples samples)"
else
  fail "$name: status $RUN_STATUS, sampling signal $got (wanted the default $(kill -l SIGRTMAX)), ${samples:-no} samples; $(head -2 "$WORK/$name.preload.err")"
fi

fi  # part 2

finish
