#include "shared/profile/profile_capture.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "shared/buffer/entry_kinds.h"
#include "shared/json/index_table.h"
#include "shared/json/location.h"
#include "shared/json/shared_libraries.h"
#include "shared/profile/sample_entry.h"
#include "shared/progress/proportion_value.h"
#include "shared/symbols/elf_symbolizer.h"
#include "shared/symbols/perf_map.h"

namespace strata {
namespace profile {
namespace {

// The entries that are samples of a thread (each starts with the ThreadId, then its time).
bool IsSampleKind(EntryKind kind) {
  return kind == EntryKind::kSample || kind == EntryKind::kSampleSharedPrefix ||
         kind == EntryKind::kSameSample || kind == EntryKind::kUnknownWait;
}

// Native addresses of the session resolved in one batch. Leaf addresses are looked up as
// they are, return addresses one byte earlier (inside the call instruction). The keys are
// de-duplicated in a flat table (every frame of every sample passes through Note()).
// A named frame keeps its library (index into `libs`, the list the profile writes) and its
// raw lib-relative address, so that `strata symbolicate` can later add inline frames and
// file:line from DWARF (docs/symbols.md, "Addresses kept beside names").
class AddressNames {
 public:
  void Note(uint64_t address, bool is_leaf) {
    const uint64_t key = is_leaf ? address : CallerAddress(address);
    const uint32_t next = static_cast<uint32_t>(keys_.size());
    if (index_.FindOrInsert(json_internal::MixHash(key), next,
                            [&](uint32_t i) { return keys_[i] == key; }) == next) {
      keys_.push_back(key);
    }
  }
  // `libs` (sorted by start, as the symbolizer's) must outlive the Frame() calls.
  void Resolve(Symbolizer& symbolizer, const std::vector<SharedLibrary>& libs) {
    libs_ = &libs;
    symbolizer.Symbolize(keys_, &result_);
  }
  // Writes the frame for `address` into `stacks` (the caller caches the answer per thread).
  uint32_t Frame(UniqueStacks& stacks, uint64_t address, bool is_leaf) {
    const uint64_t key = is_leaf ? address : CallerAddress(address);
    // An address pass 1 did not see (written meanwhile) comes back as `absent`.
    const uint32_t absent = static_cast<uint32_t>(keys_.size());
    const uint32_t found = index_.Find(json_internal::MixHash(key), absent,
                                       [&](uint32_t i) { return keys_[i] == key; });
    if (found == absent || found >= result_.addresses.size()) return stacks.AddressFrame(address);
    const SymbolizedAddress& a = result_.addresses[found];
    if (a.module.empty()) return stacks.AddressFrame(address);
    return stacks.NativeSymbolFrame(result_.NameOf(found), a.module, std::nullopt, std::nullopt,
                                    std::nullopt, NativeAddressOf(address, key));
  }

 private:
  // The library holding `key` (the looked-up address) and `address` relative to it.
  std::optional<NativeAddress> NativeAddressOf(uint64_t address, uint64_t key) const {
    if (libs_ == nullptr) return std::nullopt;
    const std::vector<SharedLibrary>& libs = *libs_;
    auto after = std::upper_bound(libs.begin(), libs.end(), key,
                                  [](uint64_t k, const SharedLibrary& l) { return k < l.start; });
    if (after == libs.begin()) return std::nullopt;
    const SharedLibrary& lib = *(after - 1);
    if (key >= lib.end || lib.start < lib.offset) return std::nullopt;
    return NativeAddress{address - (lib.start - lib.offset), static_cast<uint32_t>(after - 1 - libs.begin())};
  }

  const std::vector<SharedLibrary>* libs_ = nullptr;
  json_internal::IndexTable index_;  // Into keys_.
  std::vector<uint64_t> keys_;
  SymbolizeResult result_;
};

// A thread's native frames by (address, leaf or not): each distinct address is symbolicated
// and turned into a frameTable row once per thread, not once per sample.
class NativeFrameCache {
 public:
  template <typename MakeFrame>
  uint32_t Frame(uint64_t address, bool is_leaf, const MakeFrame& make_frame) {
    const uint64_t key = (address << 1) | (is_leaf ? 1 : 0);
    const uint32_t next = static_cast<uint32_t>(entries_.size());
    const uint32_t i = index_.FindOrInsert(json_internal::MixHash(key), next,
                                           [&](uint32_t e) { return entries_[e].key == key; });
    if (i != next) return entries_[i].frame;
    entries_.push_back(Entry{key, 0});
    const uint32_t frame = make_frame();
    entries_[i].frame = frame;
    return frame;
  }

 private:
  struct Entry {
    uint64_t key;
    uint32_t frame;
  };
  std::vector<Entry> entries_;
  json_internal::IndexTable index_;
};

// The distinct frame lists of a capture: the serialized frames that end each kSample entry,
// byte for byte. Samples repeat their stacks, so a list seen before costs one hash lookup and
// a memcmp per pass instead of work per frame (pass 1: noting its addresses; pass 2: turning
// it into frames and a stack, cached per thread by list id). Equality is exact (the bytes are
// kept); the kept bytes are capped, and past the cap new lists simply take the per-frame path.
class FrameListTable {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr size_t kMaxKeptBytes = size_t{32} << 20;

  // The id of the list `bytes[0, size)`, or kNone.
  uint32_t Find(const uint8_t* bytes, size_t size) const {
    return index_.Find(Hash(bytes, size), kNone,
                       [&](uint32_t id) { return Equals(id, bytes, size); });
  }
  // The id of the list, added if new while there is room (*added tells); kNone when there
  // is no room for it.
  uint32_t FindOrAdd(const uint8_t* bytes, size_t size, bool* added) {
    *added = false;
    const uint64_t hash = Hash(bytes, size);
    const uint32_t found =
        index_.Find(hash, kNone, [&](uint32_t id) { return Equals(id, bytes, size); });
    if (found != kNone || arena_.size() + size > kMaxKeptBytes) return found;
    const uint32_t id = static_cast<uint32_t>(entries_.size());
    index_.FindOrInsert(hash, id, [](uint32_t) { return false; });
    entries_.push_back(Entry{arena_.size(), static_cast<uint32_t>(size)});
    arena_.insert(arena_.end(), bytes, bytes + size);
    *added = true;
    return id;
  }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    size_t offset;
    uint32_t size;
  };
  static uint64_t Hash(const uint8_t* bytes, size_t size) {
    return json_internal::HashBytes(bytes, size);
  }
  bool Equals(uint32_t id, const uint8_t* bytes, size_t size) const {
    const Entry& e = entries_[id];
    return e.size == size && std::memcmp(arena_.data() + e.offset, bytes, size) == 0;
  }

