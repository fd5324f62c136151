#!/usr/bin/env bash
# `strata record --follow all|exec|none` (issue 39; docs/cli.md, "strata record") through a
# shell shim like pyenv's: sh runs helper programs, then `exec process_tree`, which starts two
# children of its own.
#   - all (the default, as before): the helpers and the children are in the profile too;
#   - exec: one process, process_tree's parent (the shim's pid, after its exec); the helpers
#     run without Strata's preload in their environment (they print their LD_PRELOAD), and
#     the program's output is that of the default run;
#   - none: process_tree run directly gives its own process only (as --no-children);
#   - --follow bogus and --no-children --follow exec: status 2.
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
TREE="$(binary tests/cli/process_tree)"
export STRATA_BASE_LIB="$STRATA_LIB"
export STRATA_NO_PROGRESS=1

SHIM="$WORK/shim"
cat >"$SHIM" <<SHIM
#!/bin/sh
# A version-manager shim: a few helpers, then the real program.
version=\$(uname -s | tr A-Z a-z)
sh -c 'echo "helper_preload=[\$LD_PRELOAD]"'
exec "$TREE" --ms 150 "\$@"
SHIM
chmod +x "$SHIM"

# processes NAME: "pid name" of the profile's Processes table.
processes() { "$STRATA" summary "$OUT/$1.json" | awk '/^Processes:/ { p = 1; getline; next } p && /^$/ { exit } p { print $1, $2 }'; }
shape() { grep -v '^helper_preload' "$WORK/$1.out" | sed 's/=[0-9.]*/=N/g' | sort; }

for follow in all exec; do
  timeout 120 env "${SANITIZER_ENV[@]}" "$STRATA" record -q --follow "$follow" -o "$OUT/$follow.json" -- "$SHIM" \
    >"$WORK/$follow.out" 2>"$WORK/$follow.err"
  status=$?
  [[ $status == 0 ]] || fail "--follow $follow: status $status: $(cat "$WORK/$follow.err")"
  processes "$follow" >"$WORK/$follow.processes"
  sed "s/^/    $follow: /" "$WORK/$follow.processes"
done
parent_pid=$(sed -n 's/.*role=parent pid=\([0-9]*\).*/\1/p' "$WORK/exec.out")
all_count=$(wc -l <"$WORK/all.processes")
result "processes all=$all_count exec=$(wc -l <"$WORK/exec.processes")"
[[ $all_count -ge 4 && $(grep -c " process_tree" "$WORK/all.processes") == 3 ]] && grep -qw uname "$WORK/all.processes" \
  && pass "--follow all: the shim's helpers and the program's children are profiled ($all_count processes)" \
  || fail "--follow all: $all_count processes"
grep -q "helper_preload=\[.*libstrata_base" "$WORK/all.out" && pass "--follow all: the helpers are preloaded" \
  || fail "--follow all: $(grep helper_preload "$WORK/all.out")"
[[ "$(cat "$WORK/exec.processes")" == "$parent_pid process_tree" ]] \
  && pass "--follow exec: one process, the program the shim exec'd (pid $parent_pid)" \
  || fail "--follow exec: processes '$(tr '\n' ';' <"$WORK/exec.processes")', the program's pid $parent_pid"
# Without Strata's preload; the caller's own LD_PRELOAD (a sanitizer build's runtime) is kept.
grep -qxF "helper_preload=[${SANITIZER_RUNTIMES:-}]" "$WORK/exec.out" &&
  pass "--follow exec: the shim's helpers run without the preload" \
  || fail "--follow exec: $(grep helper_preload "$WORK/exec.out")"
[[ "$(shape exec)" == "$(shape all)" ]] && grep -q "role=alpha" "$WORK/exec.out" \
  && pass "--follow exec: the program's output is that of the default run (its children ran)" \
  || fail "--follow exec: output differs: $(cat "$WORK/exec.out")"
"$STRATA" tree "$OUT/exec.json" --weight cpu >"$WORK/exec.tree" 2>&1
grep -q "parent_spin" "$WORK/exec.tree" && pass "--follow exec: the profile has the program's own work (parent_spin)" \
  || fail "--follow exec: no parent_spin in $(head -8 "$WORK/exec.tree")"

timeout 120 env "${SANITIZER_ENV[@]}" "$STRATA" record -q --follow none -o "$OUT/none.json" -- "$TREE" --ms 100 \
  >"$WORK/none.out" 2>"$WORK/none.err"
status=$?
none_processes=$(processes none | wc -l)
[[ $status == 0 && $none_processes == 1 ]] && grep -q "role=beta" "$WORK/none.out" \
  && pass "--follow none: the command's own process only, its children ran" \
  || fail "--follow none: status $status, $none_processes processes: $(cat "$WORK/none.err")"

"$STRATA" record --follow bogus -- true >/dev/null 2>"$WORK/bad.err"
status=$?
[[ $status == 2 ]] && grep -q "follow" "$WORK/bad.err" && pass "--follow bogus: status 2" || fail "--follow bogus: $status"
"$STRATA" record --no-children --follow exec -- true >/dev/null 2>"$WORK/bad2.err"
status=$?
[[ $status == 2 ]] && grep -q "is --follow none" "$WORK/bad2.err" && pass "--no-children --follow exec: status 2" \
  || fail "--no-children --follow exec: $status $(cat "$WORK/bad2.err")"

finish
