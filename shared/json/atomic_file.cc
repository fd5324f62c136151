#include "shared/json/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace strata {
namespace {
std::atomic<unsigned> g_temporary_counter{0};

// True when `path` names (through symlinks) something that exists and is neither a regular
// file nor a directory: a device, a pipe or a socket. Renaming over it would replace it (as
// root, STRATA_SHUTDOWN=/dev/null would turn /dev/null into a profile). Directories are left
// to rename(), which refuses them.
bool IsSpecialFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}
std::string NextTemporaryPath(const std::string& dir, const std::string& base) {
  char suffix[64];
  snprintf(suffix, sizeof(suffix), ".tmp-%d-%u", static_cast<int>(getpid()),
           g_temporary_counter.fetch_add(1, std::memory_order_relaxed));
  return dir + "." + base + suffix;
}
}  // namespace

AtomicJsonFile::AtomicJsonFile(std::string path) : path_(std::move(path)) {
  if (IsSpecialFile(path_)) {
    error_ = path_ + " is not a regular file (a device, pipe or socket): not replaced";
  }
  size_t slash = path_.rfind('/');
  std::string dir = slash == std::string::npos ? std::string() : path_.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  directory_ = dir.empty() ? std::string(".") : dir;
  // First an unnamed file in the destination's directory (O_TMPFILE): a process killed while
  // it writes (SIGKILL, another thread's _exit, the OOM killer) leaves nothing behind; it
  // gets a name only at Commit(). Where the filesystem has no O_TMPFILE, a named temporary
  // file, removed on every error.
  if (error_.empty()) {
    fd_ = open(directory_.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    unnamed_ = fd_ >= 0;
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    temporary_path_ = NextTemporaryPath(dir, base);
    if (!error_.empty() || unnamed_) break;
    fd_ = open(temporary_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0 || errno != EEXIST) break;
  }
  if (fd_ < 0) {
    SetErrno("cannot create temporary file", temporary_path_);
    temporary_path_.clear();  // Not ours: never unlink it (it may be another writer's).
  }
  output_ = std::make_unique<FdJsonOutput>(fd_, temporary_path_);
  writer_ = std::make_unique<JsonWriter>(output_.get());
}

AtomicJsonFile::~AtomicJsonFile() {
  if (!committed_) Abandon();
}

void AtomicJsonFile::SetErrno(const char* step, const std::string& file) {
  if (error_.empty()) error_ = std::string(step) + " " + file + ": " + strerror(errno);
}

void AtomicJsonFile::Abandon() {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  if (!temporary_path_.empty()) {
    if (!unnamed_) unlink(temporary_path_.c_str());  // An unnamed file goes with its descriptor.
    temporary_path_.clear();
  }
}

bool AtomicJsonFile::NameUnnamedFile() {
  // The unnamed file gets its name through /proc/self/fd (linkat with AT_EMPTY_PATH needs
  // CAP_DAC_READ_SEARCH). Straight at the destination when nothing is there (link() never
  // replaces: atomic, and nothing to clean up if killed after); else a temporary name that
  // the rename then moves over it (a kill between the two leaves that name: two system calls).
  char proc_path[64];
  snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", fd_);
  if (linkat(AT_FDCWD, proc_path, AT_FDCWD, path_.c_str(), AT_SYMLINK_FOLLOW) == 0) {
    linked_at_destination_ = true;
    unnamed_ = false;
    temporary_path_.clear();
    return true;
  }
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string() : path_.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (linkat(AT_FDCWD, proc_path, AT_FDCWD, temporary_path_.c_str(), AT_SYMLINK_FOLLOW) == 0) {
      unnamed_ = false;  // A named temporary file from here on, removed on error.
      return true;
    }
    if (errno != EEXIST) break;
    temporary_path_ = NextTemporaryPath(dir, base);
  }
  SetErrno("link", temporary_path_);
  return false;
}

bool AtomicJsonFile::Commit() {
  if (committed_ || fd_ < 0) {
    if (error_.empty()) error_ = "nothing to commit for " + path_;
    return false;
  }
  writer_->Flush();
  if (error_.empty() && !writer_->ok()) error_ = writer_->error();
  if (error_.empty() && writer_->depth() != 0) {
    error_ = "incomplete JSON document for " + path_ + " (an object or array is still open)";
  }
  if (error_.empty() && fsync(fd_) != 0) SetErrno("fsync", temporary_path_);
  if (error_.empty() && IsSpecialFile(path_)) {
    error_ = path_ + " is not a regular file (a device, pipe or socket): not replaced";
  }
  if (error_.empty() && unnamed_) (void)NameUnnamedFile();
  if (error_.empty()) {
    int fd = fd_;
    fd_ = -1;
    if (close(fd) != 0) SetErrno("close", temporary_path_);
  }
  if (error_.empty() && IsSpecialFile(path_)) {
    error_ = path_ + " is not a regular file (a device, pipe or socket): not replaced";
  }
  if (error_.empty() && !linked_at_destination_ &&
      rename(temporary_path_.c_str(), path_.c_str()) != 0) {
    SetErrno("rename", temporary_path_ + " -> " + path_);
  }
  if (!error_.empty()) {
    Abandon();
    return false;
  }
  committed_ = true;
  return true;
}

}  // namespace strata
