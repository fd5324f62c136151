// libFuzzer target: the multi-process protocol's decoder (messages.h), which reads whatever
// another process sends. The coverage-guided counterpart of the random-input cases in
// messages_test.cc ("fuzz: ..."), which it complements: those throw 300 k random and mutated
// inputs at the decoder on every test run; this one explores it with libFuzzer's feedback
// (tools/fuzz.sh) and keeps the inputs that reach new code in fuzz_corpus/.
//
// Input: [mode][rest...].
//   mode even: DecodePayload(type = rest[0], payload = rest[1...]) for one message type
//              (unknown types included);
//   mode odd:  rest is a byte stream fed to a FrameReader with small caps, in pieces whose
//              sizes come from the mode byte (1 to 16 bytes, or all at once), taking every
//              message out after each piece.
//
// Checked on every input (STRATA_CHECK aborts, which the fuzzer reports as a crash):
//  - no crash, no read outside the input (ASan), no undefined behaviour (UBSan);
//  - a refusal always comes with a reason; after a malformed frame the reader stays failed;
//  - an accepted message re-encodes to a frame that decodes to a message encoding to the
//    very same bytes, of the type the header said, no larger than that type's cap;
//  - the reader never holds more bytes than it was given.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "full/ipc/messages.h"
#include "platform/check.h"

namespace strata {
namespace ipc {
namespace {

// The caps of the frame reader: small, so that inputs of a few hundred bytes hit them.
FrameLimits SmallLimits() {
  FrameLimits limits;
  limits.control_bytes = 256;
  limits.update_bytes = 512;
  limits.profile_bytes = 1024;
  return limits;
}

void CheckAccepted(const Message& message, MessageType type) {
  STRATA_CHECK(TypeOf(message) == type, "a message decoded as another type than announced");
  const std::vector<uint8_t> frame = EncodeFrame(message);
  STRATA_CHECK(frame.size() >= kFrameHeaderBytes, "an encoded frame without its header");
  std::string error;
  std::optional<Message> again = DecodePayload(type, frame.data() + kFrameHeaderBytes,
                                               frame.size() - kFrameHeaderBytes, &error);
  STRATA_CHECK(again.has_value(), "an accepted message does not decode after re-encoding");
  STRATA_CHECK(EncodeFrame(*again) == frame, "decode(encode(m)) encodes differently from m");
}

void DecodeOnePayload(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const uint16_t raw_type = data[0] % 12;  // 0 and 11 are no message type.
  const MessageType type = static_cast<MessageType>(raw_type);
  std::string error;
  std::optional<Message> message = DecodePayload(type, data + 1, size - 1, &error);
  if (!message) {
    STRATA_CHECK(!error.empty(), "a payload refused without a reason");
    return;
  }
  STRATA_CHECK(raw_type >= kFirstMessageType && raw_type <= kLastMessageType,
               "a payload of an unknown type was accepted");
  CheckAccepted(*message, type);
}

void ReadStream(uint8_t mode, const uint8_t* data, size_t size) {
  const FrameLimits limits = SmallLimits();
  FrameReader reader(limits);
  const size_t piece = (mode >> 1) % 17;  // 0: everything at once.
  size_t given = 0;
  bool malformed = false;
  for (size_t at = 0; at < size;) {
    const size_t n = piece == 0 ? size - at : std::min(piece, size - at);
    reader.Append(data + at, n);
    at += n;
    given += n;
    STRATA_CHECK(reader.buffered_bytes() <= given, "the reader holds bytes it was not given");
    Message message;
    MessageType type;
    size_t frame_bytes = 0;
    FrameReader::Status status;
    while ((status = reader.Next(&message, &type, &frame_bytes)) ==
           FrameReader::Status::kMessage) {
      STRATA_CHECK(!malformed, "a message came out after a malformed frame");
      STRATA_CHECK(frame_bytes >= kFrameHeaderBytes &&
                       frame_bytes - kFrameHeaderBytes <= limits.CapFor(type),
                   "a frame above its type's cap was accepted");
      CheckAccepted(message, type);
    }
    if (status == FrameReader::Status::kMalformed) {
      STRATA_CHECK(reader.failed() && !reader.error().empty(), "malformed without a reason");
      malformed = true;
    } else {
      STRATA_CHECK(!malformed, "the reader recovered from a malformed frame");
    }
  }
}

}  // namespace
}  // namespace ipc
}  // namespace strata

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  if (mode % 2 == 0) {
    strata::ipc::DecodeOnePayload(data + 1, size - 1);
  } else {
    strata::ipc::ReadStream(mode, data + 1, size - 1);
  }
  return 0;
}
