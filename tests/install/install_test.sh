#!/usr/bin/env bash
# Scenario (issue 19): Strata installed into a temporary prefix and used from outside the
# repository with that prefix alone (docs/install.md).
#   1. tools/install_tree.sh lays this build's libraries, `strata`, headers, pkg-config and
#      CMake files out under $WORK/prefix.
#   2. The layout: versioned SONAMEs and symlinks, RUNPATH $ORIGIN, NEEDED by SONAME, every
#      ELF stripped with a .gnu_debuglink, its debug file under lib/debug/.build-id/ with the
#      same build-id; include/ holds strata/ only, no repository path left in a header.
#   3. The installed headers: each public header alone, and all together, compile with only
#      -I PREFIX/include (plus the system's abseil headers, which they use), -Wall -Wextra
#      -Wpedantic -Werror, g++ and clang++, C++17 and C++20; perfmon_c.h also as C11.
#   4. examples/cmake (find_package(Strata), Debian's cmake; COMPONENTS base full found, an
#      unknown component refused) and examples/make (pkg-config),
#      copied outside the repository, build against the prefix; each program runs plain and
#      with STRATA_STARTUP=1 / STRATA_SHUTDOWN: same output and status, a profile the checker
#      accepts, with ExampleBusyWork in most samples, the label, both markers, the typed
#      marker's schema and the counter; the front-end imports one of them.
#   4b. examples/api (docs/api.md: sessions, threads, labels, every kind of marker, counters,
#      full tier, monitor, child process, C entry points) build with pkg-config, run, and
#      their profiles pass the checker with what each records.
#   5. The installed `strata record` (from another directory) profiles the installed example.
#   6. gdb names a function that only the split debug info has (not .dynsym), from the file
#      beside the library (.gnu_debuglink) and by build-id (set debug-file-directory); a
#      stripped copy with no debug file beside it does not (control).
source "$(dirname "$0")/../scenario_lib.sh"

if [[ -n "$SANITIZER" ]]; then
  # Programs linked with a sanitizer-built libstrata_base.so need its runtime loaded first
  # (scenario_lib.sh); an installed Strata is an optimised, plain build.
  echo "skipped under $SANITIZER: the install test needs a plain build of the libraries"
  exit 0
fi

PREFIX="$WORK/prefix"
EXAMPLES="$WORK/examples"
rm -rf "$PREFIX" "$EXAMPLES"
mkdir -p "$EXAMPLES"
LIMIT=(timeout 300)

# --- 1. Install ---------------------------------------------------------------------------
if "${LIMIT[@]}" bash "$_runfiles/tools/install_tree.sh" "$_runfiles" "$_runfiles" "$PREFIX" \
    >"$WORK/install.log" 2>&1; then
  pass "install_tree.sh installed into $PREFIX"
else
  fail "install_tree.sh failed:"
  sed 's/^/    /' "$WORK/install.log"
  finish
fi
version="$(tr -d ' \n' <"$_runfiles/VERSION")"
soversion="${version%%.*}"

# --- 2. Layout ----------------------------------------------------------------------------
dynamic() { readelf -dW "$1" 2>/dev/null; }
for lib in base full spidermonkey; do
  real="$PREFIX/lib/libstrata_$lib.so.$version"
  [[ -f "$real" && ! -L "$real" ]] || { fail "$real is missing"; continue; }
  [[ "$(readlink "$PREFIX/lib/libstrata_$lib.so.$soversion")" == "libstrata_$lib.so.$version" &&
     "$(readlink "$PREFIX/lib/libstrata_$lib.so")" == "libstrata_$lib.so.$soversion" ]] ||
    fail "libstrata_$lib.so symlinks are not .so -> .so.$soversion -> .so.$version"
  dynamic "$real" | grep -q "(SONAME).*\[libstrata_$lib.so.$soversion\]" ||
    fail "libstrata_$lib: SONAME is not libstrata_$lib.so.$soversion"
  if [[ $lib != base ]]; then
    dynamic "$real" | grep -q '(RUNPATH).*\[\$ORIGIN\]' || fail "libstrata_$lib: RUNPATH is not \$ORIGIN"
  fi
  if dynamic "$real" | grep -E '(NEEDED).*\[libstrata_[a-z]*\.so\]'; then
    fail "libstrata_$lib needs an unversioned Strata library"
  fi
  if dynamic "$real" | grep -E '_solib|bazel-out'; then fail "libstrata_$lib still names a Bazel path"; fi
