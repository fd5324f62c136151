#!/usr/bin/env python3
"""Compares a profile's native frames with llvm-symbolizer --inlining (issue 34).

  inline_chains_check.py PROFILE.json [--require-module NAME=PERCENT ...] [--require-all=PERCENT]

For every distinct native address of every thread's stacks, the chain of frames the profile
gives it (its inline levels, caller to callee) must equal what llvm-symbolizer gives for the
same file and address (the leaf at its pc, a caller at its return address minus one), function
names compared after Strata's " (in LIB) (FILE:LINE)" suffix is taken off (the outermost
name up to its alias: `__GI_`, leading underscores and a C function's GCC clone suffix;
the two demanglers' styles made one, below). PLT stubs are compared with objdump's
`symbol@plt` labels, which llvm-symbolizer does not give. Prints the share
equal per module and overall, and up to 10 differences; exits 1 when a module named by
--require-module is below its percentage (or absent).
"""
import functools
import json
import re
import subprocess
import sys
from collections import defaultdict

SUFFIX = re.compile(r" \(in [^()]*\)( \(.*\))?$")


def strip(location):
    return SUFFIX.sub("", location)


def threads_of(profile):
    for t in profile.get("threads", []):
        yield profile, t
    for child in profile.get("processes", []):
        yield from threads_of(child)


def chains(profile, thread):
    """{(lib path, query address): [names caller to callee]} for the thread's native frames."""
    strings = thread["stringTable"]
    frames = thread["frameTable"]
    fs = frames["schema"]
    stacks = thread["stackTable"]
    ss = stacks["schema"]
    libs = profile.get("libs", [])
    out = {}
    # Each stack row: its frame and prefix. Walk every stack (leaf rows are enough, but every
    # row is a prefix of some stack: walking all of them visits every address).
    stack_rows = stacks["data"]
    leaf_rows = set(range(len(stack_rows))) - {r[ss["prefix"]] for r in stack_rows
                                               if r[ss["prefix"]] is not None}
    for leaf in leaf_rows:
        path = []
        s = leaf
        while s is not None:
            path.append(stack_rows[s][ss["frame"]])
            s = stack_rows[s][ss["prefix"]]
        path.reverse()  # Root to leaf.
        groups = []  # [(lib, address, [names])], root to leaf, native frames only.
        for f in path:
            row = frames["data"][f]
            # Rows may stop before the last columns (a label's or JS frame's): those are null.
            cell = lambda column: row[fs[column]] if column in fs and fs[column] < len(row) else None
            lib, address, depth = cell("lib"), cell("address"), cell("inlineDepth")
            if lib is None or address is None or address < 0:
                continue
            name = strip(strings[row[fs["location"]]])
            if depth and groups and groups[-1][0] == lib and groups[-1][1] == address:
                groups[-1][2].append(name)
            else:
                groups.append((lib, address, [name]))
        for i, (lib, address, names) in enumerate(groups):
            leaf_frame = i == len(groups) - 1
            query = address if leaf_frame else address - 1
            key = (libs[lib]["debugPath"] or libs[lib]["path"], query)
            out.setdefault(key, names)
    return out


def plt_stubs(path):
    """[(start, end, "symbol@plt")] from objdump's labels of the file's PLT sections."""
    done = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-j", ".plt", "-j", ".plt.sec",
                           "-j", ".plt.got", path], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, universal_newlines=True)
    labels = []
    for line in done.stdout.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.+)>:$", line)
        if m:
            labels.append((int(m.group(1), 16), m.group(2)))
    stubs = []
    for i, (start, name) in enumerate(labels):
        end = labels[i + 1][0] if i + 1 < len(labels) else start + 16
        stubs.append((start, min(end, start + 16), name))
    return stubs


