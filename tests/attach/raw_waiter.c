// A process whose only thread waits in read(2) made by a `syscall` instruction in anonymous
// executable memory (as a runtime's own raw calls are made from JIT code or a runtime library's:
// a sanitizer's background thread, a language runtime), not through libc nor by the program's
// own code. When its stdin gives a byte it prints "read N errno E" (N bytes, E the error of a
// failed call, 0 otherwise) and exits 0. Used by attach_test.sh ("raw"): strata must not
// borrow that thread (injector.h, BorrowedCallProblem), so the attach is refused and the read
// is undisturbed.
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

typedef long (*RawReadFunction)(long fd, void* buffer, unsigned long size);

int main(void) {
  // mov $0, %eax (SYS_read); syscall; ret: the arguments are already in rdi, rsi, rdx.
  static const unsigned char kCode[] = {0xb8, 0x00, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xc3};
  void* page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return 2;
  memcpy(page, kCode, sizeof(kCode));
  if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) return 2;
  RawReadFunction raw_read;
  memcpy(&raw_read, &page, sizeof(raw_read));
  printf("waiting\n");
  fflush(stdout);
  char byte;
  const long result = raw_read(0, &byte, 1);
  printf("read %ld errno %ld\n", result < 0 ? -1 : result, result < 0 ? -result : 0);
  return 0;
}
