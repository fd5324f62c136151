// A thread of a target stopped by strata with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT, never
// PTRACE_O_EXITKILL: the death of strata lets it go), its registers saved, and let go with
// them as they were (docs/attach.md, "How it works"): a call the kernel ends with a plain EINTR
// when its thread is merely stopped (epoll_wait, sigtimedwait, semop, msgrcv...: signal(7)) is
// rewound to its `syscall` instruction, unless a signal the thread does not block is pending.
//
// Thread safety: one SeizedThread per thread, used by the thread that seized it (ptrace's
// rule). Not async-signal-safe.
#ifndef STRATA_TOOLS_STRATA_ATTACH_SEIZED_THREAD_H_
#define STRATA_TOOLS_STRATA_ATTACH_SEIZED_THREAD_H_

#include <errno.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <cstdint>
#include <string>
#include <vector>

namespace strata {
namespace attach {

using Clock = std::chrono::steady_clock;

inline double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

inline constexpr int kNtX86Xstate = 0x202;  // NT_X86_XSTATE

// A thread stopped by us, seized.
class SeizedThread {
 public:
  explicit SeizedThread(pid_t tid) : tid_(tid) {}
  ~SeizedThread() { Detach(); }

  // Seizes and interrupts the thread; true once it is in its interrupt stop. A signal stop
  // that comes first is given back to the thread (Detach with it) and counts as a failure.
  bool Stop(std::string* error, long options = 0) {
    if (!SeizeAndInterrupt(error, options)) return false;
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
  bool SeizeAndInterrupt(std::string* error, long options = 0) {
    if (ptrace(PTRACE_SEIZE, tid_, nullptr, reinterpret_cast<void*>(options)) != 0) {
      seize_errno_ = errno;
      *error = std::string("PTRACE_SEIZE: ") + std::strerror(errno);
      return false;
    }
    seized_ = true;
    stop_start_ = Clock::now();  // The thread may be stopped from here (the stop's upper bound).
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
    stop_reported_ = Clock::now();
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
  pid_t tid() const { return tid_; }
  const user_regs_struct& saved() const { return saved_; }
  const std::vector<uint8_t>& xstate() const { return xstate_; }

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

  // Puts the saved registers back (an epoll wait's EINTR rewound, see above) and lets go.
  void Detach() {
    if (!seized_) return;
    if (stopped_ && (pending_signal_ == 0 || restore_registers_)) {
      user_regs_struct regs = saved_;
      if (pending_signal_ == 0 && IsRewindableEintr(regs)) {
        regs.rax = regs.orig_rax;
        regs.rip -= 2;
      }
      if (!xstate_.empty()) {
        struct iovec vector = {xstate_.data(), xstate_.size()};
        ptrace(PTRACE_SETREGSET, tid_, reinterpret_cast<void*>(kNtX86Xstate), &vector);
      }
      ptrace(PTRACE_SETREGS, tid_, nullptr, &regs);
    }
    ptrace(PTRACE_DETACH, tid_, nullptr, reinterpret_cast<void*>(static_cast<long>(pending_signal_)));
    stop_end_ = Clock::now();
    seized_ = false;
    stopped_ = false;
  }

  // Lets go with the registers the thread has now (the caller arranged them).
  void DetachAsIs() {
    if (!seized_) return;
    ptrace(PTRACE_DETACH, tid_, nullptr, nullptr);
    stop_end_ = Clock::now();
    seized_ = false;
    stopped_ = false;
  }

  // The thread is in a stop in the kernel's signal code again (an interrupt stop, or the
  // delivery stop of `signal`, given to it at Detach), after its registers were changed:
  // Detach puts the saved ones back.
  void StoppedAgain(int signal) {
    stopped_ = true;
    pending_signal_ = signal;
    restore_registers_ = true;
  }

  // The saved registers as the thread would resume with them after a stop with no signal to
  // handle, the kernel's restart done in them: a call interrupted with ERESTARTSYS,
  // ERESTARTNOINTR or ERESTARTNOHAND (and an EINTR as in Detach) rewound to its `syscall`
  // instruction; one with ERESTART_RESTARTBLOCK too, to the call itself (not restart_syscall,
  // which rt_sigreturn disables): its relative timeout starts again in full.
  user_regs_struct RegistersToResume() const {
    user_regs_struct regs = saved_;
    const long result = static_cast<long>(regs.rax);
    if (static_cast<long>(regs.orig_rax) >= 0 &&
        (result == -512 || result == -513 || result == -514 || result == -516 || IsRewindableEintr(regs))) {
      regs.rax = regs.orig_rax;
      regs.rip -= 2;
    }
    regs.orig_rax = static_cast<uint64_t>(-1);
    return regs;
  }

  // From PTRACE_INTERRUPT to PTRACE_DETACH (or now, while seized): the stop's upper bound (a
  // thread asked to stop first has to be scheduled to stop).
  double StoppedMilliseconds() const {
    return std::chrono::duration<double, std::milli>((seized_ ? Clock::now() : stop_end_) - stop_start_).count();
  }
  // From the stop's report (waitpid) to PTRACE_DETACH: the stop strata holds.
  double HeldMilliseconds() const {
    return std::chrono::duration<double, std::milli>((seized_ ? Clock::now() : stop_end_) - stop_reported_).count();
  }

  // A call the kernel ends with a plain EINTR when its thread is merely stopped (epoll_wait,
  // sigtimedwait, semop, msgrcv...: signal(7)), with no signal of the program's due that would
  // have ended it: to be rewound to its `syscall` instruction.
  bool IsRewindableEintr(const user_regs_struct& regs) const {
    if (static_cast<long>(regs.rax) != -EINTR || static_cast<long>(regs.orig_rax) < 0 || HasDeliverableSignal()) {
      return false;
    }
    errno = 0;
    const long word = ptrace(PTRACE_PEEKTEXT, tid_, reinterpret_cast<void*>(regs.rip - 2), nullptr);
    return errno == 0 && (word & 0xffff) == 0x050f;
  }

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

 private:
  pid_t tid_;
  bool seized_ = false;
  bool stopped_ = false;
  bool restore_registers_ = false;
  int pending_signal_ = 0;
  int seize_errno_ = 0;
  user_regs_struct saved_{};
  std::vector<uint8_t> xstate_;
  Clock::time_point stop_start_;
  Clock::time_point stop_reported_;
  Clock::time_point stop_end_;
};


}  // namespace attach
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_ATTACH_SEIZED_THREAD_H_
