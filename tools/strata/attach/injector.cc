// See injector.h.
#include "tools/strata/attach/injector.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "tools/strata/attach/elf_symbols.h"

namespace strata {
namespace attach {
namespace {

using Clock = std::chrono::steady_clock;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

constexpr int kNtX86Xstate = 0x202;          // NT_X86_XSTATE
constexpr size_t kScratchBytes = 256 * 1024;  // The borrowed thread's private stack + strings.

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

// A thread stopped by us, seized.
class SeizedThread {
 public:
  explicit SeizedThread(pid_t tid) : tid_(tid) {}
  ~SeizedThread() { Detach(); }

  // Seizes and interrupts the thread; true once it is in its interrupt stop. A signal stop
  // that comes first is given back to the thread (Detach with it) and counts as a failure.
  bool Stop(std::string* error) {
    if (!SeizeAndInterrupt(error)) return false;
    int status = 0;
    for (;;) {
      const pid_t waited = waitpid(tid_, &status, __WALL);
      if (waited < 0 && errno == EINTR) continue;
      if (waited != tid_) {
        *error = std::string("waitpid: ") + std::strerror(errno);
        return false;
      }
      break;
    }
    return OnReported(status, error);
  }

  // Stop() in two halves, for stopping several threads at once: the request, then what
  // waitpid reported for this thread.
  bool SeizeAndInterrupt(std::string* error) {
    if (ptrace(PTRACE_SEIZE, tid_, nullptr, nullptr) != 0) {
      seize_errno_ = errno;
      *error = std::string("PTRACE_SEIZE: ") + std::strerror(errno);
      return false;
    }
    seized_ = true;
    if (ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr) != 0) {
      *error = std::string("PTRACE_INTERRUPT: ") + std::strerror(errno);
      return false;
    }
    return true;
  }

  bool OnReported(int status, std::string* error) {
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      seized_ = false;
      *error = "the thread ended";
      return false;
    }
    stop_start_ = Clock::now();  // The thread is stopped from here (it ran until now).
    if ((status >> 16) == PTRACE_EVENT_STOP) {
      stopped_ = true;
      return ptrace(PTRACE_GETREGS, tid_, nullptr, &saved_) == 0;
    }
    // A signal-delivery stop: hand the signal back when we let go.
    pending_signal_ = WSTOPSIG(status);
    stopped_ = true;
    *error = "a signal arrived first";
    return false;
  }

  int seize_errno() const { return seize_errno_; }
  const user_regs_struct& saved() const { return saved_; }

  bool SaveExtendedState() {
    xstate_.resize(64 * 1024);
    struct iovec vector = {xstate_.data(), xstate_.size()};
    if (ptrace(PTRACE_GETREGSET, tid_, reinterpret_cast<void*>(kNtX86Xstate), &vector) != 0) {
      xstate_.clear();
      return false;
    }
    xstate_.resize(vector.iov_len);
    return true;
  }

