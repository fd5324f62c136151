#!/usr/bin/env bash
# Strict-warning-clean public headers and examples (issue 39; docs/api.md): every header of
# include/strata/ (each on its own) and every documented C++ example (examples/api, the CMake
# and Make examples) compiles with -Wall -Wextra -Wpedantic -Werror under g++ and clang++, in
# C++17 and C++20; the C API example with gcc and clang in C11 and C17. Before the fix the
# marker macros' `, ##__VA_ARGS__` (a GNU extension) failed -Wpedantic under g++ and clang++.
source "$(dirname "$0")/../scenario_lib.sh"

root="$_runfiles"
[[ -f "$root/include/strata/markers.h" ]] || { fail "no include/strata in $root"; finish; }
flags=(-Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$root/include" -I"$root")
[[ -d /usr/include/mozjs-102 ]] && flags+=(-isystem /usr/include/mozjs-102)
sources=("$root"/examples/api/*.cc "$root"/examples/cmake/strata_example.cc "$root"/examples/make/strata_example.cc)
checked=0
for compiler in g++ clang++; do
  command -v "$compiler" >/dev/null || { fail "$compiler is missing (tools/setup.sh)"; continue; }
  for standard in c++17 c++20; do
    bad=0
    for header in "$root"/include/strata/*.h; do
      printf '#include <strata/%s>\nint main() { return 0; }\n' "$(basename "$header")" >"$WORK/one_header.cc"
      if ! "$compiler" -std="$standard" "${flags[@]}" "$WORK/one_header.cc" >"$WORK/out.txt" 2>&1; then
        fail "$compiler -std=$standard: <strata/$(basename "$header")>: $(grep -m3 error "$WORK/out.txt" | tr '\n' ' ')"
        bad=$((bad + 1))
      fi
      checked=$((checked + 1))
    done
    for source in "${sources[@]}"; do
      if ! "$compiler" -std="$standard" "${flags[@]}" "$source" >"$WORK/out.txt" 2>&1; then
        fail "$compiler -std=$standard: ${source#$root/}: $(grep -m3 error "$WORK/out.txt" | tr '\n' ' ')"
        bad=$((bad + 1))
      fi
      checked=$((checked + 1))
    done
    ((bad == 0)) && pass "$compiler -std=$standard: every header and C++ example compiles with -Wall -Wextra -Wpedantic -Werror"
  done
done
for compiler in gcc clang; do
  for standard in c11 c17; do
    if "$compiler" -std="$standard" "${flags[@]}" "$root/examples/api/c_api.c" >"$WORK/out.txt" 2>&1; then
      pass "$compiler -std=$standard: examples/api/c_api.c"
    else
      fail "$compiler -std=$standard: c_api.c: $(grep -m3 error "$WORK/out.txt" | tr '\n' ' ')"
    fi
    checked=$((checked + 1))
  done
done
result "scenario=strict-headers compilations=$checked"
finish
