#!/usr/bin/env bash
# docs/api.md compiles as written (issue 39): every ```cpp block is extracted to a file of its
# own and compiled, without anything added, with -Wall -Wextra -Wpedantic -Werror under g++
# and clang++ in C++17 and C++20, against include/strata (the installed headers' layout).
# A snippet that uses something it does not declare (RequestMarker before issue 39), or
# an API that does not exist, fails here.
source "$(dirname "$0")/../scenario_lib.sh"

root="$_runfiles"
doc="$root/docs/api.md"
[[ -f "$doc" && -f "$root/include/strata/profiler.h" ]] || { fail "docs/api.md or include/strata missing in $root"; finish; }
awk -v dir="$WORK" '
  /^```cpp$/ { n++; file = sprintf("%s/snippet_%d.cc", dir, n); next }
  /^```/ { file = ""; next }
  file != "" { print > file }' "$doc"
snippets=("$WORK"/snippet_*.cc)
[[ -f "${snippets[0]}" ]] || { fail "no cpp block in docs/api.md"; finish; }
result "snippets=${#snippets[@]}"
flags=(-Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$root/include" -I"$root")
[[ -d /usr/include/mozjs-102 ]] && flags+=(-isystem /usr/include/mozjs-102)
for compiler in g++ clang++; do
  command -v "$compiler" >/dev/null || { fail "$compiler is missing (tools/setup.sh)"; continue; }
  for standard in c++17 c++20; do
    bad=0
    for snippet in "${snippets[@]}"; do
      if ! "$compiler" -std="$standard" "${flags[@]}" "$snippet" >"$WORK/out.txt" 2>&1; then
        fail "$compiler -std=$standard: docs/api.md block $(basename "$snippet" .cc | tr -dc 0-9): $(grep -m3 error "$WORK/out.txt" | tr '\n' ' ')"
        bad=$((bad + 1))
      fi
    done
    ((bad == 0)) && pass "$compiler -std=$standard: the ${#snippets[@]} cpp blocks of docs/api.md compile as written"
  done
done
# The page defines what it uses.
grep -q '^struct RequestMarker' "$doc" && pass "RequestMarker is defined on the page" || fail "RequestMarker is not defined"
finish
