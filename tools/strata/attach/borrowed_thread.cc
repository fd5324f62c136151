// See borrowed_thread.h.
#include "tools/strata/attach/borrowed_thread.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "tools/strata/attach/injector.h"

namespace strata {
namespace attach {
namespace {

// The kernel's frame for rt_sigreturn on x86-64 (arch/x86/include/asm/sigframe.h: the return
// slot, then struct ucontext with struct sigcontext_64; uapi asm/sigcontext.h).
struct KernelSigcontext {
  uint64_t r8, r9, r10, r11, r12, r13, r14, r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags;
  uint16_t cs, gs, fs, ss;
  uint64_t err, trapno, oldmask, cr2, fpstate;
  uint64_t reserved[8];
};
static_assert(sizeof(KernelSigcontext) == 256, "struct sigcontext_64");
struct KernelUcontext {
  uint64_t flags;
  uint64_t link;
  uint64_t stack_pointer;  // stack_t
  int32_t stack_flags;
  int32_t stack_padding;
  uint64_t stack_size;
  KernelSigcontext mcontext;
  uint64_t sigmask;
};
static_assert(sizeof(KernelUcontext) == 304, "struct ucontext");
constexpr uint64_t kUcFpXstate = 0x1, kUcSigcontextSs = 0x2, kUcStrictRestoreSs = 0x4;
constexpr int32_t kInvalidAltstackMode = 0x10;  // Neither 0, SS_ONSTACK nor SS_DISABLE: EINVAL.
constexpr uint32_t kXstateMagic1 = 0x46505853, kXstateMagic2 = 0x46505845;
constexpr size_t kSwBytesOffset = 464;  // fxsave's sw_reserved: struct _fpx_sw_bytes.

// The trampoline (see the header): the same bytes for every attach (what changes is in the
// registers SetCallRegisters gives it), so that two strata writing it into the same padding of
// libc's code write the same bytes. Offsets: kGenericReturn, where a Call returns (its result
// into %r12), falls through into the signal block; kAfterSignal is where the trampoline's stop
// is seen; kLoad runs the whole load (LoadAndStart).
constexpr size_t kGenericReturn = 0;
constexpr size_t kSignalBlock = 3;
constexpr size_t kAfterSignal = 33;
constexpr size_t kLoad = 48;

class CodeWriter {
 public:
  CodeWriter& Bytes(std::initializer_list<uint8_t> bytes) {
    code_.insert(code_.end(), bytes);
    return *this;
  }
  CodeWriter& Imm32(uint32_t value) {
    for (int i = 0; i < 4; ++i) code_.push_back(static_cast<uint8_t>(value >> (8 * i)));
    return *this;
  }
  CodeWriter& Imm64(uint64_t value) {
    for (int i = 0; i < 8; ++i) code_.push_back(static_cast<uint8_t>(value >> (8 * i)));
    return *this;
  }
  // A rel32 jump (opcode bytes given) to `target`.
  CodeWriter& JumpTo(std::initializer_list<uint8_t> opcode, size_t target) {
    Bytes(opcode);
    return Imm32(static_cast<uint32_t>(static_cast<int64_t>(target) - static_cast<int64_t>(code_.size() + 4)));
  }
  size_t size() const { return code_.size(); }
  std::vector<uint8_t>& code() { return code_; }

