#include "platform/sampling/libunwind_imports.h"

#include <dirent.h>
#include <link.h>
#include <elf.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <libunwind.h>
#include <alloca.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <signal.h>
#include <pthread.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "platform/sampling/libunwind_loader.h"
#include "platform/sampling/libunwind_walker.h"

// Calls `callback` from code without unwind information (no CFI: hand-written assembly) that
// keeps a frame pointer: a libunwind walk from inside `callback` fails its DWARF step at
// this frame and falls back to its validating frame-chain walk.
extern "C" void strata_test_call_without_unwind_info(void (*callback)());
__asm__(
    ".text\n"
    ".globl strata_test_call_without_unwind_info\n"
    ".type strata_test_call_without_unwind_info, @function\n"
    "strata_test_call_without_unwind_info:\n"
    "  push %rbp\n"
    "  mov %rsp, %rbp\n"
    "  call *%rdi\n"
    "  pop %rbp\n"
    "  ret\n"
    ".size strata_test_call_without_unwind_info, . - strata_test_call_without_unwind_info\n");

namespace strata {
namespace {

// The symbol names of the frames of the last WalkHere(): a walk of the calling thread's stack
// with libunwind's cursor, as a Strata walk.
std::vector<std::string> g_walked_names;

std::string SymbolAt(uintptr_t pc) {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(pc), &info) == 0 || info.dli_sname == nullptr) return "?";
  return info.dli_sname;
}

// Whether WalkHere() walks as Strata does (ScopedStrataLibunwindWalk) or as a program using
// libunwind itself.
bool g_walk_as_strata = true;

void WalkHere() {
  g_walked_names.clear();
  const LibunwindFunctions* functions = LoadedLibunwind();
  REQUIRE(functions != nullptr);
  std::optional<ScopedStrataLibunwindWalk> walk;
  if (g_walk_as_strata) walk.emplace();
  unw_context_t context;
  REQUIRE(functions->getcontext(&context) == 0);
  unw_cursor_t cursor;
  REQUIRE(functions->init_local(&cursor, &context) == 0);
  for (int i = 0; i < 64 && functions->step(&cursor) > 0; ++i) {
    unw_word_t pc = 0;
    functions->get_reg(&cursor, UNW_REG_IP, &pc);
    g_walked_names.push_back(SymbolAt(static_cast<uintptr_t>(pc) - 1));
  }
}

}  // namespace
}  // namespace strata

// noinline, with an exported name of its own: the walk must find it beyond the frame without
// unwind information.
extern "C" __attribute__((noinline)) void strata_test_validating_walk_caller() {
  strata_test_call_without_unwind_info(&strata::WalkHere);
  asm volatile("" ::: "memory");  // Not a tail call.
}

// The same, `pages` pages deeper in the stack: libunwind caches the last 4 pages it checked,
// so walks from different depths check again.
extern "C" __attribute__((noinline)) void strata_test_validating_walk_at_depth(int pages) {
  volatile char* pad = static_cast<volatile char*>(alloca(pages * 4096 + 64));
  pad[0] = 1;
  strata_test_validating_walk_caller();
  asm volatile("" ::: "memory");
}

