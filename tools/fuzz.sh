#!/usr/bin/env bash
# Fuzzes Strata's parsers of untrusted bytes with libFuzzer (docs/reliability.md, "Fuzzing"):
#
#   entry_deserializer  shared/buffer/entry_deserializer_fuzzer.cc   buffer entry deserializers
#   message_decoder     full/ipc/message_decoder_fuzzer.cc           IPC frames and payloads
#   env_settings        base/internal/settings/env_settings_fuzzer.cc         STRATA_* variable parsers
#   flight_reader       shared/flight/flight_reader_fuzzer.cc        flight recorder files (read, and
#                                                                    the recovered profile written)
#
# Each target is built with clang++ straight from the sources (Bazel's toolchain is gcc) with
# -fsanitize=fuzzer,address,undefined, run for --runs executions (default 10 M) starting from
# its committed corpus (<package>/fuzz_corpus/<target>_fuzzer/), and then the inputs that add
# coverage are merged into that corpus (-merge=1; files capped at the target's -max_len).
# --jobs J runs J processes of a target at once (sharing the new inputs), N/J executions each:
# on cores shared with other work it gets the target a larger share of them.
# (Allocation stacks in ASan reports are cut to 5 frames, which makes the allocation-heavy
# parsers ~15 % faster; run the binary on the reproducer for full stacks.)
# Finally the corpus is replayed through a clang source-coverage build (the replay main of
# the Bazel tests, -fprofile-instr-generate) and the line, region and branch coverage of the
# code each target is meant to test is reported (llvm-cov-14).
# A crash (sanitizer report, failed check, timeout, out-of-memory) stops that target; the
# reproducer is saved under the output directory. Exit status 0 only if every target ran its
# executions without a crash.
#
#   tools/fuzz.sh [--runs N] [--jobs J] [--no-merge] [--out DIR] [target...]
#   tools/fuzz.sh --runs 0 --no-merge      # coverage of the committed corpora only
#
# Debian's clang-14, its runtime libraries (libclang-rt-14-dev, which holds libFuzzer) and
# llvm-14 (llvm-cov) are installed with apt-get when missing, as tools/setup.sh does.
set -uo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
runs=10000000
merge=1
jobs=1
out="${TMPDIR:-/tmp}/strata-fuzz"
targets=()
while (($# > 0)); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --no-merge) merge=0; shift ;;
    --jobs) jobs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

# --- Target table: name, fuzzer source, the other sources it links, -max_len.
declare -A SOURCES=(
  [entry_deserializer]="shared/buffer/entry_deserializer_fuzzer.cc platform/check.cc shared/profile/sample_entry.cc"
  [message_decoder]="full/ipc/message_decoder_fuzzer.cc full/ipc/messages.cc shared/buffer/controlled_chunk_manager.cc platform/check.cc"
  [env_settings]="base/internal/settings/env_settings_fuzzer.cc base/internal/settings/env_settings.cc platform/check.cc"
  [flight_reader]="shared/flight/flight_reader_fuzzer.cc shared/flight/flight_reader.cc shared/flight/flight_recovery.cc shared/buffer/chunked_buffer.cc shared/buffer/chunk.cc shared/buffer/local_limit_chunk_manager.cc shared/buffer/controlled_chunk_manager.cc shared/profile/sample_entry.cc shared/profile/profile_capture.cc shared/profile/library_timeline.cc shared/json/json_writer.cc shared/json/gecko_profile_writer.cc shared/json/unique_strings.cc shared/json/unique_stacks.cc shared/json/shortest_double.cc shared/json/shared_libraries.cc shared/json/location.cc shared/symbols/symbolizer.cc shared/symbols/elf_symbolizer.cc shared/symbols/elf_symbol_table.cc shared/symbols/demangle.cc shared/symbols/debug_file.cc platform/check.cc platform/mutex.cc platform/process_thread_ids.cc platform/time_stamp.cc"
)
# The code each target is meant to test (its coverage is reported).
declare -A TESTED=(
  [entry_deserializer]="shared/buffer/entry_serialization.h shared/buffer/entry_kinds.h shared/profile/sample_entry.cc shared/profile/marker_entry.h"
  [message_decoder]="full/ipc/messages.cc"
  [env_settings]="base/internal/settings/env_settings.cc"
  [flight_reader]="shared/flight/flight_reader.cc shared/flight/flight_recovery.cc"
)
declare -A MAX_LEN=([entry_deserializer]=512 [message_decoder]=512 [env_settings]=256 [flight_reader]=4096)
ALL_TARGETS=(entry_deserializer message_decoder env_settings flight_reader)
((${#targets[@]} == 0)) && targets=("${ALL_TARGETS[@]}")
for t in "${targets[@]}"; do
  [[ -n "${SOURCES[$t]:-}" ]] || { echo "fuzz.sh: unknown target $t (${ALL_TARGETS[*]})" >&2; exit 2; }
done

# --- Toolchain: clang-14 with libFuzzer and the sanitizer runtimes.
CLANG=clang++-14
fuzzer_runtime_present() {
  command -v "$CLANG" >/dev/null && command -v llvm-cov-14 >/dev/null &&
    compgen -G "/usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null
}
if ! fuzzer_runtime_present; then
  echo "fuzz.sh: installing clang-14, libclang-rt-14-dev (libFuzzer) and llvm-14 (llvm-cov)" >&2
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get install -y --no-install-recommends clang-14 libclang-rt-14-dev llvm-14 >&2; then
    $SUDO apt-get update >&2
    $SUDO apt-get install -y --no-install-recommends clang-14 libclang-rt-14-dev llvm-14 >&2
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

# coverage TARGET CORPUS: "lines 84.8% regions 97.0% branches 95.8%" of the tested files.
coverage() {
  local t="$1" corpus="$2" dir="$out/${1}_coverage"
  local -a sources tested
  read -r -a sources <<<"${SOURCES[$t]}"
  read -r -a tested <<<"${TESTED[$t]}"
  mkdir -p "$dir"
  (cd "$repo" && "$CLANG" -std=c++17 -O0 -g -fprofile-instr-generate -fcoverage-mapping -I"$repo" \
      tools/testing/fuzz_replay_main.cc "${sources[@]}" -o "$dir/replay" -lpthread) >"$dir/build.log" 2>&1 &&
    LLVM_PROFILE_FILE="$dir/replay.profraw" "$dir/replay" "$corpus" >"$dir/replay.log" 2>&1 &&
    llvm-profdata-14 merge -o "$dir/replay.profdata" "$dir/replay.profraw" &&
    (cd "$repo" && llvm-cov-14 report "$dir/replay" -instr-profile="$dir/replay.profdata" "${tested[@]}") \
      >"$dir/report.txt" 2>&1 || { echo "coverage unavailable (see $dir)"; return; }
  # TOTAL  regions missed cover  functions missed executed  lines missed cover  branches missed cover
  awk '$1 == "TOTAL" { printf "lines %s regions %s branches %s", $10, $4, $13 }' "$dir/report.txt"
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
  echo "=== $t: $runs executions in $jobs process(es) from $before corpus inputs (log: $log)" >&2
  start=$(date +%s)
  # New inputs go to $work; the committed corpus only seeds the run. With --jobs N, N processes
  # share $work (each reloads what the others found) and run runs/N executions each.
  per_job=$(((runs + jobs - 1) / jobs))
  pids=()
  for ((j = 0; j < jobs; j++)); do
    job_log="$log"
    ((jobs > 1)) && job_log="$out/${t}.job$j.log"
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1:malloc_context_size=5 \
      "$binary" -runs="$per_job" -max_len="${MAX_LEN[$t]}" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$out/crashes/${t}-" "$work" "$corpus" >"$job_log" 2>&1 &
    pids+=($!)
  done
  rc=0
  for pid in "${pids[@]}"; do
    wait "$pid" || rc=$?
  done
  seconds=$(($(date +%s) - start))
  ((jobs > 1)) && cat "$out/${t}".job*.log >"$log"
  executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | awk '{ s += $1 } END { print s + 0 }')
  per_second=$((seconds > 0 ? executed / seconds : executed))
  cov=$(grep -E '^#[0-9]+' "$log" | sed -n 's/.* cov: \([0-9]*\).*/\1/p' | sort -n | tail -1)
  ft=$(grep -E '^#[0-9]+' "$log" | sed -n 's/.* ft: \([0-9]*\).*/\1/p' | sort -n | tail -1)
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
  corpus_bytes=$(find "$corpus" -type f -printf "%s\n" | awk "{ s += \$1 } END { print s + 0 }")
  edges=$(sed -n 's/^INFO: Loaded 1 modules *(\([0-9]*\) inline 8-bit counters.*/\1/p' "$log" | head -1)
  summary+=("$t: executions=${executed:-?} seconds=$seconds exec_per_s=${per_second:-?} crashes=0 cov=${cov:-?}/${edges:-?} edges ft=${ft:-?} corpus_files=$after (+$added) corpus_bytes=$corpus_bytes; source coverage of ${TESTED[$t]}: $(coverage "$t" "$corpus")")
done

echo
echo "fuzz.sh summary (runs requested per target: $runs)"
printf '  %s\n' "${summary[@]}"
exit $status