  std::vector<uint8_t> arena_;
  std::vector<Entry> entries_;
  json_internal::IndexTable index_;  // Into entries_.
};

struct ThreadState {
  std::unique_ptr<GeckoThreadWriter> writer;
  // Pass 1: the thread's samples and markers up to the capture's last block, and the blocks
  // of its first sample and first marker (where its streamed passes start).
  uint64_t entries = 0;
  BlockIndex first_sample_block;
  BlockIndex first_marker_block;
  // Written straight into the document by passes of its own (ProfileBuilder::
  // ChooseStreamedThreads); otherwise buffered by the shared pass and spliced.
  bool streamed = false;
  // An ended thread (not the main one): left out when the buffer no longer holds any row of
  // it by the time its rows are read (its oldest chunk was recycled since pass 1).
  bool left_out_if_empty = false;
  std::optional<uint32_t> last_stack;
  // The thread's latest sample frames in the current reading (kSampleSharedPrefix).
  SampleFrameHistory frame_history;
  NativeFrameCache native_frames;
  // The stack of each FrameListTable id in this thread's tables: kUnknownStack until the
  // list is first met here, kEmptyStack for a sample without frames.
  static constexpr uint32_t kUnknownStack = UINT32_MAX;
  static constexpr uint32_t kEmptyStack = UINT32_MAX - 1;
  std::vector<uint32_t> stack_by_frame_list;
};

class ProfileBuilder {
 public:
  explicit ProfileBuilder(const CaptureInputs& inputs)
      : inputs_(inputs), symbolicate_(inputs.symbolicate), pid_(inputs.pid.value_or(CurrentProcessId())),
        process_name_(inputs.process_name) {
    // Live threads (and the main thread) are listed even without data; an ended thread
    // only once its data is met in the buffer, so that a process that made many short
    // threads pays no writer for those of which nothing is left.
    for (const CaptureThread& info : inputs.threads) {
      if (info.unregister_time && !info.is_main) {
        ended_threads_.emplace(info.tid.ToNumber(), &info);
      } else {
        AddThread(info.tid, DescriptionOf(info), info.is_main);
      }
    }
  }

  // Pass 1: every thread's entry count and first blocks, the latest sample time (moved into
  // *latest_sample), the counters and the sampler's overhead (small, kept in memory), and
  // the addresses to symbolicate.
  void NoteEntry(EntryReader& reader, TimeStamp& latest_sample, TimeStamp& latest_marker,
                 TimeStamp& earliest) {
    const auto note_earliest = [&earliest](TimeStamp t) {
      if (!t.IsNull() && (earliest.IsNull() || t < earliest)) earliest = t;
    };
    EntryReader peek = reader;
    const EntryKind kind = peek.ReadObject<EntryKind>();
    switch (kind) {
      case EntryKind::kSample:
      case EntryKind::kSampleSharedPrefix:
      case EntryKind::kSameSample:
      case EntryKind::kUnknownWait:
      case EntryKind::kMarker: {
        ThreadId tid;  // All five start with the thread; samples then with their time,
        peek.ReadIntoObject(tid);  // markers with their phase, start and end (MarkerHeader).
        if (kind != EntryKind::kMarker) {
          TimeStamp time;
          peek.ReadIntoObject(time);
          if (!peek.Failed() && time > latest_sample) latest_sample = time;
          if (!peek.Failed()) note_earliest(time);
        } else {
          MarkerPhase phase;
          TimeStamp start, end;
          peek.ReadIntoObject(phase);
          peek.ReadIntoObject(start);
          peek.ReadIntoObject(end);
          if (!peek.Failed()) {
            if (start > latest_marker) latest_marker = start;
            if (end > latest_marker) latest_marker = end;
            note_earliest(start);
            note_earliest(end);
          }
        }
        if (peek.Failed()) return;
        ThreadState& thread = ThreadFor(tid);
        ++thread.entries;
        ++total_entries_;
        BlockIndex& first =
            kind == EntryKind::kMarker ? thread.first_marker_block : thread.first_sample_block;
        if (!first) first = reader.CurrentBlockIndex();
        break;
      }
      case EntryKind::kCounterSample:
      case EntryKind::kProfilerOverhead:
        AddEntry(reader);
        return;
      default:
        return;
    }
    NoteAddresses(reader);
  }

  // Streams the threads that hold at least 1/kStreamShare of the entries (and at least
  // kMinStreamedEntries): the others are buffered, so the text held in memory is at most
  // about (kStreamShare - 1)/kStreamShare of the rows when all threads are small, and
  // usually far less. Each streamed thread costs two more reads of the buffer (samples, then
  // markers), so their number is bounded by kStreamShare.
  void ChooseStreamedThreads() {
    for (auto& [key, state] : threads_) {
      (void)key;
      state.streamed = state.entries >= kMinStreamedEntries &&
                       state.entries * kStreamShare >= total_entries_;
      if (!state.streamed) buffered_entries_ += state.entries;
    }
  }
  bool has_buffered_entries() const { return buffered_entries_ != 0; }
  size_t streamed_thread_count() const {
    size_t n = 0;
    for (const auto& [key, state] : threads_) n += state.streamed ? 1 : 0;
    return n;
  }

  // The threads in document order (main first, then by thread id).
  template <typename F>
  void ForEachThread(F&& f) {
    for (auto& [key, state] : threads_) {
      (void)key;
      f(state);
    }
  }

