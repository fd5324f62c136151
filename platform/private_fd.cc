#include "platform/private_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

namespace strata {
namespace {

// The number to ask F_DUPFD_CLOEXEC for: the floor, or the upper half of a soft limit
// below it. -1 when the limit leaves no room above the standard streams.
int HighFloor() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY ||
      limit.rlim_cur > static_cast<rlim_t>(kPrivateDescriptorFloor) * 2) {
    return kPrivateDescriptorFloor;
  }
  const int half = static_cast<int>(limit.rlim_cur / 2);
  return half > 3 ? half : -1;
}

void SetCloseOnExec(int fd) {
  const int flags = fcntl(fd, F_GETFD);
  if (flags >= 0 && (flags & FD_CLOEXEC) == 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

}  // namespace

int MoveDescriptorHigh(int fd) {
  if (fd < 0) return -1;
  const int saved_errno = errno;
  const int floor = HighFloor();
  if (floor >= 0 && fd < floor) {
    const int high = fcntl(fd, F_DUPFD_CLOEXEC, floor);
    if (high >= 0) {
      close(fd);
      errno = saved_errno;
      return high;
    }
  }
  SetCloseOnExec(fd);
  errno = saved_errno;
  return fd;
}

PrivateDescriptor::PrivateDescriptor(PrivateDescriptor&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), device_(other.device_), inode_(other.inode_) {}

PrivateDescriptor& PrivateDescriptor::operator=(PrivateDescriptor&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    device_ = other.device_;
    inode_ = other.inode_;
  }
  return *this;
}

bool PrivateDescriptor::Adopt(int fd) {
  Close();
  if (fd < 0) return false;
  fd = MoveDescriptorHigh(fd);
  struct stat status;
  if (fstat(fd, &status) != 0) {
    close(fd);
    return false;
  }
  fd_ = fd;
  device_ = status.st_dev;
  inode_ = status.st_ino;
  return true;
}

bool PrivateDescriptor::IsStillOurs() {
  if (fd_ < 0) return false;
  const int saved_errno = errno;
  struct stat status;
  const bool ours =
      fstat(fd_, &status) == 0 && status.st_dev == device_ && status.st_ino == inode_;
  errno = saved_errno;
  if (!ours) fd_ = -1;  // Closed by the program, or its number reused: not ours to touch.
  return ours;
}

void PrivateDescriptor::Close() {
  if (IsStillOurs()) {
    const int saved_errno = errno;
    close(fd_);
    errno = saved_errno;
  }
  fd_ = -1;
}

int PrivateDescriptor::Release() { return std::exchange(fd_, -1); }

}  // namespace strata
