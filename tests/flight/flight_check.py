#!/usr/bin/env python3
"""Compares a profile recovered from a flight recorder file with a reference profile (a
normal save by the same process before it died).

  flight_check.py REFERENCE.json RECOVERED.json --end-name NAME [--end-text TEXT]
                  [--min-ratio 0.95]

Counts, in each, the samples of the threads GeckoMain and flight-worker taken while they ran
(CPU delta > 0: their number follows the work, not the wall time) and the "Step" markers. Checks, printing "RESULT ..." and one "FAIL: ..." line per failed check (exit 1):
  - recovered samples and Step markers >= min-ratio x the control's;
  - the recovered profile ends with an instant marker NAME (its text containing TEXT);
  - the samples and the markers both reach the end of the data (tail_failures): checked by
    their order on each work thread, not by wall-clock distances (a descheduled thread on a
    loaded machine can be far from the end in wall time).
"""
import argparse
import json
import os
import re
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def markers(thread):
    schema = thread["markers"]["schema"]
    strings = thread["stringTable"]
    for row in thread["markers"]["data"]:
        yield {
            "name": strings[row[schema["name"]]],
            "start": row[schema["startTime"]],
            "end": row[schema["endTime"]],
            "data": row[schema["data"]] if len(row) > schema["data"] else None,
        }


WORK_THREADS = ("GeckoMain", "flight-worker")

# At most this many of a thread's running samples after its last Step marker ends: the step in
# progress at the death (1 ms of that thread's CPU, ~1 sample at the 1 ms interval), plus one
# whose marker missed the sampler loop that took its samples.
MAX_SAMPLES_AFTER_LAST_STEP = 5

# At most this many of a thread's Step markers after its last running sample: samples move
# into the buffer only at a sampler loop, while a thread moves its marker staging area (16 KiB,
# shared/buffer/staging_area.h) into the buffer itself whenever it is full; so a flush after
# the last loop can put up to one area of markers (a Step entry is >= 31 bytes) past the
# samples. A lost publication of the chunk being written (1 MiB) loses thousands.
MAX_STEPS_AFTER_LAST_SAMPLE = 16384 // 31


# Under ThreadSanitizer (FLIGHT_CHECK_UNDER_TSAN=1, set by the scripts from scenario_lib's
# UNDER_TSAN) a crashing process's main thread runs TSan's deadly-signal report after its last
# step: symbolization (__asan_backtrace_open, __tsan::MemoryAccess...), CPU samples after the
# last Step marker that are TSan's, not the program's (record_child_test, exec: 7 such
# samples, 5 of them in TSan's runtime). Those samples are not counted in the tail check.
UNDER_TSAN = os.environ.get("FLIGHT_CHECK_UNDER_TSAN") == "1"
TSAN_RUNTIME_FRAMES = ("__tsan::", "__sanitizer::", "__asan_backtrace", "__interceptor_")


def in_tsan_runtime(thread, stack):
    """Whether a sample's stack has a frame of TSan's runtime."""
    if stack is None:
        return False
    strings = thread["stringTable"]
    frames = thread["frameTable"]
    location = frames["schema"]["location"]
    prefix = thread["stackTable"]["schema"]["prefix"]
    frame = thread["stackTable"]["schema"]["frame"]
    while stack is not None:
        row = thread["stackTable"]["data"][stack]
        name = strings[frames["data"][row[frame]][location]]
        if any(part in name for part in TSAN_RUNTIME_FRAMES):
            return True
        stack = row[prefix]
    return False


def running_sample_times(thread):
    """Times of the thread's samples taken while it ran (CPU delta > 0, or unknown); under
    TSan, without those in TSan's runtime (above)."""
    schema = thread["samples"]["schema"]
    delta = schema.get("threadCPUDelta")
    return sorted(row[schema["time"]] for row in thread["samples"]["data"]
                  if (delta is None or len(row) <= delta or row[delta] is None or row[delta] > 0)
                  and not (UNDER_TSAN and in_tsan_runtime(thread, row[schema["stack"]])))