  // Pass 2, shared: the samples and markers of the buffered threads.
  void AddBufferedEntry(EntryReader& reader) {
    EntryReader peek = reader;
    const EntryKind kind = peek.ReadObject<EntryKind>();
    if (!IsSampleKind(kind) && kind != EntryKind::kMarker) return;
    ThreadId tid;
    peek.ReadIntoObject(tid);
    if (peek.Failed() || ThreadFor(tid).streamed) return;
    AddEntry(reader);
  }
  // Pass 2 of one streamed thread: its samples (`markers` false) or its markers.
  void AddStreamedEntry(EntryReader& reader, ThreadId thread, bool markers) {
    EntryReader peek = reader;
    const EntryKind kind = peek.ReadObject<EntryKind>();
    if (markers ? kind != EntryKind::kMarker : !IsSampleKind(kind)) return;
    ThreadId tid;
    peek.ReadIntoObject(tid);
    if (peek.Failed() || tid != thread) return;
    AddEntry(reader);
  }

  // Every reading of the buffer starts with this: shared-prefix samples resolve against what
  // that reading has read.
  void ForgetSampleFrames() {
    for (auto& [key, state] : threads_) {
      (void)key;
      state.frame_history.Forget();
    }
  }

  // Pass 1: addresses to symbolicate.
  void NoteAddresses(EntryReader& reader) {
    if (!symbolicate_) return;
    const EntryKind kind = reader.ReadObject<EntryKind>();
    if (kind == EntryKind::kSample || kind == EntryKind::kSampleSharedPrefix) {
      if (!ReadSampleHeader(reader, kind, sample_)) return;
      // With moved libraries the same frames name different functions at different times:
      // no frame-list sharing then.
      if (!timeline_.has_moved_libraries()) {
        bool added = false;
        const uint32_t list = frame_lists_.FindOrAdd(frames_.data(), frames_.size(), &added);
        if (list != FrameListTable::kNone && !added) return;  // Its addresses are noted already.
      }
      EntryReader frames_reader = EntryReader::OverBytes(frames_);
      if (inputs_.untrusted_literals) {
        frames_reader.SetUntrustedWithResolver(inputs_.untrusted_literals);
      }
      if (!ReadFrames(frames_reader, sample_, sample_frames_)) return;
      MoveAddresses(sample_.frames.data(), sample_frames_, sample_.time);
      ElideOwnFrames(sample_.frames.data(), sample_frames_);
      NoteFrames(sample_.frames.data(), sample_frames_);
    } else if (kind == EntryKind::kMarker) {
      const MarkerHeader header = reader.ReadObject<MarkerHeader>();
      if (reader.Failed()) return;
      std::vector<SampleFrame>& frames = marker_frames_;
      size_t count = DecodeMarkerStack(header.stack, frames);
      MoveAddresses(frames.data(), count, header.start);
      ElideOwnFrames(frames.data(), count);
      NoteFrames(frames.data(), count);
    }
  }

  void ResolveAddresses() {
    if (!symbolicate_) return;
    // The names stay owned by the symbolizer: it lives as long as the builder.
    symbolizer_ = std::make_unique<ElfSymbolizer>(timeline_.libs());
    // JIT code (docs/symbols.md, "JIT code"): addresses in no module named from the perf map
    // and jitdump the process's runtime wrote, as `strata symbolicate` names them.
    if (PerfMap map = PerfMap::ForProcess(pid_.ToNumber()); !map.empty()) {
      symbolizer_ = std::make_unique<PerfMapSymbolizer>(std::move(symbolizer_), std::move(map),
                                                        PerfMap::ModuleNameFor(pid_.ToNumber()));
    }
    names_.Resolve(*symbolizer_, timeline_.libs());
  }

  // Pass 2: every entry into its writer.
  void AddEntry(EntryReader& reader) {
    const EntryKind kind = reader.ReadObject<EntryKind>();
    switch (kind) {
      case EntryKind::kSample:
      case EntryKind::kSampleSharedPrefix: {
        // One record reused for every sample: its frame vector keeps its capacity.
        SampleRecord& record = sample_;
        if (!ReadSampleHeader(reader, kind, record)) return;
        ThreadState& thread = ThreadFor(record.thread);
        const std::optional<uint32_t> stack = SampleStack(thread);
        if (!stack && failed_frames_) return;
        thread.writer->AddSample(stack, record.time,
                                 record.cpu_delta_ns >= 0 ? std::optional<int64_t>(record.cpu_delta_ns)
                                                          : std::nullopt);
        thread.last_stack = stack;
        return;
      }
      case EntryKind::kSameSample: {
        ThreadId tid;
        TimeStamp time;
        int64_t cpu_delta_ns = 0;
        reader.ReadIntoObjects(tid, time, cpu_delta_ns);
        if (reader.Failed()) return;
        ThreadState& thread = ThreadFor(tid);
        if (!thread.last_stack) return;
        thread.writer->AddSample(thread.last_stack, time, std::max<int64_t>(cpu_delta_ns, 0));
        return;
      }
      case EntryKind::kUnknownWait: {
        ThreadId tid;
        TimeStamp time;
        int64_t cpu_delta_ns = 0;
        uint8_t flags = 0, category = 0;
        reader.ReadIntoObjects(tid, time, cpu_delta_ns, flags, category);
        if (reader.Failed()) return;
        ThreadState& thread = ThreadFor(tid);
        if (!thread.last_stack) return;
        thread.last_stack = UnknownWaitStack(thread, *thread.last_stack, flags, category,
                                             cpu_delta_ns > 0);
        thread.writer->AddSample(thread.last_stack, time, std::max<int64_t>(cpu_delta_ns, 0));
        return;
      }
      case EntryKind::kMarker:
        AddMarker(reader);
        return;
      case EntryKind::kCounterSample:
        AddCounterSample(reader);
        return;
      case EntryKind::kProfilerOverhead: {
        OverheadSample s;
        reader.ReadIntoObjects(s.time, s.locking, s.threads, s.counters, s.marker_cleaning);
        if (!reader.Failed()) overhead_.push_back(s);
        return;
      }
      default:
        return;  // Entries of other tiers or kinds we do not write.
    }
  }