def alias_key(name):
    """One name for the aliases of one address (docs/symbols.md: Strata keeps the public one,
    llvm-symbolizer the first it finds, e.g. __GI___pthread_mutex_unlock_usercnt)."""
    name = demangled(name)
    if name.startswith("__GI_"):
        name = name[len("__GI_"):]
    # A C function's GCC clone (glibc's "tcache_init.part.0"): the symbol table's name, where
    # llvm-symbolizer gives DWARF's ("tcache_init"). The same function.
    name = C_CLONE.sub(r"\1", name)
    return canonical(name.lstrip("_"))


C_CLONE = re.compile(r"^([A-Za-z_]\w*?)(?:\.(?:part|constprop|isra|cold|lto_priv)(?:\.\d+)?)+$")


def symbol_addresses(path):
    """{demangled name: {addresses}} of the file's defined symbols (.symtab and .dynsym)."""
    table = defaultdict(set)
    for extra in ([], ["-D"]):
        done = subprocess.run(["nm", "-C", "--defined-only"] + extra + [path],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              universal_newlines=True)
        for line in done.stdout.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3:
                table[parts[2].split("@")[0]].add(int(parts[0], 16))
    return table


# The two demanglers' differences of style, same symbols:
#   - GNU's (Strata's, c++filt's, gdb's) keeps a space between an operator made of '<' or '>'
#     and the template arguments that follow it ("operator< <long, ...>"), LLVM's
#     (llvm-symbolizer's) does not ("operator<<long, ...>"): compared without that space;
#   - a lambda is "{lambda(ARGS)#N}" in GNU's and "'lambda'(ARGS)" (N = 1), "'lambda0'(ARGS)"
#     (N = 2), "'lambda1'(ARGS)" (N = 3)... in LLVM's: LLVM's written as GNU's.
OPERATOR_THEN_TEMPLATE = re.compile(r"(operator[^\s\w(]+) <")
LLVM_LAMBDA = re.compile(r"'lambda(\d*)'\(")


def gnu_lambdas(name):
    out, at = [], 0
    for match in LLVM_LAMBDA.finditer(name):
        if match.start() < at:
            continue
        depth, end = 1, match.end()
        while end < len(name) and depth:  # The argument list, parentheses nested.
            depth += {"(": 1, ")": -1}.get(name[end], 0)
            end += 1
        number = int(match.group(1)) + 2 if match.group(1) else 1
        out.append(name[at:match.start()])
        out.append("{lambda(" + name[match.end():end - 1] + ")#%d}" % number)
        at = end
    out.append(name[at:])
    return "".join(out)


