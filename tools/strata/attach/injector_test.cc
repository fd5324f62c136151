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
