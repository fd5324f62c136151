// libunwind loaded and initialised by the program before Strata redirects it: the program's
// memory-check pipe is already open. Strata's walks must never touch it (a read of it would
// steal bytes of whatever file the program put on that number later); the program's own
// walks keep using it. Its own process: libunwind is initialised exactly once per process.
#include <alloca.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <libunwind.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "platform/sampling/libunwind_imports.h"

// Calls `callback` from a frame without unwind information (no CFI) that keeps a frame
// pointer: libunwind's step past it validates the addresses it reads.
extern "C" void strata_test_preinit_call_without_unwind_info(void (*callback)());
__asm__(
    ".text\n"
    ".globl strata_test_preinit_call_without_unwind_info\n"
    ".type strata_test_preinit_call_without_unwind_info, @function\n"
    "strata_test_preinit_call_without_unwind_info:\n"
    "  push %rbp\n"
    "  mov %rsp, %rbp\n"
    "  call *%rdi\n"
    "  pop %rbp\n"
    "  ret\n"
    ".size strata_test_preinit_call_without_unwind_info, . - "
    "strata_test_preinit_call_without_unwind_info\n");

namespace strata {
namespace {
void Walk();
}  // namespace
}  // namespace strata

// The walk `pages` pages deeper in the stack: libunwind caches the last 4 pages it found
// readable, so walks from different depths check pages again.
extern "C" __attribute__((noinline)) void strata_test_preinit_walk_at_depth(int pages) {
  volatile char* pad = static_cast<volatile char*>(alloca(pages * 4096 + 64));
  pad[0] = 1;
  strata_test_preinit_call_without_unwind_info(&strata::Walk);
  asm volatile("" ::: "memory");  // Not a tail call.
}

namespace strata {
namespace {

using InitLocal = int (*)(unw_cursor_t*, unw_context_t*);
using Step = int (*)(unw_cursor_t*);
using GetContext = int (*)(unw_context_t*);

InitLocal g_init_local;
Step g_step;
GetContext g_getcontext;
bool g_as_strata = false;
int g_steps = 0;

void Walk() {
  unw_context_t context;
  unw_cursor_t cursor;
  g_getcontext(&context);
  g_init_local(&cursor, &context);
  int steps = 0;
  if (g_as_strata) {
    ScopedStrataLibunwindWalk walk;
    while (steps < 64 && g_step(&cursor) > 0) ++steps;
  } else {
    while (steps < 64 && g_step(&cursor) > 0) ++steps;
  }
  g_steps = steps;
}

// The pipes open in this process, by descriptor number.
std::vector<int> OpenPipes() {
  std::vector<int> pipes;
  DIR* directory = opendir("/proc/self/fd");
  while (dirent* entry = readdir(directory)) {
    char target[128] = {};
    const std::string path = std::string("/proc/self/fd/") + entry->d_name;
    if (readlink(path.c_str(), target, sizeof target - 1) > 0 &&
        std::string(target).rfind("pipe:", 0) == 0) {
      pipes.push_back(atoi(entry->d_name));
    }
  }
  closedir(directory);
  return pipes;
}

TEST_CASE(
    "libunwind initialised by the program first: Strata's walks never touch its pipe, the "
    "program's walks keep working",
    "[platform][sampling]") {
  const std::vector<int> pipes_before = OpenPipes();  // The harness's stdin may be a pipe.
  // The program: libunwind loaded and initialised (its pipe opened) before Strata.
  void* handle = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(handle != nullptr);
  g_init_local = reinterpret_cast<InitLocal>(dlsym(handle, "_ULx86_64_init_local"));
  g_step = reinterpret_cast<Step>(dlsym(handle, "_ULx86_64_step"));
  g_getcontext = reinterpret_cast<GetContext>(dlsym(handle, "_Ux86_64_getcontext"));
  REQUIRE(g_init_local != nullptr);
  REQUIRE(g_step != nullptr);
  REQUIRE(g_getcontext != nullptr);
  strata_test_preinit_call_without_unwind_info(&Walk);
  std::vector<int> libunwind_pipe;
  for (int descriptor : OpenPipes()) {
    bool old = false;
    for (int before : pipes_before) old = old || before == descriptor;
    if (!old) libunwind_pipe.push_back(descriptor);
  }
  REQUIRE(libunwind_pipe.size() == 2);  // libunwind 1.6.2's memory-check pipe.

  // Strata arrives.
  REQUIRE(RedirectLibunwindImports(handle));

  // The program's walks still work with its own pipe.
  g_as_strata = false;
  strata_test_preinit_call_without_unwind_info(&Walk);
  const int program_steps = g_steps;
  for (int i = 0; i < 32; ++i) {
    strata_test_preinit_walk_at_depth(i % 16);
    CHECK(g_steps == program_steps + 1);
  }
  CHECK(program_steps >= 3);

  // The program reuses the pipe's numbers for its own file; Strata's validating walks there
  // must not read it (nor write to or close anything).
  char directory[] = "/tmp/strata-preinit-test.XXXXXX";
  REQUIRE(mkdtemp(directory) != nullptr);
  const std::string input_path = std::string(directory) + "/input";
  {
    const int descriptor = open(input_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(write(descriptor, "0123456789", 10) == 10);
    close(descriptor);
  }
  for (int descriptor : libunwind_pipe) close(descriptor);
  const int input = open(input_path.c_str(), O_RDONLY);
  const int output = open((std::string(directory) + "/output").c_str(),
                          O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(((input == libunwind_pipe[0] && output == libunwind_pipe[1]) ||
           (input == libunwind_pipe[1] && output == libunwind_pipe[0])));
  const int validations_before = libunwind_imports_internal::ValidationCount();
  g_as_strata = true;
  for (int i = 0; i < 200; ++i) {
    strata_test_preinit_walk_at_depth(i % 16);
    CHECK(g_steps == program_steps + 1);  // + strata_test_preinit_walk_at_depth
  }
  CHECK(libunwind_imports_internal::ValidationCount() > validations_before);
  CHECK(lseek(input, 0, SEEK_CUR) == 0);
  CHECK(lseek(output, 0, SEEK_CUR) == 0);
  struct stat output_stat;
  REQUIRE(fstat(output, &output_stat) == 0);
  CHECK(output_stat.st_size == 0);
  CHECK(fcntl(input, F_GETFD) != -1);  // Not closed.
  CHECK(fcntl(output, F_GETFD) != -1);
  close(input);
  close(output);
  unlink(input_path.c_str());
  unlink((std::string(directory) + "/output").c_str());
  rmdir(directory);
}

}  // namespace
}  // namespace strata
