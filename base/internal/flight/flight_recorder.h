// The flight recorder (docs/flight-recorder.md): with STRATA_FLIGHT_RECORDER=DIR, the session
// buffer's chunks live in a file-backed shared mapping, DIR/strata-<pid>-<start ns>.flight,
// with the metadata a reader needs to make sense of them (session facts, thread table,
// libraries, marker types, counters). The mapping's pages outlive the process in the page
// cache when it crashes or is killed (SIGKILL, the OOM killer); `strata recover` turns the
// file into a profile (shared/flight/flight_recovery.h).
//
// Nothing is done on the sampling or marker hot paths: the chunks are ordinary chunks that
// happen to live in the file (ChunkStorage, shared/buffer/chunk.h); a chunk's descriptor is
// written when it is done, recycled or destroyed (once per chunk, under the buffer's or the
// manager's lock), and by the sampler loop, which publishes how much of the chunk being
// written is final, seals done chunks with a checksum, and appends the metadata that changed.
// So at most one sampler period of data is lost at a crash.
//
// The file's descriptor is private (high, close-on-exec, platform/private_fd.h) and closed
// right after mmap: a program that closes every descriptor changes nothing.
//
// Thread safety: all functions are thread-safe; Start/Stop need the session mutex. Async-signal
// safety: none.
#ifndef STRATA_BASE_INTERNAL_FLIGHT_RECORDER_H_
#define STRATA_BASE_INTERNAL_FLIGHT_RECORDER_H_

#include <cstddef>
#include <string>

#include "base/profiler.h"
#include "platform/time_stamp.h"
#include "shared/buffer/chunk.h"
#include "shared/buffer/chunked_buffer.h"

namespace strata {
namespace base_internal {

// STRATA_FLIGHT_RECORDER's value, at load, as env_settings.h checked it (a writable
// directory; a bad value is reported there with what is accepted, and never gets here).
// Resolved to an absolute path now, so that a later chdir does not matter.
void ConfigureFlightRecorder(const char* directory);

// At session start, before the buffer takes a chunk (session mutex held): creates the file
// for a buffer of `limit_bytes` in chunks of `chunk_bytes`. Returns the storage the chunk
// manager must take its chunks from, or null (recorder off, or the file could not be made:
// reported, and the session runs without it).
ChunkStorage* StartFlightRecorderLocked(size_t limit_bytes, size_t chunk_bytes,
                                        TimeStamp start_time, const ProfilerSettings& settings);

// Each sampler loop, after the buffer got the loop's samples and markers (no lock held).
void FlightRecorderOnSamplerLoop();

// The part of a loop that concerns the chunks: publishes how much of `buffer`'s current chunk
// is final and seals done chunks (the sampler loop does it for the session buffer; tests for
// a buffer of their own whose manager took the storage). No lock held.
void FlightRecorderPublishChunks(ChunkedBuffer& buffer);

// The running session's storage's file header fields, for tests: the file size and the
// chunks it had to leave on the heap. False when no file is running.
bool FlightRecorderStats(size_t* file_bytes, size_t* heap_chunks);

// At session stop, before the buffer drops its chunks (session mutex held): publishes the last
// data, seals it and marks the file as cleanly ended; later chunk destructions leave the
// file as it is.
void StopFlightRecorderLocked();

// After a session stopped and its buffer's chunks are gone (ProfilerStop): unmaps the files of
// stopped sessions, as the next start would, and forgets the directory (the next session has
// no file unless ConfigureFlightRecorder is called again). For attach sessions, which leave
// the process as it was (base/internal/attach/attach.cc). Not async-signal-safe; thread-safe.
void ReleaseStoppedFlightRecorderFiles();

// Removes the running session's file (its profile was saved at exit: nothing to recover).
// The mapping stays; the space goes when the process ends.
void RemoveFlightRecorderFile();

// Removes every file this process made and still has (the running session's, and those of
// sessions that stopped without a save): the process ends in a way that is not a crash --
// exit(), _exit(), _Exit(), an exec (issue 33; docs/flight-recorder.md). Async-signal-safe
// (unlink only, no lock, errno kept). The caller checks that this is the process that made
// them (IsOtherProcess(): a fork()ed or vfork()ed child must not remove its parent's files).
void RemoveFlightRecorderFilesAtProcessEnd();

// The running session's file, or "".
std::string FlightRecorderPath();

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_FLIGHT_RECORDER_H_
