// libunwind never touches a descriptor of the program: its imports that open, read, write or
// close descriptors are redirected, in libunwind's own GOT, to functions of this file.
//
// Why: libunwind 1.6.2 (Debian libunwind8) checks memory with a pipe. At its first
// initialisation (tdep_init_mem_validate) it opens the pipe with pipe2() in the program's
// descriptor table, and in its validating mode (after a DWARF step failed: Gstep.c, Gtrace.c)
// it checks each page it is about to read with read(pipe[0], &byte, 1) followed by
// syscall(SYS_write, pipe[1], address, 1) (EFAULT: not readable); when that read fails with
// anything but EAGAIN it close()s both numbers and opens a new pipe. A program that closed
// those numbers (close_range(3, ~0U, 0) in a daemon) and reopened its own files on them lost
// input bytes, got stack bytes appended to its output, or had its descriptors closed under
// it (issue 16). read/write are also cancellation points: a thread cancelled while it was
// sampled was cancelled inside the signal handler. And to unwind an object without
// .eh_frame_hdr, libunwind open()s files (the object, /proc/self/maps), in a signal handler.
//
// What: RedirectLibunwindImports() walks libunwind's dynamic section (DT_JMPREL and DT_RELA
// relocations of type R_X86_64_JUMP_SLOT / R_X86_64_GLOB_DAT, names from DT_SYMTAB and
// DT_STRTAB) and overwrites the GOT slots of these undefined symbols (RELRO pages are made
// writable for the store and read-only again):
//   pipe2, pipe   always answer two impossible descriptor numbers (negative, not -1, so
//                 never valid and never a number the kernel can hand out); no system call.
//   read          on those numbers, or from any descriptor while a Strata walk runs on the
//                 calling thread: -1 with errno EAGAIN, no system call (libunwind keeps its
//                 pipe). Otherwise libc's read().
//   close         on those numbers: 0, no system call. Any other number while a Strata walk
//                 runs: -1 with errno EBADF, nothing closed. Otherwise libc's close().
//   syscall       SYS_write on those numbers, or on any number while a Strata walk runs:
//                 a readability check of the address (below), nothing written. Every other
//                 call: libc's syscall().
//   write         the same check on those numbers; while a Strata walk runs, discarded
//                 (libunwind writes only debug messages with it). Otherwise libc's write().
//   msync         always the raw system call (glibc's msync() is a cancellation point;
//                 libunwind checks mappings with it where mincore() did not work).
//   mmap, munmap, mincore  always the raw system calls (libunwind's memory pools and its
//                 validation): never a program's (a tracer's, a sanitizer's) definition.
//   open          while a Strata walk runs: -1 with errno EACCES (no file is opened by a
//                 walk; an object without .eh_frame_hdr is then not unwound through its
//                 .debug_frame). Otherwise libc's open().
//   dl_iterate_phdr  while a lookup pc is set (SetLibunwindLookupPc): answered for the
//                 object of that pc, without the loader's list lock
//                 (ServeDlIteratePhdrDuringWalk), with a checked copy of what the lookup
//                 reads (unwind_table_copy.h: synthetic program headers and .eh_frame_hdr,
//                 the FDE and its CIE re-encoded, the personality pointer resolved), never
//                 the object's own bytes; when a byte is unreadable (or the tables are not
//                 of the kind copied), no object (the walk ends there, counted:
//                 UnwindLookupsRefusedAsUnreadable). Otherwise libc's (or the preload tier's
//                 wrapper, where that is loaded).
//   pthread_mutex_lock, pthread_mutex_unlock  glibc's own (looked up in libc.so.6 itself):
//                 never the program's definition, nor Strata's wait wrapper (libunwind's lock
//                 is its own; it takes it at every step, in the sampling handler). Left to
//                 the global scope if libc's are not found.
//   sigprocmask   the raw rt_sigprocmask system call (libunwind blocks every signal around
//                 its lock): never a program's definition. None at all while the caller
//                 has declared every signal blocked (ScopedEverySignalBlocked, below).
// The readability check asks the kernel to read the address, never dereferencing it: with
// rt_sigprocmask(invalid how, address, NULL, 8), which copies the 8 aligned bytes first
// (EFAULT: unreadable) and then refuses `how` (EINVAL), changing nothing (~0.15 us; a pipe
// read + write took ~0.7 us, process_vm_readv ~1.2 us). At start-up the probe is tried on a
// readable and a PROT_NONE page; if it does not tell them apart (another kernel, a seccomp
// filter), process_vm_readv() of one byte of the process's own memory is used instead, and
// if the kernel refuses that too (ENOSYS, EPERM under seccomp) the address counts as
// unreadable: a validating walk then stops earlier, nothing else changes. Both are plain
// system calls: no descriptor, not a cancellation point, never a fault.
// errno is set to a value other than EINTR on every path that does not go to libc (libunwind
// retries its read and write while errno == EINTR). syscall()'s arguments arrive as 64-bit
// words whose upper half is unspecified for an int (libunwind passes its descriptor as int):
// the descriptor is compared as int.
//
// "A Strata walk runs on the calling thread" between ScopedStrataLibunwindWalk's constructor
// and destructor (the walkers of libunwind_walker.h open one around every use of libunwind),
// and while SetLibunwindLookupPc() (below) has a pc set.
// Outside, libunwind's calls keep libc's semantics except for the validation pipe.
//
// When the program has loaded libunwind.so.8 itself, dlopen() returns that very object and it
// is redirected as well: the program's own calls keep their semantics (they are forwarded),
// a validation pipe it had not opened yet is never opened (the impossible numbers stand in,
// answering the same as the pipe would), and a pipe it had opened already is kept and still
// used by the program's walks, never by Strata's (read EAGAIN, the readability check above
// instead of the write, no close). Tested by libunwind_imports_preinit_test and
// tests/host_safety/descriptors (own_libunwind).
//
// If any of these imports cannot be redirected, libunwind must not be used:
// RedirectLibunwindImports() returns false and the loader reports libunwind unavailable.
//
// Thread safety: RedirectLibunwindImports() is thread-safe with respect to other threads
// calling libunwind (each slot is one aligned 8-byte store); call it once per loaded object.
// Async-signal safety: RedirectLibunwindImports() is NOT (dlinfo, mprotect of a RELRO page).
// ScopedStrataLibunwindWalk and every replacement function are async-signal-safe, and none
// of them is a cancellation point on the paths taken during a Strata walk.
#ifndef STRATA_PLATFORM_SAMPLING_LIBUNWIND_IMPORTS_H_
#define STRATA_PLATFORM_SAMPLING_LIBUNWIND_IMPORTS_H_