  // Adds the counters and the sampler's overhead, after the threads.
  void WriteCountersAndOverhead(GeckoProfileWriter& profile) {
    for (auto& counter : counters_) {
      if (counter.writer && counter.writer->sample_count() > 0) profile.AddCounter(*counter.writer);
    }
    profile.WriteProfilerOverhead(overhead_);
  }

  // Set before pass 1.
  void SetLibraryTimeline(LibraryTimeline timeline) {
    timeline_ = std::move(timeline);
    own_code_.clear();
    if (inputs_.keep_strata_frames) return;
    for (const SharedLibrary& library : timeline_.libs()) {
      if (IsStrataLibrary(library.name)) own_code_.emplace_back(library.start, library.end);
    }
  }
  const std::vector<SharedLibrary>& libs() const { return timeline_.libs(); }
  size_t sample_count() const { return samples_; }

 private:
  struct CounterState {
    std::unique_ptr<GeckoCounterWriter> writer;
    int64_t last_value = 0;
    uint64_t last_operations = 0;
  };

  ThreadDescription DescriptionOf(const CaptureThread& info) const {
    ThreadDescription d;
    d.name = info.name;
    d.process_name = process_name_;
    if (inputs_.kind == GeckoProfileWriter::Kind::kSubProcess) {
      // A child of a multi-process profile: the front-end's child type (not "default", which
      // it takes for the main process), and a name that tells it from its siblings running
      // the same program.
      d.process_type = "tab";
      d.process_name = ChildProcessName(process_name_, pid_.ToNumber());
    }
    d.pid = pid_;
    d.tid = info.tid;
    d.register_time = info.register_time;
    d.unregister_time = info.unregister_time;
    return d;
  }

  void AddThread(ThreadId tid, ThreadDescription description, bool is_main) {
    ThreadState state;
    state.left_out_if_empty = description.unregister_time.has_value() && !is_main;
    state.writer = std::make_unique<GeckoThreadWriter>(std::move(description), inputs_.start_time);
    // The main thread first: std::map orders by key, so main gets key 0.
    threads_.emplace(is_main ? 0 : tid.ToNumber(), std::move(state));
    thread_keys_[tid.ToNumber()] = is_main ? 0 : tid.ToNumber();
  }

  ThreadState& ThreadFor(ThreadId tid) {
    // Entries come in runs of one thread: the last answer first (std::map nodes are stable).
    if (last_thread_ != nullptr && tid.ToNumber() == last_tid_) return *last_thread_;
    auto it = thread_keys_.find(tid.ToNumber());
    if (it == thread_keys_.end()) {
      if (auto ended = ended_threads_.find(tid.ToNumber()); ended != ended_threads_.end()) {
        AddThread(tid, DescriptionOf(*ended->second), ended->second->is_main);
        it = thread_keys_.find(tid.ToNumber());
        last_tid_ = tid.ToNumber();
        last_thread_ = &threads_[it->second];
        return *last_thread_;
      }
      ThreadDescription d;
      d.name = "Thread " + std::to_string(tid.ToNumber());
      d.process_name = process_name_;
      d.pid = pid_;
      d.tid = tid;
      d.register_time = inputs_.start_time;
      AddThread(tid, std::move(d), false);
      it = thread_keys_.find(tid.ToNumber());
    }
    last_tid_ = tid.ToNumber();
    last_thread_ = &threads_[it->second];
    return *last_thread_;
  }

  // Reads a kSample or kSampleSharedPrefix entry's fields into `record` up to its frames,
  // whose serialized list ([ULEB128 count][frames], as a kSample carries it) frames_ then
  // spans: in the buffer itself when it lies in one piece (valid during this visit of the
  // entry), else copied into frame_bytes_; a shared-prefix sample's in its thread's history
  // (valid until its next sample). False, the sample skipped, when a shared-prefix sample's
  // base was not read (never, for what the sampler writes: sample_entry.h).
  bool ReadSampleHeader(EntryReader& reader, EntryKind kind, SampleRecord& record) {
    reader.ReadIntoObjects(record.thread, record.time, record.cpu_delta_ns, record.overruns);
    if (reader.Failed()) return false;
    SampleFrameHistory& history = ThreadFor(record.thread).frame_history;
    if (kind == EntryKind::kSampleSharedPrefix) {
      const uint8_t* list = nullptr;
      size_t list_size = 0;
      if (!history.Expand(reader, record.time, &list, &list_size)) return false;
      frames_ = absl::Span<const uint8_t>(list, list_size);
      return true;
    }
    if (!ReadWholeFrameList(reader)) return false;
    history.Remember(record.time, frames_.data(), frames_.size());
    return true;
  }
  bool ReadWholeFrameList(EntryReader& reader) {
    const size_t size = reader.RemainingBytes();
    if (const uint8_t* in_place = reader.ContiguousRemaining()) {
      frames_ = absl::Span<const uint8_t>(in_place, size);
      reader.Skip(size);
    } else {
      frame_bytes_.resize(size);
      reader.ReadBytes(frame_bytes_.data(), size);
      frames_ = absl::Span<const uint8_t>(frame_bytes_);
    }
    return !reader.Failed();
  }

  // Reads serialized frames into `record`, whose first `frame_count` frames are then the
  // sample's. The frame vector only ever grows: frames beyond the count keep their storage
  // for the next sample (no construction or destruction per sample).
  static bool ReadFrames(EntryReader& reader, SampleRecord& record, size_t& frame_count) {
    const uint64_t count = reader.ReadULEB128<uint64_t>();
    // Every frame takes at least one byte: a larger count is garbage.
    if (reader.Failed() || count > reader.RemainingBytes()) {
      reader.SetFailed();
      return false;
    }
    frame_count = static_cast<size_t>(count);
    if (record.frames.size() < frame_count) record.frames.resize(frame_count);
    for (size_t i = 0; i < frame_count; ++i) reader.ReadIntoObject(record.frames[i]);
    return !reader.Failed();
  }

