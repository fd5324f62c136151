// Samples written with shared prefixes (issue 38; sample_entries.h, PutSampleEntry): random
// stacks whose root sides repeat read back byte for byte as the whole samples the sampler
// wrote before (Serializer<MergedStack>), from the oldest block and from a thread's first
// block, after the oldest chunks were destroyed; the profile written from them is the
// profile written from whole samples; a deep stack whose leaf moves takes a few bytes.
#include "base/internal/sample_entries.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"
#include "shared/buffer/local_limit_chunk_manager.h"
#include "shared/json/json_writer.h"
#include "shared/profile/profile_capture.h"
#include "shared/profile/sample_entry.h"

namespace strata {
namespace base_internal {
namespace {

const char* const kLabelNames[] = {"main loop", "parse", "render frame", "flush"};

// One thread's stack as a program would move it: root first, each frame 64 bytes below its
// caller, with a label now and then.
struct StackModel {
  struct Frame {
    uintptr_t pc;
    bool label;
    bool dynamic;
  };
  std::vector<Frame> frames;  // Root first.
  uintptr_t top = 0;

  // Returns to a random depth (usually near the leaf), then calls down a few new frames; now
  // and then a deep dive towards the slot's limit.
  void Move(std::mt19937_64& random) {
    size_t keep = frames.size();
    if (random() % 5 == 0) {
      keep = frames.empty() ? 0 : random() % frames.size();
    } else {
      keep -= std::min<size_t>(keep, random() % 4);
    }
    frames.resize(keep);
    size_t add = 1 + random() % 6;
    if (random() % 40 == 0) add = random() % SampleSlot::kMaxNativeFrames;
    for (size_t i = 0; i < add && frames.size() < SampleSlot::kMaxNativeFrames; ++i) {
      frames.push_back(Frame{0x400000 + random() % 64 * 16, random() % 11 == 0, random() % 2 == 0});
    }
  }