#include <link.h>
#include <ucontext.h>

#include <cstddef>
#include <cstdint>

namespace strata {

// Redirects the imports listed above of the object opened as `handle` (a dlopen() handle).
// Returns true when every one of them that the object imports now calls this file's
// replacement (an object importing none of them is fine). Not async-signal-safe.
bool RedirectLibunwindImports(void* handle);

// Marks the calling thread as running a Strata walk for its lifetime. Nests.
// Async-signal-safe (one initial-exec TLS counter).
class ScopedStrataLibunwindWalk {
 public:
  ScopedStrataLibunwindWalk();
  ~ScopedStrataLibunwindWalk();
  ScopedStrataLibunwindWalk(const ScopedStrataLibunwindWalk&) = delete;
  ScopedStrataLibunwindWalk& operator=(const ScopedStrataLibunwindWalk&) = delete;
};

// Marks (true) or unmarks (false) the calling thread as running a Strata walk, without
// nesting: for SetLibunwindLookupPc() (below), which callers that drive
// libunwind's cursor themselves set around their walks. Async-signal-safe.
void MarkStrataLibunwindWalk(bool walking);

// True while the calling thread runs a Strata walk (a ScopedStrataLibunwindWalk is alive or
// the mark is set). Async-signal-safe.
bool InStrataLibunwindWalk();

// Declares, for its lifetime, that every signal is blocked on the calling thread: Strata's
// sampling handler (its sa_mask is full), a program thread writing its own sample ring
// (SignalsBlockedForRingWrite), Strata's own threads (they block every signal). libunwind
// blocks every signal around its cache lock, at every step of a walk: two rt_sigprocmask
// system calls a frame (~0.3 us of a ~0.5 us step, measured: realtime_test). Under this
// declaration they would change nothing, so the redirected sigprocmask makes none (the mask
// it reports saved is "every signal", which the matching restore then leaves as it is).
// Declaring it where a signal can still arrive would let a handler of the program run while
// libunwind holds its lock: only where the blocking is established. Nests. Async-signal-safe
// (an initial-exec TLS counter).
class ScopedEverySignalBlocked {
 public:
  // `blocked` false declares nothing (for callers that know it only at run time).
  explicit ScopedEverySignalBlocked(bool blocked = true);
  ~ScopedEverySignalBlocked();
  ScopedEverySignalBlocked(const ScopedEverySignalBlocked&) = delete;
  ScopedEverySignalBlocked& operator=(const ScopedEverySignalBlocked&) = delete;

