#include "full/ipc/messages.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>

namespace strata {

// --- Serializers of the buffer-side types the protocol carries (chunk metadata, Update).
// Same encodings as everything in entry_serialization.h.

template <>
struct Serializer<ControlledChunkManager::ChunkMetadata> {
  static size_t Bytes(const ControlledChunkManager::ChunkMetadata& m) {
    return SumBytes(m.done_time_stamp, m.buffer_bytes);
  }
  static void Write(EntryWriter& writer, const ControlledChunkManager::ChunkMetadata& m) {
    writer.WriteObjects(m.done_time_stamp, m.buffer_bytes);
  }
};
template <>
struct Deserializer<ControlledChunkManager::ChunkMetadata>
    : DeserializerBase<ControlledChunkManager::ChunkMetadata> {
  static void ReadInto(EntryReader& reader, ControlledChunkManager::ChunkMetadata& m) {
    reader.ReadIntoObjects(m.done_time_stamp, m.buffer_bytes);
  }
};

namespace ipc {
namespace {

using ChunkMetadata = ControlledChunkManager::ChunkMetadata;
using Update = ControlledChunkManager::Update;

// Update on the wire: uint8 kind (1 regular, 2 final); a regular one continues with
// uint64 unreleased bytes, uint64 released bytes, TimeStamp oldest released done time
// (0 = none), vector<ChunkMetadata> newly released.
constexpr uint8_t kUpdateRegular = 1;
constexpr uint8_t kUpdateFinal = 2;
// No process has 2^48 bytes of buffer: anything above is garbage (and keeps us far from the
// values Update reserves for "no update" and "final").
constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 48;

// --- Fields of each message, in wire order.

auto Fields(Hello& m) { return std::tie(m.protocol_version, m.pid, m.parent_pid, m.name); }
auto Fields(SessionState& m) {
  return std::tie(m.active, m.paused, m.generation, m.interval_ms, m.buffer_megabytes, m.features,
                  m.thread_filters, m.epoch_offset_ns);
}
auto Fields(AwaitNextChunkManagerUpdate&) { return std::tie(); }
auto Fields(DestroyReleasedChunksAtOrBefore& m) { return std::tie(m.done); }
auto Fields(GatherProfile& m) { return std::tie(m.request_id); }
auto Fields(GatherProfileReply& m) {
  return std::tie(m.request_id, m.ok, m.profile, m.capture_time);
}
auto Fields(GetGatherProfileProgress& m) { return std::tie(m.request_id); }
auto Fields(GatherProfileProgress& m) { return std::tie(m.request_id, m.progress, m.location); }
auto Fields(ExitProfile& m) { return std::tie(m.end_time, m.profile); }

template <typename T>
auto ConstFields(const T& m) {
  return Fields(const_cast<T&>(m));  // Only read through: the tie is used for writing.
}

size_t PayloadBytes(const ChunkManagerUpdate& m) {
  const Update& u = m.update;
  if (u.IsFinal() || u.IsNotUpdate()) return 1;
  return 1 + SumBytes(uint64_t{0}, uint64_t{0}, u.OldestDoneTimeStamp(), u.NewlyReleasedChunks());
}
void WritePayload(EntryWriter& w, const ChunkManagerUpdate& m) {
  const Update& u = m.update;
  if (u.IsFinal() || u.IsNotUpdate()) {
    // An empty update is never sent; encode it as final rather than write garbage.
    w.WriteObject(kUpdateFinal);
    return;
  }
  w.WriteObjects(kUpdateRegular, uint64_t{u.UnreleasedBytes()}, uint64_t{u.ReleasedBytes()},
                 u.OldestDoneTimeStamp(), u.NewlyReleasedChunks());
}

template <typename T>
size_t PayloadBytes(const T& m) {
  return std::apply([](const auto&... v) { return SumBytes(v...); }, ConstFields(m));
}
template <typename T>
void WritePayload(EntryWriter& w, const T& m) {
  std::apply([&](const auto&... v) { w.WriteObjects(v...); }, ConstFields(m));
}

// --- Reading and validation. Each returns "" or what is wrong.

template <typename T>
std::string ReadPayload(EntryReader& r, T& m) {
  std::apply([&](auto&... v) { r.ReadIntoObjects(v...); }, Fields(m));
  return "";
}

std::string ReadPayload(EntryReader& r, ChunkManagerUpdate& m) {
  const uint8_t kind = r.ReadObject<uint8_t>();
  if (r.Failed()) return "";
  if (kind == kUpdateFinal) {
    m.update = Update::Final();
    return "";
  }
  if (kind != kUpdateRegular) return "unknown update kind " + std::to_string(kind);
  uint64_t unreleased = 0, released = 0;
  TimeStamp oldest;
  std::vector<ChunkMetadata> newly;
  r.ReadIntoObjects(unreleased, released, oldest, newly);
  if (r.Failed()) return "";
  if (unreleased > kMaxBufferBytes || released > kMaxBufferBytes) {
    return "impossible byte counts";
  }
  uint64_t newly_bytes = 0;
  for (size_t i = 0; i < newly.size(); ++i) {
    const ChunkMetadata& c = newly[i];
    if (c.buffer_bytes == 0 || c.done_time_stamp.IsNull()) return "released chunk without size or time";
    if (i > 0 && !(newly[i - 1].done_time_stamp < c.done_time_stamp)) {
      return "released chunks out of order";
    }
    if (oldest.IsNull() || c.done_time_stamp < oldest) {
      return "released chunk older than the oldest released one";
    }
    newly_bytes += c.buffer_bytes;
  }
  if (newly_bytes > released) return "newly released chunks exceed the released bytes";
  m.update = Update(static_cast<size_t>(unreleased), static_cast<size_t>(released), oldest,
                    std::move(newly));
  return "";
}

bool ValidString(const std::string& s, size_t max) { return s.size() <= max; }

std::string Validate(const Hello& m) {
  if (m.protocol_version != kProtocolVersion) {
    return "protocol version " + std::to_string(m.protocol_version) + " (this side speaks " +
           std::to_string(kProtocolVersion) + ")";
  }
  if (m.pid.ToNumber() <= 0) return "impossible pid";
  if (!ValidString(m.name, 4096)) return "name too long";
  return "";
}
std::string Validate(const SessionState& m) {
  if (!std::isfinite(m.interval_ms) || m.interval_ms <= 0 || m.interval_ms > 1e6) {
    return "impossible interval";
  }
  if (m.buffer_megabytes == 0 || m.buffer_megabytes > (1u << 20)) return "impossible buffer size";
  if (m.thread_filters.size() > 1024) return "too many thread filters";
  for (const std::string& f : m.thread_filters) {
    if (!ValidString(f, 1024)) return "thread filter too long";
  }
  return "";
}
std::string Validate(const GatherProfileProgress& m) {
  if (m.progress > kProgressOne) return "progress above 1";
  if (!ValidString(m.location, 4096)) return "location too long";
  return "";
}
template <typename T>
std::string Validate(const T&) {
  return "";
}

template <typename T>
std::optional<Message> Decode(const uint8_t* payload, size_t bytes, std::string* error) {
  EntryReader reader = EntryReader::OverBytes(absl::MakeConstSpan(payload, bytes));
  reader.SetUntrusted();  // No literal-string addresses from another process.
  T message;
  std::string problem = ReadPayload(reader, message);
  if (problem.empty() && reader.Failed()) problem = "fields do not decode";
  if (problem.empty() && reader.RemainingBytes() != 0) {
    problem = std::to_string(reader.RemainingBytes()) + " bytes after the last field";
  }
  if (problem.empty()) problem = Validate(message);
  if (!problem.empty()) {
    if (error) *error = problem;
    return std::nullopt;
  }
  return Message(std::move(message));
}

void PutU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
void PutU32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
uint16_t GetU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kHello: return "Hello";
    case MessageType::kSessionState: return "SessionState";
    case MessageType::kAwaitNextChunkManagerUpdate: return "AwaitNextChunkManagerUpdate";
    case MessageType::kChunkManagerUpdate: return "ChunkManagerUpdate";
    case MessageType::kDestroyReleasedChunksAtOrBefore: return "DestroyReleasedChunksAtOrBefore";
    case MessageType::kGatherProfile: return "GatherProfile";
    case MessageType::kGatherProfileReply: return "GatherProfileReply";
    case MessageType::kGetGatherProfileProgress: return "GetGatherProfileProgress";
    case MessageType::kGatherProfileProgress: return "GatherProfileProgress";
    case MessageType::kExitProfile: return "ExitProfile";
  }
  return "unknown";
}

MessageType TypeOf(const Message& message) {
  return static_cast<MessageType>(message.index() + kFirstMessageType);
}

uint32_t FrameLimits::CapFor(MessageType type) const {
  switch (type) {
    case MessageType::kChunkManagerUpdate: return update_bytes;
    case MessageType::kGatherProfileReply:
    case MessageType::kExitProfile: return profile_bytes;
    default: return control_bytes;
  }
}

std::vector<uint8_t> EncodeFrame(const Message& message) {
  return std::visit(
      [&](const auto& m) {
        const size_t payload = PayloadBytes(m);
        std::vector<uint8_t> frame(kFrameHeaderBytes + payload);
        PutU32(frame.data(), kFrameMagic);
        PutU16(frame.data() + 4, kProtocolVersion);
        PutU16(frame.data() + 6, static_cast<uint16_t>(TypeOf(message)));
        PutU32(frame.data() + 8, static_cast<uint32_t>(payload));
        EntryWriter writer(frame.data() + kFrameHeaderBytes, payload, nullptr, 0);
        WritePayload(writer, m);
        STRATA_CHECK(writer.RemainingBytes() == 0, "IPC message size mismatch");
        return frame;
      },
      message);
}

std::optional<Message> DecodePayload(MessageType type, const uint8_t* payload, size_t bytes,
                                     std::string* error) {
  switch (type) {
    case MessageType::kHello: return Decode<Hello>(payload, bytes, error);
    case MessageType::kSessionState: return Decode<SessionState>(payload, bytes, error);
    case MessageType::kAwaitNextChunkManagerUpdate:
      return Decode<AwaitNextChunkManagerUpdate>(payload, bytes, error);
    case MessageType::kChunkManagerUpdate: return Decode<ChunkManagerUpdate>(payload, bytes, error);
    case MessageType::kDestroyReleasedChunksAtOrBefore:
      return Decode<DestroyReleasedChunksAtOrBefore>(payload, bytes, error);
    case MessageType::kGatherProfile: return Decode<GatherProfile>(payload, bytes, error);
    case MessageType::kGatherProfileReply: return Decode<GatherProfileReply>(payload, bytes, error);
    case MessageType::kGetGatherProfileProgress:
      return Decode<GetGatherProfileProgress>(payload, bytes, error);
    case MessageType::kGatherProfileProgress:
      return Decode<GatherProfileProgress>(payload, bytes, error);
    case MessageType::kExitProfile: return Decode<ExitProfile>(payload, bytes, error);
  }
  if (error) *error = "unknown message type";
  return std::nullopt;
}

void FrameReader::Append(const uint8_t* data, size_t bytes) {
  if (failed() || bytes == 0) return;
  if (skip_remaining_ > 0) {
    const size_t skipped = std::min(skip_remaining_, bytes);
    skip_remaining_ -= skipped;
    data += skipped;
    bytes -= skipped;
    if (bytes == 0) return;
  }
  if (consumed_ > 0 && consumed_ >= buffer_.size() / 2) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<ptrdiff_t>(consumed_));
    consumed_ = 0;
  }
  buffer_.insert(buffer_.end(), data, data + bytes);
}

