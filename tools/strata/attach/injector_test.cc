// StatusShowsShadowStack on /proc/PID/task/TID/status texts. The build machine's CPU has no
// user_shstk flag and its kernel prints no x86_Thread_features line, so a program with a
// shadow stack cannot be run here: the texts below are the kernel's format
// (arch/x86/kernel/shstk.c, arch_proc_pid_thread_features: "x86_Thread_features:\t" then
// "shstk " / "wrss " for each feature enabled, and the same for the locked ones).
#include "tools/strata/attach/injector.h"

#include <catch2/catch.hpp>

namespace strata {
namespace attach {
namespace {

const char kStatusHead[] =
    "Name:\techo_server\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nPid:\t4243\n"
    "TracerPid:\t0\nSeccomp:\t0\nSeccomp_filters:\t0\n";
const char kStatusTail[] = "Cpus_allowed:\t3\nvoluntary_ctxt_switches:\t12\n";

std::string Status(const std::string& features_lines) { return kStatusHead + features_lines + kStatusTail; }

TEST_CASE("shadow stack enabled on the thread") {
  CHECK(StatusShowsShadowStack(Status("x86_Thread_features:\tshstk \nx86_Thread_features_locked:\tshstk \n")));
  CHECK(StatusShowsShadowStack(Status("x86_Thread_features:\twrss shstk \nx86_Thread_features_locked:\t\n")));
  CHECK(StatusShowsShadowStack(Status("x86_Thread_features:\tshstk wrss \nx86_Thread_features_locked:\t\n")));
}

TEST_CASE("no shadow stack") {
  // Kernel with the feature, thread without it (glibc did not enable it, or unlocked it off).
  CHECK_FALSE(StatusShowsShadowStack(Status("x86_Thread_features:\t\nx86_Thread_features_locked:\t\n")));
  // Locked off: only the locked line names shstk.
  CHECK_FALSE(StatusShowsShadowStack(Status("x86_Thread_features:\t\nx86_Thread_features_locked:\tshstk \n")));
  // Only wrss (never enabled without shstk, but the word is what counts).
  CHECK_FALSE(StatusShowsShadowStack(Status("x86_Thread_features:\twrss \n")));
  // Older kernel or kernel built without user shadow stacks: no such line.
  CHECK_FALSE(StatusShowsShadowStack(Status("")));
  CHECK_FALSE(StatusShowsShadowStack(""));
  // The word elsewhere is not the feature.
  CHECK_FALSE(StatusShowsShadowStack(Status("Name_shstk:\tshstk\n")));
  CHECK_FALSE(StatusShowsShadowStack(Status("x86_Thread_features:\tshstk_other \n")));
}

}  // namespace
}  // namespace attach
}  // namespace strata

namespace strata {
namespace attach {
namespace {

// A process's mappings: the main thread's [stack], a thread stack (guard, then the stack block
// with its struct pthread at the top), the heap with an alternate signal stack in it.
const std::vector<StackMapping> kMappings = {
    {0x555500000000, 0x555500021000, "[heap]"},
    {0x7f0000000000, 0x7f0000001000, ""},  // Guard page (PROT_NONE).
    {0x7f0000001000, 0x7f0000801000, ""},  // The thread's stack block; pthread at 0x7f00007ff6c0.
    {0x7f0000900000, 0x7f0000910000, ""},  // An mmap'd alternate stack.
    {0x7fff00000000, 0x7fff00021000, "[stack]"},
};
constexpr uint64_t kThreadPointer = 0x7f00007ff6c0;

TEST_CASE("the main thread on [stack] with room may be borrowed") {
  CHECK(BorrowedStackProblem(kMappings, true, 0x7f1234, 0x7fff00020000) == "");
  CHECK(BorrowedStackProblem(kMappings, true, 0x7f1234, 0x7fff00000000 + kBorrowedStackRoom) == "");
}

TEST_CASE("another thread on its stack block with room may be borrowed") {
  CHECK(BorrowedStackProblem(kMappings, false, kThreadPointer, 0x7f00007fe000) == "");
}

TEST_CASE("a handler on an alternate stack is not borrowed") {
  CHECK(BorrowedStackProblem(kMappings, true, 0, 0x555500010000).find("[heap]") != std::string::npos);
  CHECK(BorrowedStackProblem(kMappings, false, kThreadPointer, 0x555500010000).find("[heap]") != std::string::npos);
  CHECK(BorrowedStackProblem(kMappings, false, kThreadPointer, 0x7f000090f000).find("not on its thread stack") !=
        std::string::npos);
  CHECK(BorrowedStackProblem(kMappings, true, 0, 0x7f00007fe000).find("not on the main thread's stack") !=
        std::string::npos);
  // Another thread's stack block (its pointer elsewhere), and above its own pointer.
  CHECK(BorrowedStackProblem(kMappings, false, 0x7f000090fff0, 0x7f00007fe000) != "");
  CHECK(BorrowedStackProblem(kMappings, false, kThreadPointer, 0x7f0000800000) != "");
  CHECK(BorrowedStackProblem(kMappings, false, kThreadPointer, 0x100).find("no mapping") != std::string::npos);
}

TEST_CASE("too little room below the stack pointer") {
  CHECK(BorrowedStackProblem(kMappings, true, 0, 0x7fff00000000 + kBorrowedStackRoom - 16).find("KiB") !=
        std::string::npos);
  CHECK(BorrowedStackProblem(kMappings, false, kThreadPointer, 0x7f0000001000 + 4096).find("KiB") !=
        std::string::npos);
}

TEST_CASE("only a system call made by libc's or the program's own code may be borrowed") {
  const std::string libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  const std::vector<StackMapping> mappings = {
      {0x555500000000, 0x555500010000, "/usr/bin/server"},
      {0x7f1000000000, 0x7f1000028000, libc},  // Its first, read-only segment.
      {0x7f1000028000, 0x7f100017d000, libc},  // Its text.
      {0x7f2000000000, 0x7f2000400000, "/usr/lib/x86_64-linux-gnu/libtsan.so.2"},
      {0x7f3000000000, 0x7f3000010000, ""},  // JIT code.
  };
  const std::string program = "/usr/bin/server";
  CHECK(BorrowedCallProblem(mappings, libc, program, 0x7f1000100002) == "");
  // The instruction is the 2 bytes before pc: at a mapping's start, pc is past it.
  CHECK(BorrowedCallProblem(mappings, libc, program, 0x7f1000028002) == "");
  // The program's own inline `syscall`.
  CHECK(BorrowedCallProblem(mappings, libc, program, 0x555500001000) == "");
  CHECK(BorrowedCallProblem(mappings, libc, program, 0x7f2000001234).find("libtsan.so.2 itself, not through libc") !=
        std::string::npos);
  CHECK(BorrowedCallProblem(mappings, libc, program, 0x7f3000000100).find("anonymous code") != std::string::npos);
  CHECK(BorrowedCallProblem(mappings, libc, "", 0x7f3000000100).find("anonymous code") != std::string::npos);
  CHECK(BorrowedCallProblem(mappings, libc, program, 0x100).find("no mapping") != std::string::npos);
}

}  // namespace
}  // namespace attach
}  // namespace strata
