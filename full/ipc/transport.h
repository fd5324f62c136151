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
// Descriptor hygiene (platform/private_fd.h): every descriptor is close-on-exec (a spawned
// program never inherits the parent's socket), moved high (F_DUPFD_CLOEXEC above a floor, away
// from the numbers the program hands out) and checked by identity (fstat device + inode) before
// it is read, written, polled or closed. When the program closed one (close_range(3, ~0U, 0))
// and perhaps reopened its own file on that number, the Connection or Waker forgets it without
// touching it, and says so (lost()): the owner logs once and carries on without it.
//
// Thread safety: PrivateDirectory and the functions are thread-safe; a Connection belongs
// to one thread. Async-signal safety: none.
#ifndef STRATA_FULL_IPC_TRANSPORT_H_
#define STRATA_FULL_IPC_TRANSPORT_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "full/ipc/messages.h"
#include "platform/private_fd.h"

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
// *accept_errno (when given) is accept4's errno on its failure, else 0: EMFILE, ENFILE,
// ENOBUFS and ENOMEM mean "out of descriptors or memory", which the caller must back off from
// (the connection stays in the backlog and poll() keeps saying readable).
int Accept(int listen_fd, PeerCredentials* peer, std::string* error, int* accept_errno = nullptr);

// True for accept4 errors that say the process (or the system) is out of descriptors or
// memory: retrying at once cannot succeed.
bool IsResourceExhaustion(int error_number);

// Connects to the listener at `path`, waiting at most `timeout_ms`; the listener must run
// under our uid. Returns a non-blocking, close-on-exec descriptor or -1 with *error.
int Connect(const std::string& path, int timeout_ms, std::string* error);

class Connection {
 public:
  // Takes `fd` (moved high, identity recorded).
  Connection(int fd, FrameLimits limits)
      : fd_(fd), number_(fd_.UncheckedNumber()), reader_(limits) {}
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The number for a poll set (no check: call StillOurs() first); -1 once closed or lost.
  int fd() const { return fd_.UncheckedNumber(); }
  // The number it had when taken (kept after Close() or loss: to unregister it).
  int number() const { return number_; }
  bool closed() const { return fd_.empty(); }
  // Closes the socket if its number still names it; forgets it either way.
  void Close();
  // Checks the descriptor's identity. When the program closed its number (or reopened a file
  // on it), the connection is forgotten without being touched: closed() and lost() turn true.
  bool StillOurs();
  // The descriptor was taken away by the program (StillOurs() found it gone).
  bool lost() const { return lost_; }

  // Reads everything the socket has now into the frame reader. False when the peer closed
  // the connection or on a socket error (*error says which).
  bool ReadAvailable(std::string* error);
  // The next complete message, if any (messages.h FrameReader).
  FrameReader::Status Next(Message* message, MessageType* type = nullptr,
                           size_t* frame_bytes = nullptr) {
    return reader_.Next(message, type, frame_bytes);
  }
  const std::string& read_error() const { return reader_.error(); }
  FrameReader& reader() { return reader_; }

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
  PrivateDescriptor fd_;
  int number_;
  bool lost_ = false;
  FrameReader reader_;
  std::deque<std::vector<uint8_t>> queue_;
  size_t queue_offset_ = 0;  // Into queue_.front().
  size_t queued_bytes_ = 0;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
};

// An eventfd to wake a poll() loop from other threads, moved high and checked by identity
// before every write or read: once the program has closed its number, Wake() and Drain() do
// nothing (they never write 8 bytes into, or read them from, a file the program reopened
// there). Wake() is async-signal-safe and may be called from any thread until Close();
// Drain(), fd() and Close() belong to the owner's thread. Close() must not race with Wake():
// the owner stops every waking thread (or callback) first.
class Waker {
 public:
  Waker();
  ~Waker() { Close(); }
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;
  // The number for a poll set, -1 once closed or lost.
  int fd() const { return fd_.load(std::memory_order_acquire); }
  bool ok() const { return fd() >= 0; }
  // Checks the identity; false (and forgotten, untouched) when the program took the number.
  bool StillOurs();
  void Wake() const;
  // Clears pending wake-ups (after poll() said readable).
  void Drain();
  // Closes the eventfd (if its number still names it). Idempotent.
  void Close();

 private:
  bool IsOurs(int fd) const;
  std::atomic<int> fd_{-1};
  dev_t device_ = 0;
  ino_t inode_ = 0;
};

}  // namespace ipc
}  // namespace strata

#endif  // STRATA_FULL_IPC_TRANSPORT_H_