  // Calls `function(args...)` on the thread with its stack at `stack_top`; the return value
  // in *result. False when the call did not come back (the process ended, or it faulted).
  bool Call(pid_t pid, uint64_t function, std::initializer_list<uint64_t> arguments, uint64_t stack_top,
            uint64_t* result, std::string* error) {
    user_regs_struct regs = saved_;
    unsigned long long* slots[] = {&regs.rdi, &regs.rsi, &regs.rdx, &regs.rcx, &regs.r8, &regs.r9};
    size_t i = 0;
    for (uint64_t argument : arguments) *slots[i++] = argument;
    regs.rip = function;
    regs.rax = 0;
    regs.orig_rax = static_cast<uint64_t>(-1);  // No system call restart.
    regs.eflags &= ~0x400ULL;                   // DF clear, as the ABI wants at a call.
    regs.rsp = (stack_top & ~15ULL) - 8;        // rsp % 16 == 8 at entry: a return address.
    const uint64_t return_address = 0;
    struct iovec local = {const_cast<uint64_t*>(&return_address), sizeof(return_address)};
    struct iovec remote = {reinterpret_cast<void*>(regs.rsp), sizeof(return_address)};
    if (process_vm_writev(pid, &local, 1, &remote, 1, 0) != sizeof(return_address)) {
      *error = std::string("cannot write the call's return address: ") + std::strerror(errno);
      return false;
    }
    if (ptrace(PTRACE_SETREGS, tid_, nullptr, &regs) != 0) {
      *error = std::string("PTRACE_SETREGS: ") + std::strerror(errno);
      return false;
    }
    int pass_signal = 0;
    for (;;) {
      if (ptrace(PTRACE_CONT, tid_, nullptr, reinterpret_cast<void*>(static_cast<long>(pass_signal))) != 0) {
        *error = std::string("PTRACE_CONT: ") + std::strerror(errno);
        return false;
      }
      pass_signal = 0;
      int status = 0;
      pid_t waited;
      do {
        waited = waitpid(tid_, &status, __WALL);
      } while (waited < 0 && errno == EINTR);
      if (waited != tid_) {
        *error = std::string("waitpid: ") + std::strerror(errno);
        return false;
      }
      if (WIFEXITED(status) || WIFSIGNALED(status)) {
        seized_ = stopped_ = false;
        *error = "the process ended during the call";
        return false;
      }
      if ((status >> 16) != 0) continue;  // An event or group stop: go on.
      const int signal_number = WSTOPSIG(status);
      if (signal_number == SIGSEGV) {
        user_regs_struct after;
        if (ptrace(PTRACE_GETREGS, tid_, nullptr, &after) != 0) {
          *error = std::string("PTRACE_GETREGS: ") + std::strerror(errno);
          return false;
        }
        if (after.rip == return_address) {
          *result = after.rax;
          return true;
        }
        *error = "the call faulted in the target (SIGSEGV at " + std::to_string(after.rip) + ")";
        return false;
      }
      pass_signal = signal_number;  // The program's own signal: its handler runs on top.
    }
  }

  // Puts the saved registers back (an epoll wait's EINTR rewound, see injector.h) and lets go.
  void Detach() {
    if (!seized_) return;
    if (stopped_ && pending_signal_ == 0) {
      user_regs_struct regs = saved_;
      if (static_cast<long>(regs.rax) == -EINTR && static_cast<long>(regs.orig_rax) >= 0 &&
          !HasDeliverableSignal()) {
        // A call the kernel ends with a plain EINTR when its thread is merely stopped
        // (epoll_wait, sigtimedwait, semop, msgrcv...: signal(7)), and no signal of the
        // program's is due that would have ended it: rewound to its `syscall` instruction.
        errno = 0;
        const long word = ptrace(PTRACE_PEEKTEXT, tid_, reinterpret_cast<void*>(regs.rip - 2), nullptr);
        if (errno == 0 && (word & 0xffff) == 0x050f) {
          regs.rax = regs.orig_rax;
          regs.rip -= 2;
        }
      }
      if (!xstate_.empty()) {
        struct iovec vector = {xstate_.data(), xstate_.size()};
        ptrace(PTRACE_SETREGSET, tid_, reinterpret_cast<void*>(kNtX86Xstate), &vector);
      }
      ptrace(PTRACE_SETREGS, tid_, nullptr, &regs);
    }
    ptrace(PTRACE_DETACH, tid_, nullptr, reinterpret_cast<void*>(static_cast<long>(pending_signal_)));
    seized_ = false;
    stopped_ = false;
  }

  double StoppedMilliseconds() const { return MillisecondsSince(stop_start_); }

 private:
  // Whether a signal is pending for the thread (its own or the process's) that its mask lets
  // through: then an EINTR at the stop may be that signal's, and stays.
  bool HasDeliverableSignal() const {
    std::ifstream status("/proc/" + std::to_string(tid_) + "/status");
    uint64_t pending = 0, blocked = 0;
    std::string line;
    while (std::getline(status, line)) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key = line.substr(0, colon);
      if (key == "SigPnd" || key == "ShdPnd") pending |= std::strtoull(line.c_str() + colon + 1, nullptr, 16);
      if (key == "SigBlk") blocked = std::strtoull(line.c_str() + colon + 1, nullptr, 16);
    }
    return (pending & ~blocked) != 0;
  }

