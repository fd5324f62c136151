// Pieces the multi-process parent and child share (docs/ipc.md): the link to the session's
// own chunk manager, internal threads, names and clocks.
//
// LocalManagerLink follows the session's chunk manager as a ControlledChunkManager
// (base_internal::SessionControlledChunkManager): Sync() hooks the update callback on the
// running session's manager (again after every restart); updates are folded into one
// pending update, and the owner's waker is poked; the IPC thread takes the pending update
// when it wants it. A manager that goes away (session stopped) turns the pending update into
// "empty manager" (no bytes, no released chunk), never into a final update: a process's
// final update is only sent when its IPC ends.
//
// Thread safety: Sync() and DestroyAtOrBefore() take the session lock (they may wait for a
// capture): call them from a thread that may block, never the IPC thread. The rest is
// thread-safe and never waits for the session. The update callback runs under the manager's
// lock and only takes the link's own small mutex.
#ifndef STRATA_FULL_INTERNAL_IPC_LINK_H_
#define STRATA_FULL_INTERNAL_IPC_LINK_H_

#include <pthread.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "platform/time_stamp.h"
#include "shared/buffer/controlled_chunk_manager.h"

namespace strata {
namespace full {

class LocalManagerLink {
 public:
  using Update = ControlledChunkManager::Update;

  // `wake` is called (from any thread, possibly under the manager's lock) when an update is
  // pending. It must not block or take locks.
  explicit LocalManagerLink(std::function<void()> wake) : wake_(std::move(wake)) {}

  // Session lock: hooks the running session's manager if it is not hooked yet. Returns true
  // when a manager was newly hooked (a new session).
  bool Sync();
  // Session lock: destroys the session's released chunks at or before `done`.
  void DestroyAtOrBefore(TimeStamp done);
  // Session lock: removes the callback from the session's manager (if hooked).
  void Unhook();

  bool HasPending();
  // The pending update (folded), leaving none.
  Update TakePending();
  bool hooked();

 private:
  void OnUpdate(Update&& update);

  std::function<void()> wake_;
  std::mutex mutex_;
  Update pending_;
  bool hooked_ = false;
};

// A thread of the profiler itself: made with libc's pthread_create (never registered or
// sampled), blocking the sampling signal. False if it could not be made.
bool StartInternalThread(pthread_t* thread, const char* name, std::function<void()> body);

// Descriptors a fork()ed copy of the process must not keep (the IPC sockets: a child's
// connection held open by its fork would hide the child's end from the parent). The copy
// closes them at once (pthread_atfork), each only if its number still names what was
// registered (fstat device + inode): a number the program closed and reused is left alone.
// Unregister (by the number registered) before closing, or once the descriptor is lost.
void RegisterInheritedFd(int fd);
void UnregisterInheritedFd(int fd);

// The program's name (argv[0]'s base name).
std::string ProgramName();

// CLOCK_REALTIME - CLOCK_MONOTONIC now, in nanoseconds (the epoch time of a TimeStamp t is
// t + offset).
int64_t ReadEpochOffsetNs();

}  // namespace full
}  // namespace strata

#endif  // STRATA_FULL_INTERNAL_IPC_LINK_H_
