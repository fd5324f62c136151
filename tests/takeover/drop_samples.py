#!/usr/bin/env python3
"""Makes the takeover check's failure case on purpose, to show it can fail (takeover_test.sh).

  drop_samples.py samples PROFILE OUT THREAD MARKER N
      Copies PROFILE to OUT without THREAD's signalled samples from the hand-over's opening
      marker to its closing marker MARKER ("taken-over-5" opens with "takeover-5", "detached-5"
      with "detach-5") and the first N after MARKER, as if Strata had lost them: the sample
      after them carries their CPU, as a real gap's would. The cut grows past a bounding
      sample that came together with its outer neighbour (see drop_samples). The gap so made covers the whole
      hand-over call, whatever ran between the call and its markers (see drop_samples).
  drop_samples.py signals LOG OUT CHECK_OUTPUT
      Copies the busy thread's signal log LOG to OUT without the signals taken inside the gaps
      that takeover_check reported ("GAP ... open_cpu_ms=a close_cpu_ms=b"), as if the kernel
      had sent none there.
"""
import json
import re
import sys


OPENING = {"taken-over-": "takeover-", "detached-": "detach-"}


def marker_times(profile, name):
    for thread in profile["threads"]:
        names = thread["stringTable"]
        schema = thread["markers"]["schema"]
        for m in thread["markers"]["data"]:
            if names[m[schema["name"]]] == name:
                t = m[schema["startTime"]]
                return t if t is not None else m[schema["endTime"]]
    return None


def drop_samples(profile_path, out_path, thread_name, marker, count):
    with open(profile_path) as f:
        profile = json.load(f)
    close_time = marker_times(profile, marker)
    prefix = next((p for p in OPENING if marker.startswith(p)), None)
    if close_time is None or prefix is None:
        sys.exit("no marker " + marker)
    opening = OPENING[prefix] + marker[len(prefix):]
    open_time = marker_times(profile, opening)
    if open_time is None:
        sys.exit("no marker " + opening)
    busy = next(t for t in profile["threads"] if t["name"] == thread_name)
    schema = busy["samples"]["schema"]
    time_col, cpu_col = schema["time"], schema["threadCPUDelta"]
    rows = busy["samples"]["data"]
    signalled = [i for i, r in enumerate(rows) if (r[cpu_col] or 0) > 0]
    # takeover_check's window of a hand-over runs, on the busy thread's CPU clock, from its
    # last sample before the call to its first one after the call returned. The program
    # reads the busy thread's CPU clock for the call between its two markers, so a sample
    # taken before the opening marker's time is before the call, and one taken after the
    # closing marker's time is after it. Taking out every signalled sample from the opening
    # marker on, through the closing one and N more, leaves a gap that holds the whole call.
    # (Counting the N from the closing marker alone missed the window when the calling
    # thread was preempted between the call and that marker while the busy thread ran on:
    # the samples of that time closed the window and the cut fell after it; seen under load.)
    first = next((k for k, i in enumerate(signalled) if rows[i][time_col] >= open_time), None)
    after_close = next((k for k, i in enumerate(signalled) if rows[i][time_col] > close_time), None)
    if first is None or after_close is None or after_close + count >= len(signalled):
        sys.exit("not %d signalled samples after %s" % (count + 1, marker))
    end = after_close + count  # signalled[end] is kept and closes the gap.
    # takeover_check refuses to call a gap the kernel's when two of its bounding samples came
    # together (held-back signals: within a quarter interval of CPU). The run itself has such
    # pairs under load; a cut bounded by one would make the second control fail for the run's
    # reason, not the check's. So the cut grows, a sample at a time, past any bounding sample
    # that came within half an interval of CPU of its neighbour outside the cut.
    half_interval_ns = 0.5 * float(profile["meta"]["interval"]) * 1e6
    def together(k):  # signalled[k] came within half an interval of signalled[k - 1].
        return 0 < k < len(signalled) and rows[signalled[k]][cpu_col] < half_interval_ns
    while end + 1 < len(signalled) and together(end + 1):
        end += 1
    while first > 1 and together(first - 1):
        first -= 1
    if end + 1 >= len(signalled):
        sys.exit("not enough signalled samples after %s" % marker)
    doomed = signalled[first:end]
    keep_next = signalled[end]
    carried = sum(rows[i][cpu_col] for i in doomed)
    # Copies in between carry no CPU; they go too, so no sample is left inside the gap.
    gone = set(range(doomed[0], keep_next))
    rows[keep_next][cpu_col] += carried
    busy["samples"]["data"] = [r for i, r in enumerate(rows) if i not in gone]
    with open(out_path, "w") as f:
        json.dump(profile, f)
    print("dropped %d samples (%d signalled, %d of them between %s and %s; %.3f ms of CPU)"
          % (len(gone), len(doomed), after_close - first, opening, marker, carried / 1e6))


def drop_signals(log_path, out_path, check_output_path):
    gaps = []
    with open(check_output_path) as f:
        for line in f:
            m = re.search(r"open_cpu_ms=([\d.]+) close_cpu_ms=([\d.]+)", line)
            if line.startswith("GAP ") and m:
                open_ms, close_ms = map(float, m.groups())
                # Each signal's arrival is noted just after its sample: the opening sample's
                # within a few tenths of a ms of it, the closing one's after the gap.
                gaps.append((open_ms + 0.4, close_ms))
    if not gaps:
        sys.exit("no GAP line in " + check_output_path)
    kept = dropped = 0
    with open(log_path) as f, open(out_path, "w") as out:
        for line in f:
            if line.startswith("#"):  # The trailer: the process's counts, kept.
                out.write(line)
                continue
            cpu_ms = int(line.split()[0]) / 1e6
            if any(lo < cpu_ms < hi for lo, hi in gaps):
                dropped += 1
            else:
                out.write(line)
                kept += 1
    print("dropped %d signal arrivals in %d gaps, kept %d" % (dropped, len(gaps), kept))


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "samples":
        drop_samples(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]))
    elif len(sys.argv) == 5 and sys.argv[1] == "signals":
        drop_signals(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
