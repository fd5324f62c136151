#include "platform/sampling/stack_bounds.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

extern "C" void* __libc_stack_end;  // glibc: the initial stack pointer's page, roughly.

namespace strata {

StackBounds StackBounds::OfCurrentThread() { return OfThread(pthread_self()); }

StackBounds StackBounds::OfThread(pthread_t thread) {
  pthread_attr_t attributes;
  if (pthread_getattr_np(thread, &attributes) != 0) return StackBounds();
  void* address = nullptr;
  size_t size = 0;
  const int error = pthread_attr_getstack(&attributes, &address, &size);
  pthread_attr_destroy(&attributes);
  if (error != 0 || address == nullptr || size == 0) return StackBounds();
  StackBounds bounds;
  bounds.low = reinterpret_cast<uintptr_t>(address);
  bounds.high = bounds.low + size;
  return bounds;
}

StackBounds StackBounds::MainStackReach() {
  const uintptr_t inside = reinterpret_cast<uintptr_t>(__libc_stack_end);
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return StackBounds();
  // Line by line, in a fixed buffer: "start-end perms offset dev inode path".
  char buffer[4096];
  size_t filled = 0;
  uintptr_t previous_end = 0;
  StackBounds found;
  bool done = false;
  while (!done) {
    const ssize_t got = read(fd, buffer + filled, sizeof(buffer) - 1 - filled);
    if (got <= 0) break;
    filled += static_cast<size_t>(got);
    buffer[filled] = '\0';
    char* line = buffer;
    char* newline;
    while ((newline = std::strchr(line, '\n')) != nullptr) {
      *newline = '\0';
      char* dash = nullptr;
      const uintptr_t start = std::strtoull(line, &dash, 16);
      const uintptr_t end = (dash && *dash == '-') ? std::strtoull(dash + 1, nullptr, 16) : 0;
      if (inside >= start && inside < end) {
        constexpr uintptr_t kStackGuardGap = 256 * 4096;
        found.high = end;
        found.low = previous_end + kStackGuardGap < start ? previous_end + kStackGuardGap : start;
        done = true;
        break;
      }
      previous_end = end;
      line = newline + 1;
    }
    filled = static_cast<size_t>(buffer + filled - line);
    std::memmove(buffer, line, filled);
    if (filled == sizeof(buffer) - 1) filled = 0;  // A line longer than the buffer: dropped.
  }
  close(fd);
  return found;
}

}  // namespace strata
