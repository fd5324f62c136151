#!/usr/bin/env bash
# The `strata` command line on real processes (tests/cli/README.md, docs/cli.md):
#   record  a program that forks and execs two children (three processes, each function
#           named, inlined hot loops as frames with file:line, exit status passed through);
#           a shell pipeline (the shell saves no profile), .json.gz output; exit statuses
#           (exit N, killed by a signal, cannot start); SIGINT to strata and to the whole
#           process group (the program saves its profile and dies by SIGINT, and so does strata: 130);
#           --no-children;
#   symbolicate  a raw-address profile written by the base tier itself;
#   summary, convert (chrome, pprof, collapsed), report  on the recorded profile;
#   the merged profile through the format checker and the front-end's importer.
# Under TSan (scenario_lib.sh, UNDER_TSAN) the checks of sampled stack content that a stale
# stack can break (no hex frame, the functions' shares, the inlined kernels' frames) are
# skipped with a printed reason.
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
TREE="$(binary tests/cli/process_tree)"
PPROF_CHECK="$(binary tests/cli/pprof_check)"
HERE="$(dirname "$(readlink -f "$0")")"  # The source tree (runfiles link to it, or by hand).
CHECKS="$HERE/cli_checks.js"
TREE_SOURCE="$HERE/process_tree.cc"
# The same base library as the scenario helpers (STRATA_BASE_LIB overrides it by hand).
export STRATA_BASE_LIB="$STRATA_LIB"
export STRATA_NO_PROGRESS=1

# record NAME [STRATA ARGS...] -- CMD...: runs `strata record`, stdout/stderr to $WORK/NAME.*,
# sets RUN_STATUS.
record() {
  local name="$1"
  shift
  env "${SANITIZER_ENV[@]}" "$STRATA" record "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  RUN_STATUS=$?
  cp "$WORK/$name.out" "$WORK/$name.err" "$OUT/" 2>/dev/null || true
}

show() {
  echo "--- $1: status $RUN_STATUS; stdout, stderr:"
  sed 's/^/    /' "$WORK/$1.out" "$WORK/$1.err" | head -40
}

# value KEY LINE...: the value of KEY=... in the given text.
value() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" | head -1; }

expect_status() {  # NAME EXPECTED WHAT
  if [[ "$RUN_STATUS" -eq "$2" ]]; then
    pass "$1: exit status $2 ($3)"
  else
    fail "$1: exit status $RUN_STATUS, expected $2 ($3)"
    show "$1"
  fi
}

# --- 1. A process tree: parent + two exec'd children -----------------------------------------
record tree -o "$OUT/tree.json" -- "$TREE" --ms 500 --exit-code 7
expect_status tree 7 "the program's own"
check_format tree
node "$CHECKS" processes "$OUT/tree.json" >"$WORK/tree.processes" || fail "tree: cli_checks processes"
sed 's/^/    /' "$WORK/tree.processes"
total_line=$(grep '^total' "$WORK/tree.processes")
processes=$(value processes <<<"$total_line")
threads=$(value threads <<<"$total_line")
samples=$(value samples <<<"$total_line")
hex=$(value hex_frames <<<"$total_line")
result "tree processes=$processes threads=$threads samples=$samples hex_frames=$hex"
[[ "$processes" == 3 ]] && pass "tree: three processes in one profile" || fail "tree: $processes process(es), expected 3"
# The parent is the main process; each child says it is a child, named with its pid (the
# front-end would call them all "process_tree (1/3)".."(3/3)" otherwise).
awk 'NR == 1 && !/ type=default / { bad = 1 }
     NR > 1 && /^process / { split($2, p, "="); if ($0 !~ / type=tab / || $0 !~ ("name=process_tree_\\(" p[2] "\\) ")) bad = 1 }
     END { exit bad }' "$WORK/tree.processes" &&
  pass "tree: the parent is the main process, each child a child named with its pid" ||
  fail "tree: process types or names (above)"
