// libstrata_base.so links libstdc++ statically (hidden) and forwards its operator new and
// delete to the process's (internal/global_new_forwarding.cc). This program links the
// shared library and replaces the global operator new and delete with an allocator that
// malloc/free cannot stand in for: every block carries a header, and a block without it
// aborts the program when deleted. Memory then crosses the boundary both ways (strings the
// library returns and the program frees, strings the program owns and the library grows)
// and must never mix allocators.
//
// Under AddressSanitizer the program's operator new is ASan's own, which reports a block
// released by the wrong allocator itself (alloc-dealloc-mismatch, bad-free): this program
// then does not replace it (the two replacements do not compose) and skips the counts.
// ThreadSanitizer also replaces operator new and delete (its runtime allocates blocks it
// later frees through them: with the replacement below the program died at exit reading a
// header below a block of TSan's heap), so the same applies there.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "base/markers.h"
#include "base/profiler.h"
#include "catch2/catch.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kReplacesOperatorNew = false;
uint64_t ProgramAllocations() { return 0; }  // The sanitizer's allocator: not counted.
#else
constexpr bool kReplacesOperatorNew = true;

namespace {

constexpr uint64_t kHeaderMagic = 0x5354524154414c4cull;
constexpr size_t kHeaderBytes = 16;  // Keeps the 16-byte alignment of malloc's blocks.
uint64_t g_program_allocations = 0;  // Not atomic: read on the test thread between calls.

void* HeaderedAllocate(size_t size) {
  auto* block = static_cast<unsigned char*>(std::malloc(size + kHeaderBytes));
  if (!block) throw std::bad_alloc();
  std::memcpy(block, &kHeaderMagic, sizeof(kHeaderMagic));
  __atomic_add_fetch(&g_program_allocations, 1, __ATOMIC_RELAXED);
  return block + kHeaderBytes;
}

void HeaderedFree(void* pointer) {
  if (!pointer) return;
  unsigned char* block = static_cast<unsigned char*>(pointer) - kHeaderBytes;
  uint64_t magic;
  std::memcpy(&magic, block, sizeof(magic));
  if (magic != kHeaderMagic) {
    std::fprintf(stderr, "operator delete: %p was not allocated by this program's operator new\n",
                 pointer);
    std::abort();
  }
  std::memset(block, 0, sizeof(magic));
  std::free(block);
}

uint64_t ProgramAllocations() { return __atomic_load_n(&g_program_allocations, __ATOMIC_RELAXED); }

}  // namespace

void* operator new(size_t size) { return HeaderedAllocate(size); }
void* operator new[](size_t size) { return HeaderedAllocate(size); }
void operator delete(void* pointer) noexcept { HeaderedFree(pointer); }
void operator delete[](void* pointer) noexcept { HeaderedFree(pointer); }
void operator delete(void* pointer, size_t) noexcept { HeaderedFree(pointer); }
void operator delete[](void* pointer, size_t) noexcept { HeaderedFree(pointer); }
#endif  // __SANITIZE_ADDRESS__ || __SANITIZE_THREAD__

namespace strata {
namespace {

TEST_CASE("the library allocates with the program's operator new, both ways across the API") {
  ProfilerSettings settings;
  settings.interval_ms = 1;
  const uint64_t before_start = ProgramAllocations();
  ProfilerStart(settings);
  REQUIRE(ProfilerIsActive());
  // The session's thread registry, buffer and sampler thread were allocated by the library.
  if (kReplacesOperatorNew) CHECK(ProgramAllocations() > before_start);

  STRATA_MARKER_TEXT("crossing", kOther, {}, std::string(300, 'x'));
  const uint64_t before_profile = ProgramAllocations();
  {
    // Made by the library, freed here: a foreign block would abort in HeaderedFree.
    const std::string profile = ProfilerGetProfile();
    CHECK(profile.find("\"crossing\"") != std::string::npos);
    CHECK(profile.size() > 1000);
  }
  if (kReplacesOperatorNew) CHECK(ProgramAllocations() > before_profile);

  // A string the program allocated, grown (reallocated) and assigned by the library.
  std::string error(20, 'e');
  error.shrink_to_fit();
  CHECK_FALSE(ProfilerSaveProfile("/nonexistent-directory/for/strata/profile.json", &error));
  CHECK(error.size() > 20);
  ProfilerStop();
}

}  // namespace
}  // namespace strata