done
base_size=$(stat -c %s "$PREFIX/lib/libstrata_base.so.$version")
result "installed_base_bytes=$base_size installed_full_bytes=$(stat -c %s "$PREFIX/lib/libstrata_full.so.$version")"

elf_files=("$PREFIX"/lib/libstrata_*.so."$version" "$PREFIX/lib/libstrata_record.so" "$PREFIX/bin/strata" "$PREFIX/bin/strata_js")
for file in "${elf_files[@]}"; do
  name="$(basename "$file")"
  sections="$(readelf -SW "$file")"
  if grep -qE ' \.(symtab|debug_info|debug_line) ' <<<"$sections"; then
    fail "$name is not stripped"
  fi
  link="$(readelf -p .gnu_debuglink "$file" 2>/dev/null | sed -n 's/^ *\[ *0\] *//p')"
  [[ "$link" == "$name.debug" ]] || fail "$name: .gnu_debuglink is '$link', expected $name.debug"
  build_id="$(readelf -n "$file" | sed -n 's/^ *Build ID: *//p')"
  debug_file="$PREFIX/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug"
  if [[ -z "$build_id" || ! -f "$debug_file" ]]; then
    fail "$name: no debug file by build-id ($debug_file)"
    continue
  fi
  # (readelf complains that a debug file's .interp has no contents: stderr dropped.)
  [[ "$(readelf -n "$debug_file" 2>/dev/null | sed -n 's/^ *Build ID: *//p')" == "$build_id" ]] ||
    fail "$name: the debug file's build-id differs"
  debug_sections="$(readelf -SW "$debug_file" 2>/dev/null)"
  grep -qE ' \.debug_info ' <<<"$debug_sections" || fail "$name: the debug file has no .debug_info"
  [[ "$(readlink -f "$PREFIX/lib/.debug/$name.debug")" == "$(readlink -f "$debug_file")" ]] ||
    fail "$name: lib/.debug/$name.debug does not lead to its debug file"
done
pass "checked SONAMEs, RUNPATHs, stripping and debug files of ${#elf_files[@]} ELF files"

if [[ "$(ls -A "$PREFIX/include")" != strata ]]; then
  fail "include/ holds more than strata/: $(ls -A "$PREFIX/include" | tr '\n' ' ')"
fi
if grep -rnE '#[[:space:]]*include[[:space:]]*"(base|full|platform|shared)/' "$PREFIX/include"; then
  fail "an installed header still includes a repository path (above)"
fi

