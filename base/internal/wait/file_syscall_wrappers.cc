// File-system system calls wrapped so that their kernel CPU is charged to their own stack
// (issue 34; kernel_cpu_charge.h): what a database or a build spends in the kernel besides
// reading and writing -- opening, closing, unlinking and renaming files, stat, fcntl (record
// locks: F_SETLKW also waits), access, truncate, fallocate, chown and chmod. Each marks the call as a wait
// (scoped_wait.h: a call that blocks, on a lock or a slow file system, shows as a wait on its
// stack) and calls the real function with the program's arguments: same result, errno and
// cancellation. open and fcntl are variadic: their optional argument is read as glibc's own
// definitions read it (a mode when the flags create a file; one pointer-sized argument) and
// passed on. Exported with C linkage (libstrata_base.lds). Thread safety and async-signal
// safety: as the wrapped function.
#undef _FORTIFY_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

#include "base/internal/wait/scoped_wait.h"
#include "base/internal/wait/wait_wrappers.h"

#pragma GCC diagnostic ignored "-Wignored-attributes"

namespace strata {
namespace base_internal {
namespace {

#define STRATA_FOR_EACH_FILE_FUNCTION(X) \
  X(open) \
  X(open64) \
  X(openat) \
  X(openat64) \
  X(creat) \
  X(creat64) \
  X(close) \
  X(unlink) \
  X(unlinkat) \
  X(rename) \
  X(renameat) \
  X(mkdir) \
  X(rmdir) \
  X(stat) \
  X(stat64) \
  X(lstat) \
  X(lstat64) \
  X(fstat) \
  X(fstat64) \
  X(fstatat) \
  X(fstatat64) \
  X(statx) \
  X(fcntl) \
  X(fcntl64) \
  X(access) \
  X(faccessat) \
  X(ftruncate) \
  X(ftruncate64) \
  X(truncate) \
  X(truncate64) \
  X(fallocate) \
  X(fallocate64) \
  X(fchown) \
  X(fchmod) \
  X(chown) \
  X(lchown) \
  X(chmod)

STRATA_DEFINE_REAL_TABLE(STRATA_FOR_EACH_FILE_FUNCTION)


// open's mode argument is there when the flags create a file (glibc's __OPEN_NEEDS_MODE).
constexpr bool OpenNeedsMode(int flags) {
  return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE;
}

}  // namespace

void ResolveFileSyscallFunctions() {
  STRATA_RESOLVE_TABLE();
}

}  // namespace base_internal
}  // namespace strata

// The optional mode of open/openat (0 when the flags create nothing, as glibc passes it).
#define STRATA_OPEN_MODE(flags)             \
  mode_t mode = 0;                          \
  if (::strata::base_internal::OpenNeedsMode(flags)) { \
    va_list arguments;                      \
    va_start(arguments, flags);             \
    mode = va_arg(arguments, mode_t);       \
    va_end(arguments);                      \
  }
// fcntl's optional argument: one pointer-sized value whatever the command (glibc's fcntl).
#define STRATA_FCNTL_ARGUMENT(command)      \
  va_list arguments;                        \
  va_start(arguments, command);             \
  void* argument = va_arg(arguments, void*); \
  va_end(arguments);