def tail_failures(threads, label):
    """The data's tail in the order it was written, per work thread: at most
    MAX_SAMPLES_AFTER_LAST_STEP samples after its last Step marker (markers are not lost before
    the samples' end), at most MAX_STEPS_AFTER_LAST_SAMPLE Step markers after its last sample
    (samples are not lost before the markers' end). Both are counts of the thread's own CPU
    work: they hold however long the thread or the sampler waited for a CPU."""
    failures = []
    for t in threads:
        if t["name"] not in WORK_THREADS:
            continue
        steps = sorted(((m["start"], m["end"] if m["end"] is not None else m["start"])
                        for m in markers(t) if m["name"] == "Step"), key=lambda s: s[1])
        times = running_sample_times(t)
        if not steps or not times:
            failures.append(f"{label} {t['name']}: {len(steps)} Step markers, {len(times)} samples")
            continue
        samples_after = sum(1 for x in times if x > steps[-1][1])
        steps_after = sum(1 for start, _ in steps if start > times[-1])
        print(f"RESULT {label} thread={t['name']} samples_after_last_step={samples_after} "
              f"steps_after_last_sample={steps_after}")
        if samples_after > MAX_SAMPLES_AFTER_LAST_STEP:
            failures.append(f"{label} {t['name']}: {samples_after} samples after the last Step marker "
                            f"(at most {MAX_SAMPLES_AFTER_LAST_STEP})")
        if steps_after > MAX_STEPS_AFTER_LAST_SAMPLE:
            failures.append(f"{label} {t['name']}: {steps_after} Step markers after the last sample "
                            f"(at most {MAX_STEPS_AFTER_LAST_SAMPLE})")
    return failures


def own_steps(output_path):
    """The steps each flight_program process says it did, from its "work done" line:
    {pid: {"GeckoMain": N, "flight-worker": M}} (for --end kill: those done by the ready file)."""
    steps = {}
    with open(output_path, errors="replace") as f:
        for line in f:
            m = re.search(r"flight_program: work done, ending by [\w-]+ \(pid (\d+), steps main=(\d+) "
                          r"worker=(\d+)\)", line)
            if m:
                steps[int(m.group(1))] = {"GeckoMain": int(m.group(2)), "flight-worker": int(m.group(3))}
    return steps


def thread_steps(threads):
    """Step markers per work thread."""
    return {t["name"]: sum(1 for m in markers(t) if m["name"] == "Step")
            for t in threads if t["name"] in WORK_THREADS}


def counts(profile):
    samples = steps = 0
    for t in profile["threads"]:
        if t["name"] not in WORK_THREADS:
            continue
        # Samples of the thread running, as profile_stats's cpu_samples: samples of a waiting
        # thread depend on the wall time, not on the work.
        samples += len(running_sample_times(t))
        steps += sum(1 for m in markers(t) if m["name"] == "Step")
    return samples, steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("control")
    parser.add_argument("recovered")
    parser.add_argument("--end-name", required=True)
    parser.add_argument("--end-text", default="")
    parser.add_argument("--min-ratio", type=float, default=0.95)
    args = parser.parse_args()
    failures = []
    control = load(args.control)
    recovered = load(args.recovered)
    c_samples, c_steps = counts(control)
    r_samples, r_steps = counts(recovered)
    ends = [m for t in recovered["threads"] for m in markers(t) if m["name"] == args.end_name]
    end_time = ends[-1]["start"] if ends else None
    sample_ratio = r_samples / c_samples if c_samples else 0
    step_ratio = r_steps / c_steps if c_steps else 0
    print(f"RESULT reference_samples={c_samples} recovered_samples={r_samples} sample_ratio={sample_ratio:.3f} "
          f"reference_steps={c_steps} recovered_steps={r_steps} step_ratio={step_ratio:.3f}")
    if c_samples < 100 or c_steps < 1000:
        failures.append(f"the reference profile has too little data ({c_samples} samples, {c_steps} steps)")
    if sample_ratio < args.min_ratio:
        failures.append(f"recovered samples {r_samples} < {args.min_ratio} x reference {c_samples}")
    if step_ratio < args.min_ratio:
        failures.append(f"recovered Step markers {r_steps} < {args.min_ratio} x reference {c_steps}")
    if not ends:
        failures.append(f"no '{args.end_name}' marker in the recovered profile")
    else:
        text = (ends[-1]["data"] or {}).get("name", "")
        print(f"RESULT end_marker='{args.end_name}' end_ms={end_time:.1f} text='{text}'")
        if args.end_text and args.end_text not in text:
            failures.append(f"the end marker's text '{text}' does not say '{args.end_text}'")
    failures += tail_failures(recovered["threads"], "recovered")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
