#!/usr/bin/env bash
# Threads that restrict themselves, and a low RLIMIT_SIGPENDING (issue 16; docs/reliability.md,
# "Never harm the host program"). One case per run, each a real program without Strata
# includes, run plain, preloaded (STRATA_STARTUP=1) and under `strata record`; exit status and
# stdout must be the plain run's:
#   tsc         tsc_forbidding_worker: a thread forbids itself rdtsc (PR_SET_TSC,
#               PR_TSC_SIGSEGV), then computes while sampled. Unfixed: SIGSEGV in the handler.
#               Also: the thread is still sampled.
#   tsc_main    the same with the main thread forbidding rdtsc (and a thread it creates
#               inheriting the flag); the exit save then runs on that thread. Unfixed (issue
#               33): SIGSEGV 3/3 in the vDSO's clock_gettime (the save's CLOCK_REALTIME read,
#               the handler retirement's CLOCK_MONOTONIC). Also: the main thread still sampled.
#   tsc_term    the same, then the program raises SIGTERM on that thread (status 143 plain):
#               `strata record`'s hook saves the profile from its handler there. Unfixed
#               (issue 33): SIGSEGV (139), the hook's clock read through the vDSO.
#   seccomp     seccomp_strict_worker: a thread enters SECCOMP_MODE_STRICT, computes, write()s
#               its result and ends with syscall(SYS_exit). Unfixed: SIGSEGV (rdtsc) or SIGKILL
#               (a system call in the handler). Also: a "Sampling stopped" marker says why.
#   seccomp_filter_thread, seccomp_filter_process
#               seccomp_filter_worker: a filter that kills the process at any clock or timer
#               system call, installed by a worker thread for itself (prctl), or by main for
#               every thread (seccomp(2), SECCOMP_FILTER_FLAG_TSYNC; the profile is then saved
#               before the filter applies). Unfixed: killed by SIGSYS (status 159).
#   sigpending  sigpending_counter at `ulimit -i 48`, in a fresh user namespace (the count is
#               per user and namespace, so other processes of this user do not disturb it):
#               as many timers and queued signals as plain. Unfixed: one timer fewer, and
#               killed by its own queued SIGRTMIN (taken by Strata's sampler thread, which did
#               not block it). Also: a "Thread not sampled" marker says why.
source "$(dirname "$0")/../../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
export STRATA_NO_PROGRESS=1
export STRATA_BASE_LIB="$STRATA_LIB"
case_name="${1:?usage: restricted_test.sh tsc|tsc_main|tsc_term|seccomp|seccomp_filter_thread|seccomp_filter_process|sigpending}"

# The program of the case. Each run is bounded by `timeout` outside the preloaded command
# (a preloaded `timeout` would save its own profile over the program's).
case "$case_name" in
  tsc) program=("$(binary tests/host_safety/restricted/tsc_forbidding_worker)" thread) ;;
  tsc_main) program=("$(binary tests/host_safety/restricted/tsc_forbidding_worker)" main) ;;
  tsc_term) program=("$(binary tests/host_safety/restricted/tsc_forbidding_worker)" term) ;;
  seccomp) program=("$(binary tests/host_safety/restricted/seccomp_strict_worker)") ;;
  seccomp_filter_thread | seccomp_filter_process)
    program=("$(binary tests/host_safety/restricted/seccomp_filter_worker)" "${case_name##*_}") ;;
  sigpending) program=("$(binary tests/host_safety/restricted/sigpending_counter)") ;;
  *) echo "unknown case $case_name" && exit 2 ;;
esac
# run_in_setting NAME CMD...: CMD with stdout/stderr to $WORK/NAME.*, sets RUN_STATUS. For
# sigpending, in a user namespace at `ulimit -i 48` (`exec`: the shell is not preloaded).
run_in_setting() {
  local name="$1"
  shift
  if [[ "$case_name" == sigpending ]]; then
    timeout 120 unshare -U -r bash -c 'ulimit -i 48 && exec "$@"' sigpending "$@" \
      >"$WORK/$name.out" 2>"$WORK/$name.err"
  else
    timeout 120 "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  fi
  RUN_STATUS=$?
  cp "$WORK/$name.out" "$WORK/$name.err" "$OUT/" 2>/dev/null || true
}

