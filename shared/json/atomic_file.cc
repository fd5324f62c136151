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
}  // namespace

AtomicJsonFile::AtomicJsonFile(std::string path) : path_(std::move(path)) {
  if (IsSpecialFile(path_)) {
    error_ = path_ + " is not a regular file (a device, pipe or socket): not replaced";
  }
  size_t slash = path_.rfind('/');
  std::string dir = slash == std::string::npos ? std::string() : path_.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  for (int attempt = 0; attempt < 100; ++attempt) {
    char suffix[64];
    snprintf(suffix, sizeof(suffix), ".tmp-%d-%u", static_cast<int>(getpid()),
             g_temporary_counter.fetch_add(1, std::memory_order_relaxed));
    temporary_path_ = dir + "." + base + suffix;
    if (!error_.empty()) break;
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
    unlink(temporary_path_.c_str());
    temporary_path_.clear();
  }
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
  if (error_.empty()) {
    int fd = fd_;
    fd_ = -1;
    if (close(fd) != 0) SetErrno("close", temporary_path_);
  }
  if (error_.empty() && IsSpecialFile(path_)) {
    error_ = path_ + " is not a regular file (a device, pipe or socket): not replaced";
  }
  if (error_.empty() && rename(temporary_path_.c_str(), path_.c_str()) != 0) {
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
