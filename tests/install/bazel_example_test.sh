#!/usr/bin/env bash
# examples/bazel, a separate workspace using this repository through local_repository
# (@strata//:base, @strata//:full) and strata_deps() (deps.bzl), built offline by the same
# Bazel (docs/install.md): copied
# outside the repository with its path pointed at this source tree, built with a Bazel of its
# own (--batch, an output root in the test's temporary directory: no server left behind);
# both programs run plain and with STRATA_STARTUP=1 / STRATA_SHUTDOWN: the same output and
# status, and a profile the checker accepts with ExampleBusyWork, the markers and the counter.
source "$(dirname "$0")/../scenario_lib.sh"

# The source tree (runfiles are links into it under Bazel's local strategy).
source_tree="$(dirname "$(readlink -f "$_runfiles/VERSION")")"
[[ -f "$source_tree/WORKSPACE" && -f "$source_tree/examples/bazel/WORKSPACE" ]] ||
  { fail "no Strata source tree at $source_tree"; finish; }
cmp -s "$source_tree/examples/bazel/strata_example.cc" "$source_tree/examples/cmake/strata_example.cc" ||
  fail "examples/bazel and examples/cmake have different strata_example.cc (they are one program)"
# One macro instead of the repositories by hand (issue 39): the example's WORKSPACE declares
# Strata and calls strata_deps(), nothing else.
repositories=$(grep -cE '^\s*(new_)?local_repository\(' "$source_tree/examples/bazel/WORKSPACE")
[[ $repositories == 1 ]] && grep -q '^load("@strata//:deps.bzl", "strata_deps")' "$source_tree/examples/bazel/WORKSPACE" &&
  grep -q '^strata_deps(path = ' "$source_tree/examples/bazel/WORKSPACE" \
  && pass "examples/bazel/WORKSPACE: the Strata repository and strata_deps(), nothing by hand" \
  || fail "examples/bazel/WORKSPACE declares $repositories repositories by hand, or does not call strata_deps()"
example="$WORK/bazel_example"
rm -rf "$example"
cp -r "$source_tree/examples/bazel" "$example"
rm -f "$example"/bazel-*
sed -i "s|\"\\.\\./\\.\\.\"|\"$source_tree\"|; s|\"\\.\\./\\.\\./tools/|\"$source_tree/tools/|" "$example/WORKSPACE"
grep -q "path = \"$source_tree\"" "$example/WORKSPACE" || fail "the example's WORKSPACE was not pointed at $source_tree"

bazel_run() {
  (cd "$example" && timeout 1200 bazel --batch --output_user_root="$WORK/bazel_root" "$@")
}
if bazel_run build //:strata_example //:strata_example_full >"$WORK/bazel.log" 2>&1; then
  pass "examples/bazel built offline with @strata//:base and @strata//:full"
else
  fail "examples/bazel did not build:"
  tail -30 "$WORK/bazel.log" | sed 's/^/    /'
  finish
fi
bin="$(bazel_run info bazel-bin 2>/dev/null)"

for program in strata_example strata_example_full; do
  name="bazel_$program"
  (cd "$WORK" && timeout 300 "$bin/$program" >"$WORK/$name.plain.out" 2>&1)
  plain_status=$?
  (cd "$WORK" && STRATA_STARTUP=1 STRATA_SHUTDOWN="$OUT/$name.json" timeout 300 "$bin/$program" \
    >"$WORK/$name.out" 2>"$WORK/$name.err")
  RUN_STATUS=$?
  RUN_WALL_S=0
  [[ $plain_status -eq 0 ]] || fail "$name: plain exit status $plain_status"
  cmp -s "$WORK/$name.plain.out" "$WORK/$name.out" || fail "$name: output differs from the plain run"
  require_profile "$name" || continue
  check_format "$name"
  stats "$name" "GeckoMain:ExampleBusyWork" || continue
  share="$(field "$name" match thread=GeckoMain pct)"
  result "example=$name samples=$(field "$name" thread name=GeckoMain samples) busy_work_pct=$share"
  ge "${share:-0}" 50 || fail "$name: ExampleBusyWork in only ${share:-0} % of the samples"
  for what in '"Example compute"' '"ExampleBatch"' '"Example items"'; do
    grep -q "$what" "$OUT/$name.json" || fail "$name: the profile has no $what"
  done
done
# The nested output root is large (Bazel's install base, a build of Strata): not kept.
chmod -R u+w "$WORK/bazel_root" 2>/dev/null
rm -rf "$WORK/bazel_root" "$example"
finish
