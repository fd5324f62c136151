// A program that takes its whole descriptor table back at start, as daemons and fork-exec
// helpers do: a constructor closes every descriptor above 2 (close_range(3, ~0U, 0), or a
// loop on older kernels), then the program opens its own pipes and a file on the freed low
// numbers, keeps data in them for a moment and reads it back. No Strata include or call.
//
//   fd_reuse_program FILE
//     Prints "fd_reuse: pipes=N bytes=B file_bytes=F mismatches=M" and exits 0 when every
//     byte came back as written, 3 otherwise. FILE is created (and removed).
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

constexpr int kPipes = 12;
constexpr int kBytesPerPipe = 4096;

__attribute__((constructor(101))) void CloseEverythingAbove2() {
  if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
    for (int fd = 3; fd < 1024; ++fd) close(fd);
  }
}

char PatternByte(int pipe_index, int offset) { return static_cast<char>('A' + (pipe_index * 7 + offset) % 26); }

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

size_t ReadAll(int fd, char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = read(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fd_reuse_program FILE\n");
    return 2;
  }
  int pipes[kPipes][2];
  char buffer[kBytesPerPipe];
  long mismatches = 0, bytes = 0;
  // The low numbers first: every pipe is filled at once and read back a little later, so
  // that anything else reading these numbers meanwhile would take the program's bytes.
  for (int i = 0; i < kPipes; ++i) {
    if (pipe(pipes[i]) != 0) {
      std::perror("pipe");
      return 4;
    }
    for (int j = 0; j < kBytesPerPipe; ++j) buffer[j] = PatternByte(i, j);
    if (!WriteAll(pipes[i][1], buffer, kBytesPerPipe)) {
      std::perror("write");
      return 4;
    }
  }
  const int file = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (file < 0) {
    std::perror(argv[1]);
    return 4;
  }
  const char line[] = "the program's own file\n";
  long file_bytes = 0;
  for (int k = 0; k < 200; ++k) {
    if (!WriteAll(file, line, sizeof(line) - 1)) ++mismatches;
    file_bytes += sizeof(line) - 1;
  }
  const struct timespec pause = {0, 20 * 1000 * 1000};
  nanosleep(&pause, nullptr);
  for (int i = 0; i < kPipes; ++i) {
    close(pipes[i][1]);
    const size_t got = ReadAll(pipes[i][0], buffer, kBytesPerPipe);
    if (got != kBytesPerPipe) ++mismatches;
    for (size_t j = 0; j < got; ++j) {
      if (buffer[j] != PatternByte(i, static_cast<int>(j))) ++mismatches;
    }
    char extra;
    if (read(pipes[i][0], &extra, 1) != 0) ++mismatches;  // Nothing else was written.
    close(pipes[i][0]);
    bytes += static_cast<long>(got);
  }
  if (lseek(file, 0, SEEK_SET) != 0) ++mismatches;
  char file_text[sizeof(line)];
  for (int k = 0; k < 200; ++k) {
    if (ReadAll(file, file_text, sizeof(line) - 1) != sizeof(line) - 1 ||
        std::memcmp(file_text, line, sizeof(line) - 1) != 0) {
      ++mismatches;
    }
  }
  if (read(file, file_text, 1) != 0) ++mismatches;  // Nothing was appended.
  close(file);
  unlink(argv[1]);
  std::printf("fd_reuse: pipes=%d bytes=%ld file_bytes=%ld mismatches=%ld\n", kPipes, bytes, file_bytes,
              mismatches);
  return mismatches == 0 ? 0 : 3;
}