  void Fill(SampleSlot* slot, int64_t time_ns, std::mt19937_64& random) const {
    slot->time_ns = time_ns;
    slot->cpu_ns = -1;
    slot->overruns = 0;
    slot->in_system_call = false;
    const uint32_t count = static_cast<uint32_t>(frames.size());
    slot->native_count = count;
    uint32_t labels = 0;
    for (uint32_t k = 0; k < count; ++k) {  // k: root first; natives: innermost first.
      const uintptr_t sp = top - 64 * k;
      slot->natives[count - 1 - k] = NativeFrame{frames[k].pc, sp};
      if (frames[k].label && labels < SampleSlot::kMaxLabels) {
        SampleSlot::Label& label = slot->labels[labels++];
        label.label = kLabelNames[frames[k].pc % 4];
        label.stack_address = sp - 8;
        label.category = static_cast<uint32_t>(frames[k].pc % 7);
        label.has_dynamic = frames[k].dynamic;
        label.push_site = frames[k].pc % 3 == 0 ? 0x600000 + k : 0;  // Some with a push site.
        std::snprintf(label.dynamic, sizeof(label.dynamic), "item %u", static_cast<unsigned>(k % 5));
      }
    }
    slot->label_count = labels;
    slot->script_frame_count = 0;
    slot->script_text_bytes = 0;
    // A leaf that moves between samples (the usual case), kept off now and then.
    if (count > 0 && random() % 3 != 0) slot->natives[0].pc += 1 + random() % 40;
  }
};

// The frame list a whole kSample carries for `slot` ([ULEB128 count][frames]).
std::vector<uint8_t> WholeFrameList(const SampleSlot& slot) {
  const MergedStack merged{&slot};
  std::vector<uint8_t> bytes(Serializer<MergedStack>::Bytes(merged));
  EntryWriter writer(bytes.data(), bytes.size(), nullptr, 0);
  Serializer<MergedStack>::Write(writer, merged);
  REQUIRE(writer.RemainingBytes() == 0);
  return bytes;
}

constexpr int kThreads = 3;

ThreadId TidOf(int t) { return ThreadId::FromNumber(2000 + t); }

struct Written {
  std::map<std::pair<int32_t, int64_t>, std::vector<uint8_t>> lists;  // (tid, time) -> list.
  size_t samples = 0;
};

// Writes `samples` random samples of kThreads threads into `buffer` with PutSampleEntry (and,
// when given, the same samples whole into `whole`).
Written WriteRandomSamples(ChunkedBuffer& buffer, ChunkedBuffer* whole, int samples,
                           uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<StackModel> models(kThreads);
  for (int t = 0; t < kThreads; ++t) models[t].top = 0x7ffd00000000 - (static_cast<uintptr_t>(t) << 24);
  std::vector<std::unique_ptr<PreviousSampleStack>> previous;
  for (int t = 0; t < kThreads; ++t) previous.push_back(std::make_unique<PreviousSampleStack>());
  auto slot = std::make_unique<SampleSlot>();
  Written written;
  int64_t time_ns = 1000000000;
  for (int n = 0; n < samples; ++n) {
    const int t = static_cast<int>(random() % kThreads);
    models[t].Move(random);
    time_ns += 1 + static_cast<int64_t>(random() % 1000000);
    models[t].Fill(slot.get(), time_ns, random);
    const TimeStamp time = TimeStamp::FromNanoseconds(time_ns);
    const int64_t cpu_delta = static_cast<int64_t>(random() % 2000000);
    REQUIRE(PutSampleEntry(buffer, *previous[t], TidOf(t), time, cpu_delta, 0, *slot));
    if (whole) {
      REQUIRE(whole->PutObjects(EntryKind::kSample, TidOf(t), time, cpu_delta, int32_t{0},
                                MergedStack{slot.get()}));
    }
    written.lists[{TidOf(t).ToNumber(), time_ns}] = WholeFrameList(*slot);
    ++written.samples;
    // Another writer's sample of the thread (a wait's stack) makes the next one whole.
    if (random() % 50 == 0) previous[t]->Forget();
  }
  return written;
}

struct ReadCounts {
  size_t whole = 0;
  size_t shared = 0;
  size_t stored_bytes = 0;
};

// Reads `buffer` from `start` (the oldest block when null), keeping only `only_thread`'s
// samples when it is not -1; every sample must expand to what was written.
ReadCounts ReadBack(const ChunkedBuffer& buffer, const Written& written, BlockIndex start = BlockIndex(),
                    int32_t only_thread = -1) {
  std::map<int32_t, profile::SampleFrameHistory> histories;
  ReadCounts counts;
  buffer.ReadEachFrom(start, [&](EntryReader& reader) {
    const size_t entry_bytes = reader.RemainingBytes();
    const EntryKind kind = reader.ReadObject<EntryKind>();
    REQUIRE((kind == EntryKind::kSample || kind == EntryKind::kSampleSharedPrefix));
    ThreadId tid;
    TimeStamp time;
    int64_t cpu_delta = 0;
    int32_t overruns = 0;
    reader.ReadIntoObjects(tid, time, cpu_delta, overruns);
    REQUIRE_FALSE(reader.Failed());
    if (only_thread != -1 && tid.ToNumber() != only_thread) return;
    profile::SampleFrameHistory& history = histories[tid.ToNumber()];
    std::vector<uint8_t> list;
    if (kind == EntryKind::kSample) {
      list.resize(reader.RemainingBytes());
      reader.ReadBytes(list.data(), list.size());
      history.Remember(time, list.data(), list.size());
      ++counts.whole;
    } else {
      const uint8_t* expanded = nullptr;
      size_t size = 0;
      REQUIRE(history.Expand(reader, time, &expanded, &size));
      list.assign(expanded, expanded + size);
      ++counts.shared;
    }
    REQUIRE_FALSE(reader.Failed());
    REQUIRE(reader.RemainingBytes() == 0);
    counts.stored_bytes += entry_bytes;
    const auto it = written.lists.find({tid.ToNumber(), time.ToNanoseconds()});
    REQUIRE(it != written.lists.end());
    REQUIRE(list == it->second);
  });
  return counts;
}

TEST_CASE("Samples with shared prefixes read back exactly, also after the oldest chunks went") {
  // A small limit: most chunks are destroyed, and readings start in the middle of histories.
  LocalLimitChunkManager manager(/*max_total_bytes=*/192 << 10, /*chunk_min_buffer_bytes=*/16 << 10);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  const Written written = WriteRandomSamples(buffer, nullptr, 6000, 38);
  CHECK(buffer.GetState().cleared_block_count > 1000);
  const ReadCounts all = ReadBack(buffer, written);
  CHECK(all.whole + all.shared > 100);
  CHECK(all.shared > 2 * all.whole);
  // A streamed thread's reading starts at its first block.
  for (int t = 0; t < kThreads; ++t) {
    BlockIndex first;
    buffer.ReadEach([&](EntryReader& reader) {
      EntryReader peek = reader;
      peek.ReadObject<EntryKind>();
      if (!first && peek.ReadObject<ThreadId>() == TidOf(t)) first = reader.CurrentBlockIndex();
    });
    REQUIRE(first);
    const ReadCounts one = ReadBack(buffer, written, first, TidOf(t).ToNumber());
    CHECK(one.whole + one.shared > 10);
  }
}

TEST_CASE("A deep stack whose leaf moves takes a few bytes a sample") {
  LocalLimitChunkManager manager(/*max_total_bytes=*/8 << 20, /*chunk_min_buffer_bytes=*/64 << 10);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  auto slot = std::make_unique<SampleSlot>();
  PreviousSampleStack previous;
  Written written;
  std::mt19937_64 random(7);
  StackModel model;
  model.top = 0x7ffd00000000;
  for (int k = 0; k < 1000; ++k) model.frames.push_back({0x500000 + uintptr_t(k % 3) * 16, false, false});
  for (int n = 0; n < 200; ++n) {
    const int64_t time_ns = 1000000 * (n + 1);
    model.Fill(slot.get(), time_ns, random);
    REQUIRE(PutSampleEntry(buffer, previous, TidOf(0), TimeStamp::FromNanoseconds(time_ns), 0, 0, *slot));
    written.lists[{TidOf(0).ToNumber(), time_ns}] = WholeFrameList(*slot);
  }
  const ReadCounts counts = ReadBack(buffer, written);
  REQUIRE(counts.whole + counts.shared == 200);
  // A whole sample is ~9 KiB (1 000 frames of 9 bytes); the others name what they share.
  CHECK(counts.whole <= 2);
  CHECK(counts.stored_bytes < 200 * 100 + counts.whole * 9100);
}

TEST_CASE("Frames too large for the scratch are written whole, and the next one too") {
  LocalLimitChunkManager manager(/*max_total_bytes=*/8 << 20, /*chunk_min_buffer_bytes=*/64 << 10);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  auto slot = std::make_unique<SampleSlot>();
  PreviousSampleStack previous;
  Written written;
  std::mt19937_64 random(9);
  StackModel model;
  model.top = 0x7ffd00000000;
  for (int k = 0; k < 900; ++k) model.frames.push_back({0x500000 + uintptr_t(k) * 16, false, false});
  for (int n = 0; n < 6; ++n) {
    const int64_t time_ns = 1000000 * (n + 1);
    model.Fill(slot.get(), time_ns, random);
    if (n == 2 || n == 3) {
      // Script frames whose texts share 400 bytes of the pool: over the scratch.
      slot->script_frame_count = SampleSlot::kMaxScriptFrames;
      slot->script_text_bytes = 400;
      std::memset(slot->script_text, 'x', 400);
      for (uint32_t i = 0; i < SampleSlot::kMaxScriptFrames; ++i) {
        slot->script_frames[i] = SampleSlot::ScriptFrame{
            uintptr_t{0x7ffd00000000} - 64 * uintptr_t{i} - 4, 1, 1, 0, 400, 1, 0, 0, 0};
      }
    }
    REQUIRE(PutSampleEntry(buffer, previous, TidOf(0), TimeStamp::FromNanoseconds(time_ns), 0, 0, *slot));
    written.lists[{TidOf(0).ToNumber(), time_ns}] = WholeFrameList(*slot);
  }
  const ReadCounts counts = ReadBack(buffer, written);
  // Whole: the first, the two large ones and the one after them (nothing to share with).
  CHECK(counts.whole == 4);
  CHECK(counts.shared == 2);
}

TEST_CASE("The profile of shared-prefix samples is the profile of the same samples whole") {
  LocalLimitChunkManager shared_manager(/*max_total_bytes=*/64 << 20, /*chunk_min_buffer_bytes=*/64 << 10);
  LocalLimitChunkManager whole_manager(/*max_total_bytes=*/64 << 20, /*chunk_min_buffer_bytes=*/64 << 10);
  ChunkedBuffer shared(ThreadSafety::kThreadSafe, shared_manager);
  ChunkedBuffer whole(ThreadSafety::kThreadSafe, whole_manager);
  WriteRandomSamples(shared, &whole, 3000, 11);
  profile::CaptureInputs inputs;
  inputs.start_time = TimeStamp::FromNanoseconds(1000000000);
  inputs.meta.start_time = inputs.start_time;
  inputs.meta.product = "shared prefix test";
  inputs.process_name = "shared prefix test";
  inputs.symbolicate = false;
  const auto capture = [&](const ChunkedBuffer& buffer) {
    ChunkedJsonWriter w;
    std::string error;
    REQUIRE(profile::WriteProfile(inputs, buffer, w, &error));
    return w.TakeString();
  };
  // Up to the profiling log, which counts the buffer's chunks (fewer with shared prefixes).
  const auto without_log = [](std::string json) {
    const size_t log = json.rfind("\"profilingLog\"");
    REQUIRE(log != std::string::npos);
    json.resize(log);
    return json;
  };
  const std::string from_shared = without_log(capture(shared));
  const std::string from_whole = without_log(capture(whole));
  CHECK(from_shared.size() > 10000);
  // Compared whole, reported at the first difference (the documents are long).
  size_t same = 0;
  while (same < from_shared.size() && same < from_whole.size() && from_shared[same] == from_whole[same]) ++same;
  INFO("first difference at " << same << ": " << from_shared.substr(same > 200 ? same - 200 : 0, 400)
                              << "\n---- whole: " << from_whole.substr(same > 200 ? same - 200 : 0, 400));
  CHECK(same == from_whole.size());
  CHECK(from_shared.size() == from_whole.size());
  CHECK(shared.GetState().range_end - shared.GetState().range_start <
        (whole.GetState().range_end - whole.GetState().range_start) / 2);
}

}  // namespace
}  // namespace base_internal
}  // namespace strata
