// The multi-process protocol's messages and their framing (docs/ipc.md).
//
// Every message on a connection is one frame:
//
//   offset 0  uint32  magic 0x50495453 ("STIP" in memory order)
//          4  uint16  protocol version (kProtocolVersion)
//          6  uint16  message type (MessageType)
//          8  uint32  payload bytes
//         12  payload: the message's fields, encoded with the profile buffer's serializers
//             (shared/buffer/entry_serialization.h: raw little-endian numbers, ULEB128-
//             prefixed strings and sequences, TimeStamp as int64 nanoseconds...). There is no
//             second encoding: an Update or a TimeStamp travels exactly as it would be stored
//             in the buffer.
//
// Decoding is strict and never trusts the peer: a wrong magic, another version, an unknown
// type, a payload larger than that type's cap (checked on the header, before anything is
// allocated), a field that does not decode, an impossible value, or bytes left over after
// the last field make the frame malformed. The receiver then closes that connection and logs
// why; nothing else is affected.
//
// Thread safety: value types and pure functions; FrameReader is a single-thread object.
// Async-signal safety: none (allocates).
#ifndef STRATA_FULL_IPC_MESSAGES_H_
#define STRATA_FULL_IPC_MESSAGES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/buffer/controlled_chunk_manager.h"
#include "shared/buffer/entry_serialization.h"

namespace strata {
namespace ipc {

inline constexpr uint32_t kFrameMagic = 0x50495453;  // Bytes "STIP" on little-endian.
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 12;

enum class MessageType : uint16_t {
  kHello = 1,                             // child -> parent, first message
  kSessionState = 2,                      // parent -> child, answers Hello, then on change
  kAwaitNextChunkManagerUpdate = 3,       // parent -> child
  kChunkManagerUpdate = 4,                // child -> parent
  kDestroyReleasedChunksAtOrBefore = 5,   // parent -> child
  kGatherProfile = 6,                     // parent -> child
  kGatherProfileReply = 7,                // child -> parent
  kGetGatherProfileProgress = 8,          // parent -> child
  kGatherProfileProgress = 9,             // child -> parent
  kExitProfile = 10,                      // child -> parent, as it ends
};
inline constexpr uint16_t kFirstMessageType = 1;
inline constexpr uint16_t kLastMessageType = 10;

const char* MessageTypeName(MessageType type);

// --- The messages. Field order is the wire order.

// A child introduces itself.
struct Hello {
  uint32_t protocol_version = kProtocolVersion;
  ProcessId pid;
  ProcessId parent_pid;
  std::string name;  // Program name (argv[0]'s base name).
};

// The parent's session, which the child follows: sent in answer to Hello and whenever the
// parent's session starts, stops, pauses, resumes or changes settings.
struct SessionState {
  bool active = false;
  bool paused = false;
  uint64_t generation = 0;  // A new parent session (start or restart) gets a new number.
  double interval_ms = 1.0;
  uint32_t buffer_megabytes = 64;
  uint32_t features = 0;
  std::vector<std::string> thread_filters;
  // The parent's monotonic -> Unix-epoch offset: every process of the tree writes its
  // meta.startTime with this one mapping, so that times align exactly in the parent's profile.
  int64_t epoch_offset_ns = 0;
};

// "Send me your next chunk-manager update (now if you have one, else when you do)." One is
// outstanding per child at a time.
struct AwaitNextChunkManagerUpdate {};

// The child's chunk manager's updates since its last one, folded
// (ControlledChunkManager::Update). A final update says the child is going away.
struct ChunkManagerUpdate {
  ControlledChunkManager::Update update;
};

// Destroy released chunks whose done time stamp is at or before `done`.
struct DestroyReleasedChunksAtOrBefore {
  TimeStamp done;
};

// Capture your profile (as a sub-process profile) and send it back.
struct GatherProfile {
  uint64_t request_id = 0;
};

struct GatherProfileReply {
  uint64_t request_id = 0;
  bool ok = false;
  std::string profile;  // The sub-process profile JSON, or the error when !ok.
  TimeDuration capture_time;
};

struct GetGatherProfileProgress {
  uint64_t request_id = 0;
};

struct GatherProfileProgress {
  uint64_t request_id = 0;
  uint32_t progress = 0;  // Of kProgressOne (ProportionValue's fixed point: 1 << 30).
  std::string location;   // What the capture is doing.
};
inline constexpr uint32_t kProgressOne = uint32_t{1} << 30;

// A child's last profile, sent as it ends.
struct ExitProfile {
  TimeStamp end_time;
  std::string profile;  // The sub-process profile JSON.
};

// In MessageType order (index + 1 = type).
using Message =
    std::variant<Hello, SessionState, AwaitNextChunkManagerUpdate, ChunkManagerUpdate,
                 DestroyReleasedChunksAtOrBefore, GatherProfile, GatherProfileReply,
                 GetGatherProfileProgress, GatherProfileProgress, ExitProfile>;

MessageType TypeOf(const Message& message);

// --- Limits.

struct FrameLimits {
  // Payload cap of the small control messages (everything but updates and profiles).
  uint32_t control_bytes = 64 * 1024;
  // Payload cap of a chunk-manager update (12-13 bytes per released chunk listed).
  uint32_t update_bytes = 1024 * 1024;
  // Payload cap of a profile (GatherProfileReply, ExitProfile).
  uint32_t profile_bytes = 256u * 1024 * 1024;
  // Frames with a payload above this many bytes wait for the owner's decision once their
  // header is in (FrameReader::Status::kNeedsAdmission): the owner checks its memory budget
  // before the payload is buffered. 0: every frame within its cap is taken.
  uint32_t admission_above_bytes = 0;
  uint32_t CapFor(MessageType type) const;
};

// --- Encoding and decoding.

// The whole frame (header + payload).
std::vector<uint8_t> EncodeFrame(const Message& message);

// Decodes one payload of `type`. Returns the message, or nullopt with *error saying why.
std::optional<Message> DecodePayload(MessageType type, const uint8_t* payload, size_t bytes,
                                     std::string* error);

// Cuts a byte stream into frames. Feed it what the socket gave; Next() returns complete
// messages one by one. After the first malformed frame it stays failed (error()).
//
// Memory: the reader holds what was received and not consumed, never more than one frame
// plus one read ahead of what the peer actually sent (a header announcing a large payload
// reserves nothing); after a frame larger than 1 MiB its storage is given back. With
// FrameLimits::admission_above_bytes set, a large frame's payload is only buffered once the
// owner admitted it (Admit()); a skipped one (Skip()) is read and thrown away as it arrives.
class FrameReader {
 public:
  explicit FrameReader(FrameLimits limits = FrameLimits()) : limits_(limits) {}