  // The stack of the sample whose frames frames_ spans, in `thread`'s tables: from the
  // thread's cache when this frame list was met before, else built frame by frame. Sets
  // failed_frames_ (and returns null) when the frames cannot be read.
  std::optional<uint32_t> SampleStack(ThreadState& thread) {
    failed_frames_ = false;
    const uint32_t list = frame_lists_.Find(frames_.data(), frames_.size());
    std::vector<uint32_t>& cache = thread.stack_by_frame_list;
    if (list != FrameListTable::kNone && list < cache.size() &&
        cache[list] != ThreadState::kUnknownStack) {
      ++samples_;
      if (cache[list] == ThreadState::kEmptyStack) return std::nullopt;
      return cache[list];
    }
    EntryReader frames_reader = EntryReader::OverBytes(frames_);
    if (inputs_.untrusted_literals) {
      frames_reader.SetUntrustedWithResolver(inputs_.untrusted_literals);
    }
    if (!ReadFrames(frames_reader, sample_, sample_frames_)) {
      failed_frames_ = true;
      return std::nullopt;
    }
    MoveAddresses(sample_.frames.data(), sample_frames_, sample_.time);
    const size_t walked = sample_frames_;
    ElideOwnFrames(sample_.frames.data(), sample_frames_);
    std::optional<uint32_t> stack = StackOf(thread, sample_.frames.data(), sample_frames_);
    if (!stack && walked > 0) {
      // Every frame was Strata's own (its exit save, a walk that stopped inside it): the
      // sample stays, with its CPU, under a "Profiler" label, never as an empty stack (which
      // the front-end's importer drops).
      UniqueStacks& stacks = thread.writer->stacks();
      stack = stacks.Stack(std::nullopt, stacks.LabelFrame("Profiler", inputs_.profiler_category));
    }
    if (list != FrameListTable::kNone) {
      if (cache.size() <= list) cache.resize(frame_lists_.size(), ThreadState::kUnknownStack);
      cache[list] = stack ? *stack : ThreadState::kEmptyStack;
    }
    return stack;
  }

  // Native addresses in a library replaced since at the same address go to its moved range.
  void MoveAddresses(SampleFrame* frames, size_t count, TimeStamp time) const {
    if (!timeline_.has_moved_libraries()) return;
    for (size_t i = 0; i < count; ++i) {
      if (frames[i].kind == SampleFrame::Kind::kNative) frames[i].address = timeline_.AddressAt(frames[i].address, time);
      if (frames[i].push_site != 0) frames[i].push_site = timeline_.AddressAt(frames[i].push_site, time);
    }
  }

  // Strata's own code is no frame of a profile (issue 34; docs/symbols.md "Strata's own
  // frames"): a wait wrapper's frame, the thread-start trampoline under every thread's
  // root, the marker and label entry points a sample may interrupt. Native frames in
  // Strata's libraries are removed (the wait wrappers already record the wrapped libc
  // function as a wait's leaf); `count` becomes the frames kept, in order.
  void ElideOwnFrames(SampleFrame* frames, size_t& count) const {
    if (own_code_.empty()) return;
    size_t kept = 0;
    for (size_t i = 0; i < count; ++i) {
      if (frames[i].kind == SampleFrame::Kind::kNative && IsOwnCode(frames[i].address)) continue;
      if (kept != i) frames[kept] = std::move(frames[i]);
      ++kept;
    }
    count = kept;
  }
  bool IsOwnCode(uint64_t address) const {
    for (const auto& [start, end] : own_code_) {
      if (address >= start && address < end) return true;
    }
    return false;
  }

  // Writes a marker stack's frames (native return addresses, and label frames where the
  // stack carries them: marker_entry.h, MarkerStackLabel) root first into `frames` (grown,
  // never shrunk: reused from marker to marker) and returns how many. Two passes (count, then
  // fill from the root end): no frame is moved.
  static size_t DecodeMarkerStack(const std::vector<uint64_t>& leaf_first,
                                  std::vector<SampleFrame>& frames) {
    size_t count = 0;
    auto count_one = [&](const auto&) { ++count; };
    ForEachMarkerStackFrame(leaf_first.data(), leaf_first.size(), count_one, count_one);
    if (frames.size() < count) frames.resize(count);
    size_t next = count;
    ForEachMarkerStackFrame(
        leaf_first.data(), leaf_first.size(),
        [&](uint64_t address) {
          SampleFrame& frame = frames[--next];
          frame.kind = SampleFrame::Kind::kNative;
          frame.address = address;
          frame.push_site = 0;
        },
        [&](const MarkerStackLabel& label) {
          SampleFrame& frame = frames[--next];
          frame.kind = SampleFrame::Kind::kLabel;
          frame.label = ProfilerString::Dynamic(label.label);
          frame.category = label.category;
          if (label.has_dynamic) {
            frame.dynamic.emplace(label.dynamic);
          } else {
            frame.dynamic.reset();
          }
          frame.push_site = label.push_site;
        });
    return count;
  }

  void NoteFrames(const SampleFrame* frames, size_t count) {
    // Root first: the last native frame is the leaf (interrupted pc).
    size_t leaf = count;
    for (size_t i = count; i-- > 0;) {
      if (frames[i].kind == SampleFrame::Kind::kNative) {
        leaf = i;
        break;
      }
    }
    for (size_t i = 0; i < count; ++i) {
      if (frames[i].kind == SampleFrame::Kind::kNative) names_.Note(frames[i].address, i == leaf);
    }
  }

