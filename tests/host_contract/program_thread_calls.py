#!/usr/bin/env python3
"""What Strata's code on a program's thread can call, read from the built library.

Code that runs on a program's thread (the interposed functions, the sampling-signal handler,
the marker paths, a new thread's registration) must never call anything the program can
interpose or lock: no allocator, no stdio, no program mutex (docs/host-contract.md). This
checks it on the machine code of libstrata_base.so itself, so it holds whatever the
compiler inlined:

  1. Disassemble the library (objdump) into functions and their direct calls and tail
     calls: to other functions of the library, or through the PLT to other libraries.
  2. From the roots (every interposed function the library exports, the signal handlers, the
     marker and registration entry points, and the functions reached only through an
     indirect call on those paths, named in INDIRECT_ROOTS), walk every direct call.
  3. Fail on any reachable call through the PLT that is not in ALLOWED_IMPORTS, and on any
     reachable function of the library's own that allocates (operator new/delete, the
     forwarding to the program's allocator) or is not allowed here (FORBIDDEN_INTERNAL).

Functions on paths that end the process (Fatal, abort messages) are not walked: they
run once, to say why the program is stopped (NOT_WALKED).

Usage: program_thread_calls.py LIBRARY [--list]   (--list prints every reachable function)
Exit status 0 when nothing forbidden is reachable; 1 with each violation and a call path.
"""
import re
import subprocess
import sys

# libc and loader functions that are async-signal-safe (or a single system call with no lock
# the program can hold), allowed from a program's thread.
ALLOWED_IMPORTS = {
    "memcpy", "memmove", "memset", "memcmp", "memchr", "strlen", "strcmp", "strncmp", "strchr",
    "__errno_location", "__stack_chk_fail", "__tls_get_addr",
    "clock_gettime",  # vDSO or a system call; Strata uses a raw one where rdtsc is forbidden.
    "getpid", "gettid", "pthread_self", "pthread_equal",
    "sigemptyset", "sigfillset", "sigaddset", "sigdelset", "sigismember", "sigorset",
    "__libc_current_sigrtmin", "__libc_current_sigrtmax",
    # async-signal-safe by glibc's documentation (2.35+): the loader's lock-free lookup.
    "_dl_find_object",
    # Only on an exception's way out of a wrapper (the program's own exception, thrown
    # through a wrapped call such as a cancellation): unwinding, never on a normal path.
    "_Unwind_Resume",
    # Thread-safe static initialisation: a futex of libstdc++'s own, never a program lock.
    "__cxa_guard_acquire", "__cxa_guard_release", "__cxa_guard_abort",
    # Ends the process on a broken invariant (after the message).
    "abort",
}

# Functions of the library's own that must never run on a program's thread.
FORBIDDEN_INTERNAL = [
    re.compile(r"^_Zn[wa]m"),        # operator new / new[] (forwarded to the program's)
    re.compile(r"^_Zd[la]Pv"),       # operator delete / delete[]
    re.compile(r"GlobalNewForwarding|ProgramOperator"),
]

# Functions reached from the roots only through an indirect call (a virtual function, a
# std::function, a function pointer), which a direct-call walk cannot see.
INDIRECT_ROOTS = [
    # ChunkedBuffer -> ChunkManager (virtual), on a writer's path when a chunk fills.
    r"^_ZN6strata22LocalLimitChunkManager8GetChunkEv$",
    r"^_ZN6strata22LocalLimitChunkManager12ReleaseChunkESt10unique_ptrINS_11BufferChunkESt14default_deleteIS2_EE$",
    # The buffer's chunk-destroyed callback (std::function), called by the manager there.
    # (the lambda, or where an optimised build inlined it, std::function's invoker)
    r"^_ZZN6strata13ChunkedBuffer19AttachManagerLocked.*_clE|"
    r"^_ZNSt17_Function_handler.*ChunkedBuffer19AttachManagerLocked.*_M_invoke",
    # ChunkStorage::Allocate (virtual): the flight recorder's file-backed chunks.
    r"^_ZN6strata13base_internal.*FlightFile8AllocateEm$",
]

# Roots of the library's own, besides the exported interposers.
OWN_ROOTS = [
    r"OnSamplingSignal",                                   # the sampling-signal handler
    r"^_ZN6strata13base_internal\d+(Record\w*Marker|BeginMarker|BeginStagedMarker|"
    r"FlushAndRewindMarkerStaging)",                       # marker paths (base/markers.h)
    # The native allocation records, called by libstrata_alloc.so's hooks inside the
    # program's malloc/free (base/internal/native_allocations.h).
    r"^_ZN6strata13base_internal\d+(RecordNativeAllocation|NoteNativeAllocationSetFull)",
]

# Calls not followed, each for its reason (docs/host-contract.md, "What the check reads").
NOT_WALKED = [
    # Ends the process after saying why (a broken invariant).
    re.compile(r"Fatal"),
    re.compile(r"__assert_fail"),
    # A throw: nothing on these paths throws but operator new, which is itself forbidden; the
    # landing pads that call these run only for the program's own exception passing through.
    re.compile(r"^__cxa_throw$|^__cxa_allocate_exception$|^_ZSt\d+__throw_"),
    # The first use of a function-local static (libstdc++ is linked into the library): every
    # such object on these paths is in static storage (NeverDestroyed) and first used by the
    # library's constructor, before a program thread can get here; later it is one load.
    re.compile(r"^__cxa_guard_(acquire|release|abort)$"),
    # A wrapped function's libc definition, looked up with dlsym on its first call:
    # ResolveWaitFunctions() and the signal interposers' set-up look them all up in the
    # library's constructor, so on a program's thread this is one atomic load.
    re.compile(r"^_ZN6strata14NextDefinitionEPKcS1_$"),
    # A marker name's destructor: the paths here make and destroy only literal names, which
    # own no memory; a dynamic name's string is the program's, made and freed by its code.
    re.compile(r"^_ZN6strata14ProfilerStringD[12]Ev$"),
]

