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
  4. A new thread's registration (REGISTRATION_ROOTS: pthread_create's start trampoline,
     which runs on the new thread before the program's start routine) is walked apart, by a
     narrower rule: it may make system calls through libc (perf_event_open's set-up, timers,
     its stack bounds), but it must not allocate: no operator new/delete, no libc function
     that allocates (ALLOCATING_IMPORTS), except the ones named in GLIBC_ALLOCATIONS_KNOWN.

Functions on paths that end the process (Fatal, abort messages) are not walked: they
run once, to say why the program is stopped (NOT_WALKED).

  5. libunwind (the system's libunwind.so.8, which Strata loads for its walks and runs in the
     sampling handler) is stripped: its internal calls cannot be followed. Instead every one
     of its imports must be redirected by Strata (LIBUNWIND_REDIRECTED, the list of
     platform/sampling/libunwind_imports.cc), allowed (ALLOWED_IMPORTS,
     LIBUNWIND_ALLOWED), or named in LIBUNWIND_NOT_REACHED_IN_WALKS with the reason a
     Strata walk never reaches it. A libunwind with a new import fails until it is placed.

Usage: program_thread_calls.py LIBRARY [--list] [--libunwind PATH]
  (--list prints every reachable function)
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
    # pthread_create's wrapper: reads the stack address and size the program set in its own
    # attributes (two fields; no lock, no allocation).
    "pthread_attr_getstack",
}

# libunwind's imports that RedirectLibunwindImports() points at Strata's own functions.
LIBUNWIND_REDIRECTED = {
    "pipe2", "pipe", "read", "close", "syscall", "write", "open", "open64", "msync", "mmap",
    "mmap64", "munmap", "mincore", "dl_iterate_phdr", "pthread_mutex_lock",
    "pthread_mutex_unlock", "sigprocmask",
}
# Pure functions (no lock, no allocation, nothing a program defines in practice).
LIBUNWIND_ALLOWED = {
    "strcpy", "strncpy", "stpcpy", "strrchr", "getpagesize", "sigfillset",
}
# Imports a Strata walk never reaches, each with why.
LIBUNWIND_NOT_REACHED_IN_WALKS = {
    # Only after a successful open() of an object file (.debug_frame, MiniDebugInfo): during
    # a walk open() is refused (EACCES), so the file is never read, nothing allocated for it.
    "malloc": "after open() of an object file, refused during walks",
    "free": "after open() of an object file, refused during walks",
    "fstat": "after open() of an object file, refused during walks",
    "stat": "a .debug_frame file's look-up, after open() of the object, refused during walks",
    "lzma_index_buffer_decode": "MiniDebugInfo, after open(), refused during walks",
    "lzma_index_end": "MiniDebugInfo, after open(), refused during walks",
    "lzma_index_size": "MiniDebugInfo, after open(), refused during walks",
    "lzma_index_uncompressed_size": "MiniDebugInfo, after open(), refused during walks",
    "lzma_stream_buffer_decode": "MiniDebugInfo, after open(), refused during walks",
    "lzma_stream_footer_decode": "MiniDebugInfo, after open(), refused during walks",
    "strerror": "debug messages (UNW_DEBUG), and after a failed open() outside walks",
    # libunwind's one-time set-up (tdep_init, its key and mutexes), made by WarmUpLibunwind()
    # when the session starts, on Strata's thread, before any sample.
    "pthread_once": "one-time set-up, at the warm-up",
    "pthread_key_create": "one-time set-up, at the warm-up",
    "pthread_setspecific": "the per-thread cache (UNW_CACHE_PER_THREAD), a policy Strata never sets",
    "pthread_mutex_init": "one-time set-up, at the warm-up",
    "sysconf": "the memory pools' set-up (page size), at the warm-up",
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
    r"^_ZN6strata13base_internal\d+(Record\w*Marker|BeginMarker|BeginStaged\w*Marker|"
    r"FlushAndRewindMarkerStaging)",                       # marker paths (base/markers.h)
    # The native allocation records, called by libstrata_alloc.so's hooks inside the
    # program's malloc/free (base/internal/allocations/native_allocations.h).
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
    # (also the "Thread not sampled" marker's literal name, made once when the sampling
    # signal's budget refuses a new thread its timer)
    (re.compile(r"AddTextMarker|AddMarker|Record\w*Marker|SigpendingBudgetAllowsTimerFor"),
     re.compile(r"^_ZNSt12__sso_stringD[12]Ev$|^_ZNSt7__cxx1112basic_string.*D[12]Ev$|"
                r"^_ZNSt7__cxx1112basic_string.*_M_disposeEv$")),
]

# A new thread's registration: pthread_create's start trampoline (called by glibc through a
# function pointer), on the new thread before the program's start routine; and its
# unregistration, the thread-exit key's destructor (called by glibc through a function
# pointer), after the routine returned. Walked with the registration rule (module docstring,
# step 4).
REGISTRATION_ROOTS = [
    r"^_ZN6strata13base_internal12_GLOBAL__N_116ThreadTrampolineEPv$",
    r"^_ZN6strata13base_internal22OnRegisteredThreadExitEPv$",
]