 private:
  std::vector<uint8_t> code_;
};

// Registers at kLoad and kSignalBlock (callee-saved: they survive dlopen and the start, and a
// program's handler that runs on top): %rbx the frame (what rt_sigreturn reads), %ebp the
// trampoline's signal; at kLoad also %r12 the library's path, %r13 the settings, %r14 dlopen,
// %r15 strata_attach_start's .dynsym value.
std::vector<uint8_t> TrampolineCode(size_t scratch_size) {
  CodeWriter w;
  w.Bytes({0x49, 0x89, 0xc4});                                  // mov %rax, %r12
  // kSignalBlock: onto the frame's stack, tgkill(getpid(), gettid(), %ebp), then
  // rt_sigreturn with the frame. The stack pointer is the frame's before the first system
  // call: a signal of the program's delivered at any system call's return from here on
  // gets its frame pushed on the thread's own stack, below the frame (into the strings, read
  // by then), never on the private stack, which is unmapped by then (a frame that cannot be
  // pushed makes the kernel kill with SIGSEGV).
  w.Bytes({0x48, 0x89, 0xdc});                                  // mov %rbx, %rsp
  w.Bytes({0xb8}).Imm32(SYS_getpid);                            // mov $SYS_getpid, %eax
  w.Bytes({0x0f, 0x05, 0x89, 0xc7});                            // syscall; mov %eax, %edi
  w.Bytes({0xb8}).Imm32(SYS_gettid);                            // mov $SYS_gettid, %eax
  w.Bytes({0x0f, 0x05, 0x89, 0xc6});                            // syscall; mov %eax, %esi
  w.Bytes({0x89, 0xea});                                        // mov %ebp, %edx
  w.Bytes({0xb8}).Imm32(SYS_tgkill);                            // mov $SYS_tgkill, %eax
  w.Bytes({0x0f, 0x05});                                        // syscall
  if (w.size() != kAfterSignal) std::abort();                   // The signal block's layout.
  w.Bytes({0xb8}).Imm32(SYS_rt_sigreturn);                      // mov $SYS_rt_sigreturn, %eax
  w.Bytes({0x0f, 0x05, 0x0f, 0x0b});                            // syscall; ud2
  while (w.size() < kLoad) w.Bytes({0xcc});
  // kLoad: scratch = mmap(...); on its stack (its address pushed twice: kept, and the stack
  // 16-byte aligned at the calls) handle = dlopen(library, RTLD_NOW); then
  // strata_attach_start(settings) at handle->l_addr + its offset; munmap(scratch).
  // At the stop: %r12 the start's result (mmap's error; 0 when dlopen failed), %r13 the
  // handle, %r14 the scratch still mapped (0 when unmapped or never mapped).
  const uint32_t scratch_bytes = static_cast<uint32_t>(scratch_size);
  w.Bytes({0xb8}).Imm32(SYS_mmap);                              // mov $SYS_mmap, %eax
  w.Bytes({0x31, 0xff});                                        // xor %edi, %edi
  w.Bytes({0xbe}).Imm32(scratch_bytes);                         // mov $bytes, %esi
  w.Bytes({0xba}).Imm32(PROT_READ | PROT_WRITE);                // mov $prot, %edx
  w.Bytes({0x41, 0xba}).Imm32(MAP_PRIVATE | MAP_ANONYMOUS);     // mov $flags, %r10d
  w.Bytes({0x49, 0xc7, 0xc0}).Imm32(0xffffffff);                // mov $-1, %r8
  w.Bytes({0x45, 0x31, 0xc9});                                  // xor %r9d, %r9d
  w.Bytes({0x0f, 0x05});                                        // syscall
  w.Bytes({0x48, 0x3d}).Imm32(static_cast<uint32_t>(-4096));    // cmp $-4096, %rax
  w.Bytes({0x76, 0x0e});                                        // jbe mapped
  w.Bytes({0x49, 0x89, 0xc4});                                  // mov %rax, %r12 (an error)
  w.Bytes({0x45, 0x31, 0xed});                                  // xor %r13d, %r13d
  w.Bytes({0x45, 0x31, 0xf6});                                  // xor %r14d, %r14d
  w.JumpTo({0xe9}, kSignalBlock);                               // jmp signal
  // mapped:
  w.Bytes({0x48, 0x8d, 0xa0}).Imm32(scratch_bytes);             // lea bytes(%rax), %rsp
  w.Bytes({0x50, 0x50});                                        // push %rax; push %rax
  w.Bytes({0x4c, 0x89, 0xe7});                                  // mov %r12, %rdi
  w.Bytes({0xbe}).Imm32(RTLD_NOW);                              // mov $RTLD_NOW, %esi
  w.Bytes({0x41, 0xff, 0xd6});                                  // call *%r14
  w.Bytes({0x48, 0x85, 0xc0});                                  // test %rax, %rax
  w.Bytes({0x75, 0x0f});                                        // jnz loaded
  w.Bytes({0x45, 0x31, 0xe4});                                  // xor %r12d, %r12d (dlopen failed)
  w.Bytes({0x45, 0x31, 0xed});                                  // xor %r13d, %r13d
  w.Bytes({0x4c, 0x8b, 0x34, 0x24});                            // mov (%rsp), %r14: the scratch, kept
  w.JumpTo({0xe9}, kSignalBlock);                               // jmp signal
  // loaded:
  w.Bytes({0x49, 0x89, 0xc4});                                  // mov %rax, %r12: the handle
  w.Bytes({0x48, 0x8b, 0x00});                                  // mov (%rax), %rax: l_addr
  w.Bytes({0x4c, 0x01, 0xf8});                                  // add %r15, %rax
  w.Bytes({0x4c, 0x89, 0xef});                                  // mov %r13, %rdi
  w.Bytes({0xff, 0xd0});                                        // call *%rax
  w.Bytes({0x4d, 0x89, 0xe5});                                  // mov %r12, %r13: the handle
  w.Bytes({0x49, 0x89, 0xc4});                                  // mov %rax, %r12: the result
  w.Bytes({0x5f, 0x5f});                                        // pop %rdi; pop %rdi: the scratch
  // Off the private stack before it is unmapped: a signal delivered at munmap's return
  // pushes its frame where %rsp points (seen: the program's sampling signal there, and the
  // kernel's SIGSEGV for the frame it could not push).
  w.Bytes({0x48, 0x89, 0xdc});                                  // mov %rbx, %rsp
  w.Bytes({0xb8}).Imm32(SYS_munmap);                            // mov $SYS_munmap, %eax
  w.Bytes({0xbe}).Imm32(scratch_bytes);                         // mov $bytes, %esi
  w.Bytes({0x0f, 0x05});                                        // syscall
  w.Bytes({0x45, 0x31, 0xf6});                                  // xor %r14d, %r14d
  w.JumpTo({0xe9}, kSignalBlock);                               // jmp signal
  return std::move(w.code());
}

// A signal whose default action is to ignore it, which the program has no handler for (SigCgt
// of /proc/PID/status): SIGURG, SIGWINCH or SIGCHLD (not SIGCONT: sending it cancels stops);
// one the thread does not block (`blocked`) when there is one, so that its mask need not
// change for the call (a process-directed one it blocks could otherwise land on it). SIGURG
// when the program handles them all (its handler then runs once if strata dies mid-call).
int QuietSignal(pid_t pid, uint64_t blocked) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  uint64_t caught = 0;
  while (std::getline(status, line)) {
    if (line.rfind("SigCgt:", 0) == 0) caught = std::strtoull(line.c_str() + 7, nullptr, 16);
  }
  int fallback = 0;
  for (int candidate : {SIGURG, SIGWINCH, SIGCHLD}) {
    const uint64_t bit = uint64_t{1} << (candidate - 1);
    if ((caught & bit) != 0) continue;
    if ((blocked & bit) == 0) return candidate;
    if (fallback == 0) fallback = candidate;
  }
  return fallback != 0 ? fallback : SIGURG;
}

bool WriteMemory(pid_t pid, uint64_t address, const void* data, size_t length) {
  struct iovec local = {const_cast<void*>(data), length};
  struct iovec remote = {reinterpret_cast<void*>(address), length};
  return process_vm_writev(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(length);
}

// PTRACE_GET_SYSCALL_INFO's answer (linux/ptrace.h), the part used.
struct SyscallInfo {
  uint8_t op;  // 1: entry, 2: exit.
  uint8_t padding[3];
  uint32_t arch;
  uint64_t instruction_pointer;
  uint64_t stack_pointer;
  union {
    struct {
      uint64_t nr;
      uint64_t args[6];
    } entry;
    struct {
      int64_t rval;
      uint8_t is_error;
    } exit;
  };
};

int EnvironmentInt(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : 0;
}

}  // namespace

BorrowedThread::BorrowedThread(pid_t pid, pid_t tid, const LibcCalls& libc)
    : pid_(pid), thread_(tid), libc_(libc) {
  kill_at_ = EnvironmentInt("STRATA_ATTACH_TEST_KILL_AT");
  step_delay_ms_ = EnvironmentInt("STRATA_ATTACH_TEST_STEP_DELAY_MS");
  if (const int timeout_ms = EnvironmentInt("STRATA_ATTACH_TEST_CALL_TIMEOUT_MS"); timeout_ms > 0) {
    call_timeout_ms_ = timeout_ms;
  }
}

BorrowedThread::~BorrowedThread() { Finish(); }

void BorrowedThread::Step() {
  if (round_trips_++ == 0 && step_delay_ms_ > 0) {
    std::fprintf(stderr, "strata record: STRATA_ATTACH_TEST_STEP_DELAY_MS=%d: the injection starts\n", step_delay_ms_);
  }
  if (kill_at_ > 0 && ++steps_ == kill_at_) {
    std::fprintf(stderr, "strata record: STRATA_ATTACH_TEST_KILL_AT=%d: killing strata now\n", kill_at_);
    kill(getpid(), SIGKILL);
  }
  if (step_delay_ms_ > 0) usleep(static_cast<useconds_t>(step_delay_ms_) * 1000);
}

std::string BorrowedThread::Phases() const {
  char text[128];
  std::snprintf(text, sizeof(text), "prepare %.2f + load %.2f + finish %.2f ms, %d ptrace requests", prepare_ms_,
                load_ms_, finish_ms_, round_trips_);
  return text;
}

bool BorrowedThread::Stop(std::string* error) {
  Step();
  if (!thread_.Stop(error, PTRACE_O_TRACESYSGOOD)) return false;
  if (ptrace(PTRACE_GETSIGMASK, thread_.tid(), reinterpret_cast<void*>(sizeof(signal_mask_)), &signal_mask_) != 0) {
    *error = std::string("PTRACE_GETSIGMASK: ") + std::strerror(errno);
    return false;
  }
  if (!thread_.SaveExtendedState()) {
    *error = "cannot read the XSAVE state of the borrowed thread";
    return false;
  }
  return true;
}

bool BorrowedThread::WriteFrame(std::string* error) {
  const user_regs_struct resume = thread_.RegistersToResume();
  const std::vector<uint8_t>& xstate = thread_.xstate();
  // Below the red zone and 1 KiB more: the XSAVE area (64-byte aligned, magic2 after it), the
  // ucontext under it (16-byte aligned), the return slot under that.
  // The frame's XSAVE area is ptrace's, with the software bytes rt_sigreturn checks before it
  // restores more than the legacy area (struct _fpx_sw_bytes: magic1, sizes, features; magic2
  // after the area). ptrace puts XCR0 there instead (gdb's I386_LINUX_XSAVE_XCR0_OFFSET);
  // older kernels the signal frame's bytes themselves.
  std::vector<uint8_t> fpstate = xstate;
  if (xstate.size() >= kSwBytesOffset + 48) {
    uint32_t magic1 = 0;
    uint64_t features = 0;
    std::memcpy(&magic1, xstate.data() + kSwBytesOffset, 4);
    std::memcpy(&features, xstate.data() + kSwBytesOffset + (magic1 == kXstateMagic1 ? 8 : 0), 8);
    const uint32_t size = static_cast<uint32_t>(xstate.size()), extended_size = size + 4;
    std::memset(fpstate.data() + kSwBytesOffset, 0, 48);
    std::memcpy(fpstate.data() + kSwBytesOffset, &kXstateMagic1, 4);
    std::memcpy(fpstate.data() + kSwBytesOffset + 4, &extended_size, 4);
    std::memcpy(fpstate.data() + kSwBytesOffset + 8, &features, 8);
    std::memcpy(fpstate.data() + kSwBytesOffset + 16, &size, 4);
    fpstate.resize(size + 4);
    std::memcpy(fpstate.data() + size, &kXstateMagic2, 4);
  }
  const uint64_t below = thread_.saved().rsp - 128 - 1024;
  const uint64_t fpstate_address = (below - fpstate.size()) & ~63ULL;
  const uint64_t ucontext_address = (fpstate_address - sizeof(KernelUcontext)) & ~15ULL;
  frame_ = ucontext_address - 8;

  KernelUcontext context{};
  context.flags = kUcFpXstate | kUcSigcontextSs | kUcStrictRestoreSs;
  context.stack_flags = kInvalidAltstackMode;
  KernelSigcontext& m = context.mcontext;
  m.r8 = resume.r8, m.r9 = resume.r9, m.r10 = resume.r10, m.r11 = resume.r11;
  m.r12 = resume.r12, m.r13 = resume.r13, m.r14 = resume.r14, m.r15 = resume.r15;
  m.rdi = resume.rdi, m.rsi = resume.rsi, m.rbp = resume.rbp, m.rbx = resume.rbx;
  m.rdx = resume.rdx, m.rax = resume.rax, m.rcx = resume.rcx, m.rsp = resume.rsp;
  m.rip = resume.rip, m.eflags = resume.eflags;
  m.cs = static_cast<uint16_t>(resume.cs);
  m.ss = static_cast<uint16_t>(resume.ss);
  m.fpstate = xstate.empty() ? 0 : fpstate_address;
  context.sigmask = signal_mask_;
  if (!xstate.empty() && !WriteMemory(pid_, fpstate_address, fpstate.data(), fpstate.size())) {
    *error = std::string("cannot write on the borrowed thread's stack: ") + std::strerror(errno);
    return false;
  }
  if (!WriteMemory(pid_, ucontext_address, &context, sizeof(context)) ||
      !WriteMemory(pid_, frame_, &libc_.restore_rt, sizeof(libc_.restore_rt))) {
    *error = std::string("cannot write on the borrowed thread's stack: ") + std::strerror(errno);
    return false;
  }
  return true;
}

bool BorrowedThread::SetCallRegisters(uint64_t function, std::initializer_list<uint64_t> arguments,
                                      uint64_t stack_pointer, std::string* error) {
  user_regs_struct regs = thread_.saved();
  unsigned long long* slots[] = {&regs.rdi, &regs.rsi, &regs.rdx, &regs.rcx, &regs.r8, &regs.r9};
  size_t i = 0;
  for (uint64_t argument : arguments) *slots[i++] = argument;
  regs.rip = function;
  regs.rax = 0;
  regs.orig_rax = static_cast<uint64_t>(-1);  // No system call restart.
  regs.eflags &= ~0x400ULL;                   // DF clear, as the ABI wants at a call.
  regs.rsp = stack_pointer;                   // rsp % 16 == 8 at entry: the return address.
  // The trampoline's registers (TrampolineCode); callee-saved, so harmless for libc's calls.
  regs.rbx = frame_ + 8;
  regs.rbp = static_cast<uint64_t>(stop_signal_);
  regs.r12 = library_string_;
  regs.r13 = settings_string_;
  regs.r14 = load_.dlopen;
  regs.r15 = load_.start_offset;
  Step();
  if (ptrace(PTRACE_SETREGS, thread_.tid(), nullptr, &regs) != 0) {
    *error = std::string("PTRACE_SETREGS: ") + std::strerror(errno);
    return false;
  }
  return true;
}

// A libc function that makes one system call (mmap, munmap), returning to __restore_rt with the
// frame: followed by syscall stops up to its call's exit stop, where the thread stays.
bool BorrowedThread::CallReturningToRestore(uint64_t function, std::initializer_list<uint64_t> arguments,
                                            uint64_t* result, std::string* error) {
  const long expected = function == libc_.mmap ? SYS_mmap : SYS_munmap;
  if (!SetCallRegisters(function, arguments, frame_, error)) return false;
  in_signal_code_ = false;  // It stops at syscall stops now, not in the signal code.
  const pid_t tid = thread_.tid();
  long entered = -1;
  int pass_signal = 0;
  for (;;) {
    Step();
    if (ptrace(PTRACE_SYSCALL, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(pass_signal))) != 0) {
      *error = std::string("PTRACE_SYSCALL: ") + std::strerror(errno);
      return false;
    }
    pass_signal = 0;
    int status = 0;
    pid_t waited;
    do {
      waited = waitpid(tid, &status, __WALL);
    } while (waited < 0 && errno == EINTR);
    if (waited != tid || WIFEXITED(status) || WIFSIGNALED(status)) {
      *error = "the process ended during the call";
      broken_ = true;
      return false;
    }
    if ((status >> 16) != 0) continue;  // An event or group stop: go on.
    if (WSTOPSIG(status) != (SIGTRAP | 0x80)) {
      pass_signal = WSTOPSIG(status);  // The program's own signal: its handler runs on top.
      continue;
    }
    SyscallInfo info{};
    if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, reinterpret_cast<void*>(sizeof(info)), &info) <= 0) {
      *error = std::string("PTRACE_GET_SYSCALL_INFO: ") + std::strerror(errno);
      return false;
    }
    if (info.op == 1) {
      entered = static_cast<long>(info.entry.nr);
    } else if (info.op == 2 && entered == expected) {
      *result = static_cast<uint64_t>(info.exit.rval);
      return true;
    }
  }
}

