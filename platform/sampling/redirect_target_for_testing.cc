// A library that libunwind_imports_test redirects like libunwind: it calls pipe2, read,
// close and syscall(SYS_write) through its GOT. Linked with full RELRO (-z now -z relro), so
// its GOT is read-only after loading: the redirection must make the page writable for the
// store and read-only again.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

extern "C" {

// pipe2(descriptors, O_CLOEXEC | O_NONBLOCK), as libunwind opens its pipe.
int strata_test_target_pipe2(int descriptors[2]) {
  return pipe2(descriptors, O_CLOEXEC | O_NONBLOCK);
}

// libunwind's check of `address`: read one byte from descriptors[0], then
// syscall(SYS_write, descriptors[1], address, 1). Returns the syscall's result.
long strata_test_target_validate(const int descriptors[2], const void* address) {
  char byte;
  // The byte's value and the read's result do not matter (libunwind ignores both); the
  // result is kept only because warn_unused_result (-c opt, _FORTIFY_SOURCE) demands it.
  const ssize_t ignored = read(descriptors[0], &byte, 1);
  static_cast<void>(ignored);
  return syscall(SYS_write, descriptors[1], address, 1);
}

int strata_test_target_close(int descriptor) { return close(descriptor); }

}  // extern "C"