# libc functions that allocate (through the program's malloc, which glibc calls through its
# PLT, so a program's own malloc is the one called) or may: forbidden on the registration path.
ALLOCATING_IMPORTS = {
    "malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc", "memalign",
    "valloc", "pvalloc", "strdup", "strndup", "asprintf", "vasprintf", "open_memstream",
    "fopen", "fopen64", "fdopen", "freopen", "fclose", "fread", "fgets", "fscanf",
    "__isoc99_fscanf", "getline", "getdelim", "opendir", "fdopendir", "closedir", "readdir",
    "scandir", "dlopen", "dlmopen", "dlclose", "dlsym", "dlvsym", "dlerror", "dlinfo",
    "dladdr", "dladdr1", "pthread_getattr_np", "pthread_attr_destroy", "__cxa_atexit",
    "atexit", "strerror", "strerror_l", "setlocale", "newlocale", "tolower_l",
    "pthread_key_create", "pthread_setspecific", "pthread_getaffinity_np", "qsort",
}

# Allocating libc functions the registration still calls, each with its reason. The test
# prints them: the list is to shrink, never to grow without a reason here and in
# docs/host-contract.md ("Known gaps").
GLIBC_ALLOCATIONS_KNOWN = {
    # (The new thread's stack bounds came from glibc's pthread_getattr_np, which reallocates a
    # CPU-affinity set through the program's realloc: now read from /proc/self/maps with raw
    # system calls, stack_bounds.h. pthread_getattr_np and pthread_attr_destroy are forbidden.)
    # The thread-exit key's value: glibc allocates a second-level block only for keys past
    # the first 32; Strata's key is created by the library's constructor, among the first.
    "pthread_setspecific": "the thread-exit key (one of the first 32: no allocation)",
    # Once per process, by the main thread's registration in the library's constructor.
    "pthread_key_create": "the thread-exit key, made once by the constructor's registration",
}

# Calls the registration walk does not follow, each for its reason.
REGISTRATION_NOT_WALKED = [
    # libc's mutex functions for the liveness mutex, looked up (dlopen, dlsym) by the first
    # registration: the main thread's, in the library's constructor. Later a load.
    re.compile(r"ResolveLibcMutexFunctions"),
    # libunwind's private load (dlopen...): made by the session's start (StartLocked) before
    # any thread can be registered into it; a registration warms it only once that load is
    # done (g_libunwind_ready, WarmUpLoadedLibunwindOnThisThread), so there the load is a
    # function-local static already set.
    re.compile(r"^_ZN6strata13LoadLibunwindEv$"),
]

# Edges the registration walk does not follow, each for its reason. (None today: thread names
# are Strata's own (base/internal/registry/thread_name.h), so a new thread's naming, the registry's
# list growing and a thread's end pruning ended threads' entries free nothing of the
# program's; before, std::string names needed three exceptions here, one of them a real
# operator delete of a long given name.)
REGISTRATION_EDGES_NOT_FOLLOWED = []

