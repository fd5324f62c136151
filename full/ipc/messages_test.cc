#include "full/ipc/messages.h"

#include <cstring>
#include <random>

#include "catch2/catch.hpp"

namespace strata {
namespace ipc {
namespace {

using Update = ControlledChunkManager::Update;
using Metadata = ControlledChunkManager::ChunkMetadata;

TimeStamp T(int64_t ns) { return TimeStamp::FromNanoseconds(ns); }

// Decodes exactly one frame from `bytes`, fed `step` bytes at a time.
std::optional<Message> DecodeOne(const std::vector<uint8_t>& bytes, size_t step = 0,
                                 std::string* error = nullptr, FrameLimits limits = {}) {
  FrameReader reader(limits);
  if (step == 0) step = bytes.size();
  Message message;
  for (size_t at = 0; at < bytes.size(); at += step) {
    reader.Append(bytes.data() + at, std::min(step, bytes.size() - at));
    const FrameReader::Status status = reader.Next(&message);
    if (status == FrameReader::Status::kMessage) {
      if (at + step < bytes.size() || reader.buffered_bytes() != 0) return std::nullopt;
      return message;
    }
    if (status == FrameReader::Status::kMalformed) {
      if (error) *error = reader.error();
      return std::nullopt;
    }
  }
  if (error) *error = "incomplete";
  return std::nullopt;
}

template <typename T>
T RoundTrip(const T& in, size_t step = 0) {
  const std::vector<uint8_t> frame = EncodeFrame(Message(in));
  std::string error;
  std::optional<Message> out = DecodeOne(frame, step, &error);
  INFO(error);
  REQUIRE(out.has_value());
  REQUIRE(std::holds_alternative<T>(*out));
  return std::get<T>(*out);
}

TEST_CASE("every message survives the wire, whole or byte by byte") {
  for (size_t step : {size_t{0}, size_t{1}, size_t{5}}) {
    Hello hello;
    hello.pid = ProcessId::FromNumber(1234);
    hello.parent_pid = ProcessId::FromNumber(1);
    hello.name = "child-\xc3\xa9";
    const Hello h = RoundTrip(hello, step);
    CHECK(h.protocol_version == kProtocolVersion);
    CHECK(h.pid == hello.pid);
    CHECK(h.parent_pid == hello.parent_pid);
    CHECK(h.name == hello.name);

    SessionState state;
    state.active = true;
    state.paused = true;
    state.generation = 7;
    state.interval_ms = 0.5;
    state.buffer_megabytes = 3;
    state.features = 0x25;
    state.thread_filters = {"worker", "main"};
    state.epoch_offset_ns = -123456789012345;
    const SessionState s = RoundTrip(state, step);
    CHECK(s.active);
    CHECK(s.paused);
    CHECK(s.generation == 7);
    CHECK(s.interval_ms == 0.5);
    CHECK(s.buffer_megabytes == 3);
    CHECK(s.features == 0x25);
    CHECK(s.thread_filters == state.thread_filters);
    CHECK(s.epoch_offset_ns == state.epoch_offset_ns);

    RoundTrip(AwaitNextChunkManagerUpdate{}, step);
    CHECK(RoundTrip(DestroyReleasedChunksAtOrBefore{T(99)}, step).done == T(99));
    CHECK(RoundTrip(GatherProfile{42}, step).request_id == 42);
    GatherProfileReply reply{42, true, R"({"meta":{}})", TimeDuration::FromNanoseconds(5)};
    const GatherProfileReply r = RoundTrip(reply, step);
    CHECK(r.request_id == 42);
    CHECK(r.ok);
    CHECK(r.profile == reply.profile);
    CHECK(r.capture_time == reply.capture_time);
    CHECK(RoundTrip(GetGatherProfileProgress{43}, step).request_id == 43);
    const GatherProfileProgress p =
        RoundTrip(GatherProfileProgress{43, kProgressOne / 2, "capture: writing"}, step);
    CHECK(p.progress == kProgressOne / 2);
    CHECK(p.location == "capture: writing");
    const ExitProfile e = RoundTrip(ExitProfile{T(77), "{}"}, step);
    CHECK(e.end_time == T(77));
    CHECK(e.profile == "{}");

    Update update(3 * 65536, 2 * 65536, T(10), {{T(10), 65536}, {T(20), 65536}});
    CHECK(RoundTrip(ChunkManagerUpdate{update}, step).update == update);
    CHECK(RoundTrip(ChunkManagerUpdate{Update::Final()}, step).update.IsFinal());
    const Update empty(0, 0, TimeStamp(), {});
    CHECK(RoundTrip(ChunkManagerUpdate{empty}, step).update == empty);
  }
}

TEST_CASE("frames in a stream come out one by one, in order") {
  std::vector<uint8_t> stream;
  for (uint64_t i = 1; i <= 100; ++i) {
    const std::vector<uint8_t> f = EncodeFrame(GatherProfile{i});
    stream.insert(stream.end(), f.begin(), f.end());
  }
  FrameReader reader;
  uint64_t expected = 1;
  std::mt19937 random(1);
  for (size_t at = 0; at < stream.size();) {
    const size_t n = std::min<size_t>(random() % 40 + 1, stream.size() - at);
    reader.Append(stream.data() + at, n);
    at += n;
    Message m;
    while (reader.Next(&m) == FrameReader::Status::kMessage) {
      REQUIRE(std::get<GatherProfile>(m).request_id == expected);
      ++expected;
    }
  }
  CHECK(expected == 101);
  CHECK(reader.buffered_bytes() == 0);
}

TEST_CASE("message sizes stay small") {
  // The numbers docs/ipc.md quotes.
  CHECK(EncodeFrame(AwaitNextChunkManagerUpdate{}).size() == 12);
  CHECK(EncodeFrame(DestroyReleasedChunksAtOrBefore{T(1)}).size() == 20);
  CHECK(EncodeFrame(ChunkManagerUpdate{Update(65536, 65536, T(1), {{T(1), 65536}})}).size() ==
        12 + 1 + 8 + 8 + 8 + 1 + 12);
  CHECK(EncodeFrame(ChunkManagerUpdate{Update::Final()}).size() == 13);
}

TEST_CASE("folding before sending equals sending each update") {
  // A child folds its manager's updates between two polls; the parent must learn the same
  // as if it had received every one. Random streams of releases and destructions.
  std::mt19937 random(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<Metadata> live;  // The manager's released chunks.
    int64_t now = 1000;
    size_t unreleased = 65536;
    Update folded;
    std::vector<Update> each;
    for (int step = 0; step < 20; ++step) {
      std::vector<Metadata> newly;
      if (random() % 3 != 0) {
        const int n = static_cast<int>(random() % 3) + 1;
        for (int i = 0; i < n; ++i) newly.push_back({T(now += 10), 65536});
        live.insert(live.end(), newly.begin(), newly.end());
      } else if (!live.empty()) {
        live.erase(live.begin(), live.begin() + static_cast<long>(random() % live.size() + 1));
      }
      size_t released = 0;
      for (const Metadata& m : live) released += m.buffer_bytes;
      Update u(unreleased, released, live.empty() ? TimeStamp() : live.front().done_time_stamp,
               newly);
      each.push_back(u);
      folded.Fold(Update(u));
    }
    // Wire round trip of the folded one.
    const Update received = RoundTrip(ChunkManagerUpdate{folded}).update;
    CHECK(received == folded);
    // Applying each = applying the received fold, seen as the set of live chunks.
    std::vector<Metadata> view;
    auto apply = [&view](const Update& u) {
      const TimeStamp oldest = u.OldestDoneTimeStamp();
      std::vector<Metadata> kept;
      for (const Metadata& m : view) {
        if (!oldest.IsNull() && m.done_time_stamp >= oldest) kept.push_back(m);
      }
      kept.insert(kept.end(), u.NewlyReleasedChunks().begin(), u.NewlyReleasedChunks().end());
      view = kept;
    };
    for (const Update& u : each) apply(u);
    const std::vector<Metadata> by_each = view;
    view.clear();
    apply(received);
    CHECK(view == by_each);
    CHECK(view == live);
  }
}

// --- Malformed input.

std::vector<uint8_t> Header(uint32_t magic, uint16_t version, uint16_t type, uint32_t bytes) {
  std::vector<uint8_t> h(12);
  memcpy(h.data(), &magic, 4);
  memcpy(h.data() + 4, &version, 2);
  memcpy(h.data() + 6, &type, 2);
  memcpy(h.data() + 8, &bytes, 4);
  return h;
}

std::string ErrorOf(const std::vector<uint8_t>& bytes, FrameLimits limits = {}) {
  std::string error;
  const std::optional<Message> m = DecodeOne(bytes, 0, &error, limits);
  CHECK_FALSE(m.has_value());
  return error;
}

TEST_CASE("malformed frames are refused with a reason") {
  CHECK_THAT(ErrorOf(Header(0xdeadbeef, 1, 1, 0)), Catch::Contains("magic"));
  CHECK_THAT(ErrorOf(Header(kFrameMagic, 2, 1, 0)), Catch::Contains("protocol version 2"));
  CHECK_THAT(ErrorOf(Header(kFrameMagic, 1, 0, 0)), Catch::Contains("unknown message type"));
  CHECK_THAT(ErrorOf(Header(kFrameMagic, 1, 99, 0)), Catch::Contains("unknown message type"));
  // Oversized: refused on the header alone, before the payload arrives.
  CHECK_THAT(ErrorOf(Header(kFrameMagic, 1, 1, 64 * 1024 + 1)), Catch::Contains("exceeds the cap"));
  FrameLimits small;
  small.profile_bytes = 100;
  CHECK_THAT(ErrorOf(EncodeFrame(ExitProfile{T(1), std::string(200, 'x')}), small),
             Catch::Contains("exceeds the cap"));
  // Trailing bytes after the last field.
  std::vector<uint8_t> f = EncodeFrame(GatherProfile{1});
  f.push_back(0);
  uint32_t n = 9;
  memcpy(f.data() + 8, &n, 4);
  CHECK_THAT(ErrorOf(f), Catch::Contains("after the last field"));
  // A field cut short.
  f = Header(kFrameMagic, 1, static_cast<uint16_t>(MessageType::kGatherProfile), 4);
  f.insert(f.end(), {1, 2, 3, 4});
  CHECK_THAT(ErrorOf(f), Catch::Contains("do not decode"));
  // A string claiming more bytes than there are.
  Hello hello;
  hello.pid = ProcessId::FromNumber(5);
  hello.name = "abc";
  f = EncodeFrame(hello);
  f[12 + 4 + 4 + 4] = 0x7e;  // The name's length prefix: 63 bytes.
  CHECK_FALSE(ErrorOf(f).empty());
  // A literal-string encoding (an address in the sender's memory) is never accepted.
  f = EncodeFrame(hello);
  f[12 + 4 + 4 + 4] |= 1;
  CHECK_FALSE(ErrorOf(f).empty());
  // Wrong protocol version inside Hello.
  hello.protocol_version = 9;
  CHECK_THAT(ErrorOf(EncodeFrame(hello)), Catch::Contains("protocol version 9"));
  hello.protocol_version = kProtocolVersion;
  hello.pid = ProcessId::FromNumber(-3);
  CHECK_THAT(ErrorOf(EncodeFrame(hello)), Catch::Contains("pid"));
  // Impossible updates.
  CHECK_THAT(ErrorOf(EncodeFrame(ChunkManagerUpdate{
                 Update(1, 65536, T(20), {{T(20), 65536}, {T(10), 65536}})})),
             Catch::Contains("out of order"));
  CHECK_THAT(ErrorOf(EncodeFrame(ChunkManagerUpdate{Update(1, 65536, T(20), {{T(10), 65536}})})),
             Catch::Contains("older than the oldest"));
  CHECK_THAT(ErrorOf(EncodeFrame(ChunkManagerUpdate{Update(1, 10, T(20), {{T(20), 65536}})})),
             Catch::Contains("exceed"));
  f = EncodeFrame(ChunkManagerUpdate{Update(1, 0, TimeStamp(), {})});
  f[12] = 3;  // Unknown update kind.
  CHECK_THAT(ErrorOf(f), Catch::Contains("update kind"));
  f = EncodeFrame(ChunkManagerUpdate{Update(1, 0, TimeStamp(), {})});
  memset(f.data() + 13, 0xff, 8);  // Unreleased bytes = 2^64 - 1 (Update's own "no update").
  CHECK_THAT(ErrorOf(f), Catch::Contains("impossible"));
  SessionState state;
  state.interval_ms = -1;
  CHECK_THAT(ErrorOf(EncodeFrame(state)), Catch::Contains("interval"));
  CHECK_THAT(ErrorOf(EncodeFrame(GatherProfileProgress{1, kProgressOne + 1, ""})),
             Catch::Contains("progress"));
}

TEST_CASE("a reader stays failed after a malformed frame") {
  FrameReader reader;
  const std::vector<uint8_t> bad = Header(0, 1, 1, 0);
  reader.Append(bad.data(), bad.size());
  Message m;
  CHECK(reader.Next(&m) == FrameReader::Status::kMalformed);
  const std::vector<uint8_t> good = EncodeFrame(GatherProfile{1});
  reader.Append(good.data(), good.size());
  CHECK(reader.Next(&m) == FrameReader::Status::kMalformed);
}

// --- Fuzzing: the decoder never crashes, never reads out of bounds (run under ASan in the
// sanitizer job), never allocates beyond what the frame size allows, and whatever it
// accepts re-encodes to a frame that decodes to the same thing.

void CheckAccepted(const Message& m) {
  const std::vector<uint8_t> again = EncodeFrame(m);
  std::optional<Message> twice = DecodeOne(again);
  REQUIRE(twice.has_value());
  CHECK(EncodeFrame(*twice) == again);
}

TEST_CASE("fuzz: random payloads for every message type") {
  std::mt19937_64 random(12345);
  size_t accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    const uint16_t type = static_cast<uint16_t>(random() % kLastMessageType + 1);
    std::vector<uint8_t> payload(random() % 64);
    for (uint8_t& b : payload) {
      // Small values are far more likely to form valid lengths and bools.
      b = static_cast<uint8_t>(random() % 4 == 0 ? random() : random() % 3);
    }
    std::string error;
    std::optional<Message> m =
        DecodePayload(static_cast<MessageType>(type), payload.data(), payload.size(), &error);
    if (m) {
      ++accepted;
      CheckAccepted(*m);
    } else {
      CHECK_FALSE(error.empty());
    }
  }
  INFO("accepted " << accepted);
  CHECK(accepted > 0);
}

TEST_CASE("fuzz: random and mutated byte streams through the frame reader") {
  std::mt19937_64 random(99);
  std::vector<std::vector<uint8_t>> seeds;
  Hello hello;
  hello.pid = ProcessId::FromNumber(77);
  hello.name = "seed";
  seeds.push_back(EncodeFrame(hello));
  SessionState state;
  state.thread_filters = {"a", "bc"};
  seeds.push_back(EncodeFrame(state));
  seeds.push_back(EncodeFrame(ChunkManagerUpdate{
      Update(65536, 131072, T(5), {{T(5), 65536}, {T(6), 65536}})}));
  seeds.push_back(EncodeFrame(GatherProfileReply{3, true, "{\"x\":1}", {}}));
  seeds.push_back(EncodeFrame(GatherProfileProgress{3, 5, "loc"}));
  seeds.push_back(EncodeFrame(ExitProfile{T(9), "{}"}));
  FrameLimits limits;
  limits.profile_bytes = 4096;
  for (int i = 0; i < 100000; ++i) {
    std::vector<uint8_t> bytes;
    switch (random() % 3) {
      case 0:  // Pure noise.
        bytes.resize(random() % 96);
        for (uint8_t& b : bytes) b = static_cast<uint8_t>(random());
        break;
      case 1: {  // A valid frame with a few bytes changed.
        bytes = seeds[random() % seeds.size()];
        const int flips = static_cast<int>(random() % 4) + 1;
        for (int k = 0; k < flips; ++k) bytes[random() % bytes.size()] = static_cast<uint8_t>(random());
        break;
      }
      default: {  // A valid frame, truncated or extended, with a plausible header.
        bytes = seeds[random() % seeds.size()];
        if (random() % 2) {
          bytes.resize(random() % bytes.size());
        } else {
          for (int k = static_cast<int>(random() % 8); k > 0; --k) bytes.push_back(static_cast<uint8_t>(random()));
        }
        break;
      }
    }
    FrameReader reader(limits);
    // Fed in random pieces.
    for (size_t at = 0; at < bytes.size();) {
      const size_t n = std::min<size_t>(random() % 16 + 1, bytes.size() - at);
      reader.Append(bytes.data() + at, n);
      at += n;
      Message m;
      FrameReader::Status status;
      while ((status = reader.Next(&m)) == FrameReader::Status::kMessage) CheckAccepted(m);
      if (status == FrameReader::Status::kMalformed) {
        CHECK_FALSE(reader.error().empty());
        break;
      }
    }
    CHECK(reader.buffered_bytes() <= bytes.size());
  }
}


TEST_CASE("a large frame waits for admission; a skipped one is thrown away as it arrives") {
  FrameLimits limits;
  limits.admission_above_bytes = 1024;
  ExitProfile big;
  big.end_time = TimeStamp::FromNanoseconds(7);
  big.profile = std::string(100000, 'x');
  GatherProfile small{42};
  const std::vector<uint8_t> big_frame = EncodeFrame(big), small_frame = EncodeFrame(small);
  for (const bool admit : {false, true}) {
    FrameReader reader(limits);
    reader.Append(big_frame.data(), 100);  // The header and a little.
    Message message;
    MessageType type;
    size_t bytes = 0;
    REQUIRE(reader.Next(&message, &type, &bytes) == FrameReader::Status::kNeedsAdmission);
    CHECK(type == MessageType::kExitProfile);
    CHECK(bytes == big_frame.size());
    CHECK(reader.AwaitingAdmission());
    if (admit) {
      reader.Admit();
    } else {
      reader.Skip();
      CHECK(reader.skipping_bytes() == big_frame.size() - 100);
      CHECK(reader.buffered_bytes() == 0);
    }
    // The rest in pieces, then a small frame.
    for (size_t at = 100; at < big_frame.size(); at += 7000) {
      reader.Append(big_frame.data() + at, std::min<size_t>(7000, big_frame.size() - at));
      if (!admit) CHECK(reader.buffered_bytes() == 0);  // Never held.
    }
    reader.Append(small_frame.data(), small_frame.size());
    if (admit) {
      REQUIRE(reader.Next(&message) == FrameReader::Status::kMessage);
      CHECK(std::get<ExitProfile>(message).profile == big.profile);
    }
    REQUIRE(reader.Next(&message) == FrameReader::Status::kMessage);
    CHECK(std::get<GatherProfile>(message).request_id == 42);
    CHECK(reader.Next(&message) == FrameReader::Status::kNeedMore);
  }
}

TEST_CASE("a header announcing a huge payload reserves nothing") {
  FrameReader reader;
  const std::vector<uint8_t> frame = EncodeFrame(ExitProfile{TimeStamp::FromNanoseconds(1),
                                                             std::string(1000, 'y')});
  std::vector<uint8_t> header(frame.begin(), frame.begin() + 12);
  const uint32_t huge = 200u << 20;  // Under the 256 MiB cap.
  std::memcpy(header.data() + 8, &huge, 4);
  reader.Append(header.data(), header.size());
  Message message;
  CHECK(reader.Next(&message) == FrameReader::Status::kNeedMore);
  CHECK(reader.buffered_bytes() == 12);
}

}  // namespace
}  // namespace ipc
}  // namespace strata
