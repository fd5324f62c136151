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

std::map<pid_t, uint64_t> GlibcThreadPointers(pid_t pid, const std::vector<pid_t>& tids,
                                              const std::map<std::string, uint64_t>& libc_symbols,
                                              uint64_t libc_bias, uint64_t rtld_global) {
  std::map<pid_t, uint64_t> found;
  uint32_t stack_used = 0, stack_user = 0, list = 0, next = 0, tid_field = 0;
  if (rtld_global == 0 ||
      !FieldOffset(pid, libc_symbols, libc_bias, "_thread_db_rtld_global__dl_stack_used", 128, &stack_used) ||
      !FieldOffset(pid, libc_symbols, libc_bias, "_thread_db_rtld_global__dl_stack_user", 128, &stack_user) ||
      !FieldOffset(pid, libc_symbols, libc_bias, "_thread_db_pthread_list", 128, &list) ||
      !FieldOffset(pid, libc_symbols, libc_bias, "_thread_db_list_t_next", 64, &next) ||
      !FieldOffset(pid, libc_symbols, libc_bias, "_thread_db_pthread_tid", 32, &tid_field)) {
    return found;
  }
  const std::set<pid_t> wanted(tids.begin(), tids.end());
  // Bounded: a list changing under the walk could loop; more entries than threads would not
  // be there but for that.
  const size_t limit = 2 * tids.size() + 16;
  for (const uint32_t head_offset : {stack_used, stack_user}) {
    const uint64_t head = rtld_global + head_offset;
    uint64_t entry = 0;
    if (!ReadTargetBytes(pid, head + next, &entry, sizeof(entry))) continue;
    for (size_t steps = 0; entry != head && entry != 0 && steps < limit; ++steps) {
      const uint64_t pointer = entry - list;
      uint64_t self = 0;
      int32_t tid = 0;
      if (ReadTargetBytes(pid, pointer + 16, &self, sizeof(self)) && self == pointer &&  // tcbhead_t's self.
          ReadTargetBytes(pid, pointer + tid_field, &tid, sizeof(tid)) && wanted.count(tid) != 0) {
        found[tid] = pointer;
      }
      if (!ReadTargetBytes(pid, entry + next, &entry, sizeof(entry))) break;
    }
  }
  return found;
}

}  // namespace attach
}  // namespace strata