# Exported interposers that do heavy work on purpose, each for its reason: they are not
# walked from. Every other exported function is a root, so a new interposer is checked
# until it is named here (and in docs/host-contract.md).
HEAVY_BY_DESIGN = {
    "pthread_setname_np": "a renamed thread is matched against the thread filters again",
    # The wrapped calls take the loader's lock and free memory themselves.
    "dlclose": "notes the library change (the library list is read again)",
    "dl_iterate_phdr": "notes the library change",
    # Session control events: the program replaces the sampling signal's handler or installs
    # a seccomp filter; Strata stops sampling (or its session) there, once.
    "sigaction": "a disposition of the sampling signal: bookkeeping, or sampling stops; "
                 "the sampling signal added to a small-alternate-stack handler's sa_mask",
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


# A ThreadSanitizer build of the library (--config=tsan; docs/reliability.md, TSan) is
# checked too, with what TSan itself puts there allowed, and nothing else:
#   - its instrumentation: every function calls TSan's runtime (__tsan_func_entry, the
#     __tsan_read/write and atomic hooks), TSan's own code, never the program's;
#   - the TSan-only routes of Strata's code, each by the function that takes it: Strata's
#     pages mapped through TSan's mmap/munmap interceptors (which reset the shadow of reused
#     pages, platform/page_allocation.cc), glibc's clone looked up by libc's handle
#     (platform/private_fd.cc) and whether our pthread_create comes before TSan's
#     (base/internal/process/preload.cc), each looked up once (dlopen, dlsym, dladdr).
# A plain build has none of these imports; they are not allowed there.
TSAN_RUNTIME_IMPORT = re.compile(r"^__tsan_")
TSAN_ONLY_EDGES = [
    (re.compile(r"AllocatePages|FreePages"), re.compile(r"^(mmap|munmap)$")),
    (re.compile(r"MoveDescriptorAboveSoftLimit|LibcClone"), re.compile(r"^(dlopen|dlsym)$")),
    (re.compile(r"CanWrapThreadStart"), re.compile(r"^(dlsym|dladdr)$")),
]


def is_tsan_build(calls):
    return any(is_plt and TSAN_RUNTIME_IMPORT.search(callee)
               for callees in calls.values() for callee, is_plt in callees)


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


def walk(calls, roots, not_walked, edges_not_followed, import_forbidden):
    """Walks every direct call from `roots`. Returns (parent map, violations)."""
    parent = {r: None for r in roots}
    queue = list(roots)
    violations = []
    while queue:
        function = queue.pop()
        if any(p.search(function) for p in not_walked):
            continue
        if any(p.search(function) for p in FORBIDDEN_INTERNAL):
            violations.append((function, function))
            continue
        for callee, is_plt in sorted(calls.get(function, ())):
            if any(a.search(function) and b.search(callee) for a, b in edges_not_followed):
                continue
            if is_plt:
                if import_forbidden(callee) and not any(p.search(callee) for p in not_walked):
                    violations.append((function, callee + "@plt"))
                continue
            if callee not in parent:
                parent[callee] = function
                queue.append(callee)
    return parent, violations


def report(violations, parent):
    """Prints each violation with its call path; returns how many distinct ones."""
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
    return len(seen)


def find_roots(calls, patterns):
    found_all = []
    for pattern in patterns:
        regex = re.compile(pattern)
        found = [f for f in calls if regex.search(f)]
        if not found:
            print("program_thread_calls: no function matches the root pattern %r" % pattern)
            return None
        found_all.extend(found)
    return found_all


def check_libunwind(path):
    """Every import of libunwind placed (rule 5); returns how many are not."""
    out = subprocess.run(["nm", "-D", "--undefined-only", path], check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    imports = sorted({line.split()[-1].split("@")[0] for line in out.splitlines() if line.split()})
    unplaced = [name for name in imports
                if name not in LIBUNWIND_REDIRECTED and name not in ALLOWED_IMPORTS
                and name not in LIBUNWIND_ALLOWED and name not in LIBUNWIND_NOT_REACHED_IN_WALKS]
    redirected = [name for name in imports if name in LIBUNWIND_REDIRECTED]
    print("program_thread_calls: %s: %d imports, %d redirected (%s), %d not reached in walks"
          % (path, len(imports), len(redirected), " ".join(redirected),
             len([n for n in imports if n in LIBUNWIND_NOT_REACHED_IN_WALKS])))
    for name in unplaced:
        print("FORBIDDEN: libunwind imports %s: neither redirected, allowed, nor known to be "
              "out of a walk's reach" % name)
    return len(unplaced)


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    library = argv[1]
    libunwind_unplaced = 0
    if "--libunwind" in argv:
        index = argv.index("--libunwind")
        libunwind_unplaced = check_libunwind(argv[index + 1])
        del argv[index:index + 2]
    calls = parse(library)
    roots = exported_interposers(library)
    own_roots = find_roots(calls, OWN_ROOTS + INDIRECT_ROOTS)
    registration_roots = find_roots(calls, REGISTRATION_ROOTS)
    if own_roots is None or registration_roots is None:
        return 1
    roots.extend(own_roots)
    missing = [r for r in roots if r not in calls]
    if missing:
        print("program_thread_calls: roots not found in the disassembly: %s" % missing)
        return 1

    tsan = is_tsan_build(calls)
    edges_not_followed = EDGES_NOT_FOLLOWED + (TSAN_ONLY_EDGES if tsan else [])
    if tsan:
        print("program_thread_calls: a ThreadSanitizer build: TSan's runtime calls (__tsan_*) "
              "and the TSan-only routes (TSAN_ONLY_EDGES) are allowed")

    def not_allowed(callee):
        return callee not in ALLOWED_IMPORTS and not (tsan and TSAN_RUNTIME_IMPORT.search(callee))

    parent, violations = walk(calls, roots, NOT_WALKED, edges_not_followed, not_allowed)
    registration_parent, registration_violations = walk(
        calls, registration_roots, NOT_WALKED + REGISTRATION_NOT_WALKED,
        edges_not_followed + REGISTRATION_EDGES_NOT_FOLLOWED,
        lambda callee: callee in ALLOCATING_IMPORTS and callee not in GLIBC_ALLOCATIONS_KNOWN)
    known = sorted({callee for f in registration_parent
                    for callee, is_plt in calls.get(f, ()) if is_plt and
                    callee in GLIBC_ALLOCATIONS_KNOWN})

    if len(argv) > 2 and argv[2] == "--list":
        for name in sorted(demangle(sorted(parent))):
            print("reachable:", name)
        for name in sorted(demangle(sorted(registration_parent))):
            print("registration:", name)
    print("program_thread_calls: %d roots, %d functions reachable from a program's thread"
          % (len(roots), len(parent)))
    print("program_thread_calls: a new thread's registration reaches %d functions; known "
          "allocating glibc calls there: %s" % (len(registration_parent), ", ".join(known)))
    count = report(violations, parent)
    registration_count = report(registration_violations, registration_parent)
    if count:
        print("program_thread_calls: %d forbidden calls" % count)
    if registration_count:
        print("program_thread_calls: %d allocating calls on a new thread's registration"
              % registration_count)
    return 1 if count or registration_count or libunwind_unplaced else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
