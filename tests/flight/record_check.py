#!/usr/bin/env python3
"""Checks the merged profile of `strata record -- flight_parent ...` (record_child_test.sh).

  record_check.py PROFILE.json KILLED_PID OUTPUT

The profile must hold the parent and its three flight_program children; every child has
both work threads with samples. Step markers are checked against the steps each child says it
did (its "work done" line in OUTPUT, the run's stdout), not against a count assumed from its
CPU time (a step takes at least 1 ms of CPU, more when the CPU clock is charged while the
thread is preempted; issue 35): the two that saved at exit have every one of their steps; the
killed child at least the steps it had done when it said "work done" (before its ready file
it waits, doing steps, until the sampler thread has slept 3 more times: a whole sampler loop
published those steps to the flight recorder file; flight_program.cc), a "Process crashed" end marker, and its samples
and markers both reaching the end of its data (flight_check.tail_failures: by their order, not
by wall-clock distances). Prints RESULT lines, FAIL lines; exit 1 on failure.
"""
import sys
from flight_check import markers, own_steps, tail_failures, thread_steps, WORK_THREADS


def processes(profile):
    yield profile
    for p in profile.get("processes", []):
        yield from processes(p)


def main():
    import json
    profile = json.load(open(sys.argv[1]))
    killed = int(sys.argv[2])
    own = own_steps(sys.argv[3]) if len(sys.argv) > 3 else {}
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
        steps = thread_steps(threads)
        did = own.get(pid)
        crashed = [m for t in threads for m in markers(t) if m["name"] == "Process crashed"]
        print(f"RESULT pid={pid} killed={int(pid == killed)} threads={','.join(names)} samples={samples} "
              f"steps={steps} own_steps={did} crash_markers={len(crashed)}")
        if any(samples.get(n, 0) == 0 for n in WORK_THREADS):
            failures.append(f"process {pid}: a work thread without samples ({samples})")
        if did is None:
            failures.append(f"process {pid}: no 'work done' line of its own in the output")
        else:
            for n in WORK_THREADS:
                got, done = steps.get(n, 0), did[n]
                if pid != killed and got != done:
                    failures.append(f"process {pid} {n}: {got} Step markers of the {done} steps it did "
                                    "(saved at exit: every one)")
                elif pid == killed and got < done:
                    failures.append(f"killed process {pid} {n}: {got} Step markers, fewer than the {done} "
                                    "steps it had done by its ready file")
        if pid != killed:
            if crashed:
                failures.append(f"process {pid} ended normally but has a 'Process crashed' marker")
            continue
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
