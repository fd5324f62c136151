#!/usr/bin/env python3
"""Checks where labels sit among inlined frames (issue 34; label_inline_test.sh).

label_placement_check.py PROFILE.json --tree TREE.txt --collapsed COLLAPSED.txt
                         [--pprof-traces TRACES.txt]

PROFILE is a symbolicated profile of tests/symbols/label_inline; TREE the output of `strata
summary --tree --no-fold --min-percent 0 --width 1000`; COLLAPSED `strata convert --to
collapsed`; TRACES `go tool pprof -traces` of `strata convert --to pprof`. In every stack of
each (samples of the file, paths of the tree, lines of the collapsed stacks, pprof traces):
  - the frame right after Worker is the label "Handle requests" (pushed in Worker itself:
    above the inlined Crunch and std::sin<int>), or the inlined push (AutoLabel's constructor,
    ProfilingStack::Push: a sample taken before the label is on);
  - the frame right after MiddleLevel (inlined into OuterLevel; it pushes "Middle step") is
    "Middle step", and the frame before "Middle step" is MiddleLevel;
and some stacks read Worker;Handle requests;Crunch;std::sin<int> and
OuterLevel;MiddleLevel;Middle step;InnerLevel. Prints one line per source and "label_placement:
..." last; exits 1 when a check fails.
"""
import argparse
import json
import re
import sys

NATIVE_SUFFIX = re.compile(r" \(in [^()]*\)( \(.*\))?$")


def kind(name):
    """The role a frame name plays in the checks, or None."""
    name = name.strip()
    if name.endswith(" (inline)"):
        name = name[: -len(" (inline)")]
    if name == "Handle requests":
        return "label-worker"
    if name == "Middle step":
        return "label-middle"
    if re.search(r"(^|::)Worker(\(|$)", name):
        return "Worker"
    if re.search(r"(^|::)OuterLevel(\(|$)", name):
        return "OuterLevel"
    if re.search(r"(^|::)MiddleLevel(\(|$)", name):
        return "MiddleLevel"
    if re.search(r"(^|::)InnerLevel(\(|$)", name):
        return "InnerLevel"
    if re.search(r"(^|::)Crunch(\(|$)", name):
        return "Crunch"
    if "std::sin" in name:
        return "std::sin"
    if re.match(r"strata::(AutoLabel|ProfilingStack)::", name):
        return "label-code"  # The inlined push or pop itself, before or after the label is on.
    return None


def check_stack(kinds):
    """(violations, reads worker chain, reads middle chain) for one root-first stack."""
    bad = []
    for i, k in enumerate(kinds):
        after = kinds[i + 1] if i + 1 < len(kinds) else "(end)"
        before = kinds[i - 1] if i > 0 else "(root)"
        if k == "Worker" and i + 1 < len(kinds) and after not in ("label-worker", "label-code"):
            bad.append(f"Worker is followed by {after}")
        if k == "MiddleLevel" and i + 1 < len(kinds) and after not in ("label-middle", "label-code"):
            bad.append(f"MiddleLevel is followed by {after}")
        if k == "label-middle" and before != "MiddleLevel":
            bad.append(f"Middle step follows {before}")
        if k == "label-worker" and before != "Worker":
            bad.append(f"Handle requests follows {before}")
    joined = ";".join(str(k) for k in kinds)
    worker = "Worker;label-worker;Crunch;std::sin" in joined
    middle = "OuterLevel;MiddleLevel;label-middle;InnerLevel" in joined
    return bad, worker, middle


class Tally:
    def __init__(self, source):
        self.source = source
        self.stacks = 0
        self.bad = 0
        self.worker = 0
        self.middle = 0
        self.examples = []

    def add(self, names, weight=1):
        kinds = [kind(n) for n in names]
        bad, worker, middle = check_stack(kinds)
        self.stacks += weight
        self.worker += weight if worker else 0
        self.middle += weight if middle else 0
        if bad:
            self.bad += weight
            if len(self.examples) < 3:
                self.examples.append(f"{bad[0]}: {' ; '.join(names)}")

    def ok(self):
        return self.stacks > 0 and self.bad == 0 and self.worker > 0 and self.middle > 0

    def line(self):
        return (f"{self.source}: stacks={self.stacks} misplaced={self.bad} "
                f"worker_label_crunch_sin={self.worker} middle_label_inner={self.middle}")


def profile_stacks(path, tally):
    profile = json.load(open(path))
    threads = list(profile["threads"])
    for process in profile.get("processes", []):
        threads += process["threads"]
    for t in threads:
        strings, ft, st = t["stringTable"], t["frameTable"], t["stackTable"]
        loc, prefix, frame = ft["schema"]["location"], st["schema"]["prefix"], st["schema"]["frame"]
        stack_col = t["samples"]["schema"]["stack"]
        for row in t["samples"]["data"]:
            s = row[stack_col]
            names = []
            while s is not None:
                names.append(NATIVE_SUFFIX.sub("", strings[ft["data"][st["data"][s][frame]][loc]]))
                s = st["data"][s][prefix]
            tally.add(list(reversed(names)))


def tree_paths(path, tally):
    """Every root-to-node path of the tree (weighted once per node line)."""
    path_names = []
    in_tree = False
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("  total    self"):
            in_tree = True
            continue
        if not in_tree or len(line) < 26:
            continue
        text = line[26:]
        m = re.search(r"[`|]- ", text)
        if m is None:
            path_names = [text.strip()]  # A thread's header.
            continue
        depth = m.start() // 2 + 1
        path_names = path_names[:depth] + [text[m.end():].strip()]
        tally.add(list(path_names))


def collapsed_stacks(path, tally):
    for line in open(path):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        tally.add(stack.split(";"), int(count) if count.isdigit() else 1)


def pprof_traces(path, tally):
    names = []
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("-----------+"):
            if names:
                tally.add(list(reversed(names)))
            names = []
            continue
        m = re.match(r"^\s+\S+s\s{3}(.*)$", line)  # "   21.42ms   Crunch": the leaf.
        if m and not names:
            names.append(m.group(1))
        elif names and line.startswith("             "):
            names.append(line.strip())
    if names:
        tally.add(list(reversed(names)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("profile")
    parser.add_argument("--tree", required=True)
    parser.add_argument("--collapsed", required=True)
    parser.add_argument("--pprof-traces")
    args = parser.parse_args()
    tallies = [Tally("file"), Tally("tree"), Tally("collapsed")]
    profile_stacks(args.profile, tallies[0])
    tree_paths(args.tree, tallies[1])
    collapsed_stacks(args.collapsed, tallies[2])
    if args.pprof_traces:
        tallies.append(Tally("pprof"))
        pprof_traces(args.pprof_traces, tallies[3])
    ok = True
    for t in tallies:
        print(t.line())
        for e in t.examples:
            print(f"    {e}")
        ok = ok and t.ok()
    print("label_placement: " + " ".join(
        f"{t.source}_misplaced={t.bad}/{t.stacks}" for t in tallies) + (" ok" if ok else " FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