  pid_t tid_;
  bool seized_ = false;
  bool stopped_ = false;
  int pending_signal_ = 0;
  int seize_errno_ = 0;
  user_regs_struct saved_{};
  std::vector<uint8_t> xstate_;
  Clock::time_point stop_start_;
};

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

// The system call thread `tid` is blocked in and its second argument, from
// /proc/PID/task/TID/syscall ("running" or a signal: -1).
long BlockedSyscall(pid_t pid, pid_t tid, uint64_t* second_argument) {
  std::ifstream in(ProcPath(pid, "task/" + std::to_string(tid) + "/syscall"));
  std::string number, first, second;
  if (!(in >> number)) return -1;
  char* end = nullptr;
  const long nr = std::strtol(number.c_str(), &end, 10);
  if (end == number.c_str() || *end != '\0') return -1;
  in >> first >> second;
  *second_argument = std::strtoull(second.c_str(), nullptr, 16);
  return nr;
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
  struct iovec local = {buffer, length};
  struct iovec remote = {reinterpret_cast<void*>(address), length};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(length);
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

}  // namespace

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
  // The libraries: libc.so.6 and the loader (absent: a static program), and Strata.
  std::ifstream maps(ProcPath(pid, "maps"));
  if (!maps) return PermissionAdvice(pid);
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, permissions, offset, device, inode, path;
    fields >> range >> permissions >> offset >> device >> inode;
    std::getline(fields >> std::ws, path);
    if (path.empty() || path[0] != '/') continue;
    const std::string name = path.substr(path.rfind('/') + 1);
    const uint64_t start = std::strtoull(range.c_str(), nullptr, 16);
    const bool first = std::strtoull(offset.c_str(), nullptr, 16) == 0;
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

