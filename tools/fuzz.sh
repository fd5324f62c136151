#!/usr/bin/env bash
# Fuzzes Strata's parsers of untrusted bytes with libFuzzer (docs/reliability.md, "Fuzzing"):
#
#   entry_deserializer  shared/buffer/entry_deserializer_fuzzer.cc   buffer entry deserializers
#   message_decoder     full/ipc/message_decoder_fuzzer.cc           IPC frames and payloads
#   env_settings        base/internal/env_settings_fuzzer.cc         STRATA_* variable parsers
#
# Each target is built with clang++ straight from the sources (Bazel's toolchain is gcc) with
# -fsanitize=fuzzer,address,undefined, run for --runs executions (default 10 M) starting from
# its committed corpus (<package>/fuzz_corpus/<target>_fuzzer/), and then the inputs that add
# coverage are merged into that corpus (-merge=1; files capped at the target's -max_len).
# (Allocation stacks in ASan reports are cut to 5 frames, which makes the allocation-heavy
# parsers ~15 % faster; run the binary on the reproducer for full stacks.)
# A crash (sanitizer report, failed check, timeout, out-of-memory) stops that target; the
# reproducer is saved under the output directory. Exit status 0 only if every target ran its
# executions without a crash.
#
#   tools/fuzz.sh [--runs N] [--no-merge] [--out DIR] [target...]
#
# Debian's clang-14 and its runtime libraries (libclang-rt-14-dev, which holds libFuzzer) are
# installed with apt-get when missing, as tools/setup.sh does for the rest.
set -uo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
runs=10000000
merge=1
out="${TMPDIR:-/tmp}/strata-fuzz"
targets=()
while (($# > 0)); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --no-merge) merge=0; shift ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

# --- Target table: name, fuzzer source, the other sources it links, -max_len.
declare -A SOURCES=(
  [entry_deserializer]="shared/buffer/entry_deserializer_fuzzer.cc platform/check.cc shared/profile/sample_entry.cc"
  [message_decoder]="full/ipc/message_decoder_fuzzer.cc full/ipc/messages.cc shared/buffer/controlled_chunk_manager.cc platform/check.cc"
  [env_settings]="base/internal/env_settings_fuzzer.cc base/internal/env_settings.cc platform/check.cc"
)
declare -A MAX_LEN=([entry_deserializer]=512 [message_decoder]=512 [env_settings]=256)
ALL_TARGETS=(entry_deserializer message_decoder env_settings)
((${#targets[@]} == 0)) && targets=("${ALL_TARGETS[@]}")
for t in "${targets[@]}"; do
  [[ -n "${SOURCES[$t]:-}" ]] || { echo "fuzz.sh: unknown target $t (${ALL_TARGETS[*]})" >&2; exit 2; }
done

# --- Toolchain: clang-14 with libFuzzer and the sanitizer runtimes.
CLANG=clang++-14
fuzzer_runtime_present() {
  command -v "$CLANG" >/dev/null &&
    compgen -G "/usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null
}
if ! fuzzer_runtime_present; then
  echo "fuzz.sh: installing clang-14 and libclang-rt-14-dev (libFuzzer)" >&2
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get install -y --no-install-recommends clang-14 libclang-rt-14-dev >&2; then
    $SUDO apt-get update >&2
    $SUDO apt-get install -y --no-install-recommends clang-14 libclang-rt-14-dev >&2
  fi
  fuzzer_runtime_present || { echo "fuzz.sh: libFuzzer is still missing" >&2; exit 1; }
fi

mkdir -p "$out"
CXXFLAGS=(-std=c++17 -g -O2 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
  -fno-sanitize-recover=all -I"$repo" -Wall -Wextra -Wno-unused-parameter)

corpus_dir() {  # The committed corpus of target $1: beside its fuzzer source.
  local source="${SOURCES[$1]%% *}"
  echo "$repo/$(dirname "$source")/fuzz_corpus/${1}_fuzzer"
}

summary=()
status=0
for t in "${targets[@]}"; do
  binary="$out/${t}_fuzzer"
  read -r -a sources <<<"${SOURCES[$t]}"
  echo "=== $t: building $binary" >&2
  if ! (cd "$repo" && "$CLANG" "${CXXFLAGS[@]}" "${sources[@]}" -o "$binary" -lpthread); then
    summary+=("$t: BUILD FAILED")
    status=1
    continue
  fi
  corpus="$(corpus_dir "$t")"
  mkdir -p "$corpus"
  work="$out/${t}_work"
  rm -rf "$work"
  mkdir -p "$work" "$out/crashes"
  log="$out/${t}.log"
  before=$(find "$corpus" -type f | wc -l)
  echo "=== $t: $runs executions from $before corpus inputs (log: $log)" >&2
  start=$(date +%s)
  # New inputs go to $work; the committed corpus only seeds the run.
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1:malloc_context_size=5 \
    "$binary" -runs="$runs" -max_len="${MAX_LEN[$t]}" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$out/crashes/${t}-" "$work" "$corpus" >"$log" 2>&1
  rc=$?
  seconds=$(($(date +%s) - start))
  executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  per_second=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  if ((rc != 0)); then
    crash=$(ls -t "$out/crashes/${t}-"* 2>/dev/null | head -1)
    echo "--- $t: FAILED (status $rc); reproducer: ${crash:-none}; end of the log:" >&2
    tail -40 "$log" >&2
    summary+=("$t: CRASH after ${executed:-?} executions (status $rc), reproducer ${crash:-none}")
    status=1
    continue
  fi
  added=0
  if ((merge)); then
    "$binary" -merge=1 -max_len="${MAX_LEN[$t]}" "$corpus" "$work" >"$out/${t}.merge.log" 2>&1 ||
      { echo "fuzz.sh: merge failed for $t (see $out/${t}.merge.log)" >&2; status=1; }
  fi
  after=$(find "$corpus" -type f | wc -l)
  added=$((after - before))
  corpus_bytes=$(du -sb "$corpus" | cut -f1)
  summary+=("$t: executions=${executed:-?} seconds=$seconds exec_per_s=${per_second:-?} crashes=0 cov=${cov:-?} ft=${ft:-?} corpus_files=$after (+$added) corpus_bytes=$corpus_bytes")
done

echo
echo "fuzz.sh summary (runs requested per target: $runs)"
printf '  %s\n' "${summary[@]}"
exit $status
