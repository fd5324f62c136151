#include "full/ipc/transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <utility>

namespace strata {
namespace ipc {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + strerror(errno); }

bool FillAddress(const std::string& path, sockaddr_un* address, std::string* error) {
  memset(address, 0, sizeof(*address));
  address->sun_family = AF_UNIX;
  if (path.size() + 1 > sizeof(address->sun_path)) {
    if (error) *error = "socket path too long: " + path;
    return false;
  }
  memcpy(address->sun_path, path.c_str(), path.size() + 1);
  return true;
}

bool ReadPeer(int fd, PeerCredentials* peer) {
  ucred cred{};
  socklen_t length = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) return false;
  peer->pid = cred.pid;
  peer->uid = cred.uid;
  peer->gid = cred.gid;
  return true;
}

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

// --- PrivateDirectory

PrivateDirectory::~PrivateDirectory() { Remove(); }

std::vector<std::string> DefaultDirectoryBases() {
  std::vector<std::string> bases;
  for (const char* name : {"STRATA_IPC_DIR", "XDG_RUNTIME_DIR", "TMPDIR"}) {
    const char* value = getenv(name);
    if (value && value[0] == '/') bases.emplace_back(value);
  }
  bases.emplace_back("/tmp");
  return bases;
}

bool PrivateDirectory::Create(const std::vector<std::string>& bases, std::string* error) {
  Remove();
  std::string problems;
  for (std::string base : bases) {
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    std::string templ = base + "/strata-ipc-XXXXXX";
    if (templ.size() + 1 + strlen(kSocketFileName) + 1 > sizeof(sockaddr_un{}.sun_path)) {
      problems += base + ": path too long for a socket; ";
      continue;
    }
    if (!mkdtemp(templ.data())) {
      problems += Errno(base.c_str()) + "; ";
      continue;
    }
    // mkdtemp makes it 0700 (less with an odd umask); make sure, and that it is ours and a
    // real directory (no symlink).
    struct stat st;
    if (chmod(templ.c_str(), 0700) != 0 || lstat(templ.c_str(), &st) != 0 ||
        !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0777) != 0700) {
      problems += templ + ": not a private directory; ";
      rmdir(templ.c_str());
      continue;
    }
    path_ = templ;
    return true;
  }
  if (error) *error = "cannot create a private directory (" + problems + ")";
  return false;
}

void PrivateDirectory::Remove() {
  if (path_.empty()) return;
  unlink(SocketPath().c_str());
  rmdir(path_.c_str());
  path_.clear();
}

// --- Sockets

int Listen(const std::string& path, std::string* error) {
  sockaddr_un address;
  if (!FillAddress(path, &address, error)) return -1;
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (error) *error = Errno("socket");
    return -1;
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      chmod(path.c_str(), 0600) != 0 || listen(fd, 128) != 0) {
    if (error) *error = Errno(("listen on " + path).c_str());
    close(fd);
    return -1;
  }
  return fd;
}

bool IsResourceExhaustion(int error_number) {
  return error_number == EMFILE || error_number == ENFILE || error_number == ENOBUFS ||
         error_number == ENOMEM;
}

int Accept(int listen_fd, PeerCredentials* peer, std::string* error, int* accept_errno) {
  if (error) error->clear();
  if (accept_errno) *accept_errno = 0;
  int fd;
  do {
    fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      if (accept_errno) *accept_errno = errno;
      if (error) *error = Errno("accept");
    }
    return -1;
  }
  PeerCredentials credentials;
  if (!ReadPeer(fd, &credentials)) {
    if (error) *error = Errno("SO_PEERCRED");
    close(fd);
    return -1;
  }
  if (peer) *peer = credentials;
  if (credentials.uid != geteuid()) {
    if (error) {
      *error = "peer pid " + std::to_string(credentials.pid) + " runs as uid " +
               std::to_string(credentials.uid) + ", not ours (" + std::to_string(geteuid()) + ")";
    }
    close(fd);
    return -1;
  }
  return fd;
}

int Connect(const std::string& path, int timeout_ms, std::string* error) {
  sockaddr_un address;
  if (!FillAddress(path, &address, error)) return -1;
  const int64_t deadline = NowMs() + timeout_ms;
  for (;;) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      if (error) *error = Errno("socket");
      return -1;
    }
    // A blocking connect() to a listener whose backlog is full waits until it accepts, with
    // no end: SO_SNDTIMEO bounds that wait to what is left of the deadline (the kernel then
    // says EAGAIN, as a non-blocking connect would at once).
    const int64_t left_ms = deadline - NowMs();
    if (left_ms <= 0) {
      close(fd);
      if (error) *error = "connect to " + path + ": no time left";
      return -1;
    }
    timeval wait{static_cast<time_t>(left_ms / 1000),
                 static_cast<suseconds_t>(left_ms % 1000 * 1000)};
    if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait)) != 0) {
      if (error) *error = Errno("setsockopt(SO_SNDTIMEO)");
      close(fd);
      return -1;
    }
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
      // Non-blocking from here on; no send timeout left behind on the connection.
      timeval none{0, 0};
      (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
      PeerCredentials listener;
      if (!ReadPeer(fd, &listener) || listener.uid != geteuid()) {
        if (error) *error = "the listener at " + path + " is not ours";
        close(fd);
        return -1;
      }
      const int flags = fcntl(fd, F_GETFL);
      fcntl(fd, F_SETFL, flags | O_NONBLOCK);
      return fd;
    }
    const int saved = errno;
    close(fd);
    // A full backlog (the wait above ran out, or a signal cut it short): retry until the
    // deadline. Anything else is final.
    if ((saved != EAGAIN && saved != EINTR) || NowMs() >= deadline) {
      if (saved == EAGAIN || saved == EINTR) {
        if (error) {
          *error = "connect to " + path + ": the listener's backlog stayed full for " +
                   std::to_string(timeout_ms) + " ms (it accepts no connection)";
        }
        return -1;
      }
      errno = saved;
      if (error) *error = Errno(("connect to " + path).c_str());
      return -1;
    }
    usleep(1000);
  }
}