# compare NAME: status and stdout of run NAME are the plain run's.
compare() {
  local name="$1"
  result "case=$case_name run=$name status=$RUN_STATUS stdout=\"$(head -c 200 "$WORK/$name.out" | tr '\n' ' ')\""
  if [[ "$RUN_STATUS" -eq "$plain_status" ]] && cmp -s "$WORK/plain.out" "$WORK/$name.out"; then
    pass "$name: exit status $RUN_STATUS and stdout as plain"
  else
    fail "$name: exit status $RUN_STATUS (plain $plain_status), stdout differs or not:"
    diff "$WORK/plain.out" "$WORK/$name.out" | head -5 | sed 's/^/    /'
    sed 's/^/    stderr: /' "$WORK/$name.err" | head -10
  fi
}

# The marker name and text each case's profile must show, and the thread that must be sampled.
case "$case_name" in
  tsc) marker=""; sampled_thread=tsc_forbidding_ ;;
  tsc_main) marker=""; sampled_thread=GeckoMain ;;
  tsc_term) marker=""; sampled_thread=GeckoMain ;;
  seccomp) marker="Sampling stopped"; text="the thread entered seccomp strict mode"; sampled_thread="" ;;
  seccomp_filter_thread)
    marker="Sampling stopped"; text="the thread entered a seccomp filter"; sampled_thread="" ;;
  seccomp_filter_process)
    marker="Sampling stopped"; text="the process entered a seccomp filter"; sampled_thread="" ;;
  sigpending) marker="Thread not sampled"; text="RLIMIT_SIGPENDING is 48"; sampled_thread="" ;;
esac

check_profile() {  # NAME PROFILE
  local name="$1" profile="$2"
  if [[ ! -s "$profile" ]]; then
    fail "$name: no profile at $profile"
    return
  fi
  if "$GECKO_CHECK" --max-per-code=3 "$profile" >"$WORK/$name.check" 2>&1; then
    pass "$name: $(tail -1 "$WORK/$name.check" | sed "s|^$OUT/||")"
  else
    fail "$name: the profile checker rejects the profile:"
    sed 's/^/    /' "$WORK/$name.check" | head -20
  fi
  if [[ -n "$marker" ]]; then
    grep -qF "\"$marker\"" "$profile" && grep -qF "$text" "$profile" &&
      pass "$name: the profile says why: marker '$marker' ($text)" ||
      fail "$name: no marker '$marker' with '$text' in the profile"
  fi
  if [[ -n "$sampled_thread" ]]; then
    "$PROFILE_STATS" "$profile" >"$WORK/$name.stats" 2>&1
    local samples
    samples=$(field "$name" thread "name=$sampled_thread" samples)
    result "case=$case_name run=$name thread=$sampled_thread samples=${samples:-none}"
    [[ "${samples:-0}" -gt 0 ]] && pass "$name: thread $sampled_thread still sampled ($samples)" ||
      fail "$name: thread $sampled_thread has no samples"
  fi
}

run_in_setting plain "${program[@]}"
plain_status=$RUN_STATUS
result "case=$case_name run=plain status=$plain_status stdout=\"$(head -c 200 "$WORK/plain.out" | tr '\n' ' ')\""
expected_status=0
[[ "$case_name" == tsc_term ]] && expected_status=143  # Killed by its own SIGTERM.
[[ "$plain_status" -eq "$expected_status" ]] ||
  { fail "the plain run failed ($plain_status)"; show_run plain; finish; }

run_in_setting preloaded env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
  STRATA_SHUTDOWN="$OUT/preloaded.json" "${program[@]}"
compare preloaded
# A process killed by a signal saves no profile at exit without `strata record`'s hook.
[[ "$case_name" == tsc_term ]] || check_profile preloaded "$OUT/preloaded.json"

run_in_setting record env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$OUT/record.json" -- \
  "${program[@]}"
compare record
check_profile record "$OUT/record.json"

finish
