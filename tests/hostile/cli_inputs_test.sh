#!/usr/bin/env bash
# Hostile input: broken files given to the strata command (tools/strata) — missing, empty,
# a directory, truncated JSON, truncated and corrupt gzip, binary data, JSON that is not a
# Gecko profile, and Gecko-shaped JSON with broken tables (wrong types, references out of
# range, cycles of prefixes) — through `summary`, `convert --to chrome|pprof|collapsed`,
# `symbolicate` and `report`.
#
# A file that is not a Gecko profile at all (everything but the gecko_* cases) must end with
# a clear error naming the file on stderr and a non-zero exit status below 128. A Gecko-
# shaped file with a broken part (gecko_*) may be refused the same way or processed (the
# commands tolerate broken optional parts: libs, markers, categories; symbolicate only
# rewrites addresses). Never a signal (crash, abort, stack overflow) or a hang (20 s), and a
# refused input leaves no output and no temporary file. As a control, the same commands
# accept the valid inputs the broken ones are made from (a real profile of two_workers, and
# a minimal hand-written one).
#
#   cli_inputs_test.sh [summary|chrome|pprof|collapsed|symbolicate|report]...  (default: all)
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
program="$(binary tests/two_workers_fp)"
inputs="$WORK/inputs"
outputs="$WORK/outputs"
mkdir -p "$inputs" "$outputs"
export STRATA_NO_PROGRESS=1

# --- Valid inputs: a real profile, and a minimal hand-written one.
run_profiled real "$program" --iterations 300000
if ! require_profile real; then
  finish
fi
cp "$OUT/real.json" "$inputs/real.json"
minimal='{"meta":{"version":27,"interval":1,"startTime":1000,"processType":0,"product":"t","categories":[{"name":"Other","color":"grey","subcategories":["Other"]}]},"libs":[],"threads":[{"name":"main","pid":"1","tid":1,"processName":"p","registerTime":0,"stringTable":["main","work"],"frameTable":{"schema":{"location":0,"relevantForJS":1,"innerWindowID":2,"implementation":3,"line":4,"column":5,"category":6,"subcategory":7},"data":[[0,false,0,null,null,null,0,0],[1,false,0,null,7,null,0,0]]},"stackTable":{"schema":{"prefix":0,"frame":1},"data":[[null,0],[0,1]]},"samples":{"schema":{"stack":0,"time":1,"threadCPUDelta":2},"data":[[1,0,0],[1,1,1000]]},"markers":{"schema":{"name":0,"startTime":1,"endTime":2,"phase":3,"category":4,"data":5},"data":[[1,0,1,1,0,null]]}}],"processes":[]}'
echo "$minimal" >"$inputs/minimal.json"

