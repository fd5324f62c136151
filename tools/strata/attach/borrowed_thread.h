// The thread the injector borrows (injector.h, docs/attach.md): stopped in a blocking system
// call, made to load libstrata_base.so and start the attach session (dlopen,
// strata_attach_start), and given back to its call with its registers, XSAVE state and signal
// mask as they were. Whatever happens to strata at any point (SIGKILL included: the kernel then
// detaches the thread and it runs on with the registers it has), the thread goes back to its
// call:
//
//   - Before anything, a signal frame is written on the program's stack below its red zone
//     (the space one signal delivery takes there): the registers to resume with (the
//     interrupted call rewound to its `syscall` instruction, as the kernel does after a stop),
//     the XSAVE area, the signal mask, and an invalid sigaltstack mode (so rt_sigreturn leaves
//     the thread's alternate stack alone). Its return slot holds libc's __restore_rt
//     (`mov $15, %eax; syscall`, found in libc's code), so a call made with that slot as its
//     return address ends in rt_sigreturn: back to the program's call.
//   - The trampoline (the same bytes at every attach, its parameters in callee-saved
//     registers) is written through /proc/PID/mem into the unused tail of libc's executable
//     segment (LibcCalls::code_padding; zeros there, or this trampoline already), the strings
//     on the program's stack below the frame: no round trip. Else (no such tail, strings too
//     long for the stack room) a code page (trampoline, then strings) is made by libc's mmap
//     returning to __restore_rt; strata follows that call with syscall stops
//     (PTRACE_O_TRACESYSGOOD: a syscall stop's code, 0x85, is no signal, so the tracer's death
//     there delivers nothing) and writes the page through /proc/PID/mem.
//   - The trampoline maps a private stack, calls dlopen and strata_attach_start on it, goes
//     back to the thread's own stack (just below the frame) and unmaps the private one, so
//     that a signal of the program's delivered at any later system call's return gets its
//     frame on a mapped stack, then sends the thread a signal whose default action is to
//     ignore it (SIGURG, SIGWINCH
//     or SIGCHLD, one the program has no handler for, and the thread does not block when there
//     is one; else unblocked for the call), which stops it for strata (the results
//     in %r12-%r14), then does rt_sigreturn with the frame. Without strata the signal is
//     ignored and the thread goes back to its call.
//   - At that stop (in the kernel's signal code) strata puts the registers, XSAVE area and
//     mask back exactly and lets go. With a code page, strata instead lets the thread go into
//     munmap of the page returning to __restore_rt: rt_sigreturn puts the frame back. (When
//     the interrupted call ended with ERESTART_RESTARTBLOCK, or a signal is due, the code page
//     is unmapped with syscall stops instead and the thread restored at a stop in the kernel's
//     signal code, exactly.)
// Round trips (each waits for the thread, then strata, to be scheduled): the stop and the
// load, two (four with a code page: two for its mmap). If strata dies in the middle, what
// stays in the process is the trampoline (in libc's padding, or the code page) and the private
// stack (256 KiB of address space, a few pages), and the library if dlopen had run (inert,
// unless strata_attach_start had run: then its worker sees strata gone and stops). A relative
// timeout of the interrupted call (nanosleep, poll, a futex wait) starts again in full then,
// since rt_sigreturn forbids restart_syscall.
//
#ifndef STRATA_TOOLS_STRATA_ATTACH_BORROWED_THREAD_H_
#define STRATA_TOOLS_STRATA_ATTACH_BORROWED_THREAD_H_

#include <sys/types.h>
#include <sys/user.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tools/strata/attach/seized_thread.h"

namespace strata {
namespace attach {

// Addresses in the target's libc.
struct LibcCalls {
  uint64_t mmap = 0;
  uint64_t munmap = 0;
  uint64_t restore_rt = 0;  // __restore_rt: `mov $15, %rax; syscall` (not exported: found by its bytes).
  // The unused tail of libc's executable segment (FindExecutablePadding), where the trampoline
  // goes when it fits (0: none; a code page is mapped instead).
  uint64_t code_padding = 0;
  size_t code_padding_bytes = 0;
};

// What LoadAndStart does in the target.
struct LoadRequest {
  uint64_t dlopen = 0;       // libc's.
  std::string library;       // The path, as the target sees it.
  uint64_t start_offset = 0;  // strata_attach_start's .dynsym value (added to the load bias).
  std::string settings;      // Its argument.
  size_t scratch_bytes = 256 * 1024;  // The private stack.
  uint64_t stack_room = 12 * 1024;    // What the program's stack was checked to have below its pointer.
};

class BorrowedThread {
 public:
  BorrowedThread(pid_t pid, pid_t tid, const LibcCalls& libc);
  ~BorrowedThread();  // Finish().
  BorrowedThread(const BorrowedThread&) = delete;
  BorrowedThread& operator=(const BorrowedThread&) = delete;