 private:
  bool declared_ = false;
};

// The stack words a Strata walk on the calling thread read, in order: libunwind's local
// build reads program memory only through its access_mem accessor for the words its unwind
// rules name (its tables are read from checked copies, unwind_table_copy.h), so a walk is a
// function of its start registers, these words and the loaded objects' tables. For callers
// that keep a walk for reuse (base/internal/wait/own_walk_cache.h). Owned by the caller.
struct WalkReadLog {
  struct Read {
    uintptr_t address;
    uintptr_t value;
  };
  Read* reads = nullptr;
  uint32_t capacity = 0;
  uint32_t count = 0;
  bool overflowed = false;  // More reads than `capacity`: the log is incomplete.
  bool unreadable = false;  // A read failed: the walk depended on a word's readability too.
  // Reads in [unlogged_low, unlogged_high) are not logged: the walk's start context (libunwind
  // reads the registers of a ucontext through the same accessor), Strata's memory, which the
  // caller compares by itself.
  uintptr_t unlogged_low = 0;
  uintptr_t unlogged_high = 0;
};

// Sets the calling thread's log (null: none); each word libunwind reads during a Strata walk
// on this thread is then appended to it. Async-signal-safe (an initial-exec TLS pointer).
void SetWalkReadLog(WalkReadLog* log);

// Whether every signal is blocked on the calling thread now (one rt_sigprocmask system call).
// Async-signal-safe.
bool EverySignalBlockedOnThisThread();

// Lookups of Strata walks on the calling thread that were refused for a reason that may not
// hold at the next walk (a busy copy slot, an unreadable byte, the permanent copies full, an
// encoding not copied): the walk ended or guessed there. For callers that keep a walk
// (own_walk_cache.h): a walk made while this moved is not kept. Async-signal-safe.
uint64_t RefusedLookupsOfThisThread();

// Whether `pc` lies in a function whose unwind rule is a DWARF expression that Strata's walks
// have used (the FDE's copy is kept for good: libunwind_imports.cc). libunwind evaluates an
// expression's DW_OP_deref with direct reads, not through its accessor (dwarf_i.h, Gexpr.c):
// such words are not in a WalkReadLog. glibc's signal return trampoline (__restore_rt: the
// CFA below a signal frame is the saved rsp), GCC's realigned (DRAP) frames and the PLT use
// one. Async-signal-safe (a scan of at most 64 slots).
bool InFunctionWithExpressionRule(uintptr_t pc);

// libunwind's sigprocmask calls on the calling thread: made (the system call), and skipped
// under a ScopedEverySignalBlocked. For tests. Async-signal-safe.
struct LibunwindMaskCalls {
  uint64_t made = 0;
  uint64_t skipped = 0;
};
LibunwindMaskCalls LibunwindMaskCallsOfThisThread();

// The address whose unwind information the calling thread's libunwind walk looks up next (the
// interrupted pc for the first step, a return address - 1 for the others); 0 when the thread
// is not walking. For callers that drive libunwind's cursor themselves. While it is set, the
// thread also counts as running a Strata walk for libunwind's redirected imports
// (libunwind_imports.h: no descriptor is touched, no file opened).
void SetLibunwindLookupPc(uintptr_t pc);

// For the dl_iterate_phdr wrapper (the preload tier's, and libunwind's redirected import): when the calling thread is walking (a lookup pc is set),
// calls `callback` once, for the loaded object that contains the lookup pc (none when no object
// does), stores its result (0 when not called) in *result and returns true, without taking
// any lock. Returns false when the thread is not walking: call the real dl_iterate_phdr.
bool ServeDlIteratePhdrDuringWalk(int (*callback)(dl_phdr_info*, size_t, void*),
                                  void* data, int* result);

// Forgets the lookup pcs that ServeDlIteratePhdrDuringWalk() found no unwind entry for (it
// remembers them: libunwind does not, and code without entries inside an object, such as a
// JIT's builtins in its executable, would cost a checked table search at every such frame of
// every sample). Called when an object is unloaded (FlushLibunwindCaches). Async-signal-safe.
void ForgetLookupsWithoutEntry();

// Lookups that ServeDlIteratePhdrDuringWalk() answered with no object because the checked
// copy could not be made: some of the object's unwind tables (.eh_frame_hdr, its search
// path, the FDE, the CIE, the word of an indirect personality pointer) were unreadable (a
// program's mprotect(PROT_NONE), at any moment, on any thread), or, rarely, the tables were
// not of the kind copied or 16 threads were copying at that instant (unwind_table_copy.h):
// each ends a walk early instead of faulting. Thread-safe; async-signal-safe.
uint64_t UnwindLookupsRefusedAsUnreadable();

// libunwind's reads of memory during Strata's walks (issue 33): its local address space's
// access_mem accessor (through which it reads every stack word its unwind rules name, the
// frame chain of code without unwind information, and the code bytes it checks for a
// sigreturn trampoline) is replaced, in libunwind's own accessor table, by one that during a
// Strata walk on the calling thread reads a word inside the walk's stack bounds
// (SetLibunwindWalkStackBounds: the walked thread's own stack, which it runs on) or inside
// the walk's context (SetLibunwindWalkContext) directly and any other word with CheckedRead() (an unreadable or execute-only page: the read
// fails, the step ends, nothing faults); writes, and reads outside Strata's walks (the
// program's own use of libunwind), go to libunwind's accessor as before. `local_addr_space`
// is libunwind's unw_local_addr_space. Returns false when the table cannot be found (then
// libunwind must not be used). Not async-signal-safe (libunwind's one-time set-up).
bool CheckLibunwindMemoryReads(void* handle, void* local_addr_space);

// The walked stack's bounds for the calling thread's walks (see above); [0, 0) checks every
// read. Async-signal-safe.
void SetLibunwindWalkStackBounds(uintptr_t low, uintptr_t high);

// The ucontext the calling thread's walk hands libunwind (unw_init_local2): the signal
// context the handler runs on, or the walker's own copy (a resumed walk's, in its scratch;
// the sampler's wait walks build one on their stack). libunwind reads the registers through
// its accessor from there, at the start and for every callee-saved register no frame has
// saved yet: read directly, as the stack is, not with CheckedRead (a getpid and a
// process_vm_readv each: three a sample, for a walk resumed below a verified segment). The
// caller keeps it readable until it sets nullptr (at the walk's end). Async-signal-safe.
void SetLibunwindWalkContext(const ucontext_t* context);

// How many of libunwind's reads on the calling thread went through CheckedRead (outside
// the stack bounds and the walk's context). For tests. Async-signal-safe.
uint64_t LibunwindCheckedReadsOfThisThread();

// True for the impossible descriptor numbers that the redirected pipe2() hands out.
bool IsLibunwindValidationDescriptor(long number);

namespace libunwind_imports_internal {

// True when the first and the last of `length` bytes from `address` can be read (the
// readability check above; nothing is dereferenced). Sets errno (EFAULT when unreadable).
// Async-signal-safe.
bool AddressIsReadable(uintptr_t address, size_t length);

// True when the check is the rt_sigprocmask probe (it passed its start-up test), false for
// process_vm_readv. Decided by RedirectLibunwindImports(). For tests and the log.
bool UsesSigprocmaskProbe();

// Forces one check or the other. For tests.
void UseSigprocmaskProbeForTesting(bool use);

// How many slots the last RedirectLibunwindImports() call overwrote. For tests.
int RedirectedSlotCount();

// How many readability checks libunwind asked for through the redirected imports so far
// (relaxed counter). For tests.
int ValidationCount();

}  // namespace libunwind_imports_internal
}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_LIBUNWIND_IMPORTS_H_