# run_command TAG FILE COMMAND...: runs strata COMMAND on FILE with a 20 s limit; sets
# CMD_STATUS, output in $WORK/TAG.{out,err}. Outputs go to $outputs/TAG.<ext>.
run_command() {
  local tag="$1" file="$2" command="$3"
  case "$command" in
    summary) timeout 20 "$STRATA" summary "$file" ;;
    chrome | pprof | collapsed) timeout 20 "$STRATA" convert "$file" --to "$command" -o "$outputs/$tag.$command" ;;
    symbolicate) timeout 20 "$STRATA" symbolicate "$file" -o "$outputs/$tag.json" ;;
    report) timeout 20 "$STRATA" report "$file" -o "$outputs/$tag.html" ;;
  esac >"$WORK/$tag.out" 2>"$WORK/$tag.err"
  CMD_STATUS=$?
}
COMMANDS=("$@")  # Which commands (the BUILD file splits them in two tests to stay fast).
((${#COMMANDS[@]} > 0)) || COMMANDS=(summary chrome pprof collapsed symbolicate report)

for valid in real minimal; do
  for command in "${COMMANDS[@]}"; do
    tag="valid_${valid}_$command"
    run_command "$tag" "$inputs/$valid.json" "$command"
    if [[ $CMD_STATUS -eq 0 ]]; then
      pass "$tag: accepted"
    else
      fail "$tag: the valid input is refused (status $CMD_STATUS): $(head -3 "$WORK/$tag.err")"
    fi
  done
done
rm -f "$outputs"/*

# --- Broken inputs.
make_broken() {  # make_broken NAME CONTENT (printf %s, no newline added)
  printf '%s' "$2" >"$inputs/$1"
}
real_size=$(stat -c %s "$inputs/real.json")
: >"$inputs/empty.json"
mkdir -p "$inputs/directory.json"
head -c $((real_size / 2)) "$inputs/real.json" >"$inputs/truncated_half.json"
head -c $((real_size - 1)) "$inputs/real.json" >"$inputs/truncated_last_byte.json"
head -c 4096 "$STRATA" >"$inputs/binary_elf.json"
head -c 2048 /dev/zero >"$inputs/binary_zeros.json"
printf '\xff\xfe{\x00"\x00m\x00' >"$inputs/utf16_bom.json"
gzip -c "$inputs/real.json" >"$inputs/real.json.gz"
gz_size=$(stat -c %s "$inputs/real.json.gz")
head -c $((gz_size / 2)) "$inputs/real.json.gz" >"$inputs/truncated.json.gz"
{ head -c 20 "$inputs/real.json.gz"; head -c 500 /dev/zero | tr '\0' 'Z'; } >"$inputs/corrupt.json.gz"
printf 'not json at all' | gzip -c >"$inputs/gzip_of_text.json.gz"
make_broken array.json '[1,2,3]'
make_broken string.json '"a profile"'
make_broken null.json 'null'
make_broken object_without_meta.json '{"threads":[]}'
make_broken chrome_trace.json '{"traceEvents":[{"name":"x","ph":"X","ts":0,"dur":1,"pid":1,"tid":1}]}'
make_broken deep_nesting.json "$(printf '[%.0s' {1..100000})"
# Gecko-shaped, with one broken part each (made from the minimal profile).
broken_gecko() {  # broken_gecko NAME OLD NEW: the minimal profile with OLD replaced by NEW.
  local content="${minimal/"$2"/"$3"}"
  [[ "$content" != "$minimal" ]] || fail "test bug: '$2' is not in the minimal profile"
  make_broken "gecko_$1" "$content"
}
broken_gecko meta_version_string.json '"version":27' '"version":"27"'
broken_gecko threads_object.json '"threads":[{' '"threads":{"x":{'
broken_gecko thread_not_object.json '"threads":[{"name"' '"threads":[7,{"name"'
broken_gecko no_string_table.json '"stringTable":["main","work"]' '"strings":["main","work"]'
broken_gecko string_table_numbers.json '"stringTable":["main","work"]' '"stringTable":[1,2]'
broken_gecko frame_location_out_of_range.json '"data":[[0,false' '"data":[[99,false'
broken_gecko frame_location_negative.json '"data":[[0,false' '"data":[[-1,false'
broken_gecko frame_row_not_array.json '"data":[[0,false,0,null,null,null,0,0],' '"data":[{"location":0},'
broken_gecko frame_schema_array.json '"schema":{"location":0,' '"schema":[0],"x":{"location":0,'
broken_gecko frame_schema_huge_index.json '"schema":{"location":0,' '"schema":{"location":4294967295,'
broken_gecko frame_table_missing.json '"frameTable"' '"frameTableX"'
broken_gecko stack_frame_out_of_range.json '"data":[[null,0],[0,1]]' '"data":[[null,0],[0,5]]'
broken_gecko stack_prefix_cycle.json '"data":[[null,0],[0,1]]' '"data":[[1,0],[0,1]]'
broken_gecko stack_prefix_self.json '"data":[[null,0],[0,1]]' '"data":[[null,0],[1,1]]'
broken_gecko stack_data_object.json '"data":[[null,0],[0,1]]' '"data":{"0":[null,0]}'
broken_gecko sample_stack_out_of_range.json '"data":[[1,0,0],[1,1,1000]]' '"data":[[1,0,0],[9,1,1000]]'
broken_gecko sample_stack_negative.json '"data":[[1,0,0],[1,1,1000]]' '"data":[[-2,0,0],[1,1,1000]]'
broken_gecko sample_time_string.json '"data":[[1,0,0],[1,1,1000]]' '"data":[[1,"0",0],[1,1,1000]]'
broken_gecko sample_row_empty.json '"data":[[1,0,0],[1,1,1000]]' '"data":[[],[1,1,1000]]'
broken_gecko samples_no_time.json '"schema":{"stack":0,"time":1,' '"schema":{"stack":0,"when":1,'
broken_gecko marker_name_out_of_range.json '"data":[[1,0,1,1,0,null]]' '"data":[[77,0,1,1,0,null]]'
broken_gecko marker_row_garbage.json '"data":[[1,0,1,1,0,null]]' '"data":[7,"x",null,{}]'
broken_gecko libs_not_array.json '"libs":[]' '"libs":{"a":1}'
broken_gecko libs_garbage.json '"libs":[]' '"libs":[1,"x",{"start":"0x10","end":-1,"name":7}]'
broken_gecko processes_garbage.json '"processes":[]' '"processes":[1,{"meta":7},{"threads":"x"}]'
broken_gecko processes_object.json '"processes":[]' '"processes":{"meta":{"version":27},"threads":[]}'
broken_gecko start_time_string.json '"startTime":1000' '"startTime":"soon"'
broken_gecko categories_garbage.json '"categories":[{' '"categories":[7,{'

cases=0
crashes=0
refused=0
tolerated=0
for file in "$inputs"/*; do
  base="${file##*/}"
  [[ "$base" == real.json || "$base" == minimal.json || "$base" == real.json.gz ]] && continue
  for command in "${COMMANDS[@]}"; do
    tag="${base%%.*}_$command"
    run_command "$tag" "$file" "$command"
    cases=$((cases + 1))
    message=$(grep -v '^\s*$' "$WORK/$tag.err" | head -1 | cut -c1-200)
    if ((CMD_STATUS >= 124)); then
      crashes=$((crashes + 1))
      fail "$tag: status $CMD_STATUS (crash, signal or hang): $(tail -3 "$WORK/$tag.err" | cut -c1-300)"
    elif grep -qiE 'terminate called|Segmentation|Assertion|AddressSanitizer|runtime error' "$WORK/$tag.err"; then
      crashes=$((crashes + 1))
      fail "$tag: crash report on stderr: $(head -3 "$WORK/$tag.err")"
    elif ((CMD_STATUS == 0)); then
      if [[ "$base" == gecko_* ]]; then
        tolerated=$((tolerated + 1))
        pass "$tag: processed (a broken part that is tolerated)"
        rm -f "$outputs/$tag".*
      else
        fail "$tag: accepted a file that is not a profile (status 0); stdout: $(head -c 200 "$WORK/$tag.out")"
      fi
    elif ! grep -qF -- "$base" "$WORK/$tag.err"; then
      fail "$tag: the error does not name the file: $message"
    else
      refused=$((refused + 1))
      pass "$tag: status $CMD_STATUS: $message"
      if [[ -n "$(ls -A "$outputs")" ]]; then
        fail "$tag: refused, but left files behind: $(ls -A "$outputs")"
        rm -f "$outputs"/* "$outputs"/.[!.]*
      fi
    fi
  done
done
leftovers=$(ls -A "$outputs")
[[ -z "$leftovers" ]] && pass "no output or temporary file written for a broken input" ||
  fail "files left in the output directory: $leftovers"
result "scenario=hostile-cli cases=$cases refused=$refused tolerated=$tolerated crashes=$crashes"
finish