namespace strata {
namespace {

// The descriptors open in this process, with what they point to.
std::vector<std::string> OpenDescriptors() {
  std::vector<std::string> result;
  DIR* directory = opendir("/proc/self/fd");
  if (directory == nullptr) return result;
  const int own = dirfd(directory);
  while (dirent* entry = readdir(directory)) {
    if (entry->d_name[0] == '.' || atoi(entry->d_name) == own) continue;
    char target[256] = {};
    const std::string path = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t length = readlink(path.c_str(), target, sizeof target - 1);
    result.push_back(std::string(entry->d_name) + " -> " +
                     (length > 0 ? std::string(target, length) : "?"));
  }
  closedir(directory);
  return result;
}

// The first test case of the file: libunwind is loaded here.
TEST_CASE("libunwind's imports are redirected: after warm-up no new descriptor is open",
          "[platform][sampling]") {
  REQUIRE(LoadedLibunwind() == nullptr);
  const std::vector<std::string> before = OpenDescriptors();  // The harness's stdin may be a pipe.
  REQUIRE(WarmUpLibunwind());
  CHECK(libunwind_imports_internal::RedirectedSlotCount() >= 4);  // pipe2 read close syscall
  for (const std::string& descriptor : OpenDescriptors()) {
    INFO(descriptor);
    CHECK(std::find(before.begin(), before.end(), descriptor) != before.end());
  }
}

TEST_CASE("a validating walk through code without unwind information still works",
          "[platform][sampling]") {
  REQUIRE(WarmUpLibunwind());
  const int before = libunwind_imports_internal::ValidationCount();
  strata_test_validating_walk_caller();
  INFO("walked: " << [] {
    std::string all;
    for (const std::string& name : g_walked_names) all += name + " ";
    return all;
  }());
  // WalkHere's caller, the frame without unwind information, then its caller by the
  // frame-chain fallback. In a Strata walk libunwind's reads go through the checked accessor
  // (CheckLibunwindMemoryReads), not through its own validation (a program's own walks
  // still validate: next test).
  bool found_caller = false;
  for (const std::string& name : g_walked_names) {
    if (name.find("strata_test_validating_walk_caller") != std::string::npos) found_caller = true;
  }
  CHECK(found_caller);
  CHECK(libunwind_imports_internal::ValidationCount() == before);
}

TEST_CASE("a program's own validating walks (not Strata's) work through the redirected imports",
          "[platform][sampling]") {
  REQUIRE(WarmUpLibunwind());
  g_walk_as_strata = false;
  const int before = libunwind_imports_internal::ValidationCount();
  int complete = 0;
  for (int i = 0; i < 64; ++i) {  // Different depths: libunwind's 4-page cache misses.
    strata_test_validating_walk_at_depth(i % 16);
    for (const std::string& name : g_walked_names) {
      if (name.find("strata_test_validating_walk_at_depth") != std::string::npos) ++complete;
    }
  }
  g_walk_as_strata = true;
  CHECK(libunwind_imports_internal::ValidationCount() > before);
  CHECK(complete == 64);
}

TEST_CASE("AddressIsReadable: mapped, unmapped and PROT_NONE pages", "[platform][sampling]") {
  REQUIRE(WarmUpLibunwind());
  const bool chosen = libunwind_imports_internal::UsesSigprocmaskProbe();
  CHECK(chosen);  // The probe works on Linux x86-64.
  const bool probe = GENERATE(true, false);
  INFO((probe ? "rt_sigprocmask probe" : "process_vm_readv"));
  libunwind_imports_internal::UseSigprocmaskProbeForTesting(probe);
  const long page = sysconf(_SC_PAGESIZE);
  char* memory = static_cast<char*>(
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(memory != MAP_FAILED);
  const uintptr_t first = reinterpret_cast<uintptr_t>(memory);
  CHECK(libunwind_imports_internal::AddressIsReadable(first, 1));
  CHECK(libunwind_imports_internal::AddressIsReadable(first + page - 4, 8));
  REQUIRE(mprotect(memory + page, page, PROT_NONE) == 0);
  CHECK_FALSE(libunwind_imports_internal::AddressIsReadable(first + page, 1));
  CHECK(errno == EFAULT);
  CHECK_FALSE(libunwind_imports_internal::AddressIsReadable(first + page - 4, 8));
  REQUIRE(munmap(memory, 2 * page) == 0);
  CHECK_FALSE(libunwind_imports_internal::AddressIsReadable(first, 1));
  CHECK_FALSE(libunwind_imports_internal::AddressIsReadable(8, 1));
  libunwind_imports_internal::UseSigprocmaskProbeForTesting(chosen);
}

// The whole file's content.
std::string ReadAll(const char* path) {
  std::string content;
  const int descriptor = open(path, O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) return content;
  char buffer[4096];
  ssize_t n;
  while ((n = read(descriptor, buffer, sizeof buffer)) > 0) content.append(buffer, n);
  close(descriptor);
  return content;
}

TEST_CASE(
    "close_range and the program's own files reopened on the freed numbers: many validating "
    "walks leave them byte-identical",
    "[platform][sampling]") {
  REQUIRE(WarmUpLibunwind());
  char directory[] = "/tmp/strata-imports-test.XXXXXX";
  REQUIRE(mkdtemp(directory) != nullptr);
  const std::string input_path = std::string(directory) + "/input";
  const std::string output_path = std::string(directory) + "/output";
  const std::string input_content(10000, 'i');
  {
    const int descriptor = open(input_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(descriptor >= 0);
    REQUIRE(write(descriptor, input_content.data(), input_content.size()) ==
            static_cast<ssize_t>(input_content.size()));
    close(descriptor);
  }
  // Like a daemon: nothing above stderr survives, then its own files on 3, 4, 5.
  REQUIRE(close_range(3, ~0U, 0) == 0);
  const int input = open(input_path.c_str(), O_RDONLY);
  const int write_only = open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int input_again = open(input_path.c_str(), O_RDONLY);
  REQUIRE(input == 3);
  REQUIRE(write_only == 4);
  REQUIRE(input_again == 5);
  struct stat before_input, before_output;
  REQUIRE(fstat(input, &before_input) == 0);
  REQUIRE(fstat(write_only, &before_output) == 0);

  // Strata's walks (checked reads), then the program's own (libunwind's validation, through
  // the redirected imports).
  for (int i = 0; i < 250; ++i) strata_test_validating_walk_at_depth(i % 16);
  const int validations_before = libunwind_imports_internal::ValidationCount();
  g_walk_as_strata = false;
  for (int i = 0; i < 250; ++i) strata_test_validating_walk_at_depth(i % 16);
  g_walk_as_strata = true;
  CHECK(libunwind_imports_internal::ValidationCount() > validations_before);

  // Still the same files, untouched: offsets at 0, the output empty.
  struct stat after_input, after_output;
  REQUIRE(fstat(input, &after_input) == 0);
  REQUIRE(fstat(write_only, &after_output) == 0);
  CHECK(after_input.st_ino == before_input.st_ino);
  CHECK(after_output.st_ino == before_output.st_ino);
  CHECK(lseek(input, 0, SEEK_CUR) == 0);
  CHECK(lseek(input_again, 0, SEEK_CUR) == 0);
  CHECK(lseek(write_only, 0, SEEK_CUR) == 0);
  CHECK(after_output.st_size == 0);
  CHECK((fcntl(write_only, F_GETFL) & O_ACCMODE) == O_WRONLY);
  close(input);
  close(write_only);
  close(input_again);
  CHECK(ReadAll(input_path.c_str()) == input_content);
  CHECK(ReadAll(output_path.c_str()).empty());
  unlink(input_path.c_str());
  unlink(output_path.c_str());
  rmdir(directory);
}

// The permissions ("r--p", "rw-p", ...) of the mapping that contains `address`.
std::string PermissionsAt(uintptr_t address) {
  char line[512];
  FILE* maps = fopen("/proc/self/maps", "r");
  std::string result;
  while (maps != nullptr && fgets(line, sizeof line, maps) != nullptr) {
    unsigned long start = 0, end = 0;
    char permissions[8] = {};
    if (sscanf(line, "%lx-%lx %7s", &start, &end, permissions) == 3 && address >= start &&
        address < end) {
      result = permissions;
      break;
    }
  }
  if (maps != nullptr) fclose(maps);
  return result;
}

TEST_CASE("a library with full RELRO is redirected, and its GOT is read-only again after",
          "[platform][sampling]") {
  std::string path = "platform/sampling/libredirect_target_for_testing.so";
  if (const char* runfiles = getenv("TEST_SRCDIR")) {
    path = std::string(runfiles) + "/strata/" + path;
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  INFO(path << ": " << (handle == nullptr ? dlerror() : "loaded"));
  REQUIRE(handle != nullptr);
  auto open_pipe = reinterpret_cast<int (*)(int*)>(dlsym(handle, "strata_test_target_pipe2"));
  auto validate =
      reinterpret_cast<long (*)(const int*, const void*)>(dlsym(handle, "strata_test_target_validate"));
  auto close_descriptor = reinterpret_cast<int (*)(int)>(dlsym(handle, "strata_test_target_close"));
  REQUIRE(open_pipe != nullptr);
  REQUIRE(validate != nullptr);
  REQUIRE(close_descriptor != nullptr);

  REQUIRE(RedirectLibunwindImports(handle));
  CHECK(libunwind_imports_internal::RedirectedSlotCount() >= 4);
  const std::vector<std::string> before = OpenDescriptors();
  int descriptors[2] = {-1, -1};
  REQUIRE(open_pipe(descriptors) == 0);
  CHECK(IsLibunwindValidationDescriptor(descriptors[0]));
  CHECK(IsLibunwindValidationDescriptor(descriptors[1]));
  CHECK(OpenDescriptors() == before);
  char readable = 1;
  CHECK(validate(descriptors, &readable) == 1);
  CHECK(validate(descriptors, reinterpret_cast<const void*>(8)) == -1);
  CHECK(errno == EFAULT);
  CHECK(close_descriptor(descriptors[0]) == 0);
  CHECK(close_descriptor(descriptors[1]) == 0);

  // The GOT (in the PT_GNU_RELRO range) is read-only again.
  link_map* map = nullptr;
  REQUIRE(dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0);
  dl_find_object found;
  REQUIRE(_dl_find_object(map->l_ld, &found) == 0);
  const auto* header = static_cast<const ElfW(Ehdr)*>(found.dlfo_map_start);
  const auto* headers = reinterpret_cast<const ElfW(Phdr)*>(
      static_cast<const char*>(found.dlfo_map_start) + header->e_phoff);
  bool has_relro = false;
  for (int i = 0; i < header->e_phnum; ++i) {
    if (headers[i].p_type != PT_GNU_RELRO) continue;
    has_relro = true;
    const uintptr_t relro = map->l_addr + headers[i].p_vaddr;
    CHECK(PermissionsAt(relro) == "r--p");
  }
  CHECK(has_relro);
  dlclose(handle);
}

// A walk of the calling thread from here, 24 frames of recursion deep. With
// `context_off_stack`, the context handed to the walk is a copy outside the thread's stack
// (as the sampler's wait walks hand one on their own stack for another thread's).
size_t __attribute__((noinline)) WalkAtDepth(int depth, NativeFrame* frames, size_t capacity,
                                             bool context_off_stack = false) {
  if (depth > 0) {
    const size_t count = WalkAtDepth(depth - 1, frames, capacity, context_off_stack);
    asm volatile("" ::: "memory");  // Not a tail call.
    return count;
  }
  ucontext_t context;
  getcontext(&context);
  static ucontext_t copy;
  if (context_off_stack) copy = context;
  static LibunwindWalkScratch scratch;
  return WalkStackWithLibunwind(context_off_stack ? &copy : &context,
                                StackBounds::OfCurrentThread(), frames, capacity, &scratch);
}

uint64_t BlockedMask() {
  uint64_t mask = 0;
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, nullptr, &mask, sizeof(mask));
  return mask;
}

TEST_CASE("a walk with every signal declared blocked makes no mask calls, same frames",
          "[platform][sampling]") {
  REQUIRE(WarmUpLibunwind());
  constexpr size_t kCapacity = 128;
  NativeFrame plain[kCapacity];
  const LibunwindMaskCalls before_plain = LibunwindMaskCallsOfThisThread();
  const size_t plain_count = WalkAtDepth(24, plain, kCapacity);
  const LibunwindMaskCalls after_plain = LibunwindMaskCallsOfThisThread();
  REQUIRE(plain_count > 24);
  // Undeclared: libunwind's own calls are made (its lock is taken during walks).
  CHECK(after_plain.made > before_plain.made);
  CHECK(after_plain.skipped == before_plain.skipped);

  NativeFrame declared[kCapacity];
  size_t declared_count = 0;
  sigset_t every, previous;
  sigfillset(&every);
  REQUIRE(pthread_sigmask(SIG_SETMASK, &every, &previous) == 0);
  const uint64_t mask_before = BlockedMask();
  {
    ScopedEverySignalBlocked declaration;
    declared_count = WalkAtDepth(24, declared, kCapacity);
  }
  const uint64_t mask_after = BlockedMask();
  const LibunwindMaskCalls after_declared = LibunwindMaskCallsOfThisThread();
  REQUIRE(pthread_sigmask(SIG_SETMASK, &previous, nullptr) == 0);
  // Declared: none made, some skipped (how many steps take the lock depends on libunwind's
  // cache); the mask as it was.
  CHECK(after_declared.made == after_plain.made);
  CHECK(after_declared.skipped > after_plain.skipped);
  CHECK(mask_after == mask_before);
  // The same walk: the same stack pointers, and the same return addresses but the one in
  // this test's body (two call sites of WalkAtDepth).
  REQUIRE(declared_count == plain_count);
  size_t other_pcs = 0;
  for (size_t i = 1; i < plain_count; ++i) {
    CHECK(declared[i].sp == plain[i].sp);
    if (declared[i].pc != plain[i].pc) ++other_pcs;
  }
  CHECK(other_pcs == 1);
}

// libunwind reads registers from the walk's context: the signal context, a resumed walk's
// copy in the walker's scratch (below a segment crossed by verified frame-pointer steps), the
// context a wait walk builds. Those are read directly, never through CheckedRead's system
// calls, wherever the context lies.
TEST_CASE("a walk reads its context's registers directly, not with checked reads",
          "[platform][sampling]") {
  REQUIRE(WarmUpLibunwind());
  constexpr size_t kCapacity = 128;
  NativeFrame learning[kCapacity];
  const size_t learning_count = WalkAtDepth(24, learning, kCapacity);  // Notes the verdicts.
  REQUIRE(learning_count > 24);

  const uint64_t before = LibunwindCheckedReadsOfThisThread();
  NativeFrame verified[kCapacity];
  const size_t verified_count = WalkAtDepth(24, verified, kCapacity);
  const uint64_t after_verified = LibunwindCheckedReadsOfThisThread();
  REQUIRE(verified_count == learning_count);
  // The walk crossed verified frames and resumed libunwind below them (from its scratch's
  // copy of the context): some frame not verified follows a verified one.
  size_t first_verified = 0, resumed_at = 0;
  for (size_t i = 1; i < verified_count && resumed_at == 0; ++i) {
    const bool noted = FramePointerStepVerifiedForTesting(verified[i].pc);
    if (noted && first_verified == 0) first_verified = i;
    if (!noted && first_verified != 0) resumed_at = i;
  }
  std::printf("context reads: %zu frames, verified from %zu, libunwind resumed at %zu; "
              "checked reads %llu\n",
              verified_count, first_verified, resumed_at,
              static_cast<unsigned long long>(after_verified - before));
  REQUIRE(first_verified > 0);
  REQUIRE(resumed_at > first_verified);
  CHECK(after_verified == before);

  // The context outside the walked stack, the same frames.
  NativeFrame off_stack[kCapacity];
  const size_t off_stack_count = WalkAtDepth(24, off_stack, kCapacity, true);
  CHECK(LibunwindCheckedReadsOfThisThread() == after_verified);
  REQUIRE(off_stack_count == verified_count);
  for (size_t i = 1; i < verified_count; ++i) CHECK(off_stack[i].sp == verified[i].sp);
}

TEST_CASE("outside a Strata walk the redirected imports keep libc's semantics",
          "[platform][sampling]") {
  REQUIRE(WarmUpLibunwind());
  CHECK_FALSE(InStrataLibunwindWalk());
  {
    ScopedStrataLibunwindWalk walk;
    CHECK(InStrataLibunwindWalk());
  }
  CHECK_FALSE(InStrataLibunwindWalk());
  CHECK(IsLibunwindValidationDescriptor(-(1 << 30)));
  CHECK_FALSE(IsLibunwindValidationDescriptor(-1));
  CHECK_FALSE(IsLibunwindValidationDescriptor(3));
}

}  // namespace
}  // namespace strata

// --- The permanent copies of FDEs with an expression rule ----------------------------------

namespace permanent_copies {

// glibc's signal return trampoline (__restore_rt, not exported): the sa_restorer libc's
// sigaction installs, read back from the kernel. Its CFA rule is a DWARF expression.
uintptr_t SignalRestorer() {
  struct KernelAction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    uint64_t mask;
  };
  struct sigaction action{};
  action.sa_handler = [](int) {};
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGUSR2, &action, nullptr) != 0) return 0;
  KernelAction installed{};
  if (syscall(SYS_rt_sigaction, SIGUSR2, nullptr, &installed, sizeof(uint64_t)) != 0) return 0;
  return reinterpret_cast<uintptr_t>(installed.restorer);
}

