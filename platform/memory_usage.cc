#include "platform/memory_usage.h"

#include <fcntl.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace strata {
namespace {

// The page size, 0 until first needed. Constant-initialized, so a caller in another
// static initializer (a preloaded library's constructor) finds it valid to read.
std::atomic<uint64_t> g_page_size{0};

uint64_t PageSize() {
  uint64_t size = g_page_size.load(std::memory_order_relaxed);
  if (size == 0) {
    // getauxval reads the auxiliary vector the kernel gave the process: no lock, no
    // allocation (sysconf is not on POSIX's async-signal-safe list, getauxval is not
    // either, but glibc's is a plain array walk). Racing first callers store the same value.
    size = getauxval(AT_PAGESZ);
    if (size == 0) size = 4096;
    g_page_size.store(size, std::memory_order_relaxed);
  }
  return size;
}

// Reads one unsigned decimal number at text[*pos], after any spaces. False when there is
// none or it overflows.
bool ParseNumber(const char* text, size_t length, size_t* pos, uint64_t* out) {
  size_t i = *pos;
  while (i < length && text[i] == ' ') ++i;
  if (i == length || text[i] < '0' || text[i] > '9') return false;
  uint64_t value = 0;
  for (; i < length && text[i] >= '0' && text[i] <= '9'; ++i) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *pos = i;
  *out = value;
  return true;
}

class ErrnoSaver {
 public:
  ErrnoSaver() : saved_(errno) {}
  ~ErrnoSaver() { errno = saved_; }
  ErrnoSaver(const ErrnoSaver&) = delete;
  ErrnoSaver& operator=(const ErrnoSaver&) = delete;

 private:
  const int saved_;
};

}  // namespace

namespace memory_usage_internal {

std::optional<MemoryUsage> ParseStatm(const char* text, size_t length, uint64_t page_size) {
  size_t pos = 0;
  uint64_t size_pages = 0, resident_pages = 0;
  if (!ParseNumber(text, length, &pos, &size_pages)) return std::nullopt;
  // The two fields must be separated by a space.
  if (pos == length || text[pos] != ' ') return std::nullopt;
  if (!ParseNumber(text, length, &pos, &resident_pages)) return std::nullopt;
  // The field ends at a space, a newline or the end of what was read.
  if (pos < length && text[pos] != ' ' && text[pos] != '\n') return std::nullopt;
  if (page_size == 0 || size_pages > UINT64_MAX / page_size ||
      resident_pages > UINT64_MAX / page_size) {
    return std::nullopt;
  }
  MemoryUsage usage;
  usage.virtual_bytes = size_pages * page_size;
  usage.resident_bytes = resident_pages * page_size;
  return usage;
}

}  // namespace memory_usage_internal

std::optional<MemoryUsage> ReadProcessMemoryUsage() {
  ErrnoSaver errno_saver;
  int fd;
  do {
    fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return std::nullopt;

  // Seven numbers of at most 20 digits each: 160 bytes is always enough.
  char buffer[160];
  size_t length = 0;
  while (length < sizeof(buffer)) {
    const ssize_t n = read(fd, buffer + length, sizeof(buffer) - length);
    if (n > 0) {
      length += static_cast<size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fd);
  return memory_usage_internal::ParseStatm(buffer, length, PageSize());
}

}  // namespace strata