  // Stops the thread (its interrupt stop), saves its registers, XSAVE area and signal mask.
  bool Stop(std::string* error);
  int seize_errno() const { return thread_.seize_errno(); }
  const user_regs_struct& saved() const { return thread_.saved(); }
  // Lets the thread go untouched (it was not in a call where it may be borrowed).
  void Release() { thread_.Detach(); }

  // Writes the frame, maps the code page(s) (one mmap returning to __restore_rt, followed by
  // syscall stops: two round trips) and writes the trampoline and the strings there. From here
  // on the thread goes back to its call whatever happens to strata.
  bool Prepare(const LoadRequest& load, std::string* error);

  // In one round trip: the private stack mapped, dlopen, strata_attach_start, the stack
  // unmapped (the trampoline's kLoad). *handle 0: dlopen failed (then Call(dlerror) may
  // follow). False when the thread did not come back or mmap failed.
  bool LoadAndStart(uint64_t* handle, uint64_t* start_result, std::string* error);

  // Calls function(arguments...) on the private stack (only while it is mapped: after a failed
  // dlopen); its return value in *result.
  bool Call(uint64_t function, std::initializer_list<uint64_t> arguments, uint64_t* result, std::string* error);

  // Unmaps what is left, puts everything back and lets go (also on every error path): usually
  // by letting the thread go into munmap returning to __restore_rt (the frame, no more round
  // trip); exactly at a stop in the signal code (three more round trips) when the interrupted
  // call ended with ERESTART_RESTARTBLOCK (a timed sleep: restart_syscall keeps its remaining
  // time) or a signal is due.
  void Finish();

  double StoppedMilliseconds() const { return thread_.StoppedMilliseconds(); }
  double HeldMilliseconds() const { return thread_.HeldMilliseconds(); }
  int ptrace_round_trips() const { return round_trips_; }
  // "prepare 0.3 + load 1.2 + finish 0.1 ms": where the stop went.
  std::string Phases() const;

 private:
  void Step();
  bool SetCallRegisters(uint64_t function, std::initializer_list<uint64_t> arguments, uint64_t stack_pointer,
                        std::string* error);
  bool CallReturningToRestore(uint64_t function, std::initializer_list<uint64_t> arguments, uint64_t* result,
                              std::string* error);
  // Lets the thread run to the trampoline's signal stop (the program's signals passed on);
  // false when the call faulted, the process ended, or it did not come back within
  // call_timeout_ms_ (then Abandon).
  bool WaitForTrampoline(user_regs_struct* after_call, std::string* error);
  // For a call that does not come back (dlopen waiting for a lock, which a thread stopped at
  // the wrong moment may hold): the thread, running in it, is stopped and let go as it is, to
  // finish the call and go back to its own through the frame, as when strata dies.
  void Abandon();
  bool WriteFrame(std::string* error);
  bool WriteCode(const std::vector<uint8_t>& bytes, std::string* error);

  pid_t pid_;
  SeizedThread thread_;
  LibcCalls libc_;
  LoadRequest load_;
  uint64_t signal_mask_ = 0;
  int stop_signal_ = 0;            // The trampoline's signal.
  bool mask_changed_ = false;      // stop_signal_ unblocked for the calls.
  uint64_t frame_ = 0;             // The frame's return slot (holds restore_rt).
  uint64_t code_ = 0;              // The code page(s): trampoline, then strings.
  size_t code_bytes_ = 0;
  uint64_t library_string_ = 0;
  uint64_t settings_string_ = 0;
  uint64_t load_stack_ = 0;        // The stack pointer kLoad starts with (below the frame and strings).
  bool code_in_padding_ = false;   // The trampoline is in libc's code padding (no code page).
  uint64_t scratch_ = 0;           // The private stack while mapped.
  bool broken_ = false;            // A call did not come back: no more calls.
  bool in_signal_code_ = true;     // Stopped in the kernel's signal code (where a restore is exact).
  bool finished_ = false;
  bool abandoned_ = false;         // Let go in the middle of a call (Abandon).
  int call_timeout_ms_ = 10000;    // A call's limit (STRATA_ATTACH_TEST_CALL_TIMEOUT_MS in tests).
  int round_trips_ = 0;
  int steps_ = 0;
  int kill_at_ = 0;
  int step_delay_ms_ = 0;
  double prepare_ms_ = 0, load_ms_ = 0, finish_ms_ = 0;
};

}  // namespace attach
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_ATTACH_BORROWED_THREAD_H_