namespace {

// waitpid(tid) until `deadline`: tid, -1 on an error, 0 when the deadline passed first. Woken
// by the SIGCHLD the kernel sends the tracer at each stop of its tracee (blocked meanwhile, so
// that one sent between waitpid and sigtimedwait stays pending): no sleep between polls, the
// stop is seen as soon as strata runs; each wait bounded by 5 ms all the same.
pid_t WaitUntil(pid_t tid, int* status, Clock::time_point deadline) {
  sigset_t child, previous;
  sigemptyset(&child);
  sigaddset(&child, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &child, &previous);
  pid_t waited = 0;
  for (;;) {
    waited = waitpid(tid, status, __WALL | WNOHANG);
    if (waited < 0 && errno == EINTR) continue;
    if (waited != 0) break;
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    const struct timespec step = {0, static_cast<long>(std::min<int64_t>(left, 5 * 1000 * 1000))};
    sigtimedwait(&child, nullptr, &step);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return waited;
}

// Where `address` lies in process `pid`, for an error message: "libc.so.6+0x1234" (the
// mapping's file and the offset in it), "[stack]+0x…", "an anonymous mapping" or "no mapping".
std::string DescribeAddress(pid_t pid, uint64_t address) {
  for (const StackMapping& mapping : ReadMappings(pid)) {
    if (address < mapping.start || address >= mapping.end) continue;
    if (mapping.name.empty()) return "an anonymous mapping";
    char text[32];
    std::snprintf(text, sizeof(text), "+%#llx",
                  static_cast<unsigned long long>(address - mapping.start + mapping.offset));
    return mapping.name.substr(mapping.name.rfind('/') + 1) + text;
  }
  return "no mapping";
}

}  // namespace

void BorrowedThread::Abandon() {
  // Running in the call: an interrupt stop (or a signal-delivery stop that comes first), then
  // let go as it is. The kernel restarts the system call it was stopped in (its registers are
  // untouched), so the call goes on where it was; the trampoline ends it as when strata dies
  // (the signal frame: rt_sigreturn back to the program's call, the mask given back there).
  broken_ = true;
  abandoned_ = true;
  const pid_t tid = thread_.tid();
  ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
  int status = 0;
  const pid_t waited = WaitUntil(tid, &status, Clock::now() + std::chrono::seconds(2));
  if (waited != tid || WIFEXITED(status) || WIFSIGNALED(status)) {
    return;  // Not stopped (or gone): the kernel detaches it when strata exits.
  }
  const bool signal_delivery = (status >> 16) == 0 && WSTOPSIG(status) != (SIGTRAP | 0x80);
  thread_.DetachAsIs(signal_delivery ? WSTOPSIG(status) : 0);
}

bool BorrowedThread::WaitForTrampoline(user_regs_struct* after_call, std::string* error) {
  const pid_t tid = thread_.tid();
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(call_timeout_ms_);
  int pass_signal = 0;
  for (;;) {
    Step();
    if (ptrace(PTRACE_CONT, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(pass_signal))) != 0) {
      *error = std::string("PTRACE_CONT: ") + std::strerror(errno);
      return false;
    }
    pass_signal = 0;
    int status = 0;
    const pid_t waited = WaitUntil(tid, &status, deadline);
    if (waited == 0) {
      Abandon();
      *error = "the borrowed thread " + std::to_string(tid) + "'s call (dlopen, strata_attach_start) did not " +
               "come back within " + std::to_string(call_timeout_ms_) + " ms (waiting for a lock another " +
               "thread holds?): the thread was let go to finish it alone, and goes back to its own call " +
               "when it has (the library then stays loaded, inert); try again later";
      return false;
    }
    if (waited != tid || WIFEXITED(status) || WIFSIGNALED(status)) {
      *error = "the process ended during the call";
      broken_ = true;
      return false;
    }
    if ((status >> 16) != 0) continue;  // An event or group stop: go on.
    const int signal_number = WSTOPSIG(status);
    user_regs_struct after{};
    if (ptrace(PTRACE_GETREGS, tid, nullptr, &after) != 0) {
      *error = std::string("PTRACE_GETREGS: ") + std::strerror(errno);
      return false;
    }
    if (signal_number == stop_signal_ && after.rip == code_ + kAfterSignal) {
      *after_call = after;
      in_signal_code_ = true;
      thread_.StoppedAgain(0);  // The trampoline's signal is dropped.
      return true;
    }
    if (signal_number == SIGSEGV || signal_number == SIGBUS || signal_number == SIGILL || signal_number == SIGFPE) {
      siginfo_t info{};
      ptrace(PTRACE_GETSIGINFO, tid, nullptr, &info);
      if (info.si_code > 0) {  // A fault of the call's, not a signal sent by someone.
        // Where, for a report: the instruction, the address it touched, the stack in use.
        char text[160];
        std::snprintf(text, sizeof(text), "the call faulted in the target (signal %d, code %d, at %#llx", signal_number,
                      info.si_code, static_cast<unsigned long long>(after.rip));
        *error = std::string(text) + " in " + DescribeAddress(pid_, after.rip) + ", touching " +
                 DescribeAddress(pid_, reinterpret_cast<uint64_t>(info.si_addr)) + ", stack pointer in " +
                 DescribeAddress(pid_, after.rsp) + "; borrowed thread " + std::to_string(tid) + ")";
        broken_ = true;
        thread_.StoppedAgain(0);  // Given back with its registers at Finish, the fault dropped.
        return false;
      }
    }
    pass_signal = signal_number;  // The program's own signal: its handler runs on top.
  }
}

