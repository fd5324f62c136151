#!/usr/bin/env bash
# Hostile input: every STRATA_* variable of the base tier (docs/env-vars.md) set to an empty,
# a negative, a huge and a non-numeric value (and a few more per variable), on the unmodified
# two-worker program (short runs, STRATA_LOGGING=1 so that the settings in use are printed).
#
# For each value the variable either accepts (documented: an empty list, an empty boolean
# meaning off, any path, any filter) or refuses it. A refusal must be one stderr line naming
# the variable, what it accepts (the range for numbers, the values for the others) and the
# default used, and the default must then be in force. Either way the program runs to its
# end with its own exit status (3 here), and the profile is written wherever the settings say
# it should be (nowhere when STRATA_STARTUP or STRATA_SHUTDOWN falls back to "off").
#
#   env_values_test.sh [VARIABLE...]   (default: all of them)
source "$(dirname "$0")/../scenario_lib.sh"

program="$(binary tests/two_workers_fp)"
short=(--iterations 300000 --exit-code 3)
huge_number=99999999999999999999999999999999
long_text=$(head -c 100000 /dev/zero | tr '\0' 'x')  # 100 kB, near the kernel's limit per string.

# The settings the library reports at start (STRATA_LOGGING=1):
#   "profiler started: interval 1.000 ms, buffer 64 MiB, features stackwalk,threads,cpu"
started_line() { grep -m1 'profiler started:' "$WORK/$1.err"; }

