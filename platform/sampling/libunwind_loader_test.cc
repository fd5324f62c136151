// libunwind loaded privately: it walks, but its copy of the C++ exception ABI never enters the
// process's global symbol scope, so the program's exceptions keep going through libgcc_s, also
// while sampled and in C++ code dlopen()ed later. Checked in this real process with dladdr.
#include "platform/sampling/libunwind_loader.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "platform/sampling/libunwind_walker.h"
#include "platform/sampling/sampled_thread_for_testing.h"

namespace strata {
namespace {

using sampling_testing::ChainRun;
using sampling_testing::RecordedSample;

// Whether libunwind.so.8 was in the process before any test ran: it must not be, or something
// linked it (and put its _Unwind_* symbols in the global scope).
bool LibunwindLoadedAtStartup() {
  void* handle = dlopen(kLibunwindSoname, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) {
    (void)dlerror();
    return false;
  }
  dlclose(handle);
  return true;
}
const bool g_libunwind_loaded_at_startup = LibunwindLoadedAtStartup();

// The file name of the object that contains `address` ("" if none).
std::string ObjectOf(const void* address) {
  Dl_info info;
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

bool Contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

// The object that should define the exception ABI in the global scope: libgcc_s, or under a
// sanitizer build its runtime, which interposes _Unwind_RaiseException and forwards it to the
// next definition (libgcc_s). Never libunwind.
bool IsExceptionAbiProvider(const std::string& object) {
  return Contains(object, "libgcc_s.so") || Contains(object, "libasan.so") ||
         Contains(object, "libtsan.so") || Contains(object, "libubsan.so");
}

void* GlobalSymbol(const char* name) {
  void* symbol = dlsym(RTLD_DEFAULT, name);
  if (symbol == nullptr) (void)dlerror();
  return symbol;
}

// The C++ exception ABI that libunwind.so.8 exports too.
const char* const kExceptionAbi[] = {
    "_Unwind_RaiseException", "_Unwind_Resume",       "_Unwind_Resume_or_Rethrow",
    "_Unwind_DeleteException", "_Unwind_ForcedUnwind", "_Unwind_Backtrace",
    "_Unwind_GetIP",           "_Unwind_GetCFA",       "_Unwind_FindEnclosingFunction",
};

// Names only libunwind defines.
const char* const kLibunwindOnly[] = {"_ULx86_64_init_local2", "_ULx86_64_step",
                                      "_ULx86_64_get_reg", "_Ux86_64_getcontext", "unw_backtrace"};

// Every name of kExceptionAbi resolves, in the global scope, into libgcc_s; none of
// kLibunwindOnly resolves there at all.
void CheckGlobalScopeHasNoLibunwind() {
  for (const char* name : kExceptionAbi) {
    INFO(name << " resolves into " << ObjectOf(GlobalSymbol(name)));
    CHECK(IsExceptionAbiProvider(ObjectOf(GlobalSymbol(name))));
  }
  for (const char* name : kLibunwindOnly) {
    INFO(name);
    CHECK(GlobalSymbol(name) == nullptr);
  }
}

std::string FindTestLibrary(const char* name) {
  std::vector<std::string> candidates;
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  if (srcdir != nullptr && workspace != nullptr) {
    candidates.push_back(std::string(srcdir) + "/" + workspace + "/platform/sampling/" + name);
  }
  char exe[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (length > 0) {
    exe[length] = '\0';
    std::string directory(exe);
    directory.resize(directory.rfind('/') + 1);
    candidates.push_back(directory + name);
  }
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return std::string();
}

// libexception_target_for_testing.so, dlopen()ed once (after libunwind, by the time a test
// calls this) and kept.
struct ExceptionTarget {
  void* (*bound_unwind_raise_exception)() = nullptr;
  int (*throw_and_catch)(int) = nullptr;
};

const ExceptionTarget& GetExceptionTarget() {
  static const ExceptionTarget target = [] {
    ExceptionTarget result;
    const std::string path = FindTestLibrary("libexception_target_for_testing.so");
    void* handle = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return result;
    result.bound_unwind_raise_exception = reinterpret_cast<void* (*)()>(
        dlsym(handle, "strata_test_bound_unwind_raise_exception"));
    result.throw_and_catch =
        reinterpret_cast<int (*)(int)>(dlsym(handle, "strata_test_throw_and_catch"));
    return result;
  }();
  return target;
}

TEST_CASE("LoadLibunwind: nothing linked libunwind into this process",
          "[platform][sampling][libunwind]") {
  CHECK_FALSE(g_libunwind_loaded_at_startup);
}

TEST_CASE(
    "LoadLibunwind: libunwind is loaded privately; the global scope keeps libgcc_s's "
    "exception ABI",
    "[platform][sampling][libunwind]") {
  const LibunwindFunctions* functions = LoadLibunwind();
  REQUIRE(functions != nullptr);
  CHECK(LoadLibunwind() == functions);
  CHECK(LoadedLibunwind() == functions);
  CHECK(LibunwindAvailable());
  CHECK(WarmUpLibunwind());
  // Every entry points into libunwind.so.8.
  for (const void* entry :
       {reinterpret_cast<const void*>(functions->init_local),
        reinterpret_cast<const void*>(functions->init_local2),
        reinterpret_cast<const void*>(functions->step),
        reinterpret_cast<const void*>(functions->get_reg),
        reinterpret_cast<const void*>(functions->getcontext),
        reinterpret_cast<const void*>(functions->flush_cache),
        reinterpret_cast<const void*>(functions->backtrace),
        static_cast<const void*>(functions->local_addr_space)}) {
    CHECK(Contains(ObjectOf(entry), "libunwind.so.8"));
  }
  CHECK(*functions->local_addr_space != nullptr);

  // libunwind is in the process, with its own _Unwind_RaiseException...
  void* handle = dlopen(kLibunwindSoname, RTLD_LAZY | RTLD_NOLOAD);
  REQUIRE(handle != nullptr);
  void* libunwind_raise = dlsym(handle, "_Unwind_RaiseException");
  CHECK(Contains(ObjectOf(libunwind_raise), "libunwind.so.8"));
  // ... but the global scope, which libstdc++'s references use, still resolves to libgcc_s's.
  void* global_raise = GlobalSymbol("_Unwind_RaiseException");
  CHECK(IsExceptionAbiProvider(ObjectOf(global_raise)));
  CHECK(global_raise != libunwind_raise);
  std::printf("_Unwind_RaiseException: global scope %p in %s; libunwind's %p in %s\n",
              global_raise, ObjectOf(global_raise).c_str(), libunwind_raise,
              ObjectOf(libunwind_raise).c_str());
  dlclose(handle);
  CheckGlobalScopeHasNoLibunwind();
}

TEST_CASE(
    "LoadLibunwind: C++ code dlopen()ed after the load binds its exception ABI to libgcc_s "
    "and throws",
    "[platform][sampling][libunwind]") {
  REQUIRE(LoadLibunwind() != nullptr);
  const ExceptionTarget& target = GetExceptionTarget();
  REQUIRE(target.bound_unwind_raise_exception != nullptr);
  REQUIRE(target.throw_and_catch != nullptr);
  void* bound = target.bound_unwind_raise_exception();
  INFO("the library bound _Unwind_RaiseException into " << ObjectOf(bound));
  CHECK(IsExceptionAbiProvider(ObjectOf(bound)));
  CHECK(bound == GlobalSymbol("_Unwind_RaiseException"));
  CHECK(target.throw_and_catch(100) == 100);
}

// --- C++ exceptions while sampled ----------------------------------------------------------

int g_thrown = 0;
int g_caught = 0;
int g_library_caught = 0;

__attribute__((noinline)) void ThrowFrom(int depth) {
  if (depth == 0) throw std::runtime_error("thrown while sampled");
  ThrowFrom(depth - 1);
  __asm__ volatile("");  // Not a tail call: every level is a frame to unwind.
}

// Runs on the sampled thread between chain calls: mostly throwing and catching, here and in the
// dlopen()ed library, so that many samples land inside the C++ runtime's unwinder.
void ExceptionWork() {
  for (int i = 0; i < 100; ++i) {
    ++g_thrown;
    try {
      ThrowFrom(i % 8);
    } catch (const std::runtime_error& e) {
      if (e.what()[0] == 't') ++g_caught;
    }
  }
  g_library_caught += GetExceptionTarget().throw_and_catch(100);
}

TEST_CASE("WalkStackWithLibunwind: C++ exceptions thrown and caught while sampled still work",
          "[platform][sampling][libunwind]") {
  REQUIRE(GetExceptionTarget().throw_and_catch != nullptr);
  g_thrown = g_caught = g_library_caught = 0;
  const ChainRun run = sampling_testing::RunChainOnSampledThread(
      sampling_testing::kLibunwindWalk, TimeDuration::FromMilliseconds(1),
      TimeDuration::FromMilliseconds(1000), &ExceptionWork);
  REQUIRE(run.install_error == 0);
  REQUIRE(run.timer_error == 0);
  REQUIRE(run.samples.size() >= 30);

  // Every exception was caught where it should be.
  CHECK(g_thrown > 0);
  CHECK(g_caught == g_thrown);
  CHECK(g_library_caught == g_thrown);

  size_t in_libgcc = 0, in_libunwind = 0, reached_main = 0;
  for (const RecordedSample& sample : run.samples) {
    for (size_t i = 1; i < sample.unwind_count; ++i) {
      CHECK(run.bounds.Contains(sample.unwind_frames[i].sp));
      CHECK(sample.unwind_frames[i].sp > sample.unwind_frames[i - 1].sp);
    }
    bool libgcc = false, libunwind = false;
    for (size_t i = 0; i < sample.unwind_count; ++i) {
      const std::string object =
          ObjectOf(reinterpret_cast<void*>(sample.unwind_frames[i].pc - (i > 0 ? 1 : 0)));
      if (Contains(object, "libgcc_s.so")) libgcc = true;
      // The walker's own frames never appear (it walks from the interrupted pc), so a
      // libunwind frame would be the program's exception unwinding running in libunwind.
      if (Contains(object, "libunwind.so")) libunwind = true;
    }
    in_libgcc += libgcc;
    in_libunwind += libunwind;
    const std::vector<std::string> names =
        sampling_testing::SymbolNames(sample.unwind_frames, sample.unwind_count);
    for (const std::string& name : names) {
      if (name == "strata_test_sampled_thread_main") {
        ++reached_main;
        break;
      }
    }
  }
  std::printf(
      "exceptions while sampled: %d thrown here, %d caught here, %d caught in the dlopen()ed "
      "library; %zu samples, %zu inside libgcc_s (the program's unwinder), %zu inside "
      "libunwind, %zu walks reached the thread's start routine\n",
      g_thrown, g_caught, g_library_caught, run.samples.size(), in_libgcc, in_libunwind,
      reached_main);
  CHECK(in_libgcc > 0);     // The program's exceptions were unwound by libgcc_s...
  CHECK(in_libunwind == 0);  // ... never by libunwind.
  CheckGlobalScopeHasNoLibunwind();
  if (!sampling_testing::kHandlerRunsWhereSignalled) {
    std::printf("ThreadSanitizer build: the callers of the sampled pcs are not checked (the "
                "handler runs after the signal; sampled_thread_for_testing.h)\n");
    return;
  }
  CHECK(reached_main >= run.samples.size() * 9 / 10);
}

// --- Without libunwind ---------------------------------------------------------------------

TEST_CASE("OpenPrivately: a missing library gives no table and leaves no dlerror() behind",
          "[platform][sampling][libunwind]") {
  LibunwindFunctions table;
  CHECK_FALSE(
      libunwind_loader_internal::OpenPrivately("libstrata-no-such-library.so.8", &table));
  CHECK(table.step == nullptr);
  CHECK(table.local_addr_space == nullptr);
  CHECK(dlerror() == nullptr);
  // A library that opens but is not libunwind: closed again, table untouched.
  CHECK_FALSE(libunwind_loader_internal::OpenPrivately("libm.so.6", &table));
  CHECK(table.init_local2 == nullptr);
  CHECK(dlerror() == nullptr);
}

TEST_CASE("WalkStackWithLibunwind without libunwind reports the pc only",
          "[platform][sampling][libunwind]") {
  ucontext_t context;
  REQUIRE(getcontext(&context) == 0);
  const StackBounds bounds = StackBounds::OfCurrentThread();
  NativeFrame frames[16];
  CHECK(libunwind_walker_internal::WalkStackWith(nullptr, &context, bounds, frames, 16) == 1);
  CHECK(frames[0].pc == static_cast<uintptr_t>(context.uc_mcontext.gregs[REG_RIP]));
  CHECK(frames[0].sp == static_cast<uintptr_t>(context.uc_mcontext.gregs[REG_RSP]));
  CHECK(libunwind_walker_internal::WalkStackWith(nullptr, &context, bounds, frames, 0) == 0);
  // The same context with libunwind walks on.
  REQUIRE(LoadLibunwind() != nullptr);
  CHECK(libunwind_walker_internal::WalkStackWith(LoadLibunwind(), &context, bounds, frames, 16) >
        1);
}

}  // namespace
}  // namespace strata

// --- CaptureCurrentStack -------------------------------------------------------------------

namespace {
uintptr_t g_captured[strata::kMaxCapturedFrames + 8];
size_t g_captured_count = 0;
uintptr_t g_inner_return_address = 0;
}  // namespace

extern "C" __attribute__((noinline)) void strata_test_capture_inner(size_t capacity) {
  g_captured_count = strata::CaptureCurrentStack(g_captured, capacity);
  g_inner_return_address = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  __asm__ volatile("" ::: "memory");
}

extern "C" __attribute__((noinline)) void strata_test_capture_outer(size_t capacity) {
  strata_test_capture_inner(capacity);
  __asm__ volatile("" ::: "memory");
}

namespace strata {
namespace {

TEST_CASE("CaptureCurrentStack: the caller first, then the callers' return addresses",
          "[platform][sampling][libunwind]") {
  strata_test_capture_outer(64);
  REQUIRE(g_captured_count >= 3);
  CHECK(sampling_testing::SymbolName(g_captured[0], true) == "strata_test_capture_inner");
  CHECK(g_captured[1] == g_inner_return_address);
  CHECK(sampling_testing::SymbolName(g_captured[1], true) == "strata_test_capture_outer");

  strata_test_capture_outer(1);
  CHECK(g_captured_count == 1);
  CHECK(sampling_testing::SymbolName(g_captured[0], true) == "strata_test_capture_inner");
  strata_test_capture_outer(0);
  CHECK(g_captured_count == 0);
  strata_test_capture_outer(kMaxCapturedFrames + 8);
  CHECK(g_captured_count <= kMaxCapturedFrames);
}

}  // namespace
}  // namespace strata