if ((UNDER_TSAN)); then
  # Stale callers under TSan can be any word of the stack: unsymbolicated, and the functions'
  # shares mean nothing (scenario_lib.sh).
  skip_under_tsan "tree: no hex frame, each function's share of its process's samples, the inlined kernels' frames"
else
[[ "$hex" == 0 ]] && pass "tree: no hex frame in any sample" || fail "tree: $hex hex frames in samples"
node "$CHECKS" share "$OUT/tree.json" parent_spin alpha_child_work beta_child_work alpha_inlined_kernel \
  beta_inlined_kernel >"$WORK/tree.share"
sed 's/^/    /' "$WORK/tree.share"
# Each function dominates exactly one process (>= 80 % of its samples).
for fn in parent_spin alpha_child_work beta_child_work alpha_inlined_kernel beta_inlined_kernel; do
  owners=$(awk -v fn="$fn" '$0 ~ "function=" fn " " { split($0, a, "pct="); if (a[2] + 0 >= 80) n++ } END { print n + 0 }' \
    "$WORK/tree.share")
  best=$(awk -v fn="$fn" '$0 ~ "function=" fn " " { split($0, a, "pct="); if (a[2] + 0 > m) m = a[2] + 0 } END { print m + 0 }' \
    "$WORK/tree.share")
  result "tree function=$fn best_pct=$best"
  [[ "$owners" == 1 ]] && pass "tree: $fn named in $best % of its process's samples" \
    || fail "tree: $fn is in >= 80 % of the samples of $owners process(es) (best $best %), expected 1"
done
# The inlined hot loop is a frame of its own, inside its caller, with this file and its line.
for role in alpha beta; do
  kernel_line=$(grep -n "${role^^}_KERNEL_LINE" "$TREE_SOURCE" | cut -d: -f1)
  node "$CHECKS" frames "$OUT/tree.json" "${role}_inlined_kernel" >"$WORK/tree.$role.frames"
  sed 's/^/    /' "$WORK/tree.$role.frames"
  bad=$(awk -v line="$kernel_line" -v caller="${role}_child_work" '
    { ok = 0
      if (match($0, /process_tree\.cc:[0-9]+\)/)) {
        n = substr($0, RSTART + 16, RLENGTH - 17) + 0
        split($0, l, "line="); split(l[2], m, " ")
        ok = (n >= line - 3 && n <= line + 3 && m[1] + 0 == n && index($0, "parent=" caller "(") > 0 &&
              index($0, "(in_process_tree)") > 0)
      }
      if (!ok) bad++ }
    END { print bad + 0 }' "$WORK/tree.$role.frames")
  count=$(wc -l <"$WORK/tree.$role.frames")
  if [[ "$count" -gt 0 && "$bad" == 0 ]]; then
    pass "tree: ${role}_inlined_kernel is a frame under ${role}_child_work with process_tree.cc:line near $kernel_line ($count distinct)"
  else
    fail "tree: ${role}_inlined_kernel frames: $count, $bad without the expected caller, file and line"
  fi
done
fi
grep -q "role=alpha" "$WORK/tree.out" && grep -q "role=beta" "$WORK/tree.out" \
  && pass "tree: the program's output is untouched" || fail "tree: program output missing"
merge_line=$(grep "merge" "$WORK/tree.err")
result "tree $(echo "$merge_line" | sed 's/strata record: //; s/, /,/g; s/ s/s/g; s/ (/(/; s/ /_/g')"

# The front-end's own importer takes every thread of every process.
cli_js="$HERE/../frontend/node_modules/@firefox-devtools/profiler-cli/dist/profiler-cli.js"
threads_js="$HERE/../frontend_threads.js"
if command -v node >/dev/null && [[ -f "$cli_js" && -f "$threads_js" ]]; then
  session_dir=$(mktemp -d /tmp/strata-pq.XXXXXX)
  PROFILER_CLI_SESSION_DIR="$session_dir" node "$threads_js" "$cli_js" "$OUT/tree.json" "$threads" \
    >"$WORK/tree.frontend" 2>&1
  status=$?
  PROFILER_CLI_SESSION_DIR="$session_dir" node "$cli_js" stop --all >/dev/null 2>&1 || true
  rm -rf "$session_dir"
  sed 's/^/    /' "$WORK/tree.frontend"
  [[ $status -eq 0 ]] && pass "tree: the front-end imports all $threads threads of the $processes processes" \
    || fail "tree: the front-end import failed"
