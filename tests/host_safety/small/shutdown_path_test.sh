#!/usr/bin/env bash
# Issue 16, "without %p a child's profile overwrites the parent's": STRATA_SHUTDOWN is
# inherited by the processes a profiled program starts, so with a path without %p they all
# saved to the same file (the last one to exit won). Now the first profiled process of the
# tree keeps the path as given and each profiled descendant saves to PATH with .<pid> before
# .json (docs/env-vars.md).
#
# spawn_child (a real program, no Strata include) spins in parent_work, fork+execs itself as a
# child spinning in child_work, waits for it and spins again; all preloaded with
# STRATA_STARTUP=1 and the same STRATA_SHUTDOWN=DIR/p.json:
#   one_child    two files: p.json (the parent: parent_work, no child_work) and p.<pid>.json
#                (the child: child_work, that pid); both pass the format checker.
#   chain        four generations (each execs the next): p.json and three p.<pid>.json.
#   with_pid     STRATA_SHUTDOWN=DIR/p-%p.json: one file per process, as before.
#   unprofiled_parent  the same variable set in a shell that is not preloaded (it saves
#                nothing): the preloaded program under it is the first profiled process and
#                keeps DIR/p.json.
# Every run has the plain run's exit status and output.
source "$(dirname "$0")/../../scenario_lib.sh"

program="$(binary tests/host_safety/small/spawn_child)"
iterations=60000000

timeout 120 "$program" "$iterations" 1 >"$WORK/plain1.out" 2>&1
plain1_status=$?
timeout 120 "$program" "$iterations" 3 >"$WORK/plain3.out" 2>&1
plain3_status=$?

# same_as_plain NAME PLAIN: exit status and output of run NAME match plain run PLAIN.
same_as_plain() {
  local name="$1" plain="$2" plain_status="$3"
  if [[ "$RUN_STATUS" -eq "$plain_status" ]] && cmp -s "$WORK/$plain.out" "$WORK/$name.out"; then
    pass "$name: exit status $RUN_STATUS and output as without Strata"
  else
    fail "$name: exit status $RUN_STATUS (plain $plain_status) or output differs"
    show_run "$name"
  fi
}

# files_in DIR: the file names in DIR, sorted, space-separated.
files_in() { ls -A "$1" | sort | tr '\n' ' '; }

# profile_pid FILE: the pid of the profile's main thread.
profile_pid() { "$PROFILE_STATS" "$1" | awk '$1 == "thread" { for (i = 2; i <= NF; i++) if ($i ~ /^pid=/) { print substr($i, 5); exit } }'; }

# samples_in FILE FUNCTION: the profile's main-thread samples with FUNCTION on the stack.
samples_in() {
  "$PROFILE_STATS" "$1" "GeckoMain:$2" |
    awk '$1 == "match" { for (i = 2; i <= NF; i++) if ($i ~ /^count=/) { print substr($i, 7); exit } }'
}

# check_profile LABEL FILE OWN OTHER: FILE is a valid profile with samples in OWN, none in OTHER.
check_profile() {
  local label="$1" file="$2" own="$3" other="$4"
  local own_samples other_samples
  if ! "$GECKO_CHECK" --max-per-code=3 "$file" >"$WORK/check.out" 2>&1; then
    fail "$label: $(basename "$file") is rejected by the checker: $(head -5 "$WORK/check.out")"
    return
  fi
  own_samples=$(samples_in "$file" "$own")
  other_samples=$(samples_in "$file" "$other")
  result "case=$label file=$(basename "$file") pid=$(profile_pid "$file") ${own}=${own_samples:-?} ${other}=${other_samples:-?}"
  if [[ "${own_samples:-0}" -gt 0 && "${other_samples:-1}" -eq 0 ]]; then
    pass "$label: $(basename "$file") is the profile of a $own process ($own_samples samples, none in $other)"
  else
    fail "$label: $(basename "$file") has ${own_samples:-?} samples in $own and ${other_samples:-?} in $other"
  fi
}

# --- one_child
dir="$WORK/one_child"
mkdir -p "$dir"
STRATA_SHUTDOWN="$dir/p.json" run_profiled one_child "$program" "$iterations" 1
same_as_plain one_child plain1 "$plain1_status"
files=$(files_in "$dir")
result "case=one_child files=\"$files\""
if [[ "$files" =~ ^p\.([0-9]+)\.json\ p\.json\ $ ]]; then
  child_pid="${BASH_REMATCH[1]}"
  pass "one_child: two profiles: $files"
  check_profile one_child "$dir/p.json" parent_work child_work
  check_profile one_child "$dir/p.$child_pid.json" child_work parent_work
  [[ "$(profile_pid "$dir/p.$child_pid.json")" == "$child_pid" ]] &&
    pass "one_child: p.$child_pid.json is process $child_pid's" ||
    fail "one_child: p.$child_pid.json holds pid $(profile_pid "$dir/p.$child_pid.json")"
else
  fail "one_child: expected p.json and p.<pid>.json, found: $files"
  show_run one_child
fi

# --- chain of four generations
dir="$WORK/chain"
mkdir -p "$dir"
STRATA_SHUTDOWN="$dir/p.json" run_profiled chain "$program" "$iterations" 3
same_as_plain chain plain3 "$plain3_status"
files=$(files_in "$dir")
result "case=chain files=\"$files\""
count=$(ls -A "$dir" | grep -cE '^p\.[0-9]+\.json$')
if [[ -f "$dir/p.json" && "$count" -eq 3 && $(ls -A "$dir" | wc -l) -eq 4 ]]; then
  pass "chain: p.json and three p.<pid>.json"
  check_profile chain "$dir/p.json" parent_work child_work
  for file in "$dir"/p.[0-9]*.json; do check_profile chain "$file" child_work parent_work; done
else
  fail "chain: expected p.json and three p.<pid>.json, found: $files"
fi

# --- with %p: unchanged, one file per process
dir="$WORK/with_pid"
mkdir -p "$dir"
STRATA_SHUTDOWN="$dir/p-%p.json" run_profiled with_pid "$program" "$iterations" 1
same_as_plain with_pid plain1 "$plain1_status"
files=$(files_in "$dir")
[[ "$files" =~ ^p-[0-9]+\.json\ p-[0-9]+\.json\ $ ]] && pass "with_pid: two p-<pid>.json: $files" ||
  fail "with_pid: expected two p-<pid>.json, found: $files"

# --- an unprofiled shell with the same variable above the profiled program
dir="$WORK/unprofiled_parent"
mkdir -p "$dir"
STRATA_SHUTDOWN="$dir/p.json" timeout 120 bash -c 'LD_PRELOAD="$1" STRATA_STARTUP=1 "$2" "$3" 0; echo "status $?"' \
  bash "$STRATA_PRELOAD" "$program" "$iterations" >"$WORK/unprofiled_parent.out" 2>"$WORK/unprofiled_parent.err"
files=$(files_in "$dir")
grep -q '^status 0$' "$WORK/unprofiled_parent.out" || fail "unprofiled_parent: the program failed: $(cat "$WORK/unprofiled_parent.out")"
[[ "$files" == "p.json " ]] && pass "unprofiled_parent: the first profiled process keeps p.json" ||
  fail "unprofiled_parent: expected p.json alone, found: $files"

finish
