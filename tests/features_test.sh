#!/usr/bin/env bash
# Scenario: the STRATA_STARTUP_FEATURES and STRATA_STARTUP_FILTERS switches on the unmodified
# two-worker program (short runs, ~0.2 s of CPU per worker):
#   framepointers     frame-pointer walk on the -fno-omit-frame-pointer build: each worker's
#                     samples hold its own function and its thread entry function;
#   rawaddresses      no symbolication: native frames are "0x..." addresses, the program is in
#                     libs, meta.presymbolicated is not true, the checker and the
#                     front-end (profiler-cli) accept it;
#   FILTERS=alpha     only worker-alpha of the two workers is profiled;
#   -threads          threads made with pthread_create are not registered: no workers;
#   BUFFER_MB=1 with LOGGING=1: a small buffer still gives a valid profile, and logging
#                     writes something to stderr;
#   -cpu, -stackwalk  still valid profiles.
# Every profile passes the shared format checker.
source "$(dirname "$0")/scenario_lib.sh"

fp_program="$(binary tests/two_workers_fp)"
iters=(--iterations 4000000)

# --- framepointers
name=feature_framepointers
STRATA_STARTUP_FEATURES=framepointers run_profiled "$name" "$fp_program" "${iters[@]}"
show_run "$name"
if require_profile "$name"; then
  check_format "$name"
  if stats "$name" "worker-alpha:spin_alpha_leaf|alpha_work_loop" \
      "worker-beta:spin_beta_leaf|beta_work_loop" "worker-alpha:alpha_thread_main" \
      "worker-beta:beta_thread_main" "worker-alpha:alpha_work_loop" "worker-beta:beta_work_loop"; then
    for w in alpha beta; do
      require_thread "$name" "worker-$w"
      own=$(field "$name" match "patterns=spin_${w}_leaf|${w}_work_loop" pct)
      entry=$(field "$name" match "patterns=${w}_thread_main" pct)
      caller=$(field "$name" match "patterns=${w}_work_loop" pct)
      result "scenario=features feature=framepointers thread=worker-$w own_function_pct=$own" \
        "entry_${w}_thread_main_pct=$entry caller_${w}_work_loop_pct=$caller"
      ge "${own:-0}" 80 && pass "$name: worker-$w: $own % in its own functions" ||
        fail "$name: worker-$w: only ${own:-0} % of samples in its own functions"
      ge "${entry:-0}" 80 && pass "$name: worker-$w: $entry % reach ${w}_thread_main" ||
        fail "$name: worker-$w: only ${entry:-0} % of samples reach ${w}_thread_main"
    done
  fi
fi

# --- rawaddresses
name=feature_rawaddresses
STRATA_STARTUP_FEATURES=rawaddresses run_profiled "$name" "$fp_program" "${iters[@]}"
show_run "$name"
if require_profile "$name"; then
  check_format "$name"
  if stats "$name" "worker-alpha:alpha_" "worker-beta:beta_"; then
    require_thread "$name" worker-alpha
    require_thread "$name" worker-beta
    [[ "$(field "$name" profile "" presymbolicated)" == 0 ]] &&
      pass "$name: meta.presymbolicated is not set" ||
      fail "$name: meta.presymbolicated is true in a raw-address profile"
    for w in alpha beta; do
      hex=$(field "$name" thread "name=worker-$w" hex_frames)
      named=$(field "$name" match "patterns=${w}_" count)
      result "scenario=features feature=rawaddresses thread=worker-$w hex_frames=$hex" \
        "samples_with_${w}_names=$named"
      [[ "${hex:-0}" -gt 0 ]] && pass "$name: worker-$w has $hex raw-address frames" ||
        fail "$name: worker-$w has no 0x... frames"
      [[ "${named:-0}" -eq 0 ]] && pass "$name: worker-$w has no symbolicated ${w}_ names" ||
        fail "$name: worker-$w has $named samples with symbolicated names in raw-address mode"
    done
    check_frontend "$name"
    if grep -q "^lib name=$(basename "$fp_program")$" "$WORK/$name.stats"; then
      pass "$name: libs lists $(basename "$fp_program")"
    else
      fail "$name: libs does not list $(basename "$fp_program")"
    fi
  fi
fi

# --- FILTERS=alpha
name=filter_alpha
STRATA_STARTUP_FILTERS=alpha run_profiled "$name" "$fp_program" "${iters[@]}"
show_run "$name"
if require_profile "$name"; then
  check_format "$name"
  if stats "$name"; then
    require_thread "$name" worker-alpha
    forbid_thread "$name" worker-beta
    result "scenario=features filter=alpha threads=$(awk '$1 == "thread" { printf "%s ", $3 }' "$WORK/$name.stats")"
  fi
fi

# --- -threads
name=feature_no_threads
STRATA_STARTUP_FEATURES=-threads run_profiled "$name" "$fp_program" "${iters[@]}"
show_run "$name"
if require_profile "$name"; then
  check_format "$name"
  if stats "$name"; then
    [[ -n "$(field "$name" thread name=GeckoMain samples)" ]] &&
      pass "$name: GeckoMain is there" || fail "$name: no GeckoMain thread"
    forbid_thread "$name" worker-alpha
    forbid_thread "$name" worker-beta
  fi
fi

# --- small buffer, logging
name=buffer_1mb_logging
STRATA_STARTUP_BUFFER_MB=1 STRATA_LOGGING=1 run_profiled "$name" "$fp_program" "${iters[@]}"
show_run "$name"
if require_profile "$name"; then
  check_format "$name"
  if stats "$name"; then
    require_thread "$name" worker-alpha
    require_thread "$name" worker-beta
  fi
  [[ -s "$WORK/$name.err" ]] && pass "$name: STRATA_LOGGING=1 logs to stderr" ||
    fail "$name: STRATA_LOGGING=1 wrote nothing to stderr"
fi

# --- -cpu, -stackwalk
for feature in cpu stackwalk; do
  name=feature_no_$feature
  STRATA_STARTUP_FEATURES=-$feature run_profiled "$name" "$fp_program" "${iters[@]}"
  show_run "$name"
  if require_profile "$name"; then
    check_format "$name"
    stats "$name" >/dev/null && require_thread "$name" worker-alpha
  fi
done

finish
