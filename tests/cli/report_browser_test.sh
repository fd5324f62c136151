#!/usr/bin/env bash
# `strata report` in a real browser (tests/cli/README.md): a program with labels and markers
# (marked_program) is recorded with `strata record`, its report loaded by headless Chromium
# (Debian `chromium`, installed by tools/setup.sh): the page's script must finish without a
# console message or error (the page sets #status to "ready", or to "error: ..." from
# window.onerror) — opened on each weight (wall, the default; --weight cpu and samples), its
# table saying what it weighs — and a screenshot must show the flame graph (png_check.js: rows of the
# flame graph's warm colours at least 600 pixels wide). Where Chromium is missing or cannot
# start, the test says so and passes (SKIP).
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
PROGRAM="$(binary tests/cli/marked_program)"
HERE="$(dirname "$(readlink -f "$0")")"  # The source tree (runfiles link to it, or by hand).
export STRATA_BASE_LIB="$STRATA_LIB"
export STRATA_NO_PROGRESS=1

browser=""
for candidate in chromium chromium-browser google-chrome; do
  if command -v "$candidate" >/dev/null; then
    browser="$(command -v "$candidate")"
    break
  fi
done
if [[ -z "$browser" ]]; then
  echo "SKIP: no Chromium found (tools/setup.sh installs Debian's chromium); the report was not loaded in a browser"
  exit 0
fi

env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$OUT/marked.json" -- "$PROGRAM" --ms 300 >"$WORK/record.out" 2>"$WORK/record.err" \
  || { fail "strata record: $(cat "$WORK/record.err")"; finish; }
"$STRATA" report "$OUT/marked.json" -o "$OUT/marked.html" 2>"$WORK/report.err" \
  || { fail "strata report: $(cat "$WORK/report.err")"; finish; }
pass "recorded and reported: $(tail -1 "$WORK/report.err")"

chrome() {  # chrome ACTION_FLAGS... : headless Chromium on the report, private profile dir.
  timeout 90 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --no-default-browser-check --disable-extensions --user-data-dir="$WORK/chrome-profile" \
    --enable-logging=stderr --v=0 --hide-scrollbars "$@" "file://$OUT/marked.html"
}

chrome --dump-dom >"$WORK/dom.html" 2>"$WORK/chrome-dom.err"
status=$?
if [[ $status -ne 0 || ! -s "$WORK/dom.html" ]]; then
  echo "SKIP: Chromium ($browser) could not run here (status $status):"
  grep -v "dbus\|Fontconfig" "$WORK/chrome-dom.err" | tail -5 | sed 's/^/    /'
  exit 0
fi
state=$(grep -o '<div id="status" data-state="[a-z]*">[^<]*</div>' "$WORK/dom.html")
echo "    $state"
[[ "$state" == *'data-state="ready"'* ]] && pass "the page's script ran to the end (status ready)" \
  || fail "the page did not become ready: ${state:-no status element}"
if grep -q ":CONSOLE" "$WORK/chrome-dom.err"; then
  fail "console messages:"
  grep ":CONSOLE" "$WORK/chrome-dom.err" | head -10 | sed 's/^/    /'
else
  pass "no console message or error"
fi
grep -q "renderer" "$WORK/dom.html" && pass "the DOM has the data (thread names in the table scope)" \
  || fail "the DOM does not mention the renderer thread"

# The page opened on each weight (--weight; the page's control redraws the same way): ready,
# silent, and the table says what it weighs (wall is the default, checked above).
grep -q '<span id="top-scope" class="hint">[^<]*wall time' "$WORK/dom.html" \
  && pass "default weight: the table weighs wall time" || fail "default weight: the table scope does not say wall time"
for weight in cpu samples; do
  "$STRATA" report "$OUT/marked.json" --weight "$weight" -o "$OUT/marked.html" 2>>"$WORK/report.err"
  chrome --dump-dom >"$WORK/dom.$weight.html" 2>"$WORK/chrome-dom.$weight.err"
  words="CPU time"
  [[ "$weight" == samples ]] && words="samples"
  if grep -q 'data-state="ready"' "$WORK/dom.$weight.html" && ! grep -q ":CONSOLE" "$WORK/chrome-dom.$weight.err" &&
    grep -q "<span id=\"top-scope\" class=\"hint\">[^<]*$words" "$WORK/dom.$weight.html"; then
    pass "--weight $weight: the page is ready, silent, and its table weighs $words"
  else
    fail "--weight $weight: $(grep -o '<span id="top-scope"[^<]*' "$WORK/dom.$weight.html"; grep ":CONSOLE" "$WORK/chrome-dom.$weight.err" | head -3)"
  fi
done
"$STRATA" report "$OUT/marked.json" -o "$OUT/marked.html" 2>>"$WORK/report.err"  # The screenshot's.

