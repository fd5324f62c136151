// The multi-process transport: Unix domain stream sockets in a private directory, peers
// checked by credentials, framed messages (messages.h) with non-blocking I/O.
//
//   PrivateDirectory  a fresh mkdtemp directory, mode 0700, owned by us (checked with lstat);
//                     removed with its socket when destroyed.
//   Listen / Accept   the parent's listening socket; Accept() reports the peer's SO_PEERCRED
//                     (pid, uid, gid) and refuses a peer whose uid is not ours.
//   Connect           a child's connection, with a timeout; checks the listener's uid too.
//   Connection        a non-blocking socket with a FrameReader and an outgoing queue:
//                     ReadAvailable() until the socket would block, Send()/Flush() writes as
//                     much as the socket takes. The owner polls fd() (POLLIN, and POLLOUT
//                     while WantsWrite()).
//
// Every descriptor is close-on-exec: a spawned program never inherits the parent's socket.
//
// Thread safety: PrivateDirectory and the functions are thread-safe; a Connection belongs
// to one thread. Async-signal safety: none.
#ifndef STRATA_FULL_IPC_TRANSPORT_H_
#define STRATA_FULL_IPC_TRANSPORT_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "full/ipc/messages.h"

namespace strata {
namespace ipc {

// The socket file inside the private directory.
inline constexpr const char kSocketFileName[] = "parent.sock";

class PrivateDirectory {
 public:
  PrivateDirectory() = default;
  ~PrivateDirectory();
  PrivateDirectory(const PrivateDirectory&) = delete;
  PrivateDirectory& operator=(const PrivateDirectory&) = delete;

  // Creates <base>/strata-ipc-XXXXXX for the first base in `bases` where it can be made and
  // where the socket path fits in sockaddr_un; checks mode 0700 and ownership.
  bool Create(const std::vector<std::string>& bases, std::string* error);
  const std::string& path() const { return path_; }
  std::string SocketPath() const { return path_ + "/" + kSocketFileName; }
  // Removes the socket file and the directory (also done by the destructor).
  void Remove();

 private:
  std::string path_;
};

// Where PrivateDirectory looks, in order: $STRATA_IPC_DIR, $XDG_RUNTIME_DIR, $TMPDIR, /tmp.
std::vector<std::string> DefaultDirectoryBases();

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// A listening socket at `path` (non-blocking, close-on-exec), or -1 with *error.
int Listen(const std::string& path, std::string* error);

// Accepts one connection. Returns its descriptor (non-blocking, close-on-exec) with the
// peer's credentials; -1 when there is none to accept (*error empty) or on failure. A peer
// of another uid is accepted and closed at once: -1 with *error and *peer telling who.
int Accept(int listen_fd, PeerCredentials* peer, std::string* error);

// Connects to the listener at `path`, waiting at most `timeout_ms`; the listener must run
// under our uid. Returns a non-blocking, close-on-exec descriptor or -1 with *error.
int Connect(const std::string& path, int timeout_ms, std::string* error);

class Connection {
 public:
  Connection(int fd, FrameLimits limits) : fd_(fd), reader_(limits) {}
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd() const { return fd_; }
  bool closed() const { return fd_ < 0; }
  void Close();

  // Reads everything the socket has now into the frame reader. False when the peer closed
  // the connection or on a socket error (*error says which).
  bool ReadAvailable(std::string* error);
  // The next complete message, if any (messages.h FrameReader).
  FrameReader::Status Next(Message* message, MessageType* type = nullptr,
                           size_t* frame_bytes = nullptr) {
    return reader_.Next(message, type, frame_bytes);
  }
  const std::string& read_error() const { return reader_.error(); }

  // Queues a message and writes what the socket takes now. False on a socket error.
  bool Send(const Message& message, std::string* error);
  // Queues already-encoded bytes.
  bool SendFrame(std::vector<uint8_t> frame, std::string* error);
  // Writes queued bytes until the socket would block. False on a socket error.
  bool Flush(std::string* error);
  bool WantsWrite() const { return queued_bytes_ > 0; }
  size_t queued_bytes() const { return queued_bytes_; }

  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }

 private:
  int fd_;
  FrameReader reader_;
  std::deque<std::vector<uint8_t>> queue_;
  size_t queue_offset_ = 0;  // Into queue_.front().
  size_t queued_bytes_ = 0;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
};

// An eventfd to wake a poll() loop from other threads. Wake() is async-signal-safe.
class Waker {
 public:
  Waker();
  ~Waker();
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;
  int fd() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  void Wake() const;
  // Clears pending wake-ups (after poll() said readable).
  void Drain() const;

 private:
  int fd_;
};

}  // namespace ipc
}  // namespace strata

#endif  // STRATA_FULL_IPC_TRANSPORT_H_