# --- 3. Headers ---------------------------------------------------------------------------
public_headers=()
for header in "$PREFIX"/include/strata/*.h; do public_headers+=("strata/$(basename "$header")"); done
[[ ${#public_headers[@]} -ge 12 ]] || fail "only ${#public_headers[@]} public headers installed"
compile_check() {  # LABEL COMPILER ARGS... (reads the translation unit from stdin)
  local label="$1"
  shift
  if ! "${LIMIT[@]}" "$@" -Wall -Wextra -Wpedantic -Werror -I"$PREFIX/include" -fsyntax-only - \
      >"$WORK/compile.log" 2>&1; then
    fail "$label does not compile:"
    sed 's/^/    /' "$WORK/compile.log" | head -20
  fi
}
for header in "${public_headers[@]}"; do
  echo "#include <$header>" | compile_check "<$header> alone (g++ -std=c++17)" g++ -std=c++17 -x c++
done
for compiler in g++ clang++; do
  for std in c++17 c++20; do
    printf '#include <%s>\n' "${public_headers[@]}" |
      compile_check "all public headers ($compiler -std=$std)" "$compiler" "-std=$std" -x c++
  done
done
echo '#include <strata/perfmon_c.h>' | compile_check "<strata/perfmon_c.h> as C11" gcc -std=c11 -x c
pass "compiled ${#public_headers[@]} public headers alone and together (g++, clang++; C++17, C++20)"

# --- 4. Examples outside the repository -------------------------------------------------------
cmp -s "$_runfiles/examples/cmake/strata_example.cc" "$_runfiles/examples/make/strata_example.cc" ||
  fail "examples/cmake and examples/make have different strata_example.cc (they are one program)"
cp -r "$_runfiles/examples/cmake" "$_runfiles/examples/make" "$EXAMPLES/"
chmod -R u+w "$EXAMPLES"
if "${LIMIT[@]}" cmake -S "$EXAMPLES/cmake" -B "$EXAMPLES/cmake/build" -DCMAKE_PREFIX_PATH="$PREFIX" \
    >"$WORK/cmake.log" 2>&1 &&
   "${LIMIT[@]}" cmake --build "$EXAMPLES/cmake/build" >>"$WORK/cmake.log" 2>&1; then
  pass "examples/cmake built with find_package(Strata)"
else
  fail "examples/cmake did not build:"
  sed 's/^/    /' "$WORK/cmake.log" | tail -30
fi
# find_package(Strata COMPONENTS ...): known components are found, an unknown one fails naming it.
mkdir -p "$EXAMPLES/components"
cat >"$EXAMPLES/components/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(components CXX)
find_package(Strata REQUIRED COMPONENTS ${WANTED})
CMAKE
if "${LIMIT[@]}" cmake -S "$EXAMPLES/components" -B "$EXAMPLES/components/ok" -DWANTED="base;full" \
    -DCMAKE_PREFIX_PATH="$PREFIX" >"$WORK/components_ok.log" 2>&1; then
  pass "find_package(Strata REQUIRED COMPONENTS base full) is found"
else
  fail "find_package(Strata REQUIRED COMPONENTS base full): $(tail -5 "$WORK/components_ok.log")"
fi
if ! "${LIMIT[@]}" cmake -S "$EXAMPLES/components" -B "$EXAMPLES/components/bad" -DWANTED=nonsense \
    -DCMAKE_PREFIX_PATH="$PREFIX" >"$WORK/components_bad.log" 2>&1 &&
   grep -q "unknown component 'nonsense'" "$WORK/components_bad.log"; then
  pass "find_package(Strata REQUIRED COMPONENTS nonsense) fails, naming the component"
else
  fail "find_package(Strata COMPONENTS nonsense): $(tail -5 "$WORK/components_bad.log")"
fi
if (cd "$EXAMPLES/make" && "${LIMIT[@]}" make PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig") >"$WORK/make.log" 2>&1; then
  pass "examples/make built with pkg-config"
else
  fail "examples/make did not build:"
  sed 's/^/    /' "$WORK/make.log" | tail -30
fi

# run_example NAME PROGRAM: plain, then profiled; the same output and status; profile checks.
run_example() {
  local name="$1" program="$2"
  if [[ ! -x "$program" ]]; then
    fail "$name: $program was not built"
    return
  fi
  (cd "$WORK" && "${LIMIT[@]}" "$program" >"$WORK/$name.plain.out" 2>&1)
  local plain_status=$?
  # Profiled: the library the program links, started by its environment variables.
  (cd "$WORK" && STRATA_STARTUP=1 STRATA_SHUTDOWN="$OUT/$name.json" "${LIMIT[@]}" "$program" \
    >"$WORK/$name.out" 2>"$WORK/$name.err")
  RUN_STATUS=$?
  RUN_WALL_S=0
  [[ $plain_status -eq 0 && $RUN_STATUS -eq 0 ]] ||
    fail "$name: exit status plain $plain_status, profiled $RUN_STATUS (expected 0)"
  grep -q '^strata_example: done checksum=' "$WORK/$name.plain.out" || fail "$name: no result line"
  cmp -s "$WORK/$name.plain.out" "$WORK/$name.out" || fail "$name: output differs from the plain run"
  require_profile "$name" || return
  check_format "$name"
  stats "$name" "GeckoMain:ExampleBusyWork" || return
  local samples share
  samples="$(field "$name" thread name=GeckoMain samples)"
  share="$(field "$name" match thread=GeckoMain pct)"
  result "example=$name samples=$samples busy_work_pct=$share"
  ge "${samples:-0}" 20 || fail "$name: only ${samples:-0} samples on the main thread (>= 20 expected)"
  ge "${share:-0}" 50 || fail "$name: ExampleBusyWork in only ${share:-0} % of the samples (>= 50 expected)"
  local what
  for what in '"Example batch"' '"Example compute"' '"Example batch done"' '"ExampleBatch"' '"Example items"'; do
    grep -q "$what" "$OUT/$name.json" || fail "$name: the profile has no $what"
  done
}
run_example cmake_base "$EXAMPLES/cmake/build/strata_example"
run_example cmake_full "$EXAMPLES/cmake/build/strata_example_full"
run_example make_base "$EXAMPLES/make/strata_example"
run_example make_full "$EXAMPLES/make/strata_example_full"
if [[ -s "$OUT/cmake_base.json" ]]; then
  check_frontend cmake_base GeckoMain:ExampleBusyWork
fi
for name in cmake_full make_full; do
  [[ -s "$OUT/$name.json" ]] || continue
  grep -q '"Memory"' "$OUT/$name.json" || fail "$name: the full tier's memory counter is not in the profile"
done

# --- 4b. docs/api.md's examples (examples/api), built with pkg-config and run -----------------
cp -r "$_runfiles/examples/api" "$EXAMPLES/"
chmod -R u+w "$EXAMPLES/api"
api_pkg_config() { PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config "$@"; }
# api_example NAME TIER COMPILER STD EXPECTED...: build, run (profile to $OUT/api_NAME.json),
# checker, and each EXPECTED string in the profile.
api_example() {
  local name="$1" tier="$2" compiler="$3" std="$4" source
  shift 4
  source="$(ls "$EXAMPLES/api/$name".c* | head -1)"
  if ! "${LIMIT[@]}" "$compiler" "-std=$std" -O1 -Wall -Wextra -Werror $(api_pkg_config --cflags "$tier") \
      "$source" -o "$EXAMPLES/api/$name" -pthread $(api_pkg_config --libs "$tier") >"$WORK/api_$name.log" 2>&1; then
    fail "examples/api/$(basename "$source") does not build:"
    sed 's/^/    /' "$WORK/api_$name.log" | head -20
    return
  fi
  (cd "$WORK" && STRATA_SHUTDOWN="$OUT/api_$name.json" "${LIMIT[@]}" "$EXAMPLES/api/$name" "$OUT/api_$name.json" \
    >"$WORK/api_$name.out" 2>"$WORK/api_$name.err")
  RUN_STATUS=$?
  RUN_WALL_S=0
  require_profile "api_$name" || return
  check_format "api_$name"
  local what
  for what in "$@"; do
    grep -qF "$what" "$OUT/api_$name.json" || fail "api_$name: the profile has no $what"
  done
}
api_example session_threads strata-base g++ c++17 '"GeckoMain"' '"Worker loop"' '"api-worker"'
api_example markers_counters strata-base g++ c++17 '"ApiRequest"' '"Requests in flight"' \
  'cache miss for key 42' '"Frame start"' '"Load"'
api_example full_tier strata-full g++ c++17 '"full tier example"'
api_example c_api strata-full gcc c11 '"C example"'
# A C program linked with the full tier only loads libstrata_base.so after libc: base's
# interposers still find libc's functions (platform/next_definition.h), and it is sampled
# (before: it crashed in a wrapper with no real function, or got no sampling handler).
if [[ -s "$OUT/api_c_api.json" ]]; then
  c_samples=$(node -e 'const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    console.log(p.threads.reduce((n, t) => n + t.samples.data.length, 0))' "$OUT/api_c_api.json")
  result "api_c_api samples=$c_samples"
  [[ "${c_samples:-0}" -ge 5 ]] && pass "api_c_api: the C program linked with the full tier only is sampled ($c_samples samples)" ||
    fail "api_c_api: ${c_samples:-0} samples"
fi

# --- 5. The installed `strata record` ----------------------------------------------------------
if [[ -x "$EXAMPLES/make/strata_example" ]]; then
  mkdir -p "$WORK/elsewhere"
  (cd "$WORK/elsewhere" && "${LIMIT[@]}" "$PREFIX/bin/strata" record -o "$OUT/record.json" -- \
    "$EXAMPLES/make/strata_example" >"$WORK/record.out" 2>"$WORK/record.err")
  RUN_STATUS=$?
  RUN_WALL_S=0
  if require_profile record; then
    check_format record
    stats record "GeckoMain:ExampleBusyWork" &&
      ge "$(field record match thread=GeckoMain pct)" 50 ||
      fail "record: ExampleBusyWork is not in most samples of the strata record profile"
  fi
fi

# --- 6. Split debug info found by gdb ----------------------------------------------------------
base_real="$PREFIX/lib/libstrata_base.so.$version"
base_id="$(readelf -n "$base_real" | sed -n 's/^ *Build ID: *//p')"
base_debug="$PREFIX/lib/debug/.build-id/${base_id:0:2}/${base_id:2}.debug"
# A local function of the library: in the debug file's .symtab, not in the stripped .dynsym.
read -r symbol_address symbol_name < <(readelf -sW "$base_debug" 2>/dev/null |
  awk '$4 == "FUNC" && $5 == "LOCAL" && $3 > 16 && $8 ~ /^_ZN.*6strata/ { print $2, $8; exit }')
