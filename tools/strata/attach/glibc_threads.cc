// See glibc_threads.h.
#include "tools/strata/attach/glibc_threads.h"

#include <set>

#include "tools/strata/attach/injector.h"

namespace strata {
namespace attach {
namespace {

// The offset of a _thread_db_* field descriptor ({bits, count, offset}), checked for the size
// expected; false when absent or not so.
bool FieldOffset(pid_t pid, const std::map<std::string, uint64_t>& symbols, uint64_t bias, const char* name,
                 uint32_t bits, uint32_t* offset) {
  const auto found = symbols.find(name);
  uint32_t descriptor[3] = {};
  if (found == symbols.end() || !ReadTargetBytes(pid, bias + found->second, descriptor, sizeof(descriptor))) return false;
  *offset = descriptor[2];
  return descriptor[0] == bits && descriptor[1] == 1 && descriptor[2] < 65536;
}

}  // namespace

GlibcThreadLists FindGlibcThreadLists(pid_t pid, const std::map<std::string, uint64_t>& libc_symbols,
                                      uint64_t libc_bias, uint64_t rtld_global) {
  GlibcThreadLists lists;
  uint32_t stack_used = 0, stack_user = 0;
  if (rtld_global == 0 ||
      !FieldOffset(pid, libc_symbols, libc_bias, "_thread_db_rtld_global__dl_stack_used", 128, &stack_used) ||
      !FieldOffset(pid, libc_symbols, libc_bias, "_thread_db_rtld_global__dl_stack_user", 128, &stack_user) ||
      !FieldOffset(pid, libc_symbols, libc_bias, "_thread_db_pthread_list", 128, &lists.list) ||
      !FieldOffset(pid, libc_symbols, libc_bias, "_thread_db_list_t_next", 64, &lists.next) ||
      !FieldOffset(pid, libc_symbols, libc_bias, "_thread_db_pthread_tid", 32, &lists.tid)) {
    return GlibcThreadLists();
  }
  lists.stack_used = rtld_global + stack_used;
  lists.stack_user = rtld_global + stack_user;
  return lists;
}

std::map<pid_t, uint64_t> GlibcThreadPointers(pid_t pid, const std::vector<pid_t>& tids, const GlibcThreadLists& lists) {
  std::map<pid_t, uint64_t> found;
  if (!lists.found()) return found;
  const std::set<pid_t> wanted(tids.begin(), tids.end());
  // Bounded: a list changing under the walk could loop; more entries than the process has
  // threads would not be there but for that.
  const size_t limit = 2 * ThreadsOf(pid).size() + 16;
  for (const uint64_t head : {lists.stack_used, lists.stack_user}) {
    uint64_t entry = 0;
    if (!ReadTargetBytes(pid, head + lists.next, &entry, sizeof(entry))) continue;
    for (size_t steps = 0; entry != head && entry != 0 && steps < limit; ++steps) {
      const uint64_t pointer = entry - lists.list;
      uint64_t self = 0;
      int32_t tid = 0;
      if (ReadTargetBytes(pid, pointer + 16, &self, sizeof(self)) && self == pointer &&  // tcbhead_t's self.
          ReadTargetBytes(pid, pointer + lists.tid, &tid, sizeof(tid)) && wanted.count(tid) != 0) {
        found[tid] = pointer;
      }
      if (!ReadTargetBytes(pid, entry + lists.next, &entry, sizeof(entry))) break;
    }
  }
  return found;
}

}  // namespace attach
}  // namespace strata