# check NAME VAR VALUE VERDICT PROFILE [SETTINGS]
#   VERDICT  refused:<what the message must also contain> | accepted
#   PROFILE  written (at $OUT/NAME.json) | none | cwd:<file name in the run's directory>
#   SETTINGS a fixed string the "profiler started" line must contain ("" = not checked)
check() {
  local name="$1" var="$2" value="$3" verdict="$4" profile="$5" settings="${6:-}"
  local run_dir="$WORK/$name.cwd"
  rm -rf "$run_dir" && mkdir -p "$run_dir"
  (
    cd "$run_dir" || exit 1
    export STRATA_LOGGING=1
    export "$var=$value"
    run_profiled "$name" "$program" "${short[@]}"
    echo "$RUN_STATUS" >"$WORK/$name.status"
  )
  local status shown="${value:0:40}"
  status=$(cat "$WORK/$name.status")
  ((${#value} > 40)) && shown+="...(${#value} bytes)"
  local message
  message=$(grep -F -- "$var=" "$WORK/$name.err" | head -1)
  result "scenario=hostile-env var=$var value=\"$shown\" status=$status message=\"${message:0:300}\""

  # The program ran to its end, with its own exit status.
  [[ "$status" == 3 ]] || fail "$name: exit status $status, the program returns 3"
  grep -q '^two_workers: done exit_code=3$' "$WORK/$name.out" ||
    fail "$name: the program did not run to its end"
  if grep -qiE 'terminate called|Segmentation|Aborted|AddressSanitizer|runtime error' "$WORK/$name.err"; then
    fail "$name: crash or sanitizer report on stderr:"
    sed 's/^/    /' "$WORK/$name.err" | head -10
  fi

  # Refused with a clear message, or accepted silently.
  local error_count
  error_count=$(grep -c 'is not valid' "$WORK/$name.err")
  case "$verdict" in
    refused:*)
      local need="${verdict#refused:}"
      if [[ -z "$message" ]]; then
        fail "$name: no message naming $var for the value '$shown'"
        sed 's/^/    stderr: /' "$WORK/$name.err" | head -5
      elif ! grep -qF -- "$need" <<<"$message" || ! grep -qF 'using the default' <<<"$message"; then
        fail "$name: the message does not say '$need' and which default is used: $message"
      elif ((${#message} > 600)); then
        fail "$name: the message is ${#message} bytes long (a hostile value must not flood stderr)"
      elif [[ "$error_count" -ne 1 ]]; then
        fail "$name: $error_count error lines, expected exactly one"
      else
        pass "$name: refused: ${message:0:160}"
      fi
      ;;
    accepted)
      [[ "$error_count" -eq 0 ]] && pass "$name: accepted without an error" ||
        fail "$name: '$shown' is a valid value of $var, but: $(grep -m1 'is not valid' "$WORK/$name.err")"
      ;;
  esac

  # The settings in force.
  if [[ -n "$settings" ]]; then
    local line
    line=$(started_line "$name")
    grep -qF -- "$settings" <<<"$line" && pass "$name: in force: $settings" ||
      fail "$name: expected '$settings' in force, the library says: ${line:-<no start line>}"
  fi

  # The profile, where the settings say.
  case "$profile" in
    written)
      if [[ -s "$OUT/$name.json" ]]; then
        check_format "$name"
      else
        fail "$name: no profile written"
      fi
      ;;
    none)
      if [[ -e "$OUT/$name.json" ]] || [[ -n "$(ls -A "$run_dir")" ]]; then
        fail "$name: a profile was written although the setting fell back to 'off': $(ls -A "$run_dir") $(ls "$OUT/$name.json" 2>/dev/null)"
      else
        pass "$name: no profile (as the default says)"
      fi
      ;;
    cwd:*)
      local file="$run_dir/${profile#cwd:}"
      if [[ -s "$file" ]]; then
        cp "$file" "$OUT/$name.json" && check_format "$name"
      else
        fail "$name: no profile at the relative path ${profile#cwd:}"
      fi
      ;;
  esac
}

default_settings="interval 1.000 ms, buffer 64 MiB, features stackwalk,threads,cpu"

check_variable() {
  local var="$1"
  case "$var" in
    STRATA_STARTUP_INTERVAL)
      local range="from 0.05 to 1000"
      for case in "empty:" "negative:-1" "huge:$huge_number" "text:abc" "zero:0" "nan:nan" \
          "inf:inf" "tiny:1e-400" "trailing:2ms" "long:$long_text"; do
        check "interval_${case%%:*}" "$var" "${case#*:}" "refused:$range" written "interval 1.000 ms"
      done
      check interval_valid "$var" " 2.5" accepted written "interval 2.500 ms"
      ;;
    STRATA_STARTUP_BUFFER_MB)
      local range="from 1 to 4096"
      for case in "empty:" "negative:-1" "huge:$huge_number" "text:abc" "zero:0" "fraction:1.5" \
          "above:4097" "hex:0x10"; do
        check "buffer_${case%%:*}" "$var" "${case#*:}" "refused:$range" written "buffer 64 MiB"
      done
      check buffer_valid "$var" 8 accepted written "buffer 8 MiB"
      ;;
    STRATA_STARTUP_FEATURES)
      local values="stackwalk threads cpu precise framepointers rawaddresses"
      check features_empty "$var" "" accepted written "features stackwalk,threads,cpu"
      for case in "negative:-1" "huge:$huge_number" "text:abc" "long:$long_text"; do
        check "features_${case%%:*}" "$var" "${case#*:}" "refused:$values" written \
          "features stackwalk,threads,cpu"
      done
      check features_valid "$var" "-cpu, precise" accepted written "features stackwalk,threads,precise"
      ;;
    STRATA_STARTUP_FILTERS)
      # Any list of substrings is valid; an empty one means every thread.
      check filters_empty "$var" "" accepted written "$default_settings"
      for case in "negative:-1" "huge:$huge_number" "text:abc" "long:$long_text"; do
        check "filters_${case%%:*}" "$var" "${case#*:}" accepted written
      done
      ;;
    STRATA_SHUTDOWN)
      # Empty: refused (no path), nothing saved. Anything else is a (relative) path.
      check shutdown_empty "$var" "" "refused:a file path" none "$default_settings"
      check shutdown_negative "$var" "-1" accepted "cwd:-1"
      check shutdown_huge "$var" "$huge_number" accepted "cwd:$huge_number"
      check shutdown_text "$var" "abc" accepted "cwd:abc"
      ;;
    STRATA_FLIGHT_RECORDER)
      # An existing writable directory; anything else is refused and the program runs without
      # the recorder. Accepted: the profile is saved at exit and the file removed.
      local need="an existing directory this process can write to"
      for case in "empty:" "missing:/nonexistent/strata-flight" "file:/etc/passwd" "long:$long_text"; do
        check "flight_${case%%:*}" "$var" "${case#*:}" "refused:$need" written "$default_settings"
      done
      check flight_valid "$var" "." accepted written "$default_settings"
      if compgen -G "$WORK/flight_valid.cwd/*.flight" >/dev/null; then
        fail "flight_valid: a flight recorder file was left although the profile was saved"
      fi
      ;;
    STRATA_HELP | STRATA_STARTUP | STRATA_LOGGING)
      local tag profile="written"
      tag=$(tr 'A-Z' 'a-z' <<<"${var#STRATA_}")
      [[ "$var" == STRATA_STARTUP ]] && profile=none  # Its default is off: no session.
      local settings="$default_settings"
      [[ "$var" == STRATA_LOGGING || "$var" == STRATA_STARTUP ]] && settings=""  # Not printed.
      # Empty is "off", like 0.
      check "${tag}_empty" "$var" "" accepted "$profile" "$settings"
      for case in "negative:-1" "huge:$huge_number" "text:abc" "two:2"; do
        check "${tag}_${case%%:*}" "$var" "${case#*:}" "refused:1 or 0" "$profile" "$settings"
      done
      ;;
    STRATA_SIGNAL | STRATA_SAMPLING_SIGNAL)
      # Signals: a refused value keeps the default (no control signal; the chosen sampling
      # signal), and the profile is saved to STRATA_SHUTDOWN as without the variable.
      local tag need="no control signal"
      tag=$(tr 'A-Z' 'a-z' <<<"${var#STRATA_}")
      [[ "$var" == STRATA_SAMPLING_SIGNAL ]] && need="SIGRTMIN+n"
      for case in "empty:" "negative:-1" "huge:$huge_number" "text:abc" "long:$long_text" \
          "kill:SIGKILL" "segv:11"; do
        check "${tag}_${case%%:*}" "$var" "${case#*:}" "refused:$need" written "$default_settings"
      done
      ;;
    *)
      fail "unknown variable $var"
      ;;
  esac
}

variables=("$@")
((${#variables[@]} == 0)) && variables=(STRATA_STARTUP_INTERVAL STRATA_STARTUP_BUFFER_MB
  STRATA_STARTUP_FEATURES STRATA_STARTUP_FILTERS STRATA_SHUTDOWN STRATA_HELP STRATA_STARTUP
  STRATA_LOGGING STRATA_SIGNAL STRATA_SAMPLING_SIGNAL STRATA_FLIGHT_RECORDER)
for var in "${variables[@]}"; do
  check_variable "$var"
done
finish
