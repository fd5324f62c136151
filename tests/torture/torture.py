#!/usr/bin/env python3
"""The torture matrix (issue 33, docs/host-contract.md "The torture matrix").

Runs torture_program with combinations of the host's habits (allocator, process kinds, thread
ends, signal set-ups, descriptor limit, stacks), each under a seccomp set-up and a way of
profiling (preloaded with a feature set, or `strata record`), and compares every profiled run
with the same combination run plain:
  - the same exit status and the same stdout (the program checks itself: children's statuses,
    threads ended as asked, every signal it sent received with its value, descriptors it could
    open, its stacks), no hang (a watchdog);
  - no file left behind but the profiles: no temporary file, no flight-recorder file, nothing
    in the run's TMPDIR;
  - every profile written is complete JSON, and the first one passes the format checker.

  torture.py --program P --strata S --library L --check C --deny D
             [--mode pairwise|random|all] [--seconds N] [--seed N] [--jobs N] [--only SPEC]

pairwise (CI): a fixed set of combinations that covers every pair of values of any two
dimensions (greedy, deterministic). random: random combinations until --seconds have passed
(tools/torture.sh). all: the whole product (hours). --only "alloc=locked,process=fork,...":
one combination (the line every failure prints).
Prints one line per combination and "torture: N combinations, N failed"; exits 1 on a failure.
"""
import argparse
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

# The program's own dimensions (torture_program.cc) and the matrix's.
DIMENSIONS = [
    ("alloc", ["system", "locked"]),
    ("process", ["none", "fork", "_Fork", "sysfork", "clone", "vfork_exec", "posix_spawn",
                 "exec"]),
    ("threads", ["join", "pthread_exit", "cancel", "raw_exit", "detach", "storm"]),
    ("signals", ["none", "rt_handler", "sigwait", "altstack", "altstack_small", "itimer_prof",
                 "sysv"]),
    ("rlimit", ["none", "nofile64"]),
    ("stack", ["default", "small_threads", "deep_main"]),
    # A seccomp filter inherited from the launcher, on perf_event_open.
    ("seccomp", ["none", "eperm", "kill", "trap"]),
    # How the program is profiled.
    ("profiler", ["preload", "preload_precise", "preload_timer", "preload_nowaitstacks",
                  "preload_flight", "record"]),
]
PROGRAM_DIMENSIONS = ["alloc", "process", "threads", "signals", "rlimit", "stack"]
WATCHDOG_SECONDS = 120


def pairwise(dimensions, rng):
    """A list of combinations (dicts) covering every pair of values of any two dimensions."""
    names = [name for name, _ in dimensions]
    values = dict(dimensions)
    uncovered = set()
    for (a, b) in itertools.combinations(range(len(names)), 2):
        for va in values[names[a]]:
            for vb in values[names[b]]:
                uncovered.add((a, va, b, vb))
    combos = []
    while uncovered:
        # Start from the first uncovered pair, then fill each other dimension greedily.
        a, va, b, vb = min(uncovered, key=lambda p: (p[0], p[2], str(p[1]), str(p[3])))
        combo = {names[a]: va, names[b]: vb}
        order = [i for i in range(len(names)) if i not in (a, b)]
        rng.shuffle(order)
        for i in order:
            best, best_gain = None, -1
            for v in values[names[i]]:
                gain = 0
                for j, vj in ((j, combo[names[j]]) for j in range(len(names)) if names[j] in combo):
                    key = (i, v, j, vj) if i < j else (j, vj, i, v)
                    gain += key in uncovered
                if gain > best_gain:
                    best, best_gain = v, gain
            combo[names[i]] = best
        for (i, j) in itertools.combinations(range(len(names)), 2):
            uncovered.discard((i, combo[names[i]], j, combo[names[j]]))
        combos.append(combo)
    return combos


def spec(combo):
    return ",".join("%s=%s" % (name, combo[name]) for name, _ in DIMENSIONS)


def parse_spec(text):
    combo = dict(part.split("=", 1) for part in text.split(","))
    for name, values in DIMENSIONS:
        combo.setdefault(name, values[0])
        if combo[name] not in values:
            raise SystemExit("torture: %s=%s is not one of %s" % (name, combo[name], values))
    return combo


