#!/usr/bin/env python3
"""Checks a profile's native allocations against the truth the program printed.

  alloc_check.py PROFILE.json TRUTH.txt [--allocated-tolerance 0.05] [--retained-tolerance 0.05]
                 [--others-retained-share 0.01]

TRUTH.txt holds the program's lines "truth FUNCTION allocated=N retained=M"
(alloc_accuracy_program.cc). From the "Native allocation" markers of the profile's threads
(as the Firefox Profiler reads them: in table order, an allocation's address retained until a
free of that address), for each function of the truth: the estimated bytes allocated by
stacks that contain it, and the bytes it retains at the end. Checks:
  - each function's estimate is within the tolerance of its truth;
  - a function that retains bytes (truth retained > 0) retains within the tolerance;
  - functions that retain nothing hold at most the given share of the retained truth in all.
Prints one line per function; exit status 1 on any failure.
"""
import argparse
import json
import sys


def function_names(thread):
    """The unqualified function name of each frame of the thread (no namespace, arguments, lib)."""
    strings = thread['stringTable']
    schema = thread['frameTable']['schema']
    names = []
    for frame in thread['frameTable']['data']:
        location = strings[frame[schema['location']]].split(' (in ')[0]
        location = location.replace('(anonymous namespace)::', '')
        names.append(location.split('(')[0].split('::')[-1].strip())
    return names


def stack_functions(thread, names, stack, cache):
    if stack in cache:
        return cache[stack]
    schema = thread['stackTable']['schema']
    rows = thread['stackTable']['data']
    found = set()
    s = stack
    while s is not None:
        row = rows[s]
        found.add(names[row[schema['frame']]])
        s = row[schema['prefix']]
    cache[stack] = found
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('profile')
    parser.add_argument('truth')
    parser.add_argument('--allocated-tolerance', type=float, default=0.05)
    parser.add_argument('--retained-tolerance', type=float, default=0.05)
    parser.add_argument('--others-retained-share', type=float, default=0.01)
    args = parser.parse_args()

    truth = {}
    with open(args.truth) as f:
        for line in f:
            words = line.split()
            if len(words) == 4 and words[0] == 'truth':
                truth[words[1]] = {k: int(v) for k, v in (w.split('=') for w in words[2:])}
    if not truth:
        print('FAIL: no truth lines in', args.truth)
        return 1

    with open(args.profile) as f:
        profile = json.load(f)
    allocated = {name: 0 for name in truth}
    retained = {name: 0 for name in truth}
    records = 0
    without_stack = 0
    frees = 0
    for thread in profile['threads']:
        markers = thread['markers']
        schema = markers['schema']
        names = None
        cache = {}
        live = {}  # address -> (estimate, functions), as the front-end matches them.
        for marker in markers['data']:
            data = marker[schema['data']]
            if not isinstance(data, dict) or data.get('type') != 'Native allocation':
                continue
            records += 1
            if names is None:
                names = function_names(thread)
            size = data['size']
            address = data['memoryAddress']
            if size < 0:
                frees += 1
                live.pop(address, None)
                continue
            try:
                stack = data['stack']['samples']['data'][0][0]
            except (KeyError, IndexError, TypeError):
                stack = None
            if stack is None:
                without_stack += 1
                continue
            functions = stack_functions(thread, names, stack, cache)
            for name in truth:
                if name in functions:
                    allocated[name] += size
            live[address] = (size, functions)
        for size, functions in live.values():
            for name in truth:
                if name in functions:
                    retained[name] += size

    failures = 0
    print(f'{records} native allocation records ({frees} frees, {without_stack} without a stack)')
    if records == 0:
        print('FAIL: no native allocation records')
        return 1
    retained_truth = sum(t['retained'] for t in truth.values())
    others_retained = 0
    for name, t in truth.items():
        error = (allocated[name] - t['allocated']) / t['allocated'] if t['allocated'] else 0
        ok = abs(error) <= args.allocated_tolerance
        line = (f"{'ok  ' if ok else 'FAIL'} {name}: allocated {allocated[name]} estimated, "
                f"{t['allocated']} true ({error:+.2%}, tolerance {args.allocated_tolerance:.0%})")
        failures += not ok
        if t['retained'] > 0:
            r_error = (retained[name] - t['retained']) / t['retained']
            r_ok = abs(r_error) <= args.retained_tolerance
            failures += not r_ok
            line += (f"; {'ok' if r_ok else 'FAIL'} retained {retained[name]} estimated, "
                     f"{t['retained']} true ({r_error:+.2%})")
        else:
            others_retained += retained[name]
            line += f'; retained {retained[name]} estimated, 0 true'
        print(line)
    if retained_truth > 0:
        share = others_retained / retained_truth
        ok = share <= args.others_retained_share
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} functions that leak nothing retain {others_retained} "
              f"bytes, {share:.2%} of the leak (at most {args.others_retained_share:.0%})")
    print('PASS' if failures == 0 else f'FAIL: {failures} failure(s)')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