if [[ -z "${symbol_name:-}" ]]; then
  fail "no local strata function in the debug file's symbol table"
elif grep -q " $symbol_name\$" <<<"$(readelf -W --dyn-syms "$base_real")"; then
  fail "$symbol_name is a dynamic symbol: not a test of the debug file"
else
  gdb_symbol() {  # FILE [GDB ARGS...]: what gdb says is at symbol_address of FILE.
    local file="$1"
    shift
    "${LIMIT[@]}" gdb -batch -nx "$@" -ex "info symbol 0x$symbol_address" "$file" 2>&1 | tail -1
  }
  demangled="$(c++filt "$symbol_name")"
  beside="$(gdb_symbol "$base_real")"
  mkdir -p "$WORK/lonely"
  cp "$base_real" "$WORK/lonely/"
  by_id="$(gdb_symbol "$WORK/lonely/$(basename "$base_real")" -iex "set debug-file-directory $PREFIX/lib/debug")"
  control="$(gdb_symbol "$WORK/lonely/$(basename "$base_real")" -iex "set debug-file-directory /nonexistent")"
  result "gdb_symbol=$symbol_name"
  [[ "$beside" == "${demangled%%(*}"* ]] ||
    fail "gdb does not find the debug file beside the library: '$beside' (expected $demangled)"
  [[ "$by_id" == "${demangled%%(*}"* ]] ||
    fail "gdb does not find the debug file by build-id: '$by_id' (expected $demangled)"
  [[ "$control" == "No symbol matches"* ]] ||
    fail "control: gdb names $symbol_name without the debug file ('$control')"
  pass "gdb names $demangled from the split debug info (beside the library and by build-id)"