else
  fail "tree: node or profiler-cli missing (tools/setup.sh installs them)"
fi

# --- 2. A shell with a background job; gzip output --------------------------------------------
record shell -o "$OUT/shell.json.gz" -- sh -c "'$TREE' --child alpha --ms 200 & '$TREE' --child beta --ms 200; wait"
expect_status shell 0 "the shell's"
if gzip -t "$OUT/shell.json.gz" 2>/dev/null; then pass "shell: .json.gz is gzip"; else fail "shell: not gzip"; fi
shell_processes=$(node "$CHECKS" processes "$OUT/shell.json.gz" | grep '^total' | value processes)
[[ "$shell_processes" == 2 ]] && pass "shell: the two programs' profiles (the shell itself saves none)" \
  || { fail "shell: $shell_processes process(es), expected 2"; show shell; }
grep -q "saved no profile" "$WORK/shell.err" && pass "shell: says that the shell saved no profile" \
  || fail "shell: no note about the shell's missing profile"
"$STRATA" summary "$OUT/shell.json.gz" >"$WORK/shell.summary" 2>&1
grep -q "2 process(es)" "$WORK/shell.summary" && pass "shell: summary reads the .json.gz" \
  || { fail "shell: summary of the .json.gz"; sed 's/^/    /' "$WORK/shell.summary"; }

# --- 3. Exit statuses --------------------------------------------------------------------------
record exit5 -o "$WORK/exit5.json" -- sh -c 'exit 5'
expect_status exit5 5 "exit 5"
record killed -o "$WORK/killed.json" -- sh -c 'kill -KILL $$'
expect_status killed 137 "killed by SIGKILL: 128 + 9"
record missing -o "$WORK/missing.json" -- /nonexistent/program
expect_status missing 127 "cannot start"
grep -q "cannot run '/nonexistent/program': No such file or directory" "$WORK/missing.err" \
  && pass "missing: the message names the program" || { fail "missing: message"; show missing; }

# --- 4. Ctrl-C: SIGINT to strata alone, then to the whole process group -------------------------
set -m  # Background jobs in their own process group, SIGINT not ignored.
for mode in strata group; do
  name="sigint_$mode"
  env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$OUT/$name.json" -- "$TREE" --forever >"$WORK/$name.out" 2>"$WORK/$name.err" &
  pid=$!
  for _ in $(seq 600); do grep -q "role=forever" "$WORK/$name.out" 2>/dev/null && break; sleep 0.1; done
  # Until the program has spun 300 ms of its own CPU (utime + stime in /proc, clock ticks),
  # not for 0.8 s of wall time: a loaded machine may not give it a CPU meanwhile (issue 35).
  forever_pid=$(sed -n 's/^process_tree: role=forever pid=\([0-9]*\)$/\1/p' "$WORK/$name.out" | head -1)
  hz=$(getconf CLK_TCK)
  for _ in $(seq 1200); do
    ticks=$(awk '{ print $14 + $15 }' "/proc/${forever_pid:-0}/stat" 2>/dev/null) || break
    ((ticks * 1000 >= 300 * hz)) && break
    sleep 0.05
  done
  if [[ "$mode" == strata ]]; then kill -INT "$pid"; else kill -INT -- "-$pid"; fi
  start=$(date +%s.%N)
  wait "$pid"
  RUN_STATUS=$?
  waited=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  result "$name status=$RUN_STATUS stop_s=$waited"
  expect_status "$name" 130 "SIGINT: the program saves and dies by it, strata dies by it too"
  if [[ -s "$OUT/$name.json" ]]; then
    if skip_under_tsan "$name: forever_spin's share of the samples"; then
      pass "$name: profile saved"
    else
    share=$(node "$CHECKS" share "$OUT/$name.json" forever_spin | value pct)
    ge "${share:-0}" 80 && pass "$name: profile saved, forever_spin in $share % of the samples" \
      || fail "$name: forever_spin in only ${share:-0} % of the samples"
    fi
  else
    fail "$name: no profile saved"
    show "$name"
  fi
