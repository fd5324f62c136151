// GlibcThreadPointers and FindExecutablePadding on this test process itself: its own glibc's
// thread lists read through process_vm_readv of its own pid (as strata reads a target's), and
// its own libc's executable padding as the loader mapped it.
#include "tools/strata/attach/glibc_threads.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/strata/attach/elf_symbols.h"
#include "tools/strata/attach/injector.h"

namespace strata {
namespace attach {
namespace {

// The first mapping (file offset 0) of the library whose name starts with `prefix`, its path.
uint64_t MappingOf(const std::string& prefix, std::string* path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, permissions, offset, device, inode, name;
    fields >> range >> permissions >> offset >> device >> inode >> name;
    if (name.empty() || std::strtoull(offset.c_str(), nullptr, 16) != 0) continue;
    if (name.substr(name.rfind('/') + 1).rfind(prefix, 0) != 0) continue;
    *path = name;
    return std::strtoull(range.c_str(), nullptr, 16);
  }
  return 0;
}

struct Started {
  pthread_t thread;
  std::atomic<pid_t> tid{0};
  std::atomic<bool> done{false};
};

void* Wait(void* raw) {
  auto* started = static_cast<Started*>(raw);
  started->tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
  while (!started->done.load()) usleep(1000);
  return nullptr;
}

TEST_CASE("every thread's pointer is read from glibc's lists, as pthread_self") {
  std::string libc_path, ld_path;
  const uint64_t libc_base = MappingOf("libc.so.6", &libc_path);
  const uint64_t ld_base = MappingOf("ld-linux-x86-64.so", &ld_path);
  REQUIRE(libc_base != 0);
  REQUIRE(ld_base != 0);
  std::map<std::string, uint64_t> libc_symbols, ld_symbols;
  uint64_t libc_vaddr = 0, ld_vaddr = 0;
  REQUIRE(ReadDynamicSymbols(libc_path, &libc_symbols, &libc_vaddr));
  REQUIRE(ReadDynamicSymbols(ld_path, &ld_symbols, &ld_vaddr));
  REQUIRE(ld_symbols.count("_rtld_global") == 1);
  std::vector<Started> threads(4);
  for (Started& started : threads) REQUIRE(pthread_create(&started.thread, nullptr, &Wait, &started) == 0);
  for (Started& started : threads) {
    while (started.tid.load() == 0) usleep(1000);
  }
  const pid_t main_tid = getpid();
  std::vector<pid_t> tids = {main_tid};
  for (const Started& started : threads) tids.push_back(started.tid.load());
  const GlibcThreadLists lists =
      FindGlibcThreadLists(getpid(), libc_symbols, libc_base - libc_vaddr, ld_base - ld_vaddr + ld_symbols["_rtld_global"]);
  REQUIRE(lists.found());
  const std::map<pid_t, uint64_t> found = GlibcThreadPointers(getpid(), tids, lists);
  CHECK(found.size() == tids.size());
  CHECK(found.count(main_tid) == 1);
  if (found.count(main_tid)) CHECK(found.at(main_tid) == static_cast<uint64_t>(pthread_self()));
  for (const Started& started : threads) {
    REQUIRE(found.count(started.tid.load()) == 1);
    CHECK(found.at(started.tid.load()) == static_cast<uint64_t>(started.thread));
  }
  // A tid that is no thread of this process is not found.
  CHECK(GlibcThreadPointers(getpid(), {999999999}, lists).empty());
  // One thread asked for alone (as for a thread started after the attach) is found alone.
  const std::map<pid_t, uint64_t> one = GlibcThreadPointers(getpid(), {threads[2].tid.load()}, lists);
  CHECK(one.size() == 1);
  CHECK(one.count(threads[2].tid.load()) == 1);
  // No lists (a libc without the descriptors): nothing found.
  CHECK(GlibcThreadPointers(getpid(), tids, GlibcThreadLists()).empty());
  for (Started& started : threads) started.done.store(true);
  for (Started& started : threads) pthread_join(started.thread, nullptr);
}

TEST_CASE("libc's executable padding is mapped executable and holds zeros") {
  std::string libc_path;
  const uint64_t libc_base = MappingOf("libc.so.6", &libc_path);
  REQUIRE(libc_base != 0);
  uint64_t offset = 0, bytes = 0;
  REQUIRE(FindExecutablePadding(libc_path, 256, &offset, &bytes));
  CHECK(bytes >= 256);
  CHECK(bytes < 4096);
  const uint64_t start = libc_base + offset;
  CHECK((start + bytes) % 4096 == 0);  // Up to the end of the segment's last page.
  // In an r-x mapping of libc, all zeros (nothing of the program's there).
  bool executable = false;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, permissions;
    fields >> range >> permissions;
    const uint64_t low = std::strtoull(range.c_str(), nullptr, 16);
    const uint64_t high = std::strtoull(range.c_str() + range.find('-') + 1, nullptr, 16);
    if (low <= start && start + bytes <= high) executable = permissions.find('x') != std::string::npos;
  }
  CHECK(executable);
  std::vector<uint8_t> there(bytes);
  REQUIRE(ReadTargetBytes(getpid(), start, there.data(), there.size()));
  CHECK(std::all_of(there.begin(), there.end(), [](uint8_t byte) { return byte == 0; }));
  // A file that is not ELF has none.
  uint64_t ignored = 0;
  CHECK_FALSE(FindExecutablePadding("/proc/self/status", 256, &ignored, &ignored));
}

}  // namespace
}  // namespace attach
}  // namespace strata
