// Wait stacks for reads through C stdio (issue 34): a program that waits for its input in
// fgets, getline, fread or getc (C++'s std::cin and std::getline on it call getc and fread)
// shows that call, not an "Unknown wait". glibc's stdio reads with its internal __read, which
// no `read` wrapper sees, so the stdio functions are wrapped themselves.
//
// Only a call that must read the file is marked: one that finds its stream's buffer empty
// (glibc's FILE, <bits/types/struct_FILE.h>: _IO_read_ptr at _IO_read_end), so that the usual
// call, served from the buffer, costs one comparison more than plain. A call served partly
// from the buffer that then reads (a line longer than what is buffered) is not marked: its
// wait, if the read blocks, is an "Unknown wait" on the last known stack, never another
// call's time (docs/sampling.md). __uflow is what glibc's inline getc_unlocked and
// getchar_unlocked call on an empty buffer; __getdelim what an optimised program's getline
// calls. Output (fwrite, printf, fflush to
// a full pipe) is not wrapped: docs/sampling.md lists it.
//
// Each wrapper calls the real function with the program's arguments: same result, errno,
// locking and cancellation. Exported with C linkage (libstrata_base.lds). Thread safety and
// async-signal safety: as the wrapped function.
#undef _FORTIFY_SOURCE
#include <stdio.h>
#include <sys/types.h>

#include <atomic>

#include "base/internal/wait/scoped_wait.h"
#include "base/internal/wait/wait_wrappers.h"

// glibc exports these; its headers declare them only under _FORTIFY_SOURCE or not at all.
extern "C" {
char* __fgets_chk(char* line, size_t size, int count, FILE* stream);
size_t __fread_chk(void* data, size_t data_size, size_t size, size_t count, FILE* stream);
ssize_t __getdelim(char** line, size_t* size, int delimiter, FILE* stream);
int __uflow(FILE* stream);
}

#pragma GCC diagnostic ignored "-Wignored-attributes"

namespace strata {
namespace base_internal {
namespace {

#define STRATA_FOR_EACH_STDIO_FUNCTION(X) \
  X(fgets) \
  X(__fgets_chk) \
  X(fread) \
  X(__fread_chk) \
  X(getline) \
  X(getdelim) \
  X(__getdelim) \
  X(fgetc) \
  X(getc) \
  X(getchar) \
  X(__uflow)

STRATA_DEFINE_REAL_TABLE(STRATA_FOR_EACH_STDIO_FUNCTION)


// Whether a read from `stream` must read its file: nothing is buffered. Read without the
// stream's lock, as glibc's own getc_unlocked does: a stale answer only marks, or does not
// mark, one call (hence not instrumented by TSan: the race is benign by design).
__attribute__((no_sanitize("thread"))) inline bool MustRead(FILE* stream) {
  return stream->_IO_read_ptr >= stream->_IO_read_end;
}

}  // namespace

void ResolveStdioFunctions() {
  STRATA_RESOLVE_TABLE();
}

}  // namespace base_internal
}  // namespace strata

using strata::base_internal::MustRead;
using strata::base_internal::ScopedWait;

// Calls `real` directly when the buffer serves the call (or there is no stream: libc's own
// answer, which for some calls is not a crash); else marks the call as a wait (its kernel CPU
// charged to it, as `read`'s).
#define STRATA_STDIO_CALL(function, stream, ...)                          \
  const auto real = STRATA_REAL(function);                                \
  if (stream == nullptr || !MustRead(stream)) return real(__VA_ARGS__);  \
  STRATA_IO_CALL(function, __VA_ARGS__)

extern "C" {

char* fgets(char* line, int size, FILE* stream) {
  STRATA_STDIO_CALL(fgets, stream, line, size, stream);
}
char* __fgets_chk(char* line, size_t size, int count, FILE* stream) {
  STRATA_STDIO_CALL(__fgets_chk, stream, line, size, count, stream);
}
size_t fread(void* data, size_t size, size_t count, FILE* stream) {
  STRATA_STDIO_CALL(fread, stream, data, size, count, stream);
}
size_t __fread_chk(void* data, size_t data_size, size_t size, size_t count, FILE* stream) {
  STRATA_STDIO_CALL(__fread_chk, stream, data, data_size, size, count, stream);
}
ssize_t getline(char** line, size_t* size, FILE* stream) {
  STRATA_STDIO_CALL(getline, stream, line, size, stream);
}
ssize_t getdelim(char** line, size_t* size, int delimiter, FILE* stream) {
  STRATA_STDIO_CALL(getdelim, stream, line, size, delimiter, stream);
}
// What an optimised program's getline calls (<bits/stdio.h> inlines getline into it).
ssize_t __getdelim(char** line, size_t* size, int delimiter, FILE* stream) {
  STRATA_STDIO_CALL(__getdelim, stream, line, size, delimiter, stream);
}
int fgetc(FILE* stream) { STRATA_STDIO_CALL(fgetc, stream, stream); }
int getc(FILE* stream) { STRATA_STDIO_CALL(getc, stream, stream); }
int getchar() { STRATA_STDIO_CALL(getchar, stdin, ); }
int __uflow(FILE* stream) { STRATA_STDIO_CALL(__uflow, stream, stream); }

}  // extern "C"