extern "C" {

int open(const char* path, int flags, ...) {
  const auto real = STRATA_REAL(open);
  STRATA_OPEN_MODE(flags)
  STRATA_IO_CALL(open, path, flags, mode);
}
int open64(const char* path, int flags, ...) {
  const auto real = STRATA_REAL(open64);
  STRATA_OPEN_MODE(flags)
  STRATA_IO_CALL(open64, path, flags, mode);
}
int openat(int directory, const char* path, int flags, ...) {
  const auto real = STRATA_REAL(openat);
  STRATA_OPEN_MODE(flags)
  STRATA_IO_CALL(openat, directory, path, flags, mode);
}
int openat64(int directory, const char* path, int flags, ...) {
  const auto real = STRATA_REAL(openat64);
  STRATA_OPEN_MODE(flags)
  STRATA_IO_CALL(openat64, directory, path, flags, mode);
}
int creat(const char* path, mode_t mode) {
  const auto real = STRATA_REAL(creat);
  STRATA_IO_CALL(creat, path, mode);
}
int creat64(const char* path, mode_t mode) {
  const auto real = STRATA_REAL(creat64);
  STRATA_IO_CALL(creat64, path, mode);
}
int close(int fd) {
  const auto real = STRATA_REAL(close);
  STRATA_IO_CALL(close, fd);
}
int unlink(const char* path) {
  const auto real = STRATA_REAL(unlink);
  STRATA_IO_CALL(unlink, path);
}
int unlinkat(int directory, const char* path, int flags) {
  const auto real = STRATA_REAL(unlinkat);
  STRATA_IO_CALL(unlinkat, directory, path, flags);
}
int rename(const char* from, const char* to) {
  const auto real = STRATA_REAL(rename);
  STRATA_IO_CALL(rename, from, to);
}
int renameat(int from_directory, const char* from, int to_directory, const char* to) {
  const auto real = STRATA_REAL(renameat);
  STRATA_IO_CALL(renameat, from_directory, from, to_directory, to);
}
int mkdir(const char* path, mode_t mode) {
  const auto real = STRATA_REAL(mkdir);
  STRATA_IO_CALL(mkdir, path, mode);
}
int rmdir(const char* path) {
  const auto real = STRATA_REAL(rmdir);
  STRATA_IO_CALL(rmdir, path);
}
int stat(const char* path, struct stat* status) {
  const auto real = STRATA_REAL(stat);
  STRATA_IO_CALL(stat, path, status);
}
int stat64(const char* path, struct stat64* status) {
  const auto real = STRATA_REAL(stat64);
  STRATA_IO_CALL(stat64, path, status);
}
int lstat(const char* path, struct stat* status) {
  const auto real = STRATA_REAL(lstat);
  STRATA_IO_CALL(lstat, path, status);
}
int lstat64(const char* path, struct stat64* status) {
  const auto real = STRATA_REAL(lstat64);
  STRATA_IO_CALL(lstat64, path, status);
}
int fstat(int fd, struct stat* status) {
  const auto real = STRATA_REAL(fstat);
  STRATA_IO_CALL(fstat, fd, status);
}
int fstat64(int fd, struct stat64* status) {
  const auto real = STRATA_REAL(fstat64);
  STRATA_IO_CALL(fstat64, fd, status);
}
int fstatat(int directory, const char* path, struct stat* status, int flags) {
  const auto real = STRATA_REAL(fstatat);
  STRATA_IO_CALL(fstatat, directory, path, status, flags);
}
int fstatat64(int directory, const char* path, struct stat64* status, int flags) {
  const auto real = STRATA_REAL(fstatat64);
  STRATA_IO_CALL(fstatat64, directory, path, status, flags);
}
int statx(int directory, const char* path, int flags, unsigned int mask, struct statx* status) {
  const auto real = STRATA_REAL(statx);
  STRATA_IO_CALL(statx, directory, path, flags, mask, status);
}
int fcntl(int fd, int command, ...) {
  const auto real = STRATA_REAL(fcntl);
  STRATA_FCNTL_ARGUMENT(command)
  STRATA_IO_CALL(fcntl, fd, command, argument);
}
int fcntl64(int fd, int command, ...) {
  const auto real = STRATA_REAL(fcntl64);
  STRATA_FCNTL_ARGUMENT(command)
  STRATA_IO_CALL(fcntl64, fd, command, argument);
}
int access(const char* path, int mode) {
  const auto real = STRATA_REAL(access);
  STRATA_IO_CALL(access, path, mode);
}
int faccessat(int directory, const char* path, int mode, int flags) {
  const auto real = STRATA_REAL(faccessat);
  STRATA_IO_CALL(faccessat, directory, path, mode, flags);
}
int ftruncate(int fd, off_t size) {
  const auto real = STRATA_REAL(ftruncate);
  STRATA_IO_CALL(ftruncate, fd, size);
}
int ftruncate64(int fd, off64_t size) {
  const auto real = STRATA_REAL(ftruncate64);
  STRATA_IO_CALL(ftruncate64, fd, size);
}
int truncate(const char* path, off_t size) {
  const auto real = STRATA_REAL(truncate);
  STRATA_IO_CALL(truncate, path, size);
}
int truncate64(const char* path, off64_t size) {
  const auto real = STRATA_REAL(truncate64);
  STRATA_IO_CALL(truncate64, path, size);
}
int fallocate(int fd, int mode, off_t offset, off_t size) {
  const auto real = STRATA_REAL(fallocate);
  STRATA_IO_CALL(fallocate, fd, mode, offset, size);
}
int fallocate64(int fd, int mode, off64_t offset, off64_t size) {
  const auto real = STRATA_REAL(fallocate64);
  STRATA_IO_CALL(fallocate64, fd, mode, offset, size);
}
int fchown(int fd, uid_t owner, gid_t group) {
  const auto real = STRATA_REAL(fchown);
  STRATA_IO_CALL(fchown, fd, owner, group);
}
int fchmod(int fd, mode_t mode) {
  const auto real = STRATA_REAL(fchmod);
  STRATA_IO_CALL(fchmod, fd, mode);
}
int chown(const char* path, uid_t owner, gid_t group) {
  const auto real = STRATA_REAL(chown);
  STRATA_IO_CALL(chown, path, owner, group);
}
int lchown(const char* path, uid_t owner, gid_t group) {
  const auto real = STRATA_REAL(lchown);
  STRATA_IO_CALL(lchown, path, owner, group);
}
int chmod(const char* path, mode_t mode) {
  const auto real = STRATA_REAL(chmod);
  STRATA_IO_CALL(chmod, path, mode);
}

}  // extern "C"