  std::optional<uint32_t> StackOf(ThreadState& thread, const SampleFrame* frames, size_t count) {
    size_t leaf = count;
    for (size_t i = count; i-- > 0;) {
      if (frames[i].kind == SampleFrame::Kind::kNative) {
        leaf = i;
        break;
      }
    }
    frame_indexes_.clear();
    UniqueStacks& stacks = thread.writer->stacks();
    for (size_t i = 0; i < count; ++i) {
      const SampleFrame& f = frames[i];
      if (f.kind == SampleFrame::Kind::kNative) {
        const bool is_leaf = i == leaf;
        frame_indexes_.push_back(thread.native_frames.Frame(f.address, is_leaf, [&] {
          return symbolicate_ ? names_.Frame(stacks, f.address, is_leaf)
                              : stacks.AddressFrame(f.address);
        }));
      } else if (f.kind == SampleFrame::Kind::kScript) {
        frame_indexes_.push_back(ScriptFrame(stacks, f));
      } else {
        std::string text(f.label.View());
        if (f.dynamic) {
          text += ' ';
          text += *f.dynamic;
        }
        frame_indexes_.push_back(stacks.LabelFrame(text, f.category, 0, false, std::nullopt,
                                                   f.push_site));
      }
    }
    ++samples_;
    return stacks.StackFromFrames(frame_indexes_.data(), frame_indexes_.size());
  }

  // A script engine's frame: a function as a JS frame (the front-end classifies it by its
  // "name (file:line:col)" location; line/column give the position inside it, the JIT tier
  // goes to `implementation`), an engine label as a label.
  static uint32_t ScriptFrame(UniqueStacks& stacks, const SampleFrame& f) {
    const bool relevant_for_js = (f.script_flags & kScriptFrameRelevantForJs) != 0;
    if (!IsScriptFunction(f.script_kind)) {
      return stacks.LabelFrame(f.text, f.category, 0, relevant_for_js);
    }
    FrameInfo info;
    std::string location;
    if (ClassifyLocation(f.text) == LocationKind::kJs) {
      info.location = f.text;
    } else {
      // A script without a function: the engine names it by its file only ("life.js"); the
      // front-end shows "(root scope) life.js".
      location = JsLocation("", f.text, 1, 0);
      info.location = location;
    }
    info.category = f.category;
    info.subcategory = 0;
    if (f.script_flags & kScriptFrameHasPosition) {
      info.line = f.line;
      info.column = f.column;
    }
    info.implementation = ScriptFrameImplementation(f.script_kind);
    return stacks.Frame(info);
  }

  // An unknown wait's stack (EntryKind::kUnknownWait): the previous sample's, without its
  // leaf when that was a finished wait's (the wrapped call it waited in), under the "Unknown
  // wait" label -- not when the sample carries CPU (the thread ran: time of the code after
  // the wait), nor a second time.
  std::optional<uint32_t> UnknownWaitStack(ThreadState& thread, uint32_t previous, uint8_t flags,
                                           uint8_t category, bool carries_cpu) {
    UniqueStacks& stacks = thread.writer->stacks();
    std::optional<uint32_t> base = previous;
    if (flags & kUnknownWaitDropsLeaf) base = stacks.PrefixOf(previous);
    if (carries_cpu && base) return base;
    const uint32_t label = stacks.LabelFrame(kUnknownWaitLabel, category);
    if (base && stacks.FrameOf(*base) == label) return base;
    return stacks.Stack(base, label);
  }

  // A marker's stack (leaf first, as recorded) root first, moved and elided, as StackOf()
  // gives it, in frames reused from marker to marker (no allocation
  // per marker: native allocation records are markers with stacks, by the hundred thousand).
  std::optional<uint32_t> MarkerStack(ThreadState& thread,
                                      const std::vector<uint64_t>& leaf_first) {
    std::vector<SampleFrame>& frames = marker_frames_;
    size_t count = DecodeMarkerStack(leaf_first, frames);
    MoveAddresses(frames.data(), count, marker_time_);
    ElideOwnFrames(frames.data(), count);
    return StackOf(thread, frames.data(), count);
  }

  void AddMarker(EntryReader& reader) {
    const MarkerHeader header = reader.ReadObject<MarkerHeader>();
    if (reader.Failed()) return;
    ThreadState& thread = ThreadFor(header.thread);
    GeckoThreadWriter& writer = *thread.writer;
    const MarkerTiming timing{header.phase, header.start, header.end};
    const std::string_view name = header.name.View();  // Lives as long as `header`.
    std::optional<uint32_t> stack;
    if (!header.stack.empty()) {
      marker_time_ = header.start;
      stack = MarkerStack(thread, header.stack);
      --samples_;  // MarkerStack counted it as a sample.
    }
    bool minimal_stack = false;
    auto write_stack = [&](JsonWriter& w) {
      if (stack) {
        writer.WriteMarkerStack(w, *stack, header.start.IsNull() ? header.end : header.start,
                                minimal_stack);
      }
    };
    if (header.payload_tag == kUntypedMarkerTag) {
      if (!stack) {
        writer.AddMarker(name, timing, header.category);
      } else {
        writer.AddMarker(name, timing, header.category, "Stack", write_stack);
      }
    } else if (header.payload_tag == kTextMarkerTag) {
      reader.ReadIntoObject(marker_text_);  // Reused: no allocation per marker.
      writer.AddMarker(name, timing, header.category, "Text", [&](JsonWriter& w) {
        w.StringProperty("name", marker_text_);
        write_stack(w);
      });
    } else if (const MarkerTypeFunctions* type =
                   inputs_.marker_type ? inputs_.marker_type(header.payload_tag) : nullptr) {
      minimal_stack = type->minimal_stack;
      writer.AddMarker(name, timing, header.category, type->type_name, [&](JsonWriter& w) {
        type->stream(reader, w);
        write_stack(w);
      });
    }
  }