std::atomic<bool> g_go{false};
std::atomic<int> g_answered{0};
std::atomic<int> g_refused{0};
std::atomic<int> g_rule_seen{0};

int CountAnswer(dl_phdr_info* info, size_t, void*) {
  if (info->dlpi_phnum == 3) g_answered.fetch_add(1);
  return 0;
}

// Looks up `pc` 200 times, as a walk's step does.
void* LookUp(void* pc_argument) {
  const uintptr_t pc = reinterpret_cast<uintptr_t>(pc_argument);
  while (!g_go.load()) {
  }
  for (int round = 0; round < 200; ++round) {
    const uint64_t refused_before = strata::RefusedLookupsOfThisThread();
    strata::SetLibunwindLookupPc(pc);
    int result = -1;
    strata::ServeDlIteratePhdrDuringWalk(&CountAnswer, nullptr, &result);
    strata::SetLibunwindLookupPc(0);
    if (strata::RefusedLookupsOfThisThread() != refused_before) g_refused.fetch_add(1);
  }
  return nullptr;
}

void* AskRule(void* pc_argument) {
  const uintptr_t pc = reinterpret_cast<uintptr_t>(pc_argument);
  while (!g_go.load()) {
  }
  for (int round = 0; round < 2000; ++round) {
    if (strata::InFunctionWithExpressionRule(pc)) g_rule_seen.fetch_add(1);
  }
  return nullptr;
}

}  // namespace permanent_copies

