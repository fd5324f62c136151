#!/usr/bin/env python3
"""Compares a profile recovered from a flight recorder file with a reference profile (a
normal save by the same process before it died).

  flight_check.py REFERENCE.json RECOVERED.json --end-name NAME [--end-text TEXT]
                  [--min-ratio 0.95] [--tail-ms 100]

Counts, in each, the samples of the threads GeckoMain and flight-worker taken while they ran
(CPU delta > 0: their number follows the work, not the wall time) and the "Step" markers. Checks, printing "RESULT ..." and one "FAIL: ..." line per failed check (exit 1):
  - recovered samples and Step markers >= min-ratio x the control's;
  - the recovered profile ends with an instant marker NAME (its text containing TEXT);
  - data reaches the end: a Step marker ends, and a work thread has a sample, within
    tail-ms before that end marker.
"""
import argparse
import json
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


def counts(profile):
    samples = steps = 0
    last_step = last_sample = None
    for t in profile["threads"]:
        if t["name"] not in ("GeckoMain", "flight-worker"):
            continue
        schema = t["samples"]["schema"]
        # Samples of the thread running (CPU delta > 0, or unknown), as profile_stats's
        # cpu_samples: samples of a waiting thread depend on the wall time, not on the work.
        delta = schema.get("threadCPUDelta")
        rows = [row for row in t["samples"]["data"]
                if delta is None or len(row) <= delta or row[delta] is None or row[delta] > 0]
        times = [row[schema["time"]] for row in rows]
        samples += len(times)
        if times:
            last_sample = max(last_sample or times[-1], max(times))
        for m in markers(t):
            if m["name"] == "Step":
                steps += 1
                end = m["end"] if m["end"] is not None else m["start"]
                last_step = end if last_step is None else max(last_step, end)
    return samples, steps, last_step, last_sample


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("control")
    parser.add_argument("recovered")
    parser.add_argument("--end-name", required=True)
    parser.add_argument("--end-text", default="")
    parser.add_argument("--min-ratio", type=float, default=0.95)
    parser.add_argument("--tail-ms", type=float, default=100)
    args = parser.parse_args()
    failures = []
    control = load(args.control)
    recovered = load(args.recovered)
    c_samples, c_steps, _, _ = counts(control)
    r_samples, r_steps, last_step, last_sample = counts(recovered)
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
        if last_step is None or last_step < end_time - args.tail_ms:
            failures.append(f"the last Step marker ({last_step}) is more than {args.tail_ms} ms before the end ({end_time})")
        if last_sample is None or last_sample < end_time - args.tail_ms:
            failures.append(f"the last work sample ({last_sample}) is more than {args.tail_ms} ms before the end ({end_time})")
        else:
            print(f"RESULT tail_step_ms={end_time - last_step:.1f} tail_sample_ms={end_time - last_sample:.1f}")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