done
set +m

# --- 5. --no-children --------------------------------------------------------------------------
record nochildren -o "$OUT/nochildren.json" --no-children -- "$TREE" --ms 150
expect_status nochildren 0 "the program's"
nc=$(node "$CHECKS" processes "$OUT/nochildren.json" | grep '^total' | value processes)
[[ "$nc" == 1 ]] && pass "nochildren: only the command's own process" || fail "nochildren: $nc processes"
[[ $(grep -c "role=alpha\|role=beta" "$WORK/nochildren.out") == 2 ]] \
  && pass "nochildren: the children still ran" || fail "nochildren: children output missing"

# --- 6. symbolicate a raw profile written by the base tier itself ------------------------------
STRATA_STARTUP_FEATURES=rawaddresses run_profiled raw "$TREE" --child beta --ms 200
node "$CHECKS" processes "$OUT/raw.json" | grep -q "hex_frames=[1-9]" && pass "raw: the base tier wrote raw addresses" \
  || fail "raw: no raw addresses"
"$STRATA" symbolicate "$OUT/raw.json" -o "$OUT/raw.sym.json" >"$WORK/symbolicate.out" 2>&1 \
  || fail "symbolicate failed: $(cat "$WORK/symbolicate.out")"
sed 's/^/    /' "$WORK/symbolicate.out"
if ! skip_under_tsan "symbolicate: no hex frame left, beta_inlined_kernel's share of the samples"; then
node "$CHECKS" processes "$OUT/raw.sym.json" | grep -q "hex_frames=0" && pass "symbolicate: no hex frame left" \
  || fail "symbolicate: hex frames left"
raw_share=$(node "$CHECKS" share "$OUT/raw.sym.json" beta_inlined_kernel | value pct)
ge "${raw_share:-0}" 80 && pass "symbolicate: beta_inlined_kernel in $raw_share % of the samples" \
  || fail "symbolicate: beta_inlined_kernel in ${raw_share:-0} %"
fi
"$GECKO_CHECK" --quiet "$OUT/raw.sym.json" && pass "symbolicate: format checker" || fail "symbolicate: format checker"

# --- 7. summary, convert, report on the recorded tree ------------------------------------------
# --top 12: the total-time table's first rows are the 4 common roots, then the three
# programs' functions and their inlined kernels (self time goes to the function an inlined
# kernel is inlined into, docs/symbols.md; the kernel keeps its total time).
"$STRATA" summary "$OUT/tree.json" --top 12 >"$WORK/summary.txt" 2>&1
sed 's/^/    /' "$WORK/summary.txt" | head -40
grep -q "3 process(es), 3 thread(s), $samples samples" "$WORK/summary.txt" \
  && grep -q "alpha_inlined_kernel  \[process_tree\]" "$WORK/summary.txt" \
  && grep -q "alpha_child_work(double)  \[process_tree\]" "$WORK/summary.txt" \
  && pass "summary: processes, threads, samples, the inlined function and its outer one" || fail "summary output"