  void AddCounterSample(EntryReader& reader) {
    uint32_t id = 0;
    TimeStamp time;
    int64_t value = 0;
    uint64_t operations = 0;
    reader.ReadIntoObjects(id, time, value, operations);
    if (reader.Failed()) return;
    // An id past every counter known (a counter destroyed since, or damaged data: a
    // recovered flight recorder file) names nothing.
    if (id >= inputs_.counters.size()) return;
    if (counters_.size() <= id) {
      counters_.resize(id + 1);
    }
    CounterState& counter = counters_[id];
    if (!counter.writer) {
      if (!inputs_.counters[id].name) {
        return;  // A counter destroyed since: its name is gone.
      }
      const CaptureCounter& d = inputs_.counters[id];
      counter.writer = std::make_unique<GeckoCounterWriter>(d.name, d.category ? d.category : "Other",
                                                            d.description ? d.description : "",
                                                            inputs_.start_time);
    }
    // Differences wrap (two's complement) rather than overflow on damaged values.
    const int64_t value_delta =
        static_cast<int64_t>(static_cast<uint64_t>(value) - static_cast<uint64_t>(counter.last_value));
    counter.writer->AddSample(time, value_delta, operations - counter.last_operations);
    counter.last_value = value;
    counter.last_operations = operations;
  }

  const CaptureInputs& inputs_;
  const bool symbolicate_;
  const ProcessId pid_;
  const std::string process_name_;
  LibraryTimeline timeline_{std::vector<LibraryLifetime>()};
  std::vector<std::pair<uint64_t, uint64_t>> own_code_;  // Strata's libraries: [start, end).
  std::unique_ptr<Symbolizer> symbolizer_;
  AddressNames names_;
  std::map<int64_t, ThreadState> threads_;
  // Ended threads of CaptureInputs::threads not met in the buffer yet (by thread id; the
  // first one listed for an id reused by the system).
  std::unordered_map<int64_t, const CaptureThread*> ended_threads_;
  std::unordered_map<int64_t, int64_t> thread_keys_;
  int64_t last_tid_ = 0;
  ThreadState* last_thread_ = nullptr;  // ThreadFor()'s last answer (for last_tid_).
  std::vector<CounterState> counters_;
  std::vector<OverheadSample> overhead_;
  std::vector<uint32_t> frame_indexes_;
  std::vector<SampleFrame> marker_frames_;  // MarkerStack()'s, reused.
  SampleRecord sample_;       // Reused by every sample read (no allocation per sample);
  size_t sample_frames_ = 0;  // the number of its frames that are the current sample's.
  // The current sample's serialized frames (ReadSampleHeader), and their copy when they
  // straddle two chunks.
  absl::Span<const uint8_t> frames_;
  std::vector<uint8_t> frame_bytes_;
  std::string marker_text_;           // The current text marker's text.
  bool failed_frames_ = false;
  TimeStamp marker_time_;  // The current marker's start, for its stack's addresses.
  FrameListTable frame_lists_;
  size_t samples_ = 0;
  uint64_t total_entries_ = 0;     // Samples and markers seen by pass 1.
  uint64_t buffered_entries_ = 0;  // Those of the threads not streamed.
  static constexpr uint64_t kStreamShare = 8;
  static constexpr uint64_t kMinStreamedEntries = 4096;
};

// One pass over the buffer: reports its progress by block position in [start, end) and
// watches the failure latch, every 1/kSteps of the range; in between, one comparison per
// entry.
class PassProgress {
 public:
  static constexpr uint64_t kSteps = 256;

  PassProgress(ProgressLogger& logger, FailureLatch& failure, BufferIndex start, BufferIndex end)
      : logger_(logger), failure_(failure), start_(start),
        total_(end > start ? end - start : 1), step_(total_ / kSteps > 0 ? total_ / kSteps : 1),
        stopped_(failure.Failed()) {}

  // False once the capture has failed: the entry is to be skipped.
  bool At(BlockIndex block) {
    const BufferIndex index = block.ToBufferIndex();
    if (index >= next_) Check(index);
    return !stopped_;
  }

 private:
  void Check(BufferIndex index) {
    stopped_ = failure_.Failed();
    const uint64_t done = index > start_ ? index - start_ : 0;
    logger_.SetLocalProgress(done, total_);  // Clamped to 1 past `end`.
    next_ = index + step_;
  }

