#!/usr/bin/env python3
"""Checks the labels in a profile's allocation stacks (alloc_labels_program.cc).

  alloc_labels_check.py PROFILE.json [--inline]

Every "Native allocation" record with a stack (allocations and frees; the stack is the one the
call tree of the front-end's "Native Allocations" strategy uses), root first, by unqualified
function or label name, must hold its allocating function under the labels its callers
pushed, each label right after the function that pushed it:
  AllocateUnderLabel:   LabeledCaller, Labeled caller, MiddleStep, AllocateUnderLabel
  AllocateInLabelFrame: AllocateInLabelFrame, Own frame
  Recurse (depth 0):    Recurse x4, Depth 2, Recurse x2, AllocateBlocks
  LoadFile:             LoadFile, Load data.bin, AllocateBlocks
  AllocateLeaf:         OuterHolder, Outer label, [InlinedHelper with --inline,] AllocateLeaf
  Unlabeled:            no label
and no other label. Prints the records per case and the misplaced ones; exit status 1 when
a case has no record or any record is misplaced.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from alloc_check import function_names  # noqa: E402  (names without arguments or namespaces)

LABELS = {'Labeled caller', 'Own frame', 'Depth 2', 'Load data.bin', 'Outer label'}


def path_of(thread, names, stack, cache):
    if stack in cache:
        return cache[stack]
    schema = thread['stackTable']['schema']
    rows = thread['stackTable']['data']
    path = []
    s = stack
    while s is not None:
        path.append(names[rows[s][schema['frame']]])
        s = rows[s][schema['prefix']]
    path.reverse()
    cache[stack] = path
    return path


def contains(path, sequence):
    n = len(sequence)
    return any(path[i:i + n] == sequence for i in range(len(path) - n + 1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('profile')
    parser.add_argument('--inline', action='store_true',
                        help='inline frames are expanded (strata record, symbolicate)')
    args = parser.parse_args()
    with open(args.profile) as f:
        profile = json.load(f)

    leaf = ['OuterHolder', 'Outer label'] + (['InlinedHelper'] if args.inline else []) + ['AllocateLeaf']
    cases = [
        ('AllocateUnderLabel', ['LabeledCaller', 'Labeled caller', 'MiddleStep', 'AllocateUnderLabel']),
        ('AllocateInLabelFrame', ['AllocateInLabelFrame', 'Own frame']),
        ('Recurse', ['Recurse'] * 4 + ['Depth 2'] + ['Recurse'] * 2 + ['AllocateBlocks']),
        ('LoadFile', ['LoadFile', 'Load data.bin', 'AllocateBlocks']),
        ('AllocateLeaf', leaf),
        ('Unlabeled', ['Unlabeled', 'AllocateBlocks']),
    ]
    counts = {name: [0, 0] for name, _ in cases}  # [records, misplaced]
    examples = {}
    for thread in profile['threads']:
        markers = thread['markers']
        schema = markers['schema']
        names = None
        cache = {}
        for m in markers['data']:
            data = m[schema['data']]
            if not isinstance(data, dict) or data.get('type') != 'Native allocation':
                continue
            stack = data.get('stack')
            if not stack:
                continue
            samples = stack['samples']
            index = samples['data'][0][samples['schema']['stack']]
            if names is None:
                names = function_names(thread)
            path = path_of(thread, names, index, cache)
            for name, expected in cases:
                if name not in path:
                    continue
                counts[name][0] += 1
                labels = [p for p in path if p in LABELS]
                expected_labels = [p for p in expected if p in LABELS]
                if not contains(path, expected) or labels != expected_labels:
                    counts[name][1] += 1
                    examples.setdefault(name, ';'.join(path))
                break
    failed = False
    for name, _ in cases:
        records, misplaced = counts[name]
        print(f'{name}: {records} records, {misplaced} misplaced')
        if name in examples:
            print(f'  e.g. {examples[name]}')
        if records == 0 or misplaced > 0:
            failed = True
    total = sum(c[0] for c in counts.values())
    bad = sum(c[1] for c in counts.values())
    print(f'alloc_labels: records={total} misplaced={bad}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
