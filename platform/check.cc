#include "platform/check.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace strata {
namespace {

void WriteString(const char* s) { (void)!write(STDERR_FILENO, s, strlen(s)); }

}  // namespace

namespace check_internal {

void CheckFailed(const char* file, int line, const char* condition, const char* message) {
  char digits[16];
  int n = 0;
  unsigned value = line > 0 ? static_cast<unsigned>(line) : 0;
  char reversed[16];
  do {
    reversed[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0 && n < 15);
  for (int i = 0; i < n; ++i) digits[i] = reversed[n - 1 - i];
  digits[n] = '\0';
  WriteString("strata: check failed at ");
  WriteString(file);
  WriteString(":");
  WriteString(digits);
  WriteString(": ");
  WriteString(condition);
  WriteString(": ");
  WriteString(message);
  WriteString("\n");
  abort();
}

}  // namespace check_internal

void FatalMisuse(const char* kind, const char* name, const char* what) {
  WriteString("strata: fatal: ");
  WriteString(kind);
  WriteString(" '");
  WriteString(name);
  WriteString("' ");
  WriteString(what);
  WriteString("\n");
  abort();
}

}  // namespace strata