# Calls not followed from one function to another, each for its reason.
EDGES_NOT_FOLLOWED = [
    # The inlined destructor of a literal ProfilerString (made by the marker helpers for the
    # general path): a literal name owns no memory, its std::string member stays empty.
    (re.compile(r"AddTextMarker|AddMarker|Record\w*Marker"),
     re.compile(r"^_ZNSt12__sso_stringD[12]Ev$|^_ZNSt7__cxx1112basic_string.*D[12]Ev$|"
                r"^_ZNSt7__cxx1112basic_string.*_M_disposeEv$")),
]

# Exported interposers that do heavy work on purpose, each for its reason: they are not
# walked from. Every other exported function is a root, so a new interposer is checked
# until it is named here (and in docs/host-contract.md).
HEAVY_BY_DESIGN = {
    # A new thread is registered on itself, before the program's start routine runs: it holds
    # no lock of the program's yet (glibc's own thread start allocates its TLS there too).
    "pthread_create": "registers the new thread (allocates) before the program's code runs",
    "pthread_setname_np": "a renamed thread is matched against the thread filters again",
    # The wrapped calls take the loader's lock and free memory themselves.
    "dlclose": "notes the library change (the library list is read again)",
    "dl_iterate_phdr": "notes the library change",
    # Session control events: the program replaces the sampling signal's handler or installs
    # a seccomp filter; Strata stops sampling (or its session) there, once.
    "sigaction": "a disposition of the sampling signal: bookkeeping, or sampling stops",
    "signal": "as sigaction",
    "bsd_signal": "as sigaction",
    "sysv_signal": "as sigaction",
    "sigset": "as sigaction (System V; glibc's own bypasses the sigaction wrapper)",
    "sigignore": "as sigaction",
    "syscall": "rt_sigaction, seccomp and exit system calls made raw: as sigaction / session stop",
    "prctl": "PR_SET_SECCOMP: the session stops before the filter is installed",
    # The program's request to end: the exit save runs there (after the program's own exit
    # handlers would have run, as it always did); _exit, _Exit and the exec family stay roots.
    "exit": "the exit save (or a wait, bounded, for another thread's)",
}

FUNCTION_HEADER = re.compile(r"^([0-9a-f]+) <(.+)>:$")
BRANCH = re.compile(r"\s(call|jmp|j[a-z]+)\s+[0-9a-f]+ <([^>]+)>")


def parse(library):
    """Returns {function: set of (callee, is_plt)} from objdump's disassembly."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", library], check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    calls = {}
    current = None
    for line in out.splitlines():
        header = FUNCTION_HEADER.match(line)
        if header:
            current = header.group(2)
            calls.setdefault(current, set())
            continue
        if current is None:
            continue
        branch = BRANCH.search(line)
        if not branch:
            continue
        target = branch.group(2)
        if target.endswith("@plt"):
            calls[current].add((target[:-4], True))
            continue
        base = target.split("+", 1)[0]
        if base != current:
            calls[current].add((base, False))
    return calls


def exported_interposers(library):
    out = subprocess.run(["nm", "-D", "--defined-only", library], check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    names = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("T", "W", "i") and not parts[2].startswith("_Z") \
                and not parts[2].startswith("strata_") and parts[2] not in HEAVY_BY_DESIGN:
            names.append(parts[2])
    return names


def demangle(names):
    if not names:
        return []
    out = subprocess.run(["c++filt"], input="\n".join(names), stdout=subprocess.PIPE,
                         universal_newlines=True).stdout
    return out.splitlines()


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    library = argv[1]
    calls = parse(library)
    roots = exported_interposers(library)
    for pattern in OWN_ROOTS + INDIRECT_ROOTS:
        regex = re.compile(pattern)
        found = [f for f in calls if regex.search(f)]
        if not found:
            print("program_thread_calls: no function matches the root pattern %r" % pattern)
            return 1
        roots.extend(found)
    missing = [r for r in roots if r not in calls]
    if missing:
        print("program_thread_calls: roots not found in the disassembly: %s" % missing)
        return 1

    parent = {r: None for r in roots}
    queue = list(roots)
    violations = []
    while queue:
        function = queue.pop()
        if any(p.search(function) for p in NOT_WALKED):
            continue
        if any(p.search(function) for p in FORBIDDEN_INTERNAL):
            violations.append((function, function))
            continue
        for callee, is_plt in sorted(calls.get(function, ())):
            if any(a.search(function) and b.search(callee) for a, b in EDGES_NOT_FOLLOWED):
                continue
            if is_plt:
                if callee not in ALLOWED_IMPORTS and not any(p.search(callee) for p in NOT_WALKED):
                    violations.append((function, callee + "@plt"))
                continue
            if callee not in parent:
                parent[callee] = function
                queue.append(callee)

    if len(argv) > 2 and argv[2] == "--list":
        for name in sorted(demangle(sorted(parent))):
            print("reachable:", name)
    print("program_thread_calls: %d roots, %d functions reachable from a program's thread"
          % (len(roots), len(parent)))
    seen = set()
    for function, callee in violations:
        if (function, callee) in seen:
            continue
        seen.add((function, callee))
        path = []
        f = function
        while f is not None and len(path) < 100:
            path.append(f)
            f = parent.get(f)
        print("FORBIDDEN: %s" % demangle([callee])[0])
        for step in demangle(path):
            print("    from %s" % step[:200])
    if violations:
        print("program_thread_calls: %d forbidden calls" % len(seen))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
