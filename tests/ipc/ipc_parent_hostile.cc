// The hostile-peer scenario of ipc_parent (ipc_parent.cc: `ipc_parent <ipc_child> hostile
// <out.json>`): garbage, truncated, oversized messages, a silent peer, peers of another uid:
// refused and logged; the real child carries on.
#include "tests/ipc/ipc_parent_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/markers.h"
#include "base/profiler.h"
#include "full/full.h"
#include "full/ipc/messages.h"
#include "full/multiprocess.h"
#include "rapidjson/document.h"
#include "shared/buffer/chunk.h"

namespace ipc_parent {
namespace {

int RawConnect(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

// True when the parent closes the connection within `timeout_ms` (we read EOF).
bool ClosedByParent(int fd, int timeout_ms) {
  const double end = NowMs() + timeout_ms;
  while (NowMs() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) == 1) {
      char buffer[4096];
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
    }
  }
  return false;
}

bool SendAll(int fd, const void* data, size_t bytes) {
  return send(fd, data, bytes, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes);
}

// In a fork()ed copy: become `nobody`, optionally keeping the power to pass the private
// directory's 0700 (CAP_DAC_OVERRIDE), connect, say Hello, and report through the exit
// status: 0 = refused as expected, 1 = unexpected, 2 = connect failed with EACCES.
[[noreturn]] void OtherUidPeer(const std::string& path, bool keep_dac_override,
                               const std::vector<uint8_t>& hello) {
  prctl(PR_SET_KEEPCAPS, 1);
  if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(3);
  if (keep_dac_override) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    const uint32_t caps = (1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH);
    data[0].effective = data[0].permitted = caps;
    if (syscall(SYS_capset, &header, data) != 0) _exit(4);
  }
  const int fd = RawConnect(path);
  if (fd < 0) _exit(errno == EACCES ? 2 : 5);
  if (!SendAll(fd, hello.data(), hello.size())) _exit(0);  // Already closed: refused.
  _exit(ClosedByParent(fd, 3000) ? 0 : 1);
}

int RunOtherUidPeer(const std::string& path, bool keep_dac_override,
                    const std::vector<uint8_t>& hello) {
  const pid_t pid = fork();
  if (pid == 0) OtherUidPeer(path, keep_dac_override, hello);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

}  // namespace

int Hostile(const std::string& out) {
  strata::full::IpcSettings ipc;
  ipc.gather_poll_interval_ms = kShortPollMs;
  ipc.hello_timeout_ms = 500;
  StartParent(16, ipc);
  Kid kid = Spawn({"worker"});
  Check(Answer(kid) == 'r', "the real child follows");
  const std::string path = GetIpcStatus().socket_path;
  namespace ipcm = strata::ipc;
  ipcm::Hello hello;
  hello.pid = strata::ProcessId::FromNumber(getpid());
  hello.name = "fake";
  const std::vector<uint8_t> hello_frame = ipcm::EncodeFrame(hello);

  // 1. Garbage.
  int fd = RawConnect(path);
  const char garbage[] = "GET / HTTP/1.1\r\nHost: strata\r\n\r\n\x01\x02\x03\x04\x05\x06\x07";
  SendAll(fd, garbage, sizeof(garbage));
  Check(ClosedByParent(fd, 2000), "garbage: connection closed");
  close(fd);
  // 2. A truncated frame, then the peer closes: nothing to do but forget it.
  fd = RawConnect(path);
  SendAll(fd, hello_frame.data(), hello_frame.size() / 2);
  close(fd);
  // 3. A truncated frame from a peer that stays silent: closed after the Hello timeout.
  fd = RawConnect(path);
  SendAll(fd, hello_frame.data(), 7);
  Check(ClosedByParent(fd, 3000), "silent peer: closed after the Hello timeout");
  close(fd);
  // 4. An oversized message, refused on its header (nothing allocated for it).
  fd = RawConnect(path);
  uint8_t header[12];
  const uint32_t magic = ipcm::kFrameMagic, huge = 0x7fffffff;
  const uint16_t version = ipcm::kProtocolVersion,
                 type = static_cast<uint16_t>(ipcm::MessageType::kExitProfile);
  memcpy(header, &magic, 4);
  memcpy(header + 4, &version, 2);
  memcpy(header + 6, &type, 2);
  memcpy(header + 8, &huge, 4);
  SendAll(fd, header, sizeof(header));
  Check(ClosedByParent(fd, 2000), "oversized message: connection closed");
  close(fd);
  // 5. A proper Hello, then a malformed update.
  fd = RawConnect(path);
  SendAll(fd, hello_frame.data(), hello_frame.size());
  std::vector<uint8_t> update = ipcm::EncodeFrame(ipcm::ChunkManagerUpdate{
      strata::ControlledChunkManager::Update(1, 65536, strata::TimeStamp::FromNanoseconds(5),
                                             {{strata::TimeStamp::FromNanoseconds(5), 65536}})});
  update[12] = 9;  // Unknown update kind.
  SendAll(fd, update.data(), update.size());
  Check(ClosedByParent(fd, 2000), "malformed update after Hello: connection closed");
  close(fd);
  // 6. Another uid that can pass the directory (CAP_DAC_OVERRIDE): refused by SO_PEERCRED.
  if (geteuid() == 0) {
    const int rc = RunOtherUidPeer(path, true, hello_frame);
    Check(rc == 0, "a peer of another uid is refused (SO_PEERCRED), status " + std::to_string(rc));
    // 7. Another uid without that power: the 0700 directory stops it at connect().
    const int rc2 = RunOtherUidPeer(path, false, hello_frame);
    Check(rc2 == 2, "a peer of another uid cannot even reach the socket (0700 directory), status " +
                        std::to_string(rc2));
  } else {
    std::printf("RESULT other_uid=skipped (not root)\n");
  }
  SleepMs(100);
  const IpcStatus status = GetIpcStatus();
  PrintStatus();
  Check(status.children == 1, "the real child is still connected");
  Check(status.closed_connections >= 3,
        "malformed peers were closed (" + std::to_string(status.closed_connections) + ")");
  Check(status.refused_connections >= (geteuid() == 0 ? 2u : 1u),
        "refusals counted (" + std::to_string(status.refused_connections) + ")");
  bool logged_uid = geteuid() != 0;
  for (const std::string& e : status.events) {
    if (e.find("runs as uid 65534") != std::string::npos) logged_uid = true;
  }
  Check(logged_uid, "the other uid's refusal is logged");
  // The session goes on: the real child is gathered.
  Tell(kid, 'm');
  Check(Answer(kid) == 'a', "the real child still works");
  Capture(out);
  Tell(kid, 'q');
  Check(Reap(kid), "the child ended");
  ProfileView view;
  if (!ReadProfile(out, &view)) return 1;
  Check(view.Child(kid.pid) != nullptr, "the real child is in the profile");
  Check(view.EventMentions("malformed") && view.EventMentions("exceeds the cap"),
        "the gathering log's events tell about the malformed peers");
  return 0;
}

}  // namespace ipc_parent
