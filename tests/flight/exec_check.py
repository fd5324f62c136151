#!/usr/bin/env python3
"""Checks the merged profile of `strata record -- exec_children.sh flight_program`
(record_child_test.sh).

  exec_check.py PROFILE.json

Every pid left several flight recorder files (sh, sh, then flight_program: two execs); the one
recovered must be the last image's, the flight_program that crashed: four flight_program
processes, each with both work threads' samples and >= 95 % of its 2 x 300 Step markers; the
three that died by SIGSEGV end with "Process crashed", the one that called ProfilerStop and
then crashed (a clean end, its status unknown to `strata record`) with "Recording ended" and no
"Process crashed". The fifth child, which called ProfilerStop and _exited, left no file (it
did not crash: its file is removed, issue 33) and is not in the profile. Prints RESULT lines,
FAIL lines; exit 1 on failure.
"""
import json
import sys
from flight_check import markers
from record_check import processes


def main():
    profile = json.load(open(sys.argv[1]))
    failures = []
    children = {}
    names = []
    for p in processes(profile):
        for t in p["threads"]:
            names.append(t.get("processName", ""))
            if t.get("processName", "").startswith("flight_program"):
                children.setdefault(int(t["pid"]), []).append(t)
    print(f"RESULT processes={sum(1 for _ in processes(profile))} flight_program={len(children)} "
          f"process_names={sorted(set(names))}")
    if len(children) != 4:
        failures.append(f"{len(children)} flight_program processes in the profile (expected 4: an "
                        "earlier image's file recovered instead of the last one's?)")
    ended = crashed_count = 0
    for pid, threads in sorted(children.items()):
        samples = {t["name"]: len(t["samples"]["data"]) for t in threads}
        steps = sum(1 for t in threads for m in markers(t) if m["name"] == "Step")
        crashed = sum(1 for t in threads for m in markers(t) if m["name"] == "Process crashed")
        clean = sum(1 for t in threads for m in markers(t) if m["name"] == "Recording ended")
        print(f"RESULT pid={pid} samples={samples} steps={steps} crashed={crashed} recording_ended={clean}")
        if any(samples.get(n, 0) == 0 for n in ("GeckoMain", "flight-worker")):
            failures.append(f"process {pid}: a work thread without samples ({samples})")
        if steps < 0.95 * 600:
            failures.append(f"process {pid}: {steps} Step markers (expected >= 570)")
        if crashed + clean != 1:
            failures.append(f"process {pid}: {crashed} 'Process crashed' and {clean} 'Recording ended' markers")
        crashed_count += crashed
        ended += clean
    if crashed_count != 3 or ended != 1:
        failures.append(f"{crashed_count} crashed and {ended} cleanly ended processes (expected 3 and 1)")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