fi

# --- 7. `strata symbolicate` reads the split debug info ------------------------------------------
# A raw-address profile of a program whose samples are mostly inside libstrata_base (kept
# with the ownframes feature: Strata's frames are elided by default): the
# installed strata names those frames with file:line, which only the debug file has (libdwfl
# finds it through the .gnu_debuglink in lib/.debug/). Strata's sources are the only ones
# with paths under shared/, base/ or platform/ here; frames read "NAME (in libstrata_base.so.0)
# (FILE:LINE)".
if ! "${LIMIT[@]}" g++ -std=c++17 -O2 -I"$PREFIX/include" "$_runfiles/tests/install/marker_loop.cc" \
    -o "$WORK/marker_loop" -L"$PREFIX/lib" -Wl,-rpath,"$PREFIX/lib" -lstrata_base >"$WORK/loop.log" 2>&1; then
  fail "marker_loop did not build:"
  sed 's/^/    /' "$WORK/loop.log" | head -20
else
  (cd "$WORK" && STRATA_STARTUP=1 STRATA_STARTUP_FEATURES=rawaddresses,ownframes STRATA_SHUTDOWN="$OUT/raw.json" \
    "${LIMIT[@]}" "$WORK/marker_loop" >/dev/null 2>"$WORK/raw.err")
  if [[ ! -s "$OUT/raw.json" ]]; then
    fail "marker_loop wrote no raw profile: $(head -5 "$WORK/raw.err")"
  elif ! "${LIMIT[@]}" "$PREFIX/bin/strata" symbolicate "$OUT/raw.json" -o "$OUT/symbolicated.json" \
      2>"$WORK/symbolicate.err"; then
    fail "strata symbolicate failed: $(cat "$WORK/symbolicate.err")"
  else
    sed 's/^/    /' "$WORK/symbolicate.err"
    sources=$(grep -oE '\(in libstrata_base\.so\.[0-9]+\) \((\./)?(shared|base|platform)/[a-z_/]+\.(h|cc):[0-9]+\)' \
      "$OUT/symbolicated.json" | sed 's/^(in [^)]*) (\(.*\):[0-9]*)$/\1/' | sort -u)
    result "strata_source_files_named=$(grep -c . <<<"$sources")"
    if [[ -n "$sources" ]]; then
      pass "strata symbolicate names libstrata_base frames with file:line ($(head -3 <<<"$sources" | tr '\n' ' '))"
    else
      fail "strata symbolicate gave no file:line in Strata's sources: the split debug info was not read"
    fi
  fi
fi

finish