"$STRATA" convert "$OUT/tree.json" --to chrome -o "$OUT/tree.trace.json" 2>"$WORK/chrome.err" || fail "convert chrome"
if node "$CHECKS" chrome "$OUT/tree.trace.json" >"$WORK/chrome.check"; then
  head -1 "$WORK/chrome.check" | sed 's/^/    /'
  names=$(head -1 "$WORK/chrome.check" | value process_names | tr ',' '\n' | grep -c "process_tree")
  if [[ "$names" == 3 ]] && grep -q "chrome_slice name=alpha_inlined_kernel " "$WORK/chrome.check" \
     && grep -q "chrome_slice name=parent_spin_step(unsigned_long) " "$WORK/chrome.check"; then
    pass "convert chrome: valid JSON, balanced slices, 3 named processes, the functions as slices"
  else
    fail "convert chrome: expected events missing"
    sed 's/^/    /' "$WORK/chrome.check" | head -20
  fi
else
  fail "convert chrome: the trace is malformed"
  sed 's/^/    /' "$WORK/chrome.check" | head
fi

"$STRATA" convert "$OUT/tree.json" --to pprof -o "$OUT/tree.pb.gz" 2>"$WORK/pprof.err" || fail "convert pprof"
if "$PPROF_CHECK" "$OUT/tree.pb.gz" >"$WORK/pprof.check"; then
  head -1 "$WORK/pprof.check" | sed 's/^/    /'
  count=$(head -1 "$WORK/pprof.check" | value total_count)
  [[ "$count" == "$samples" ]] && grep -q "pprof_function name=alpha_inlined_kernel$" "$WORK/pprof.check" \
    && pass "convert pprof: decodes with profile.proto, $count samples as in the profile" \
    || fail "convert pprof: $count samples (profile: $samples) or functions missing"
else
  fail "convert pprof: $(cat "$WORK/pprof.check")"
fi

"$STRATA" convert "$OUT/tree.json" --to collapsed -o "$OUT/tree.collapsed" 2>"$WORK/collapsed.err" \
  || fail "convert collapsed"
collapsed_total=$(node "$CHECKS" collapsed "$OUT/tree.collapsed" | value total)
[[ "$collapsed_total" == "$samples" ]] && grep -q ";alpha_child_work(double);alpha_inlined_kernel [0-9]" "$OUT/tree.collapsed" \
  && pass "convert collapsed: counts sum to $samples samples, root-first frames" \
  || fail "convert collapsed: total $collapsed_total, expected $samples"

"$STRATA" report "$OUT/tree.json" -o "$OUT/tree.html" 2>"$WORK/report.err" || fail "report: $(cat "$WORK/report.err")"
if [[ -s "$OUT/tree.html" ]]; then
  grep -qi "https\?://\|src=\|@import\|url(" "$OUT/tree.html" && fail "report: references something outside the file" \
    || pass "report: no external URL, no src=, no url()"
  grep -q "alpha_inlined_kernel" "$OUT/tree.html" && grep -q '"threads":\[' "$OUT/tree.html" \
    && pass "report: the profile's data is in the page ($(wc -c <"$OUT/tree.html") bytes)" || fail "report: data missing"
fi

# --- 8. Help and errors ------------------------------------------------------------------------
for sub in record symbolicate summary convert report; do
  "$STRATA" "$sub" --help >"$WORK/help.$sub" 2>&1 && grep -q "Usage" "$WORK/help.$sub" \
    || fail "$sub --help"
done
pass "--help on every subcommand"
"$STRATA" summary /nonexistent/p.json >/dev/null 2>"$WORK/err.summary"
[[ $? -eq 1 ]] && grep -q "/nonexistent/p.json: cannot open: No such file or directory" "$WORK/err.summary" \
  && pass "errors name the file and what is wrong" || fail "summary error: $(cat "$WORK/err.summary")"
"$STRATA" convert "$OUT/tree.json" --to svg -o "$WORK/x" >/dev/null 2>&1 && fail "convert --to svg accepted" \
  || pass "convert --to svg refused"
env "${SANITIZER_ENV[@]}" "$STRATA" record --features bogus -- true >/dev/null 2>"$WORK/err.features"
grep -q "unknown feature 'bogus'" "$WORK/err.features" && pass "record --features checks names" \
  || fail "record --features bogus: $(cat "$WORK/err.features")"

finish
