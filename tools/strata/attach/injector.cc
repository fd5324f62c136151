// See injector.h.
#include "tools/strata/attach/injector.h"

#include <dirent.h>
#include <sched.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "tools/strata/attach/borrowed_thread.h"
#include "tools/strata/attach/elf_symbols.h"
#include "tools/strata/attach/glibc_threads.h"
#include "tools/strata/attach/seized_thread.h"

namespace strata {
namespace attach {
namespace {

constexpr size_t kScratchBytes = 256 * 1024;  // The borrowed thread's private stack.

std::string ProcPath(pid_t pid, const std::string& rest) {
  return "/proc/" + std::to_string(pid) + "/" + rest;
}

std::map<std::string, std::string> ReadStatus(pid_t pid) {
  std::map<std::string, std::string> fields;
  std::ifstream in(ProcPath(pid, "status"));
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    size_t value = line.find_first_not_of(" \t", colon + 1);
    fields[line.substr(0, colon)] = value == std::string::npos ? "" : line.substr(value);
  }
  return fields;
}

std::vector<pid_t> Threads(pid_t pid) {
  std::vector<pid_t> tids;
  if (DIR* dir = opendir(ProcPath(pid, "task").c_str())) {
    while (dirent* entry = readdir(dir)) {
      const long tid = std::strtol(entry->d_name, nullptr, 10);
      if (tid > 0) tids.push_back(static_cast<pid_t>(tid));
    }
    closedir(dir);
  }
  std::sort(tids.begin(), tids.end());
  return tids;
}

// What /proc/PID/task/TID/syscall says of thread `tid`: the system call it is blocked in
// (-1 when running or not in a call), its second argument, and its user stack pointer and
// instruction pointer (the address after its `syscall` instruction, as in its registers).
struct BlockedCall {
  long nr = -1;
  uint64_t second_argument = 0;
  uint64_t sp = 0;
  uint64_t pc = 0;
};

BlockedCall ReadBlockedCall(pid_t pid, pid_t tid) {
  BlockedCall call;
  std::ifstream in(ProcPath(pid, "task/" + std::to_string(tid) + "/syscall"));
  std::string number;
  if (!(in >> number)) return call;
  char* end = nullptr;
  const long nr = std::strtol(number.c_str(), &end, 10);
  if (end == number.c_str() || *end != '\0' || nr < 0) return call;
  std::string fields[8];  // Six arguments, sp, pc.
  for (std::string& field : fields) {
    if (!(in >> field)) return call;
  }
  call.nr = nr;
  call.second_argument = std::strtoull(fields[1].c_str(), nullptr, 16);
  call.sp = std::strtoull(fields[6].c_str(), nullptr, 16);
  call.pc = std::strtoull(fields[7].c_str(), nullptr, 16);
  return call;
}


// A blocking call in which the thread holds no lock of libc's or the loader's: what a
// borrowed thread may be stopped in (injector.h). 2 = best, 1 = acceptable, 0 = no.
int SafetyOf(long nr, uint64_t second_argument) {
  switch (nr) {
    case 0: case 7: case 23: case 34: case 35: case 43: case 288: case 45: case 47:
    case 61: case 230: case 270: case 271:
      return 2;
    case 232: case 281: case 441:  // epoll: its EINTR is rewound on detach.
      return 2;
    case 202:  // futex: FUTEX_WAIT_BITSET (condition variables, join, semaphores), not a lock.
      return (second_argument & 127) == 9 ? 1 : 0;
    default:
      return 0;
  }
}

bool ReadTarget(pid_t pid, uint64_t address, void* buffer, size_t length) {
  return ReadTargetBytes(pid, address, buffer, length);
}

bool WriteTarget(pid_t pid, uint64_t address, const void* buffer, size_t length) {
  struct iovec local = {const_cast<void*>(buffer), length};
  struct iovec remote = {reinterpret_cast<void*>(address), length};
  return process_vm_writev(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(length);
}

std::string ReadTargetString(pid_t pid, uint64_t address) {
  char text[512] = {};
  for (size_t length = sizeof(text) - 1; length >= 16; length /= 2) {
    if (ReadTarget(pid, address, text, length)) break;
  }
  return std::string(text);
}

std::string PermissionAdvice(pid_t pid) {
  int scope = -1;
  std::ifstream yama("/proc/sys/kernel/yama/ptrace_scope");
  if (yama) yama >> scope;
  std::string advice = "no permission to trace process " + std::to_string(pid) + " (";
  if (scope >= 1) advice += "Yama ptrace_scope is " + std::to_string(scope) + "; ";
  advice += "attach needs the same user and a dumpable process, or CAP_SYS_PTRACE: run strata as root, "
            "or `sudo sysctl kernel.yama.ptrace_scope=0` where Yama allows only descendants)";
  return advice;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::vector<StackMapping> ReadMappings(pid_t pid) {
  std::vector<StackMapping> mappings;
  std::ifstream maps(ProcPath(pid, "maps"));
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, permissions, offset, device, inode, name;
    fields >> range >> permissions >> offset >> device >> inode;
    std::getline(fields >> std::ws, name);
    const size_t dash = range.find('-');
    if (dash == std::string::npos) continue;
    StackMapping mapping;
    mapping.start = std::strtoull(range.c_str(), nullptr, 16);
    mapping.end = std::strtoull(range.c_str() + dash + 1, nullptr, 16);
    mapping.offset = std::strtoull(offset.c_str(), nullptr, 16);
    mapping.name = name;
    mappings.push_back(mapping);
  }
  return mappings;
}

RealtimeWindow::RealtimeWindow() {
  const char* off = std::getenv("STRATA_ATTACH_TEST_NO_REALTIME");
  if (off != nullptr && std::strcmp(off, "1") == 0) return;
  policy_ = sched_getscheduler(0);
  if (policy_ < 0 || sched_getparam(0, &param_) != 0) return;
  struct sched_param fifo = {};
  fifo.sched_priority = 1;
  active_ = sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &fifo) == 0;
}

RealtimeWindow::~RealtimeWindow() {
  if (active_) sched_setscheduler(0, policy_, &param_);
}

namespace {
std::string TaskPath(pid_t pid, pid_t tid) { return "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid); }
}  // namespace

bool WorkerBoost::Raise(pid_t pid, pid_t tid) {
  if (tried_ || tid <= 0) return false;
  tried_ = true;
  policy_ = sched_getscheduler(tid);
  if (policy_ < 0 || sched_getparam(tid, &param_) != 0) return false;
  // The worker is the target's thread `tid` only while /proc/PID/task/TID exists (a recycled
  // id in another process is not ours to change).
  if (access(TaskPath(pid, tid).c_str(), F_OK) != 0) return false;
  struct sched_param fifo = {};
  fifo.sched_priority = 1;
  if (sched_setscheduler(tid, SCHED_FIFO, &fifo) != 0) return false;
  pid_ = pid;
  tid_ = tid;
  // A thread the worker started before it was raised (its descriptor-table grower: attach.cc,
  // GrowDescriptorTable, named StrataAttach as its creator) runs at the worker's policy of
  // then: raised too, and given back the same policy by Restore.
  for (pid_t other : ThreadsOf(pid)) {
    if (other == tid || before_attach_.count(other) != 0 || sched_getscheduler(other) == SCHED_FIFO) continue;
    std::ifstream comm(TaskPath(pid, other) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("Strata", 0) == 0) sched_setscheduler(other, SCHED_FIFO, &fifo);
  }
  return true;
}

void WorkerBoost::Restore() {
  if (tid_ <= 0) return;
  for (pid_t tid : ThreadsOf(pid_)) {
    if (tid != tid_) {
      if (before_attach_.count(tid) != 0 || sched_getscheduler(tid) != SCHED_FIFO) continue;
      std::ifstream comm(TaskPath(pid_, tid) + "/comm");
      std::string name;
      std::getline(comm, name);
      if (name.rfind("Strata", 0) != 0) continue;
    }
    sched_setscheduler(tid, policy_, &param_);
  }
  tid_ = 0;
}

std::string BorrowedStackProblem(const std::vector<StackMapping>& mappings, bool main_thread,
                                 uint64_t thread_pointer, uint64_t sp) {
  const StackMapping* found = nullptr;
  for (const StackMapping& mapping : mappings) {
    if (mapping.start <= sp && sp < mapping.end) found = &mapping;
  }
  auto where = [&found]() {
    return found->name.empty() ? std::string("an anonymous mapping that is not its stack") : found->name;
  };
  if (found == nullptr) return "its stack pointer is in no mapping";
  if (main_thread) {
    if (found->name != "[stack]") {
      return "its stack pointer is not on the main thread's stack ([stack]) but in " + where() +
             " (a handler on an alternate signal stack?)";
    }
  } else if (!found->name.empty() || thread_pointer < found->start || thread_pointer >= found->end ||
             sp >= thread_pointer) {
    return "its stack pointer is not on its thread stack (the mapping below its thread pointer) but in " +
           where() + " (a handler on an alternate signal stack?)";
  }
  if (sp - found->start < kBorrowedStackRoom) {
    return "less than " + std::to_string(kBorrowedStackRoom / 1024) + " KiB of its stack left below its stack pointer";
  }
  return "";
}

std::string BorrowedCallProblem(const std::vector<StackMapping>& mappings, const std::string& libc_path,
                                const std::string& executable_path, uint64_t pc) {
  // `pc` is the address after the 2-byte `syscall` instruction.
  const uint64_t instruction = pc - 2;
  for (const StackMapping& mapping : mappings) {
    if (mapping.start <= instruction && instruction < mapping.end) {
      if (!mapping.name.empty() && (mapping.name == libc_path || mapping.name == executable_path)) return "";
      return "its system call is made by " + (mapping.name.empty() ? std::string("anonymous code") : mapping.name) +
             " itself, not through libc (a runtime's own raw call)";
    }
  }
  return "its system call is made by code in no mapping";
}

bool StatusShowsShadowStack(const std::string& status_text) {
  std::istringstream lines(status_text);
  std::string line;
  const std::string key = "x86_Thread_features:";
  while (std::getline(lines, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    std::istringstream words(line.substr(key.size()));
    std::string word;
    while (words >> word) {
      if (word == "shstk") return true;
    }
  }
  return false;
}

bool ReadTargetWord(pid_t pid, uint64_t address, int32_t* value) {
  return ReadTarget(pid, address, value, sizeof(*value));
}

bool WriteTargetWord(pid_t pid, uint64_t address, int32_t value) {
  return WriteTarget(pid, address, &value, sizeof(value));
}

std::string CheckTarget(pid_t pid, TargetFacts* facts) {
  facts->pid = pid;
  const auto status = ReadStatus(pid);
  if (status.empty()) return "no process " + std::to_string(pid);
  std::istringstream(status.count("Uid") ? status.at("Uid") : "") >> facts->uid;
  std::istringstream(status.count("Gid") ? status.at("Gid") : "") >> facts->gid;
  const std::string state = status.count("State") ? status.at("State") : "";
  if (!state.empty() && (state[0] == 'Z' || state[0] == 'X')) {
    return "process " + std::to_string(pid) + " has exited (state " + state + ")";
  }
  if (!state.empty() && (state[0] == 'T' || state[0] == 't')) {
    return "process " + std::to_string(pid) + " is stopped (state " + state +
           "); continue it first (kill -CONT " + std::to_string(pid) + ")";
  }
  if (status.count("TracerPid") && status.at("TracerPid") != "0") {
    return "process " + std::to_string(pid) + " is already traced by process " + status.at("TracerPid") +
           " (a debugger or another profiler); detach that one first";
  }
  if (status.count("Seccomp") && status.at("Seccomp") == "1") {
    return "process " + std::to_string(pid) + " runs in strict seccomp mode: nothing can be loaded into it";
  }
  {
    std::ifstream yama("/proc/sys/kernel/yama/ptrace_scope");
    int scope = 0;
    if (yama && (yama >> scope) && scope >= 3) {
      return "Yama ptrace_scope is 3: no process may be traced until reboot; use `perf record -p` instead";
    }
  }
  // User shadow stacks (glibc.cpu.x86_shstk on Linux 6.6+): the borrowed thread's calls
  // return into __restore_rt, which is not on its shadow stack (a control-protection fault
  // kills the program). Any thread may have one; it is enabled per thread.
  for (pid_t tid : Threads(pid)) {
    if (StatusShowsShadowStack(ReadWholeFile(ProcPath(pid, "task/" + std::to_string(tid) + "/status")))) {
      return "process " + std::to_string(pid) + " runs with user shadow stacks (thread " + std::to_string(tid) +
             ": shstk in x86_Thread_features): Strata's attach would make it fault; start the program with "
             "GLIBC_TUNABLES=glibc.cpu.x86_shstk=off, or use `perf record -p`";
    }
  }
  // The executable's class and machine.
  {
    const int fd = open(ProcPath(pid, "exe").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == EACCES || errno == EPERM) return PermissionAdvice(pid);
      return "cannot read the executable of process " + std::to_string(pid) + ": " + std::strerror(errno);
    }
    Elf64_Ehdr header{};
    const ssize_t n = pread(fd, &header, sizeof(header), 0);
    close(fd);
    if (n < static_cast<ssize_t>(EI_NIDENT + 4) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
      return "process " + std::to_string(pid) + " does not run an ELF executable";
    }
    if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_machine != EM_X86_64) {
      return "process " + std::to_string(pid) + " is not a 64-bit x86-64 program (" +
             (header.e_ident[EI_CLASS] == ELFCLASS32 ? "32-bit" : "another architecture") +
             "): Strata attaches to x86-64 programs only; use `perf record -p`";
    }
  }
  // The executable's path as the maps name it: /proc/PID/exe, not the first named mapping. A
  // program built with ThreadSanitizer has TSan's "/tmp/tsan.rodata.PID (deleted)" mappings
  // below its own, and a thread blocked in the program's own system call (attach_test's
  // `--only regs`) was refused as a runtime's raw call (BorrowedCallProblem).
  {
    char exe[4096];
    const ssize_t length = readlink(ProcPath(pid, "exe").c_str(), exe, sizeof(exe) - 1);
    if (length > 0) facts->executable_path.assign(exe, static_cast<size_t>(length));
  }
  // The libraries: libc.so.6 and the loader (absent: a static program), and Strata.
  // Opened, not access()ed: reading another process's maps needs ptrace access, checked at open.
  if (!std::ifstream(ProcPath(pid, "maps"))) return PermissionAdvice(pid);
  for (const StackMapping& mapping : ReadMappings(pid)) {
    const std::string& path = mapping.name;
    if (path.empty() || path[0] != '/') continue;
    if (facts->executable_path.empty()) facts->executable_path = path;
    const std::string name = path.substr(path.rfind('/') + 1);
    const uint64_t start = mapping.start;
    const bool first = mapping.offset == 0;
    if (name == "libc.so.6" && first && facts->libc_base == 0) {
      facts->libc_path = path;
      facts->libc_base = start;
    } else if (name.rfind("ld-linux-x86-64.so", 0) == 0 && first && facts->ld_base == 0) {
      facts->ld_path = path;
      facts->ld_base = start;
    } else if (name == "libstrata_base.so" || name.rfind("libstrata_base", 0) == 0) {
      facts->has_strata = true;
    }
  }
  if (facts->libc_base == 0) {
    return "process " + std::to_string(pid) +
           " has no libc.so.6 loaded (statically linked, or not a glibc program: Go, musl): Strata "
           "cannot be loaded into it; use `perf record -p`";
  }
  return "";
}

std::vector<pid_t> ThreadsOf(pid_t pid) { return Threads(pid); }

bool ReadTargetBytes(pid_t pid, uint64_t address, void* buffer, size_t length) {
  struct iovec local = {buffer, length};
  struct iovec remote = {reinterpret_cast<void*>(address), length};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(length);
}

std::vector<ThreadPointer> ReadThreadPointers(pid_t pid, const std::vector<pid_t>& tids, double* longest_stop_ms,
                                              bool* permission_denied, double* longest_held_ms) {
  *permission_denied = false;
  std::map<uint64_t, int> pointer_uses;
  std::vector<ThreadPointer> pointers;
  // All are asked at once and each is let go as soon as it has stopped: the listing takes the
  // longest wait for a thread to be scheduled, not their sum, and each stop stays short.
  std::map<pid_t, std::unique_ptr<SeizedThread>> asked;
  for (pid_t tid : tids) {
    auto thread = std::make_unique<SeizedThread>(tid);
    std::string error;
    if (!thread->SeizeAndInterrupt(&error)) {
      if (thread->seize_errno() == EPERM) *permission_denied = true;
      continue;  // Ended meanwhile, or not ours to trace.
    }
    asked.emplace(tid, std::move(thread));
  }
  while (!asked.empty()) {
    int status = 0;
    const pid_t waited = waitpid(-1, &status, __WALL);
    if (waited < 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: nothing left to report.
    }
    auto found = asked.find(waited);
    if (found == asked.end()) continue;
    SeizedThread& thread = *found->second;
    std::string error;
    if (thread.OnReported(status, &error)) {
      pointers.push_back({waited, thread.saved().fs_base});
      ++pointer_uses[thread.saved().fs_base];
    }
    thread.Detach();
    *longest_stop_ms = std::max(*longest_stop_ms, thread.StoppedMilliseconds());
    if (longest_held_ms != nullptr) *longest_held_ms = std::max(*longest_held_ms, thread.HeldMilliseconds());
    asked.erase(found);
  }
  // A pointer shared by two tasks (a raw clone sharing its parent's TLS): not a thread of
  // glibc's own; neither is listed.
  std::vector<ThreadPointer> result;
  for (const ThreadPointer& thread : pointers) {
    if (thread.pointer != 0 && pointer_uses[thread.pointer] == 1) result.push_back(thread);
  }
  return result;
}

bool OfferNewThreads(pid_t pid, uint64_t mailbox_address, const std::vector<ThreadPointer>& threads) {
  struct Entry {
    int32_t tid;
    uint32_t unused;
    uint64_t pointer;
  };
  uint32_t full = 1;
  if (!ReadTarget(pid, mailbox_address, &full, sizeof(full)) || full != 0) return false;
  std::vector<Entry> entries;
  for (const ThreadPointer& thread : threads) {
    if (entries.size() == kMailboxThreads) break;
    entries.push_back({thread.tid, 0, thread.pointer});
  }
  if (entries.empty()) return true;
  const uint32_t count = static_cast<uint32_t>(entries.size());
  // The entries and their count first, then the flag the worker polls.
  if (!WriteTarget(pid, mailbox_address + 8, entries.data(), entries.size() * sizeof(Entry)) ||
      !WriteTarget(pid, mailbox_address + 4, &count, sizeof(count))) {
    return false;
  }
  full = 1;
  return WriteTarget(pid, mailbox_address, &full, sizeof(full));
}

InjectionResult InjectAndStart(const TargetFacts& facts, const std::string& library,
                               const std::string& library_file, const std::string& settings) {
  InjectionResult result;
  const pid_t pid = facts.pid;
  const std::string root = ProcPath(pid, "root");
  std::map<std::string, uint64_t> libc_symbols, ld_symbols;
  uint64_t libc_vaddr = 0, ld_vaddr = 0;
  if (!ReadDynamicSymbols(root + facts.libc_path, &libc_symbols, &libc_vaddr)) {
    result.error = "cannot read the symbols of " + facts.libc_path + " of process " + std::to_string(pid);
    return result;
  }
  auto libc = [&](const char* name) -> uint64_t {
    auto found = libc_symbols.find(name);
    return found == libc_symbols.end() ? 0 : facts.libc_base - libc_vaddr + found->second;
  };
  LibcCalls libc_calls;
  libc_calls.mmap = libc("mmap");
  libc_calls.munmap = libc("munmap");
  const uint64_t dlopen_address = libc("dlopen"), dlerror_address = libc("dlerror");
  if (!libc_calls.mmap || !libc_calls.munmap || !dlopen_address || !dlerror_address) {
    result.refused = true;
    result.error = "the libc of process " + std::to_string(pid) +
                   " does not export dlopen (glibc older than 2.34?): attach needs glibc >= 2.34";
    return result;
  }
  // Where the borrowed thread's calls return to without strata (borrowed_thread.h).
  const uint64_t restore_rt_offset = FindRestoreRt(root + facts.libc_path);
  if (restore_rt_offset == 0) {
    result.refused = true;
    result.error = "the libc of process " + std::to_string(pid) +
                   " has no single __restore_rt (`mov $15, %rax; syscall`) in its code: not a glibc strata knows";
    return result;
  }
  libc_calls.restore_rt = facts.libc_base + restore_rt_offset;
  // Where the trampoline goes without a round trip (borrowed_thread.h). A test forces the code
  // page instead (STRATA_ATTACH_TEST_CODE_PAGE=1), the path of a libc with no such padding.
  uint64_t padding_offset = 0, padding_bytes = 0;
  const char* force_code_page = std::getenv("STRATA_ATTACH_TEST_CODE_PAGE");
  if ((force_code_page == nullptr || std::strcmp(force_code_page, "1") != 0) &&
      FindExecutablePadding(root + facts.libc_path, 256, &padding_offset, &padding_bytes)) {
    libc_calls.code_padding = facts.libc_base + padding_offset;
    libc_calls.code_padding_bytes = padding_bytes;
  }
  // Strata's entry point and control words: offsets in the library's own .dynsym, added to its
  // load bias in the process (the l_addr dlopen's handle starts with). No dlsym round trips.
  std::map<std::string, uint64_t> strata_symbols;
  uint64_t strata_vaddr = 0;
  if (!ReadDynamicSymbols(library_file, &strata_symbols, &strata_vaddr) ||
      !strata_symbols.count("strata_attach_start") || !strata_symbols.count("strata_attach_state") ||
      !strata_symbols.count("strata_attach_stop_request") || !strata_symbols.count("strata_attach_new_threads")) {
    result.error = library_file + " has no strata_attach_start (an older libstrata_base.so?)";
    return result;
  }
  uint64_t r_debug = 0;
  if (facts.ld_base != 0 && ReadDynamicSymbols(root + facts.ld_path, &ld_symbols, &ld_vaddr) &&
      ld_symbols.count("_r_debug")) {
    r_debug = facts.ld_base - ld_vaddr + ld_symbols["_r_debug"];
  }

  // The library's pages into the page cache now: the borrowed thread's dlopen does not wait
  // for the disk while it is stopped.
  ReadLoadSegments(library_file);

  // 1. Every thread's pointer, one short stop each.
  // What each thread waits in before the listing stops it: a timed wait (nanosleep, poll...)
  // stopped once is restarted by the kernel as restart_syscall, which says nothing of itself.
  // Kept with where it waits (its stack pointer and instruction pointer): a restart_syscall
  // has the safety of that call only when found at the same place, not when the thread woke
  // meanwhile and entered another timed wait (one that may hold a lock) that the listing's
  // stop turned into a restart_syscall.
  std::map<pid_t, BlockedCall> before_listing;
  for (pid_t tid : Threads(pid)) before_listing[tid] = ReadBlockedCall(pid, tid);
  // The safety of a call at `sp`/`pc` (the address after its `syscall` instruction), a
  // restart_syscall being that of the call it restarts.
  auto safety_of = [&before_listing](pid_t tid, long nr, uint64_t second, uint64_t sp, uint64_t pc) {
    if (nr == SYS_restart_syscall) {
      auto found = before_listing.find(tid);
      if (found == before_listing.end() || found->second.sp != sp || found->second.pc != pc) return 0;
      return SafetyOf(found->second.nr, found->second.second_argument);
    }
    return SafetyOf(nr, second);
  };
  const Clock::time_point list_start = Clock::now();
  std::string thread_list;
  bool permission_denied = false;
  // From glibc's thread lists in the process's memory (glibc_threads.h): no thread stopped. A
  // thread not found there is stopped once for its pointer (ReadThreadPointers).
  const std::vector<pid_t> tids = Threads(pid);
  const uint64_t rtld_global =
      facts.ld_base != 0 && ld_symbols.count("_rtld_global") ? facts.ld_base - ld_vaddr + ld_symbols["_rtld_global"] : 0;
  result.thread_lists = FindGlibcThreadLists(pid, libc_symbols, facts.libc_base - libc_vaddr, rtld_global);
  const std::map<pid_t, uint64_t> from_memory = GlibcThreadPointers(pid, tids, result.thread_lists);
  std::vector<pid_t> not_found;
  for (pid_t tid : tids) {
    if (from_memory.count(tid) == 0) not_found.push_back(tid);
  }
  result.threads_stopped_to_list = not_found.size();
  std::vector<ThreadPointer> pointers =
      ReadThreadPointers(pid, not_found, &result.longest_thread_stop_ms, &permission_denied,
                         &result.longest_thread_held_ms);
  if (permission_denied) {
    result.refused = true;
    result.error = PermissionAdvice(pid);
    return result;
  }
  {
    // A pointer two tasks share (a raw clone sharing its parent's TLS) is no glibc thread's own.
    std::map<uint64_t, int> uses;
    for (const auto& [tid, pointer] : from_memory) pointers.push_back({tid, pointer});
    for (const ThreadPointer& thread : pointers) ++uses[thread.pointer];
    pointers.erase(std::remove_if(pointers.begin(), pointers.end(),
                                  [&uses](const ThreadPointer& thread) { return uses[thread.pointer] != 1; }),
                   pointers.end());
  }
  for (const ThreadPointer& thread : pointers) {
    char item[64];
    std::snprintf(item, sizeof(item), "%s%d:%llx", thread_list.empty() ? "" : ",", thread.tid,
                  static_cast<unsigned long long>(thread.pointer));
    thread_list += item;
    ++result.threads_listed;
  }

  result.list_ms = MillisecondsSince(list_start);
  std::map<pid_t, uint64_t> listed_pointers;
  for (const ThreadPointer& thread : pointers) listed_pointers[thread.tid] = thread.pointer;
  // Threads in a safe call whose stack pointer is not on their own stack (a handler on an
  // alternate signal stack): never borrowed, the frame would land in the program's data.
  std::map<pid_t, std::string> stack_problems;
  // 2. Borrow a thread blocked in a safe call, while the loader is idle.
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(2);
  for (bool first = true;; first = false) {
    if (!first) usleep(2000);
    if (Clock::now() > deadline) {
      result.refused = true;
      result.error = "no thread of process " + std::to_string(pid) +
                     " could be borrowed for 2 s: none blocked in a call through libc where it holds no "
                     "lock of libc's (read, poll, accept, a condition wait...) on its own stack, or the loader "
                     "stayed busy; try again when the program waits for input";
      for (const auto& [tid, problem] : stack_problems) {
        result.error += "; thread " + std::to_string(tid) + " waits in such a call, but " + problem;
      }
      return result;
    }
    int r_state = 0;
    const bool loader_idle =
        r_debug == 0 || (ReadTarget(pid, r_debug + 24, &r_state, sizeof(r_state)) && r_state == 0);
    pid_t best = 0;
    int best_safety = 0;
    const std::vector<StackMapping> mappings = ReadMappings(pid);
    for (pid_t tid : Threads(pid)) {
      const BlockedCall call = ReadBlockedCall(pid, tid);
      const int safety = safety_of(tid, call.nr, call.second_argument, call.sp, call.pc);
      if (safety <= best_safety) continue;
      const auto pointer = listed_pointers.find(tid);
      if (tid != pid && pointer == listed_pointers.end()) continue;  // Not listed: its stack is not known.
      std::string problem = BorrowedCallProblem(mappings, facts.libc_path, facts.executable_path, call.pc);
      if (problem.empty()) {
        problem = BorrowedStackProblem(mappings, tid == pid, pointer == listed_pointers.end() ? 0 : pointer->second,
                                       call.sp);
      }
      if (!problem.empty()) {
        stack_problems[tid] = problem;
        continue;
      }
      best = tid;
      best_safety = safety;
    }
    if (loader_idle && best != 0) {
      const RealtimeWindow realtime;  // Outlives the thread's Finish (its destructor).
      result.realtime = realtime.active();
      BorrowedThread thread(pid, best, libc_calls);
      std::string error;
      if (!thread.Stop(&error)) {
        if (thread.seize_errno() == EPERM) {
          result.refused = true;
          result.error = PermissionAdvice(pid);
          return result;
        }
        continue;
      }
      // Still in that call, now that it is stopped?
      const user_regs_struct& saved = thread.saved();
      if (safety_of(best, static_cast<long>(saved.orig_rax), saved.rsi, saved.rsp, saved.rip) == 0) {
        thread.Release();
        continue;
      }
      // A call of libc's, on its own stack with room for the frame (the registers now, the
      // mappings now).
      const std::vector<StackMapping> mappings_now = ReadMappings(pid);
      std::string problem = BorrowedCallProblem(mappings_now, facts.libc_path, facts.executable_path, saved.rip);
      if (problem.empty()) problem = BorrowedStackProblem(mappings_now, best == pid, saved.fs_base, saved.rsp);
      if (!problem.empty()) {
        stack_problems[best] = problem;
        thread.Release();
        continue;
      }
      result.borrowed_tid = best;
      result.borrow_wait_ms = MillisecondsSince(deadline - std::chrono::seconds(2));
      LoadRequest load;
      load.dlopen = dlopen_address;
      load.library = library;
      load.start_offset = strata_symbols["strata_attach_start"];
      load.settings = settings + "STRATA_ATTACH_THREADS=" + thread_list + "\n";
      load.scratch_bytes = kScratchBytes;
      load.stack_room = kBorrowedStackRoom;
      bool ok = thread.Prepare(load, &error);
      if (!ok) error = "cannot prepare the borrowed thread: " + error;
      uint64_t handle = 0, start_result = 0;
      if (ok) ok = thread.LoadAndStart(&handle, &start_result, &error);
      if (ok && handle == 0) {
        uint64_t message = 0;
        std::string why = "unknown";
        if (thread.Call(dlerror_address, {}, &message, &error) && message != 0) why = ReadTargetString(pid, message);
        error = "dlopen(" + library + ") failed in the target: " + why;
        ok = false;
      }
      uint64_t load_bias = 0;
      if (ok && !ReadTarget(pid, handle, &load_bias, sizeof(load_bias))) {  // link_map::l_addr
        ok = false;
        error = "cannot read the library's load address in the target";
      }
      if (ok) {
        result.state_address = load_bias + strata_symbols["strata_attach_state"];
        result.stop_address = load_bias + strata_symbols["strata_attach_stop_request"];
        result.mailbox_address = load_bias + strata_symbols["strata_attach_new_threads"];
        if (strata_symbols.count("strata_attach_worker_tid")) {
          result.worker_tid_address = load_bias + strata_symbols["strata_attach_worker_tid"];
        }
        uint64_t worker_thread = 0;
        int32_t worker_tid = 0;
        if (strata_symbols.count("strata_attach_worker_thread") && result.thread_lists.found() &&
            ReadTarget(pid, load_bias + strata_symbols["strata_attach_worker_thread"], &worker_thread,
                       sizeof(worker_thread)) &&
            worker_thread != 0 && ReadTarget(pid, worker_thread + result.thread_lists.tid, &worker_tid, sizeof(worker_tid))) {
          result.worker_tid = worker_tid;
        }
      }
      thread.Finish();
      result.borrowed_stop_ms = thread.StoppedMilliseconds();
      result.borrowed_held_ms = thread.HeldMilliseconds();
      result.borrowed_round_trips = thread.ptrace_round_trips();
      result.borrowed_phases = thread.Phases();
      if (!ok) {
        result.error = error;
        return result;
      }
      result.start_result = static_cast<int>(start_result);
      result.ok = true;
      return result;
    }
  }
}

}  // namespace attach
}  // namespace strata