  ProgressLogger& logger_;
  FailureLatch& failure_;
  const BufferIndex start_;
  const uint64_t total_;
  const uint64_t step_;
  BufferIndex next_ = 0;
  bool stopped_;
};

// The phases' ranges in the capture's progress (profile_capture.h).
constexpr ProportionValue kAddressesEnd = ProportionValue::FromRatio(25, 100);
constexpr ProportionValue kSymbolsEnd = ProportionValue::FromRatio(40, 100);
constexpr ProportionValue kThreadsEnd = ProportionValue::FromRatio(97, 100);

}  // namespace

bool WriteProfile(const CaptureInputs& inputs, const ChunkedBuffer& buffer, JsonWriter& out,
                  std::string* error) {
  FailureLatch own_failure;
  FailureLatch& failure = inputs.failure ? *inputs.failure : own_failure;
  ProgressLogger no_progress;
  ProgressLogger& progress = inputs.progress ? *inputs.progress : no_progress;
  auto latch_writer_error = [&](const GeckoProfileWriter& profile) {
    if (!profile.ok()) failure.SetFailure(profile.error());
  };

  ProfileBuilder builder(inputs);
  // Writing goes on during capture: the second pass stops where the first one did, so every
  // sample written has had its addresses resolved (and the capture's own samples are left
  // out).
  BlockIndex last_block;
  // The latest sample time up to last_block: samples keep arriving while the caller prepares
  // the capture, and a sample after meta.profilingEndTime would be dropped by the front-end.
  TimeStamp latest_sample;
  // The latest marker time (start or end): a marker may end after the capture began (a
  // program can give an interval's end in advance), and the front-end cuts off what is
  // past meta.profilingEndTime.
  TimeStamp latest_marker;
  // The earliest sample or marker time: entries from before the session's start (a marker
  // given an earlier start, a buffer kept across a restart) widen the range's start.
  TimeStamp earliest_entry;
  {
    ProgressLogger phase = progress.CreateSubLogger(ProportionValue::Zero(), kAddressesEnd,
                                                    "capture: collecting addresses");
    builder.SetLibraryTimeline(inputs.library_history ? LibraryTimeline(inputs.library_history())
                                                      : LibraryTimeline());
    const ChunkedBuffer::State state = buffer.GetState();
    PassProgress pass(phase, failure, state.range_start, state.range_end);
    buffer.ReadEach([&](EntryReader& reader) {
      last_block = reader.CurrentBlockIndex();
      if (!pass.At(last_block)) return;
      builder.NoteEntry(reader, latest_sample, latest_marker, earliest_entry);
    });
  }
  // A sample covers one interval from its time, and the front-end keeps samples strictly
  // before the end: the end goes one interval past the latest sample.
  ProfileMeta meta = inputs.meta;
  if (meta.profiling_end_time && !latest_sample.IsNull()) {
    const TimeStamp sample_end =
        latest_sample + TimeDuration::FromNanoseconds(
                            std::max<int64_t>(1, static_cast<int64_t>(meta.interval_ms * 1e6)));
    if (sample_end > *meta.profiling_end_time) meta.profiling_end_time = sample_end;
  }
  if (meta.profiling_end_time && !latest_marker.IsNull() &&
      latest_marker > *meta.profiling_end_time) {
    meta.profiling_end_time = latest_marker;
  }
  if (meta.profiling_start_time && !earliest_entry.IsNull() &&
      earliest_entry < *meta.profiling_start_time) {
    meta.profiling_start_time = earliest_entry;
  }
  if (meta.profiling_start_time && meta.profiling_end_time && inputs.sub_processes_range &&
      !failure.Failed()) {
    if (const std::optional<TimeRange> children = inputs.sub_processes_range()) {
      if (children->start < *meta.profiling_start_time) meta.profiling_start_time = children->start;
      if (children->end > *meta.profiling_end_time) meta.profiling_end_time = children->end;
    }
  }
  if (!failure.Failed()) {
    ProgressLogger phase =
        progress.CreateSubLogger(kAddressesEnd, kSymbolsEnd, "capture: symbolicating");
    builder.ResolveAddresses();
  }

  GeckoProfileWriter profile(out, meta, inputs.kind);
  if (!failure.Failed()) {
    ProgressLogger phase =
        progress.CreateSubLogger(kSymbolsEnd, kThreadsEnd, "capture: writing threads");
    profile.WriteLibs(builder.libs());
    latch_writer_error(profile);
    builder.ChooseStreamedThreads();
    // Each pass reads the buffer up to last_block and reports its progress in an equal part
    // of the phase: the buffered threads' pass, then two per streamed thread.
    const uint64_t passes =
        (builder.has_buffered_entries() ? 1 : 0) + 2 * builder.streamed_thread_count();
    uint64_t pass_index = 0;
    const auto run_pass = [&](BlockIndex from, const auto& add_entry) {
      ProgressLogger pass_logger = phase.CreateLoopSubLogger(
          ProportionValue::Zero(), ProportionValue::One(), pass_index++, passes);
      builder.ForgetSampleFrames();
      const ChunkedBuffer::State state = buffer.GetState();
      const BufferIndex start = from ? from.ToBufferIndex() : state.range_start;
      PassProgress pass(pass_logger, failure, start, last_block.ToBufferIndex() + 1);
      buffer.ReadEachFrom(from, [&](EntryReader& reader) {
        const BlockIndex block = reader.CurrentBlockIndex();
        if (block <= last_block && pass.At(block)) add_entry(reader);
      });
    };
    if (builder.has_buffered_entries() && !failure.Failed()) {
      run_pass(BlockIndex(), [&](EntryReader& reader) { builder.AddBufferedEntry(reader); });
    }
    // The threads in document order: a buffered one is spliced, a streamed one written by
    // its own passes straight into the output.
    builder.ForEachThread([&](ThreadState& thread) {
      if (failure.Failed()) return;
      if (!thread.streamed) {
        if (thread.left_out_if_empty && thread.writer->sample_count() == 0 &&
            thread.writer->marker_count() == 0) {
          return;
        }
        profile.AddThread(*thread.writer);
      } else {
        const ThreadId tid = thread.writer->description().tid;
        profile.StartThread(*thread.writer);
        // A pass of a kind the thread has no entry of is skipped (its share of progress too).
        if (thread.first_sample_block) {
          run_pass(thread.first_sample_block, [&](EntryReader& reader) {
            builder.AddStreamedEntry(reader, tid, /*markers=*/false);
          });
        } else {
          ++pass_index;
        }
        latch_writer_error(profile);  // A failed output stops the next pass early.
        if (thread.first_marker_block) {
          run_pass(thread.first_marker_block, [&](EntryReader& reader) {
            builder.AddStreamedEntry(reader, tid, /*markers=*/true);
          });
        } else {
          ++pass_index;
        }
        profile.EndThread(*thread.writer);
      }
      latch_writer_error(profile);
    });
  }
  {
    ProgressLogger phase =
        progress.CreateSubLogger(kThreadsEnd, ProportionValue::One(), "capture: finishing");
    if (!failure.Failed()) {
      builder.WriteCountersAndOverhead(profile);
      latch_writer_error(profile);
    }
    if (!failure.Failed() && inputs.sub_processes) {
      inputs.sub_processes(profile);
      latch_writer_error(profile);
    }
    if (!failure.Failed()) {
      const ChunkedBuffer::State state = buffer.GetState();
      profile.WriteProfilingLog(inputs.pid.value_or(CurrentProcessId()), [&](JsonWriter& w) {
        if (inputs.profiling_log) inputs.profiling_log(w);
        w.UintProperty("bufferBlocksPushed", state.pushed_block_count);
        w.UintProperty("bufferBlocksCleared", state.cleared_block_count);
        w.UintProperty("bufferFailedWrites", state.failed_put_count);
        w.UintProperty("bufferChunksTaken", state.chunks_taken);
      });
      if (inputs.profile_gathering_log) {
        profile.WriteProfileGatheringLog(inputs.profile_gathering_log);
      }
    }
    // Closes the document even after a failure: it stays well-formed where the output allows.
    profile.Finish();
    latch_writer_error(profile);
  }
  if (failure.Failed()) {
    if (error) *error = failure.Failure();
    return false;
  }
  return true;
}

}  // namespace profile
}  // namespace strata