std::vector<ThreadPointer> ReadThreadPointers(pid_t pid, const std::vector<pid_t>& tids, double* longest_stop_ms,
                                              bool* permission_denied) {
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
  const uint64_t mmap_address = libc("mmap"), munmap_address = libc("munmap"), dlopen_address = libc("dlopen"),
                 dlerror_address = libc("dlerror");
  if (!mmap_address || !munmap_address || !dlopen_address || !dlerror_address) {
    result.refused = true;
    result.error = "the libc of process " + std::to_string(pid) +
                   " does not export dlopen (glibc older than 2.34?): attach needs glibc >= 2.34";
    return result;
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

  // 1. Every thread's pointer, one short stop each.
  const Clock::time_point list_start = Clock::now();
  std::string thread_list;
  bool permission_denied = false;
  const std::vector<ThreadPointer> pointers =
      ReadThreadPointers(pid, Threads(pid), &result.longest_thread_stop_ms, &permission_denied);
  if (permission_denied) {
    result.refused = true;
    result.error = PermissionAdvice(pid);
    return result;
  }
  for (const ThreadPointer& thread : pointers) {
    char item[64];
    std::snprintf(item, sizeof(item), "%s%d:%llx", thread_list.empty() ? "" : ",", thread.tid,
                  static_cast<unsigned long long>(thread.pointer));
    thread_list += item;
    ++result.threads_listed;
  }

  result.list_ms = MillisecondsSince(list_start);
  // 2. Borrow a thread blocked in a safe call, while the loader is idle.
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(2);
  for (bool first = true;; first = false) {
    if (!first) usleep(2000);
    if (Clock::now() > deadline) {
      result.refused = true;
      result.error = "no thread of process " + std::to_string(pid) +
                     " could be borrowed for 2 s: none blocked in a call where it holds no lock of "
                     "libc's (read, poll, accept, a condition wait...), or the loader stayed busy; "
                     "try again when the program waits for input";
      return result;
    }
    int r_state = 0;
    const bool loader_idle =
        r_debug == 0 || (ReadTarget(pid, r_debug + 24, &r_state, sizeof(r_state)) && r_state == 0);
    pid_t best = 0;
    int best_safety = 0;
    for (pid_t tid : Threads(pid)) {
      uint64_t second = 0;
      const long nr = BlockedSyscall(pid, tid, &second);  // Before `second` is read.
      const int safety = SafetyOf(nr, second);
      if (safety > best_safety) {
        best = tid;
        best_safety = safety;
      }
    }
    if (loader_idle && best != 0) {
      SeizedThread thread(best);
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
      if (SafetyOf(static_cast<long>(saved.orig_rax), saved.rsi) == 0) {
        thread.Detach();
        continue;
      }
      result.borrowed_tid = best;
      result.borrow_wait_ms = MillisecondsSince(deadline - std::chrono::seconds(2));
      if (!thread.SaveExtendedState()) {
        result.error = "cannot read the XSAVE state of the borrowed thread";
        return result;
      }
      // The scratch mapping: called with the program's stack 1 KiB below its red zone
      // (mmap's wrapper uses a few words).
      uint64_t scratch = 0;
      const uint64_t program_stack = saved.rsp - 128 - 1024;
      if (!thread.Call(pid, mmap_address,
                       {0, kScratchBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, static_cast<uint64_t>(-1), 0},
                       program_stack, &scratch, &error) ||
          scratch > static_cast<uint64_t>(-4096)) {
        result.error = "mmap in the target failed: " + error;
        thread.Detach();
        result.borrowed_stop_ms = thread.StoppedMilliseconds();
        return result;
      }
      const uint64_t stack_top = scratch + kScratchBytes;
      // Strings at the bottom of the scratch: library, names, settings.
      const std::string full_settings = settings + "STRATA_ATTACH_THREADS=" + thread_list + "\n";
      std::string strings;
      auto place = [&](const std::string& text) {
        const uint64_t address = scratch + strings.size();
        strings += text;
        strings += '\0';
        return address;
      };
      const uint64_t library_address = place(library);
      const uint64_t settings_address = place(full_settings);
      bool ok = strings.size() < kScratchBytes / 2 && WriteTarget(pid, scratch, strings.data(), strings.size());
      if (!ok) error = "cannot write the library path into the target";
      uint64_t handle = 0, start = 0;
      if (ok) {
        ok = thread.Call(pid, dlopen_address, {library_address, static_cast<uint64_t>(RTLD_NOW)}, stack_top, &handle, &error);
        if (ok && handle == 0) {
          uint64_t message = 0;
          std::string why = "unknown";
          if (thread.Call(pid, dlerror_address, {}, stack_top, &message, &error) && message != 0) {
            why = ReadTargetString(pid, message);
          }
          error = "dlopen(" + library + ") failed in the target: " + why;
          ok = false;
        }
      }
      uint64_t load_bias = 0;
      if (ok && !ReadTarget(pid, handle, &load_bias, sizeof(load_bias))) {  // link_map::l_addr
        ok = false;
        error = "cannot read the library's load address in the target";
      }
      if (ok) {
        start = load_bias + strata_symbols["strata_attach_start"];
        result.state_address = load_bias + strata_symbols["strata_attach_state"];
        result.stop_address = load_bias + strata_symbols["strata_attach_stop_request"];
        result.mailbox_address = load_bias + strata_symbols["strata_attach_new_threads"];
      }
      uint64_t start_result = 0;
      if (ok) ok = thread.Call(pid, start, {settings_address}, stack_top, &start_result, &error);
      uint64_t ignored = 0;
      std::string unmap_error;
      thread.Call(pid, munmap_address, {scratch, kScratchBytes}, program_stack, &ignored, &unmap_error);
      thread.Detach();
      result.borrowed_stop_ms = thread.StoppedMilliseconds();
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