#   - LLVM 14's demangler gives up on some names GNU's reads (a template argument that is an
#     expression naming a member: "srNS_13__is_durationIT_EE5valueE" in std::chrono's
#     duration_cast), and llvm-symbolizer then prints the mangled name: demangled with
#     c++filt (GNU's) to compare.
@functools.lru_cache(maxsize=None)
def demangled(name):
    if not name.startswith("_Z"):
        return name
    try:
        out = subprocess.run(["c++filt", name], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return name
    return out.stdout.strip() or name


#   - a GCC clone's suffix (an optimised build's ".constprop.0", ".isra.0", ".part.0", ".cold")
#     is " [clone .constprop.0] [clone .isra.0]" in GNU's and " (.constprop.0.isra.0)" in
#     LLVM's: LLVM's written as GNU's.
LLVM_CLONES = re.compile(r" \(((?:\.[A-Za-z_]\w*?(?:\.\d+)?)+)\)$")
CLONE_PART = re.compile(r"\.[A-Za-z_][A-Za-z_]*(?:\.\d+)?")


def gnu_clones(name):
    match = LLVM_CLONES.search(name)
    if not match:
        return name
    parts = CLONE_PART.findall(match.group(1))
    return name[:match.start()] + "".join(" [clone %s]" % p for p in parts)


def canonical(name):
    return OPERATOR_THEN_TEMPLATE.sub(r"\1<", gnu_clones(gnu_lambdas(demangled(name))))


# The PLT's header (PLT0: the lazy binder's push and jump, before the first stub) has no
# symbol. llvm-symbolizer names it from the next stub with a negative offset
# ("name@plt-0x10"); Strata leaves it as module!0xADDRESS. Neither is a function's name:
# the same answer.
PLT_HEADER = re.compile(r"@plt-0x[0-9a-f]+$")


def same(mine, other, symbols):
    if (len(mine) == 1 and len(other) == 1 and PLT_HEADER.search(other[0]) and
            "!0x" in mine[0]):
        return True
    if len(mine) != len(other) or not mine:
        return False
    # The outermost frame comes from the symbol table, where one address may have several
    # names (aliases, identical code folded): any of them is the same function. Inlined
    # frames come from DWARF and must be equal (up to the demanglers' style, above).
    if [canonical(n) for n in mine[1:]] != [canonical(n) for n in other[1:]]:
        return False
    if alias_key(mine[0]) == alias_key(other[0]):
        return True
    return bool(symbols.get(mine[0], set()) & symbols.get(other[0], set()))


def symbolize(path, addresses):
    """{address: [names caller to callee]} from llvm-symbolizer."""
    text = "\n".join("0x%x" % a for a in addresses) + "\n"
    done = subprocess.run(["llvm-symbolizer", "--inlining", "--demangle", "--functions=linkage",
                           "--obj=" + path], input=text, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, universal_newlines=True)
    blocks = done.stdout.strip("\n").split("\n\n")
    result = {}
    for address, block in zip(addresses, blocks):
        lines = block.split("\n")
        names = [lines[i] for i in range(0, len(lines) - 1, 2)]
        result[address] = list(reversed(names))
    return result


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    profile = json.load(open(argv[1]))
    required = {}
    args = argv[2:]
    while args:
        if args[0].startswith("--require-all="):
            required["*"] = float(args[0].split("=", 1)[1])
            args = args[1:]
        elif args[0] == "--require-module" and len(args) > 1:
            name, percent = args[1].split("=")
            required[name] = float(percent)
            args = args[2:]
        else:
            print("unknown argument %s" % args[0])
            return 2
    ours = {}
    for p, t in threads_of(profile):
        ours.update(chains(p, t))
    by_path = defaultdict(list)
    for (path, address) in ours:
        by_path[path].append(address)
    equal = defaultdict(int)
    total = defaultdict(int)
    differences = []
    for path, addresses in sorted(by_path.items()):
        addresses.sort()
        theirs = symbolize(path, addresses)
        for start, end, name in plt_stubs(path):
            for address in addresses:
                if start <= address < end:
                    theirs[address] = [name]  # llvm-symbolizer names no PLT stub.
        module = path.rsplit("/", 1)[-1]
        symbols = None
        for address in addresses:
            mine = ours[(path, address)]
            other = theirs.get(address, [])
            total[module] += 1
            if other == ["??"] or not other:
                equal[module] += 1 if mine else 0  # Nothing to compare with.
                continue
            if symbols is None and mine != other:
                symbols = symbol_addresses(path)
            if same(mine, other, symbols or {}):
                equal[module] += 1
            elif len(differences) < 10:
                differences.append("%s+0x%x: strata %s | llvm-symbolizer %s" % (
                    module, address, " > ".join(mine), " > ".join(other)))
    status = 0
    for module in sorted(total):
        share = 100.0 * equal[module] / total[module]
        print("inline_chains: %s %d of %d addresses equal (%.1f %%)" % (
            module, equal[module], total[module], share))
    for module, percent in required.items():
        if module == "*":
            share = 100.0 * sum(equal.values()) / max(1, sum(total.values()))
            if share < percent:
                print("inline_chains: FAIL all modules below %.1f %%" % percent)
                status = 1
            continue
        if module not in total:
            print("inline_chains: FAIL no address in %s" % module)
            status = 1
        elif 100.0 * equal[module] / total[module] < percent:
            print("inline_chains: FAIL %s below %.1f %%" % (module, percent))
            status = 1
    for d in differences:
        print("  differs: " + d)
    all_equal = sum(equal.values())
    all_total = sum(total.values())
    print("inline_chains: all modules %d of %d addresses equal (%.1f %%)" % (
        all_equal, all_total, 100.0 * all_equal / max(1, all_total)))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