FrameReader::Status FrameReader::Next(Message* message, MessageType* type_out,
                                      size_t* frame_bytes) {
  if (failed()) return Status::kMalformed;
  const size_t available = buffer_.size() - consumed_;
  if (available < kFrameHeaderBytes) return Status::kNeedMore;
  const uint8_t* header = buffer_.data() + consumed_;
  const uint32_t magic = GetU32(header);
  const uint16_t version = GetU16(header + 4);
  const uint16_t raw_type = GetU16(header + 6);
  const uint32_t payload = GetU32(header + 8);
  char text[160];
  if (magic != kFrameMagic) {
    snprintf(text, sizeof(text), "bad frame magic 0x%08x", magic);
    error_ = text;
    return Status::kMalformed;
  }
  if (version != kProtocolVersion) {
    snprintf(text, sizeof(text), "protocol version %u (this side speaks %u)", version,
             kProtocolVersion);
    error_ = text;
    return Status::kMalformed;
  }
  if (raw_type < kFirstMessageType || raw_type > kLastMessageType) {
    snprintf(text, sizeof(text), "unknown message type %u", raw_type);
    error_ = text;
    return Status::kMalformed;
  }
  const MessageType type = static_cast<MessageType>(raw_type);
  if (payload > limits_.CapFor(type)) {
    snprintf(text, sizeof(text), "%s of %u bytes exceeds the cap of %u", MessageTypeName(type),
             payload, limits_.CapFor(type));
    error_ = text;
    return Status::kMalformed;
  }
  if (awaiting_admission_) return Status::kNeedsAdmission;  // Admit() or Skip() first.
  if (!admitted_ && limits_.admission_above_bytes > 0 && payload > limits_.admission_above_bytes) {
    awaiting_admission_ = true;
    if (type_out) *type_out = type;
    if (frame_bytes) *frame_bytes = kFrameHeaderBytes + payload;
    return Status::kNeedsAdmission;
  }
  if (available - kFrameHeaderBytes < payload) {
    // Nothing reserved on the header's word: the buffer grows with what actually arrives.
    return Status::kNeedMore;
  }
  admitted_ = false;
  std::string problem;
  std::optional<Message> decoded =
      DecodePayload(type, header + kFrameHeaderBytes, payload, &problem);
  if (!decoded) {
    error_ = std::string(MessageTypeName(type)) + ": " + problem;
    return Status::kMalformed;
  }
  consumed_ += kFrameHeaderBytes + payload;
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
    // A large frame's storage goes back (the next frames are small, as a rule).
    if (buffer_.capacity() > (size_t{1} << 20)) std::vector<uint8_t>().swap(buffer_);
  }
  *message = std::move(*decoded);
  if (type_out) *type_out = type;
  if (frame_bytes) *frame_bytes = kFrameHeaderBytes + payload;
  return Status::kMessage;
}

void FrameReader::Admit() {
  if (!awaiting_admission_) return;
  awaiting_admission_ = false;
  admitted_ = true;
}

void FrameReader::Skip() {
  if (!awaiting_admission_) return;
  awaiting_admission_ = false;
  const size_t available = buffer_.size() - consumed_;
  const size_t frame = kFrameHeaderBytes + GetU32(buffer_.data() + consumed_ + 8);
  const size_t dropped = std::min(available, frame);
  skip_remaining_ = frame - dropped;
  consumed_ += dropped;
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
    if (buffer_.capacity() > (size_t{1} << 20)) std::vector<uint8_t>().swap(buffer_);
  }
}

}  // namespace ipc
}  // namespace strata
