#!/usr/bin/env bash
# Symbolication speed (issue 34): addresses per second of `strata symbolicate` against
# `llvm-symbolizer --inlining` on the same profile's addresses (docs/benchmarks.md,
# "Symbolication speed"). Called by tools/bench.sh; runs alone too:
#
#   tools/bench/symbolicate_speed.sh [ROUNDS]     (STRATA_BIN: the bazel-bin to use)
#
# The profile: `strata record --no-symbolicate` of `g++ -O2 -c` of a <regex> file (g++, cc1plus,
# as, named at capture with their addresses kept: thousands of distinct addresses in large stripped binaries and in libc/libstdc++, whose
# Debian debug files are used where installed). Both tools get the same lookups: every
# distinct (file, address) a sample needs, the leaf at its pc and callers at return address
# - 1, as `strata symbolicate` looks them up. `strata symbolicate` is timed as a whole (read,
# look up, rewrite the profile); llvm-symbolizer once per file with all its addresses on
# stdin. Each is run ROUNDS times (default 3), cold file cache aside; the best run counts.
# Prints one line: "symbolicate_speed: addresses=N strata_s=S strata_per_s=R llvm_s=S
# llvm_per_s=R files=F".
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
BIN="${STRATA_BIN:-$repo/bazel-bin}"
STRATA="$BIN/tools/strata/strata"
ROUNDS="${1:-3}"
WORK="$(mktemp -d /tmp/strata-symbolicate-speed.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
die() { echo "symbolicate_speed: $*" >&2; exit 1; }
[[ -x "$STRATA" ]] || die "no $STRATA (build //tools/strata first)"
command -v llvm-symbolizer >/dev/null || die "llvm-symbolizer is missing (tools/setup.sh installs llvm)"
command -v g++ >/dev/null || die "g++ is missing"

cat >"$WORK/regex.cc" <<'EOF'
#include <regex>
#include <string>
int Match(const std::string& s) {
  std::regex r("([a-z]+)@([a-z]+)\\.(com|org)");
  std::smatch m;
  return std::regex_search(s, m, r) ? static_cast<int>(m.size()) : 0;
}
EOF
(cd "$WORK" && "$STRATA" record --no-symbolicate -o "$WORK/raw.json" -- g++ -O2 -c regex.cc \
  >"$WORK/record.out" 2>&1) || die "strata record failed: $(tail -3 "$WORK/record.out")"

# The lookups, per file: "PATH<TAB>0xADDRESS" lines (lib-relative, as llvm-symbolizer takes
# them), from the capture's frames ("0x..." or named with their address and lib kept).
python3 - "$WORK/raw.json" >"$WORK/lookups.tsv" <<'PY' || die "cannot read the profile"
import json, sys

def processes(p):
    yield p
    for c in p.get("processes", []):
        yield from processes(c)

wanted = set()
for proc in processes(json.load(open(sys.argv[1]))):
    libs = [l for l in proc.get("libs", []) if l.get("path")]
    for t in proc.get("threads", []):
        strings, ft, st = t["stringTable"], t["frameTable"], t["stackTable"]
        loc, prefix, frame = ft["schema"]["location"], st["schema"]["prefix"], st["schema"]["frame"]
        rows = st["data"]
        caller = [False] * len(rows)
        for r in rows:
            if r[prefix] is not None:
                caller[r[prefix]] = True
        leaf = [False] * len(rows)
        for s in t["samples"]["data"]:
            stack = s[t["samples"]["schema"]["stack"]]
            if stack is not None:
                leaf[stack] = True
        all_libs = proc.get("libs", [])
        address_col, lib_col = ft["schema"].get("address"), ft["schema"].get("lib")
        for i, r in enumerate(rows):
            row = ft["data"][r[frame]]
            text = strings[row[loc]]
            place = None  # (path, lib-relative address)
            if text.startswith("0x"):
                absolute = int(text, 16)
                for l in libs:
                    if l["start"] <= absolute < l["end"]:
                        place = (l["path"], absolute - (l["start"] - l["offset"]))
                        break
            elif address_col is not None and lib_col is not None and len(row) > max(address_col, lib_col):
                # Named at capture, address kept (docs/symbols.md, "Addresses kept beside names").
                if row[address_col] is not None and row[lib_col] is not None and all_libs[row[lib_col]].get("path"):
                    place = (all_libs[row[lib_col]]["path"], row[address_col])
            if place is None:
                continue
            if caller[i]:
                wanted.add((place[0], place[1] - 1))
            if leaf[i] or not caller[i]:
                wanted.add(place)
for path, relative in sorted(wanted):
    print("%s\t0x%x" % (path, relative))
PY
addresses=$(wc -l <"$WORK/lookups.tsv")
files=$(cut -f1 "$WORK/lookups.tsv" | sort -u | wc -l)
((addresses > 0)) || die "the profile has no native addresses"

now() { date +%s.%N; }
best() { sort -g | head -1; }

for ((r = 0; r < ROUNDS; r++)); do
  start=$(now)
  "$STRATA" symbolicate "$WORK/raw.json" -o "$WORK/named.json" >"$WORK/symbolicate.out" 2>&1 ||
    die "strata symbolicate failed: $(tail -3 "$WORK/symbolicate.out")"
  end=$(now)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f\n", b - a }'
done | best >"$WORK/strata_s"

for ((r = 0; r < ROUNDS; r++)); do
  start=$(now)
  while IFS= read -r path; do
    awk -F'\t' -v p="$path" '$1 == p { print $2 }' "$WORK/lookups.tsv" |
      llvm-symbolizer --inlining --demangle --obj="$path" >/dev/null 2>&1
  done < <(cut -f1 "$WORK/lookups.tsv" | sort -u)
  end=$(now)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f\n", b - a }'
done | best >"$WORK/llvm_s"

strata_s=$(cat "$WORK/strata_s")
llvm_s=$(cat "$WORK/llvm_s")
awk -v n="$addresses" -v s="$strata_s" -v l="$llvm_s" -v f="$files" 'BEGIN {
  printf "symbolicate_speed: addresses=%d strata_s=%.3f strata_per_s=%.0f llvm_s=%.3f llvm_per_s=%.0f files=%d\n",
    n, s, n / s, l, n / l, f }'
grep -m1 "addresses named" "$WORK/symbolicate.out" | sed 's/^/symbolicate_speed: strata said: /'