// A copy whose CFA rule is an expression is kept for good, for every thread's lookups: it is
// written once, by the first lookup, and read (by libunwind, by InFunctionWithExpressionRule)
// without being written again. Before, each lookup rebuilt it in place while other threads
// read it: under --config=tsan a race report (BuildUnwindTableCopy against
// InFunctionWithExpressionRule, found in takeover_repeat_linked_test).
TEST_CASE("the permanent copy of an expression rule's FDE is written once, read by all threads",
          "[platform][sampling][libunwind]") {
  using namespace permanent_copies;
  REQUIRE(strata::LoadLibunwind() != nullptr);
  const uintptr_t restorer = SignalRestorer();
  REQUIRE(restorer != 0);
  void* pc = reinterpret_cast<void*>(restorer);
  constexpr int kLookers = 4;
  constexpr int kAskers = 2;
  pthread_t threads[kLookers + kAskers];
  for (int i = 0; i < kLookers; ++i) {
    REQUIRE(pthread_create(&threads[i], nullptr, &LookUp, pc) == 0);
  }
  for (int i = 0; i < kAskers; ++i) {
    REQUIRE(pthread_create(&threads[kLookers + i], nullptr, &AskRule, pc) == 0);
  }
  g_go.store(true);
  for (pthread_t thread : threads) pthread_join(thread, nullptr);
  INFO("answered " << g_answered.load() << ", refused " << g_refused.load() << " of "
                   << kLookers * 200 << " lookups; the rule seen by " << g_rule_seen.load()
                   << " asks");
  // Only lookups made while the first one was still building the copy may be refused (how
  // many depends on the scheduling); once built, every lookup is answered from it.
  CHECK(g_answered.load() + g_refused.load() == kLookers * 200);
  CHECK(g_answered.load() > 0);
  CHECK(strata::InFunctionWithExpressionRule(restorer));
  const int answered_before = g_answered.load();
  const uint64_t refused_before = strata::RefusedLookupsOfThisThread();
  strata::SetLibunwindLookupPc(restorer);
  int result = -1;
  CHECK(strata::ServeDlIteratePhdrDuringWalk(&CountAnswer, nullptr, &result));
  strata::SetLibunwindLookupPc(0);
  CHECK(g_answered.load() == answered_before + 1);
  CHECK(strata::RefusedLookupsOfThisThread() == refused_before);
}