bool BorrowedThread::WriteCode(const std::vector<uint8_t>& bytes, std::string* error) {
  // Into the read-only, executable pages, as a debugger writes a breakpoint: /proc/PID/mem (one
  // write), else PTRACE_POKEDATA a word at a time.
  const int memory = open(("/proc/" + std::to_string(pid_) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
  if (memory >= 0) {
    const ssize_t written = pwrite(memory, bytes.data(), bytes.size(), static_cast<off_t>(code_));
    close(memory);
    if (written == static_cast<ssize_t>(bytes.size())) return true;
  }
  for (size_t offset = 0; offset < bytes.size(); offset += 8) {
    long word = 0;
    std::memcpy(&word, bytes.data() + offset, std::min<size_t>(8, bytes.size() - offset));
    if (ptrace(PTRACE_POKEDATA, thread_.tid(), reinterpret_cast<void*>(code_ + offset), reinterpret_cast<void*>(word)) != 0) {
      *error = std::string("cannot write the trampoline: ") + std::strerror(errno);
      return false;
    }
  }
  return true;
}

bool BorrowedThread::Prepare(const LoadRequest& load, std::string* error) {
  const Clock::time_point start = Clock::now();
  load_ = load;
  if (libc_.restore_rt == 0) {
    *error = "libc's __restore_rt was not found in its code";
    return false;
  }
  stop_signal_ = QuietSignal(pid_, signal_mask_);
  if (!WriteFrame(error)) return false;
  std::string strings = load.library;
  strings += '\0';
  const size_t settings_offset = strings.size();
  strings += load.settings;
  strings += '\0';
  const std::vector<uint8_t> trampoline = TrampolineCode(load.scratch_bytes);
  // The trampoline into libc's code padding (no round trip) and the strings on the program's
  // stack below the frame, when they fit in the room the stack was checked for; else both into
  // a code page mapped by a call of libc's mmap (two round trips).
  const uint64_t strings_address = (frame_ - 64 - strings.size()) & ~uint64_t{63};
  if (libc_.code_padding != 0 && trampoline.size() <= libc_.code_padding_bytes &&
      thread_.saved().rsp - strings_address + 1024 <= load.stack_room) {
    std::vector<uint8_t> there(trampoline.size());
    struct iovec local = {there.data(), there.size()};
    struct iovec remote = {reinterpret_cast<void*>(libc_.code_padding), there.size()};
    const bool readable = process_vm_readv(pid_, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(there.size());
    const bool zeros = std::all_of(there.begin(), there.end(), [](uint8_t byte) { return byte == 0; });
    // Zeros as in the file, or this trampoline from an earlier attach: never anything else.
    if (readable && (zeros || there == trampoline)) {
      code_ = libc_.code_padding;
      if (!zeros) {
        code_in_padding_ = true;
      } else if (WriteCode(trampoline, error)) {
        code_in_padding_ = true;
      } else {
        code_ = 0;
      }
    }
    if (code_in_padding_) {
      if (!WriteMemory(pid_, strings_address, strings.data(), strings.size())) {
        *error = std::string("cannot write on the borrowed thread's stack: ") + std::strerror(errno);
        return false;
      }
      library_string_ = strings_address;
      load_stack_ = strings_address - 64;
    }
  }
  if (!code_in_padding_) {
    const size_t code_bytes = 512;  // More than the trampoline takes.
    code_bytes_ = (code_bytes + strings.size() + 4095) & ~size_t{4095};
    uint64_t address = 0;
    if (!CallReturningToRestore(libc_.mmap, {0, code_bytes_, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, static_cast<uint64_t>(-1), 0},
                                &address, error)) {
      return false;
    }
    if (address > static_cast<uint64_t>(-4096)) {
      *error = "mmap in the target failed: error " + std::to_string(-static_cast<int64_t>(address));
      return false;
    }
    code_ = address;
    library_string_ = code_ + code_bytes;
    load_stack_ = frame_ - 16;  // The mmap system call uses no stack.
    std::vector<uint8_t> bytes = trampoline;
    if (bytes.size() > code_bytes) {
      *error = "the trampoline is larger than its room";
      return false;
    }
    bytes.resize(code_bytes, 0xcc);
    bytes.insert(bytes.end(), strings.begin(), strings.end());
    if (!WriteCode(bytes, error)) return false;
  }
  settings_string_ = library_string_ + settings_offset;
  // The trampoline's signal must reach the thread during the calls (the frame has the mask).
  const uint64_t bit = uint64_t{1} << (stop_signal_ - 1);
  if ((signal_mask_ & bit) != 0) {
    uint64_t mask = signal_mask_ & ~bit;
    Step();
    if (ptrace(PTRACE_SETSIGMASK, thread_.tid(), reinterpret_cast<void*>(sizeof(mask)), &mask) != 0) {
      *error = std::string("PTRACE_SETSIGMASK: ") + std::strerror(errno);
      return false;
    }
    mask_changed_ = true;
  }
  prepare_ms_ = MillisecondsSince(start);
  return true;
}

bool BorrowedThread::LoadAndStart(uint64_t* handle, uint64_t* start_result, std::string* error) {
  const Clock::time_point start = Clock::now();
  if (broken_ || code_ == 0) {
    *error = "the borrowed thread is not prepared";
    return false;
  }
  // From the program's stack below the frame and the strings to the scratch.
  if (!SetCallRegisters(code_ + kLoad, {}, load_stack_, error)) return false;
  in_signal_code_ = false;
  user_regs_struct after{};
  if (!WaitForTrampoline(&after, error)) return false;
  load_ms_ = MillisecondsSince(start);
  *handle = after.r13;
  *start_result = after.r12;
  scratch_ = after.r14;
  if (*handle == 0 && scratch_ == 0) {
    *error = "mmap in the target failed: error " + std::to_string(-static_cast<int64_t>(after.r12));
    return false;
  }
  return true;
}

bool BorrowedThread::Call(uint64_t function, std::initializer_list<uint64_t> arguments, uint64_t* result,
                          std::string* error) {
  if (broken_ || code_ == 0 || scratch_ == 0) {
    *error = "the borrowed thread cannot make calls";
    return false;
  }
  const uint64_t stack_pointer = ((scratch_ + load_.scratch_bytes) & ~15ULL) - 8;
  const uint64_t return_address = code_ + kGenericReturn;
  if (!WriteMemory(pid_, stack_pointer, &return_address, sizeof(return_address))) {
    *error = std::string("cannot write the call's return address: ") + std::strerror(errno);
    return false;
  }
  if (!SetCallRegisters(function, arguments, stack_pointer, error)) return false;
  in_signal_code_ = false;
  user_regs_struct after{};
  if (!WaitForTrampoline(&after, error)) return false;
  *result = after.r12;
  return true;
}

void BorrowedThread::Finish() {
  if (finished_) return;
  finished_ = true;
  if (abandoned_) return;  // Let go in its call (Abandon): nothing of it is strata's now.
  const Clock::time_point start = Clock::now();
  const pid_t tid = thread_.tid();
  std::string error;
  if (!broken_ && scratch_ != 0 && code_ != 0) {
    // The private stack (kept after a failed dlopen), by a call returning to the trampoline.
    const uint64_t stack_pointer = frame_ - 16;
    const uint64_t return_address = code_ + kGenericReturn;
    if (WriteMemory(pid_, stack_pointer, &return_address, sizeof(return_address)) &&
        SetCallRegisters(libc_.munmap, {scratch_, load_.scratch_bytes}, stack_pointer, &error)) {
      in_signal_code_ = false;
      user_regs_struct after{};
      if (WaitForTrampoline(&after, &error)) scratch_ = 0;
    }
  }
  const long saved_result = static_cast<long>(thread_.saved().rax);
  // The trampoline in libc's code padding: nothing to unmap; at its stop in the signal code,
  // everything is put back exactly there (below), with no more round trip.
  if (!broken_ && code_ != 0 && !code_in_padding_ && in_signal_code_ && saved_result != -516 &&
      !thread_.HasDeliverableSignal()) {
    // The usual end: munmap of the code returning to __restore_rt, the thread let go at once;
    // rt_sigreturn puts the frame's registers, XSAVE area and mask back (the same path as when
    // strata dies; exact, the restart being done in the frame's registers). Not for a call
    // ended with ERESTART_RESTARTBLOCK (rt_sigreturn would make it start again in full), nor
    // when a signal is due (the kernel then decides between EINTR and restart as after a stop).
    if (SetCallRegisters(libc_.munmap, {code_, code_bytes_}, frame_, &error)) {
      Step();
      thread_.DetachAsIs();
      finish_ms_ = MillisecondsSince(start);
      return;
    }
  }
  uint64_t ignored = 0;
  if (!broken_ && code_ != 0 && !code_in_padding_) {
    CallReturningToRestore(libc_.munmap, {code_, code_bytes_}, &ignored, &error);
  }
  if (!broken_ && !in_signal_code_) {
    // At a syscall stop (munmap's exit, or a call that failed): brought to a stop in the signal
    // code with PTRACE_INTERRUPT, where the registers are put back and restarts are done.
    Step();
    ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
    Step();
    ptrace(PTRACE_CONT, tid, nullptr, nullptr);
    for (;;) {
      int status = 0;
      const pid_t waited = waitpid(tid, &status, __WALL);
      if (waited < 0 && errno == EINTR) continue;
      if (waited != tid || WIFEXITED(status) || WIFSIGNALED(status)) {
        broken_ = true;
        break;
      }
      if ((status >> 16) == PTRACE_EVENT_STOP) {
        thread_.StoppedAgain(0);
        break;
      }
      if ((status >> 16) == 0 && WSTOPSIG(status) != (SIGTRAP | 0x80)) {
        thread_.StoppedAgain(WSTOPSIG(status));  // The program's signal: delivered after the restore.
        break;
      }
      ptrace(PTRACE_CONT, tid, nullptr, nullptr);
    }
  }
  if (mask_changed_) {
    ptrace(PTRACE_SETSIGMASK, tid, reinterpret_cast<void*>(sizeof(signal_mask_)), &signal_mask_);
  }
  Step();
  thread_.Detach();
  finish_ms_ = MillisecondsSince(start);
}

}  // namespace attach
}  // namespace strata
