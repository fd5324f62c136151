#!/usr/bin/env python3
"""Checks the merged profile of `strata record -- flight_parent ...` (record_child_test.sh).

  record_check.py PROFILE.json KILLED_PID

The profile must hold the parent and its three flight_program children; every child has
both work threads with samples; the killed child has >= 95 % of the Step markers of its
1000 ms per thread (2 x 1000, 1 ms steps), a "Process crashed" end marker, and its samples and
markers both reaching the end of its data (flight_check.tail_failures: by their order, not by
wall-clock distances). Prints RESULT lines, FAIL lines; exit 1 on failure.
"""
import sys
from flight_check import markers, tail_failures


def processes(profile):
    yield profile
    for p in profile.get("processes", []):
        yield from processes(p)


def main():
    import json
    profile = json.load(open(sys.argv[1]))
    killed = int(sys.argv[2])
    failures = []
    children = {}
    for p in processes(profile):
        for t in p["threads"]:
            if t.get("processName", "").startswith("flight_program"):
                children.setdefault(int(t["pid"]), []).append(t)
    print(f"RESULT processes={sum(1 for _ in processes(profile))} flight_program_children={len(children)}")
    if len(children) != 3:
        failures.append(f"{len(children)} flight_program processes in the profile (expected 3)")
    for pid, threads in sorted(children.items()):
        names = sorted(t["name"] for t in threads)
        samples = {t["name"]: len(t["samples"]["data"]) for t in threads}
        steps = sum(1 for t in threads for m in markers(t) if m["name"] == "Step")
        crashed = [m for t in threads for m in markers(t) if m["name"] == "Process crashed"]
        print(f"RESULT pid={pid} killed={int(pid == killed)} threads={','.join(names)} samples={samples} "
              f"steps={steps} crash_markers={len(crashed)}")
        if any(samples.get(n, 0) == 0 for n in ("GeckoMain", "flight-worker")):
            failures.append(f"process {pid}: a work thread without samples ({samples})")
        if pid != killed:
            if crashed:
                failures.append(f"process {pid} ended normally but has a 'Process crashed' marker")
            continue
        if steps < 0.95 * 2000:
            failures.append(f"killed process {pid}: {steps} Step markers (expected >= 1900)")
        if not crashed:
            failures.append(f"killed process {pid}: no 'Process crashed' marker")
            continue
        print(f"RESULT killed_end_text='{(crashed[-1]['data'] or {}).get('name', '')}'")
        failures += tail_failures(threads, f"killed process {pid}")
    if killed not in children:
        failures.append(f"the killed child {killed} is not in the profile")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
