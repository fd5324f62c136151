#!/usr/bin/env python3
"""Checks the merged profile of `strata record -- exec_children.sh flight_program`
(record_child_test.sh).

  exec_check.py PROFILE.json OUTPUT

Every pid left several flight recorder files (sh, sh, then flight_program: two execs); the one
recovered must be the last image's, the flight_program that crashed: four flight_program
processes, each with both work threads' samples and Step markers. The Step markers are checked
against the steps each process says it did (its "work done" line in OUTPUT, the run's stdout),
not against a count assumed from its CPU time: a step takes at least 1 ms of CPU, and a CPU
clock charged while the thread was preempted makes fewer (531 of an assumed 600 beside load,
issue 35). The three that died by SIGSEGV end with "Process crashed"; the one that called
ProfilerStop and then crashed (a clean end, its status unknown to `strata record`) ends with
"Recording ended" and no "Process crashed". The fifth child, which called ProfilerStop and
_exited, left no file (it did not crash: its file is removed, issue 33) and is not in the
profile. Each has at most its steps, at least one per work thread, with samples and markers
both reaching the end of the data (flight_check.tail_failures: by their order, not by
wall-clock distances; what a sampler loop had not published at the crash is lost,
docs/flight-recorder.md). The cleanly ended process must have every one of its steps
(RESULT ... clean_end_missing_steps=0): ProfilerStop moves the threads' staged markers and
ring samples into the file before it seals it (it dropped the last sampler period's, 0-2 of
299, before issue 35's finding).
Prints RESULT lines, FAIL lines; exit 1 on failure.
"""
import json
import sys
from flight_check import markers, own_steps, tail_failures, thread_steps, WORK_THREADS
from record_check import processes


def main():
    profile = json.load(open(sys.argv[1]))
    own = own_steps(sys.argv[2])
    failures = []
    children = {}
    names = []
    for p in processes(profile):
        for t in p["threads"]:
            names.append(t.get("processName", ""))
            if t.get("processName", "").startswith("flight_program"):
                children.setdefault(int(t["pid"]), []).append(t)
    print(f"RESULT processes={sum(1 for _ in processes(profile))} flight_program={len(children)} "
          f"process_names={sorted(set(names))} work_done_lines={len(own)}")
    if len(children) != 4:
        failures.append(f"{len(children)} flight_program processes in the profile (expected 4: an "
                        "earlier image's file recovered instead of the last one's?)")
    ended = crashed_count = 0
    for pid, threads in sorted(children.items()):
        samples = {t["name"]: len(t["samples"]["data"]) for t in threads}
        steps = thread_steps(threads)
        crashed = sum(1 for t in threads for m in markers(t) if m["name"] == "Process crashed")
        clean = sum(1 for t in threads for m in markers(t) if m["name"] == "Recording ended")
        did = own.get(pid)
        print(f"RESULT pid={pid} samples={samples} steps={steps} own_steps={did} crashed={crashed} "
              f"recording_ended={clean}")
        if any(samples.get(n, 0) == 0 for n in WORK_THREADS):
            failures.append(f"process {pid}: a work thread without samples ({samples})")
        if crashed + clean != 1:
            failures.append(f"process {pid}: {crashed} 'Process crashed' and {clean} 'Recording ended' markers")
        crashed_count += crashed
        ended += clean
        if did is None:
            failures.append(f"process {pid}: no 'work done' line of its own in the output")
            continue
        for n in WORK_THREADS:
            got, done = steps.get(n, 0), did[n]
            if got > done:
                failures.append(f"process {pid} {n}: {got} Step markers, more than the {done} steps it did")
            elif got == 0:
                failures.append(f"process {pid} {n}: no Step marker of its {done} steps")
            if clean:
                print(f"RESULT pid={pid} thread={n} clean_end_missing_steps={done - got}")
                if got != done:
                    failures.append(f"process {pid} {n}: a clean end kept {got} of its {done} "
                                    "Step markers (the last sampler period's were dropped)")
        failures += tail_failures(threads, f"process {pid}")
    if crashed_count != 3 or ended != 1:
        failures.append(f"{crashed_count} crashed and {ended} cleanly ended processes (expected 3 and 1)")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