// --- Connection

Connection::~Connection() { Close(); }

void Connection::Close() {
  fd_.Close();  // Only if its number still names our socket.
  queue_.clear();
  queued_bytes_ = 0;
  queue_offset_ = 0;
}

bool Connection::StillOurs() {
  if (fd_.empty()) return false;
  if (fd_.IsStillOurs()) return true;
  lost_ = true;  // PrivateDescriptor forgot it, untouched.
  Close();
  return false;
}

namespace {
constexpr char kLostDescriptor[] =
    "its descriptor was closed by the program (the number now names something else, or "
    "nothing): left alone";
}  // namespace

bool Connection::ReadAvailable(std::string* error) {
  if (!StillOurs()) {
    if (error) *error = lost_ ? kLostDescriptor : "closed";
    return false;
  }
  const int fd = fd_.UncheckedNumber();
  uint8_t buffer[64 * 1024];
  // At most 4 MiB per call, so that one busy peer does not starve the others; and no more
  // once the reader waits for its owner's admission of a frame (it holds no more than one
  // read's worth beyond a frame header until then).
  for (int i = 0; i < 64 && !reader_.AwaitingAdmission(); ++i) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n > 0) {
      bytes_received_ += static_cast<uint64_t>(n);
      reader_.Append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      if (error) *error = "connection closed by the peer";
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    if (error) *error = Errno("recv");
    return false;
  }
  return true;
}

bool Connection::Send(const Message& message, std::string* error) {
  return SendFrame(EncodeFrame(message), error);
}

bool Connection::SendFrame(std::vector<uint8_t> frame, std::string* error) {
  if (fd_.empty()) {
    if (error) *error = "closed";
    return false;
  }
  queued_bytes_ += frame.size();
  queue_.push_back(std::move(frame));
  return Flush(error);
}

bool Connection::Flush(std::string* error) {
  if (queue_.empty()) return !fd_.empty();
  if (!StillOurs()) {
    if (error) *error = lost_ ? kLostDescriptor : "closed";
    return false;
  }
  const int fd = fd_.UncheckedNumber();
  while (!queue_.empty()) {
    const std::vector<uint8_t>& front = queue_.front();
    const ssize_t n = send(fd, front.data() + queue_offset_, front.size() - queue_offset_,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (error) *error = Errno("send");
      return false;
    }
    bytes_sent_ += static_cast<uint64_t>(n);
    queued_bytes_ -= static_cast<size_t>(n);
    queue_offset_ += static_cast<size_t>(n);
    if (queue_offset_ == front.size()) {
      queue_.pop_front();
      queue_offset_ = 0;
    }
  }
  return true;
}

// --- Waker

Waker::Waker() {
  const int fd = MoveDescriptorHigh(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  struct stat st;
  if (fd < 0) return;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return;
  }
  device_ = st.st_dev;
  inode_ = st.st_ino;
  fd_.store(fd, std::memory_order_release);
}

bool Waker::IsOurs(int fd) const {
  if (fd < 0) return false;
  const int saved_errno = errno;
  struct stat st;
  const bool ours = fstat(fd, &st) == 0 && st.st_dev == device_ && st.st_ino == inode_;
  errno = saved_errno;
  return ours;
}

bool Waker::StillOurs() {
  const int fd = fd_.load(std::memory_order_acquire);
  if (IsOurs(fd)) return true;
  fd_.store(-1, std::memory_order_release);  // The program's now: forgotten, untouched.
  return false;
}

void Waker::Wake() const {
  const int fd = fd_.load(std::memory_order_acquire);
  if (!IsOurs(fd)) return;
  const int saved_errno = errno;
  const uint64_t one = 1;
  const ssize_t n = write(fd, &one, sizeof(one));
  (void)n;  // EAGAIN: the counter is already non-zero, the loop will wake anyway.
  errno = saved_errno;
}

void Waker::Drain() {
  if (!StillOurs()) return;
  uint64_t value;
  const ssize_t n = read(fd_.load(std::memory_order_acquire), &value, sizeof(value));
  (void)n;
}

void Waker::Close() {
  const int fd = fd_.exchange(-1, std::memory_order_acq_rel);
  if (IsOurs(fd)) close(fd);
}

}  // namespace ipc
}  // namespace strata