class Runner:
    def __init__(self, args, root):
        self.args = args
        self.root = root
        self.plain_cache = {}
        self.sequence = itertools.count()

    def program_args(self, combo):
        return [self.args.program] + ["--%s=%s" % (d, combo[d]) for d in PROGRAM_DIMENSIONS]

    def seccomp_prefix(self, combo):
        return {"none": [], "eperm": [self.args.deny, "13"], "kill": [self.args.deny, "kill"],
                "trap": [self.args.deny, "trap"]}[combo["seccomp"]]

    def run(self, command, env, directory):
        """Runs command in directory (created), returns (status, stdout, stderr)."""
        os.makedirs(os.path.join(directory, "tmp"))
        full_env = dict(os.environ)
        full_env.pop("LD_PRELOAD", None)
        full_env = {k: v for k, v in full_env.items() if not k.startswith("STRATA_")}
        full_env["TMPDIR"] = os.path.join(directory, "tmp")
        try:
            done = subprocess.run(["timeout", "-s", "KILL", str(WATCHDOG_SECONDS)] + command,
                                  cwd=directory, env=full_env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, universal_newlines=True,
                                  errors="replace")
            return done.returncode, done.stdout, done.stderr
        except OSError as error:
            return -1, "", str(error)

    def plain(self, combo):
        key = tuple(combo[d] for d in PROGRAM_DIMENSIONS) + (combo["seccomp"],)
        if key not in self.plain_cache:
            directory = os.path.join(self.root, "plain-%d" % next(self.sequence))
            self.plain_cache[key] = self.run(self.seccomp_prefix(combo) + self.program_args(combo),
                                             {}, directory)
        return self.plain_cache[key]

    def profiled(self, combo, directory):
        profiler = combo["profiler"]
        program = self.program_args(combo)
        if profiler == "record":
            command = [self.args.strata, "record", "-o", os.path.join(directory, "record.json"),
                       "--"] + program
            return self.seccomp_prefix(combo) + command
        env = ["LD_PRELOAD=" + self.args.library, "STRATA_STARTUP=1",
               "STRATA_STARTUP_BUFFER_MB=8",
               "STRATA_SHUTDOWN=" + os.path.join(directory, "profile-%p.json")]
        if profiler == "preload_precise":
            env.append("STRATA_STARTUP_FEATURES=precise")
        elif profiler == "preload_timer":
            env.append("STRATA_SAMPLING_SOURCE=timer")
        elif profiler == "preload_nowaitstacks":
            env.append("STRATA_STARTUP_FEATURES=-waitstacks")
        elif profiler == "preload_flight":
            os.makedirs(os.path.join(directory, "flight"))
            env.append("STRATA_FLIGHT_RECORDER=" + os.path.join(directory, "flight"))
        return self.seccomp_prefix(combo) + ["env"] + env + program

    def check(self, combo):
        """Returns a list of problems (empty: the combination holds)."""
        plain_status, plain_out, plain_err = self.plain(combo)
        if plain_status != 0:
            return ["plain run: status %d: %s %s" % (plain_status, plain_out.strip(),
                                                     plain_err.strip()[:300])]
        directory = os.path.join(self.root, "run-%d" % next(self.sequence))
        os.makedirs(directory)
        command = self.profiled(combo, directory)
        status, out, err = self.run(command, {}, os.path.join(directory, "cwd"))
        problems = []
        if status == 137:
            problems.append("hung (killed by the %d s watchdog)" % WATCHDOG_SECONDS)
        elif status != plain_status:
            problems.append("status %d, %d plain" % (status, plain_status))
        if out != plain_out:
            problems.append("stdout differs from plain: %r (plain %r)" % (out.strip()[:400],
                                                                         plain_out.strip()))
        leftovers = []
        for sub in ("cwd/tmp", "flight"):
            path = os.path.join(directory, sub)
            if os.path.isdir(path):
                leftovers += [os.path.join(sub, f) for f in os.listdir(path)]
        profiles = []
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if name in ("cwd", "flight"):
                continue
            if name.endswith(".json") and not name.startswith("."):
                profiles.append(path)
            else:
                leftovers.append(name)
        if leftovers:
            problems.append("files left behind: %s" % " ".join(sorted(leftovers)[:10]))
        for path in profiles:
            try:
                with open(path) as f:
                    json.load(f)
            except (OSError, ValueError) as error:
                problems.append("%s is not complete JSON: %s" % (os.path.basename(path), error))
        if not profiles and status == plain_status:
            problems.append("no profile written")
        elif profiles and not problems:
            main_profile = profiles[0]
            checked = subprocess.run([self.args.check, "--max-per-code=3", main_profile],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     universal_newlines=True)
            if checked.returncode != 0:
                problems.append("the format checker rejects %s: %s" % (
                    os.path.basename(main_profile), checked.stdout.strip()[-600:]))
        if problems:
            problems.append("stderr: " + err.strip()[-600:].replace("\n", " | "))
        else:
            shutil.rmtree(directory, ignore_errors=True)
        return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for flag in ("program", "strata", "library", "check", "deny"):
        parser.add_argument("--" + flag, required=True)
    parser.add_argument("--mode", choices=["pairwise", "random", "all"], default="pairwise")
    parser.add_argument("--seconds", type=float, default=1800)
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--only")
    parser.add_argument("--keep", help="keep run directories here (default: a temporary one)")
    args = parser.parse_args()
    for flag in ("program", "strata", "check", "deny"):  # --library is an LD_PRELOAD value.
        setattr(args, flag, os.path.abspath(getattr(args, flag)))

    rng = random.Random(args.seed)
    if args.only:
        combos = [parse_spec(args.only)]
    elif args.mode == "pairwise":
        combos = pairwise(DIMENSIONS, rng)
    elif args.mode == "all":
        combos = [dict(zip([n for n, _ in DIMENSIONS], values))
                  for values in itertools.product(*[v for _, v in DIMENSIONS])]
    else:
        combos = None  # Drawn as we go.

    root = args.keep or tempfile.mkdtemp(prefix="strata-torture.")
    os.makedirs(root, exist_ok=True)
    runner = Runner(args, root)
    print("torture: mode=%s seed=%d runs in %s" % (args.mode, args.seed, root), flush=True)
    start = time.time()
    failed = 0
    count = 0

    def one(combo):
        return combo, runner.check(combo)

    def report(combo, problems):
        nonlocal failed, count
        count += 1
        if problems:
            failed += 1
            print("FAIL: torture %s" % spec(combo), flush=True)
            for problem in problems:
                print("    " + problem, flush=True)
        else:
            print("ok: %s" % spec(combo), flush=True)

    if combos is not None:
        print("torture: %d combinations" % len(combos), flush=True)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for combo, problems in pool.map(one, combos):
                report(combo, problems)
    else:
        while time.time() - start < args.seconds:
            combo = {n: rng.choice(v) for n, v in DIMENSIONS}
            report(*one(combo))
    print("torture: %d combinations in %.0f s, %d failed" % (count, time.time() - start, failed))
    if failed == 0 and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
