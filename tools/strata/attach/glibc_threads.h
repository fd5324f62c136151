// The thread pointers of a running glibc process's threads, read from its memory as
// libthread_db reads them for gdb, without stopping any thread (docs/attach.md, "How it works"):
// glibc keeps every thread's struct pthread (its thread pointer, the %fs base on x86-64) in two
// lists of the loader's _rtld_global (_dl_stack_used: stacks glibc allocated; _dl_stack_user:
// the main thread and stacks the program gave), and describes their layout for libthread_db in
// libc's exported _thread_db_* descriptors ({bits, count, offset} of each field used).
//
// The lists are read while the threads run (a thread may start or end meanwhile), so nothing
// read is trusted: the walk is bounded, and a pointer counts for a thread only when the memory
// there says so twice (its TCB's self pointer is the pointer, its tid field the thread's id).
// A thread not found so (its list entry changing under the walk, a raw clone, another pid
// namespace whose ids differ) is left to the caller (a ptrace stop).
//
// Thread safety: thread-safe (no shared state). Not async-signal-safe (allocates).
#ifndef STRATA_TOOLS_STRATA_ATTACH_GLIBC_THREADS_H_
#define STRATA_TOOLS_STRATA_ATTACH_GLIBC_THREADS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace strata {
namespace attach {

// Where glibc's thread lists are in a process, and the offsets of the fields read.
struct GlibcThreadLists {
  uint64_t stack_used = 0;  // The two list heads (list_t) in _rtld_global.
  uint64_t stack_user = 0;
  uint32_t list = 0;        // struct pthread's list member.
  uint32_t next = 0;        // list_t's next.
  uint32_t tid = 0;         // struct pthread's tid.
  bool found() const { return stack_used != 0; }
};

// `libc_symbols`: libc's .dynsym values (ReadDynamicSymbols), `libc_bias` added to them gives
// the process's addresses; `rtld_global`: the address of ld.so's _rtld_global in the process.
// Not found() when libc has no descriptors (not glibc >= 2.34's layout) or they cannot be read.
GlibcThreadLists FindGlibcThreadLists(pid_t pid, const std::map<std::string, uint64_t>& libc_symbols,
                                      uint64_t libc_bias, uint64_t rtld_global);

// tid -> thread pointer for those of `tids` found in the lists and checked (above).
std::map<pid_t, uint64_t> GlibcThreadPointers(pid_t pid, const std::vector<pid_t>& tids, const GlibcThreadLists& lists);

}  // namespace attach
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_ATTACH_GLIBC_THREADS_H_