  void Append(const uint8_t* data, size_t bytes);

  enum class Status { kMessage, kNeedMore, kMalformed, kNeedsAdmission };
  // kMessage: *message is set (and *type, *frame_bytes if given). kNeedsAdmission: a frame
  // above admission_above_bytes has its header in (*type and *frame_bytes tell which); call
  // Admit() or Skip() (or drop the reader) before Next() again.
  Status Next(Message* message, MessageType* type = nullptr, size_t* frame_bytes = nullptr);
  // The frame waiting for admission is buffered and decoded as usual.
  void Admit();
  // The frame waiting for admission is discarded, its payload as it arrives.
  void Skip();
  // A frame waits for Admit() or Skip(): the caller should read no more for now.
  bool AwaitingAdmission() const { return awaiting_admission_; }
  // Payload bytes of a skipped frame still to come and be thrown away.
  size_t skipping_bytes() const { return skip_remaining_; }

  const std::string& error() const { return error_; }
  bool failed() const { return !error_.empty(); }
  // Bytes received but not consumed yet.
  size_t buffered_bytes() const { return buffer_.size() - consumed_; }

 private:
  FrameLimits limits_;
  std::vector<uint8_t> buffer_;
  size_t consumed_ = 0;
  std::string error_;
  bool awaiting_admission_ = false;
  bool admitted_ = false;       // The frame at consumed_ was admitted.
  size_t skip_remaining_ = 0;   // Payload bytes of a skipped frame still to discard.
};

}  // namespace ipc
}  // namespace strata

#endif  // STRATA_FULL_IPC_MESSAGES_H_