chrome --window-size=1280,1000 --screenshot="$OUT/report.png" >/dev/null 2>"$WORK/chrome-shot.err"
if [[ -s "$OUT/report.png" ]]; then
  node "$HERE/png_check.js" "$OUT/report.png" >"$WORK/png.txt" || fail "png_check"
  cat "$WORK/png.txt" | sed 's/^/    /'
  rows=$(sed -n 's/.*flame_rows=\([0-9]*\).*/\1/p' "$WORK/png.txt")
  result "report_screenshot flame_rows=${rows:-0}"
  [[ "${rows:-0}" -ge 48 ]] && pass "the screenshot shows the flame graph ($rows wide rows of flame colours)" \
    || fail "no flame graph in the screenshot ($OUT/report.png): ${rows:-0} rows"
else
  fail "no screenshot: $(grep -v dbus "$WORK/chrome-shot.err" | tail -3)"
fi

# --- Deep stacks, a process tree with empty processes (issue 20): a Python workload (deep
# native recursion now and then) started through a shell, so that processes which only exec or
# wait are in the profile.
# The interpreter itself, not the first python3 in PATH: that may be a launcher script (a
# pyenv shim is a bash script), whose own processes (readlink, basename, subshells) then join
# the recorded tree; each that gets a sample adds a timeline row above the flame graph.
PYTHON="$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)"
if [[ -x "$PYTHON" ]]; then
  env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$OUT/deep.json" -- \
    sh -c "true; /bin/true; '$PYTHON' '$HERE/deep_python.py' 40" >"$WORK/deep.out" 2>"$WORK/deep.err" ||
    fail "record deep_python: $(tail -3 "$WORK/deep.err")"
  "$STRATA" report "$OUT/deep.json" -o "$OUT/marked.html" 2>>"$WORK/report.err"
  chrome --window-size=1280,1000 --dump-dom >"$WORK/dom.deep.html" 2>/dev/null
  # The flame graph opens on its root (the bottom of the canvas).
  grep -q 'id="flame"[^>]*data-scrolled-to-root="true"' "$WORK/dom.deep.html" &&
    pass "deep stacks: the flame graph opens scrolled to its root" ||
    fail "deep stacks: the flame graph is not scrolled to its root: $(grep -o '<canvas id="flame"[^>]*>' "$WORK/dom.deep.html")"
  # Every axis label inside the timeline (the last one was cut at the right edge).
  labels=$(grep -o 'data-axis-labels="[^"]*"' "$WORK/dom.deep.html" | sed 's/&quot;/"/g')
  width=$(grep -o 'data-width="[0-9]*"' "$WORK/dom.deep.html" | head -1 | grep -o '[0-9]*')
  if [[ -n "$labels" && -n "$width" ]] && node -e '
      const labels = JSON.parse(process.argv[1].replace(/^data-axis-labels="|"$/g, ""));
      const width = Number(process.argv[2]);
      process.exit(labels.length > 1 && labels.every(([, l, r]) => l >= 0 && r <= width) ? 0 : 1);' "$labels" "$width"; then
    pass "the time axis's labels are all inside the timeline ($width px)"
  else
    fail "a time axis label is cut: $labels (width $width)"
  fi
  # Processes that only exec'd (sh's children without samples) are not listed.
  if grep -q 'without samples or markers not shown' "$WORK/dom.deep.html"; then
    pass "empty processes are left out of the timeline (counted in the header)"
  else
    fail "empty processes: $(grep -o '<div id="facts"[^<]*' "$WORK/dom.deep.html")"
  fi
  # The flame graph's frame is 70 % of the window's height and opens scrolled to its root, at
  # its bottom: that is in the screenshot only when the frame begins in the window's top 30 %.
  # A 2000 px window leaves 600 px for the header and the timeline (about 12 thread rows):
  # ci102 cut the root off at 1000 px under 10 rows, and counted 53 flame rows for >= 64.
  chrome --window-size=1280,2000 --screenshot="$OUT/deep.png" >/dev/null 2>"$WORK/chrome-deep.err"
  if [[ -s "$OUT/deep.png" ]]; then
    node "$HERE/png_check.js" "$OUT/deep.png" >"$WORK/deep_png.txt" || fail "png_check deep"
    sed 's/^/    /' "$WORK/deep_png.txt"
    rows=$(sed -n 's/.*flame_rows=\([0-9]*\).*/\1/p' "$WORK/deep_png.txt")
    result "deep_screenshot flame_rows=${rows:-0}"
    # The root's full-width frames (process entry, interpreter main, ...): several rows of 16 px.
    [[ "${rows:-0}" -ge 64 ]] && pass "deep stacks: the screenshot shows the flame graph's wide root frames ($rows rows)" \
      || fail "deep stacks: the flame graph looks blank in the screenshot ($OUT/deep.png): ${rows:-0} rows"
  else
    fail "no deep screenshot: $(grep -v dbus "$WORK/chrome-deep.err" | tail -3)"
  fi
else
  fail "python3 is missing (the deep-stack report check needs it)"
fi
finish
