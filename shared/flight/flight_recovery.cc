#include "shared/flight/flight_recovery.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/buffer/chunked_buffer.h"
#include "shared/buffer/entry_kinds.h"
#include "shared/buffer/local_limit_chunk_manager.h"
#include "shared/json/gecko_profile_writer.h"
#include "shared/json/marker_timing.h"
#include "shared/profile/marker_entry.h"
#include "shared/profile/profile_capture.h"

namespace strata {
namespace flight {
namespace {

// The "Text" marker payload's schema (the same as a normal save's, base/internal/capture.cc).
constexpr const char kTextMarkerSchema[] =
    R"({"name":"Text","display":["marker-chart","marker-table"],)"
    R"("chartLabel":"{marker.data.name}","tableLabel":"{marker.name} - {marker.data.name}",)"
    R"("data":[{"key":"name","label":"Details","format":"string","searchable":true}]})";

constexpr size_t kMaxLiteralBytes = 4096;

// Opens a path read from the file (untrusted) if it names a regular file; -1 otherwise. Never
// blocks: a FIFO there (no writer) would hang a blocking open, and a device is never read.
int OpenRegularFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  struct stat st {};
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads string literals of the dead process from its libraries' files.
class LibraryLiteralResolver final : public LiteralResolver {
 public:
  explicit LibraryLiteralResolver(const std::vector<profile::LibraryLifetime>& libraries)
      : libraries_(libraries) {}

  const char* Resolve(uint64_t address, size_t length) const override {
    if (length > kMaxLiteralBytes) return nullptr;
    auto [it, inserted] = cache_.try_emplace({address, length});
    if (inserted) it->second = Read(address, length);
    return it->second.data();
  }

 private:
  struct Segment {
    uint64_t vaddr, filesz, offset;
  };

  std::string Read(uint64_t address, size_t length) const {
    for (const profile::LibraryLifetime& l : libraries_) {
      if (address < l.library.start || address >= l.library.end || l.library.path.empty() ||
          l.library.path[0] != '/') {
        continue;
      }
      const uint64_t file_address = address - (l.library.start - l.library.offset);
      for (const Segment& s : SegmentsOf(l.library.path)) {
        if (file_address < s.vaddr || file_address - s.vaddr + length > s.filesz) continue;
        std::string text(length, '\0');
        const int fd = OpenRegularFile(l.library.path);
        if (fd < 0) break;
        const ssize_t n = pread(fd, text.data(), length,
                                static_cast<off_t>(s.offset + (file_address - s.vaddr)));
        close(fd);
        if (n == static_cast<ssize_t>(length)) return text;
        break;
      }
    }
    ++unresolved_;
    return std::string(length, '?');
  }

  // The PT_LOAD segments of an ELF64 file (cached; empty when unreadable).
  const std::vector<Segment>& SegmentsOf(const std::string& path) const {
    auto [it, inserted] = segments_.try_emplace(path);
    if (!inserted) return it->second;
    const int fd = OpenRegularFile(path);
    if (fd < 0) return it->second;
    Elf64_Ehdr eh;
    if (pread(fd, &eh, sizeof(eh), 0) == sizeof(eh) && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) &&
        eh.e_phnum < 4096) {
      for (unsigned i = 0; i < eh.e_phnum; ++i) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof(ph), static_cast<off_t>(eh.e_phoff + i * sizeof(ph))) != sizeof(ph)) {
          break;
        }
        if (ph.p_type == PT_LOAD) it->second.push_back({ph.p_vaddr, ph.p_filesz, ph.p_offset});
      }
    }
    close(fd);
    return it->second;
  }

  const std::vector<profile::LibraryLifetime>& libraries_;
  mutable std::map<std::pair<uint64_t, size_t>, std::string> cache_;  // Nodes never move.
  mutable std::map<std::string, std::vector<Segment>> segments_;
  mutable size_t unresolved_ = 0;
};

void IgnorePayload(EntryReader&, JsonWriter&) {}

// The latest sample or marker time in the entries (null when none).
TimeStamp LatestTime(const ChunkedBuffer& buffer, size_t* samples) {
  TimeStamp latest;
  buffer.ReadEach([&](EntryReader& reader) {
    EntryReader peek = reader;
    const EntryKind kind = peek.ReadObject<EntryKind>();
    ThreadId tid;
    if (kind == EntryKind::kSample || kind == EntryKind::kSampleSharedPrefix ||
        kind == EntryKind::kSameSample) {
      TimeStamp time;
      peek.ReadIntoObjects(tid, time);
      if (!peek.Failed() && time > latest) latest = time;
      if (!peek.Failed() && samples) ++*samples;
    } else if (kind == EntryKind::kMarker) {
      MarkerPhase phase;
      TimeStamp start, end;
      peek.ReadIntoObjects(tid, phase, start, end);
      if (!peek.Failed()) {
        if (start > latest) latest = start;
        if (end > latest) latest = end;
      }
    }
  });
  return latest;
}

}  // namespace

std::string EndMarkerName(const FlightContents& contents, const RecoveryOptions& options) {
  if ((contents.clean_end || options.live) && !options.crashed) return "Recording ended";
  return "Process crashed";
}

bool WriteRecoveredProfile(const FlightContents& contents, const RecoveryOptions& options,
                           JsonWriter& out, std::string* error, size_t* samples_found) {
  if (!contents.session) {
    *error = "the file holds no readable session record (times and names unknown)";
    return false;
  }
  const SessionFacts& session = *contents.session;
  const TimeStamp start = TimeStamp::FromNanoseconds(session.start_ns);

  // The entries, in a buffer read untrusted (literals from the library files).
  size_t total = 0;
  for (const std::string& e : contents.entries) total += e.size() + 10;
  constexpr BufferChunk::Length kChunkBytes = 1 << 20;
  ChunkedBuffer buffer(ThreadSafety::kSingleThreaded,
                       std::make_unique<LocalLimitChunkManager>(total * 2 + 4 * kChunkBytes, kChunkBytes));
  for (const std::string& e : contents.entries) {
    buffer.ReserveAndPut([&] { return e.size(); },
                         [&](EntryWriter* w) {
                           if (w) w->WriteBytes(e.data(), e.size());
                           return 0;
                         });
  }
  LibraryLiteralResolver resolver(contents.libraries);
  buffer.SetUntrustedReading(&resolver);
  size_t samples = 0;
  TimeStamp last = LatestTime(buffer, &samples);
  if (samples_found) *samples_found = samples;
  if (last.IsNull()) last = contents.clean_end ? TimeStamp::FromNanoseconds(contents.end_ns) : start;

  // Where the data ends, and why, on the main thread's track.
  ThreadId marker_thread = ThreadId::FromNumber(static_cast<int32_t>(session.pid));
  for (const ThreadFacts& t : contents.threads) {
    if (t.is_main) marker_thread = ThreadId::FromNumber(t.tid);
  }
  const std::string end_name = EndMarkerName(contents, options);
  std::string end_text = options.end_reason;
  if (end_text.empty() && options.live && !contents.clean_end) {
    end_text = "read from the running session; the session goes on in the process";
  }
  if (end_text.empty()) {
    end_text = contents.clean_end && !options.crashed
                   ? "the session ended normally"
                   : "the process ended without saving its profile (crashed or killed); the "
                     "data ends here";
  }
  buffer.PutObjects(EntryKind::kMarker, marker_thread, MarkerPhase::kInstant, last, TimeStamp(),
                    end_name, uint8_t{0}, profile::kTextMarkerTag, std::vector<uint64_t>(),
                    end_text);

  profile::CaptureInputs inputs;
  inputs.start_time = start;
  inputs.process_name = session.program;
  inputs.pid = ProcessId::FromNumber(static_cast<int32_t>(session.pid));
  inputs.symbolicate = options.symbolicate;
  inputs.untrusted_literals = &resolver;
  ProfileMeta& meta = inputs.meta;
  meta.start_time = start;
  meta.start_time_epoch_ns = session.start_epoch_ns;
  meta.interval_ms = session.interval_ms;
  meta.product = session.program;
  meta.presymbolicated = options.symbolicate;
  meta.profiling_start_time = start;
  // A damaged time stamp may be near INT64_MAX: no overflow past it.
  constexpr int64_t kEndMarginNs = 1000000;
  meta.profiling_end_time = last.ToNanoseconds() > INT64_MAX - kEndMarginNs
                                ? last
                                : last + TimeDuration::FromNanoseconds(kEndMarginNs);
  for (const auto& [name, color] : session.categories) meta.categories.push_back({name, color, {}});
  FillSystemInfo(meta);
  meta.marker_schemas.push_back(kTextMarkerSchema);
  std::vector<profile::MarkerTypeFunctions> types(256, profile::MarkerTypeFunctions{nullptr, nullptr, nullptr});
  for (const MarkerTypeFacts& t : contents.marker_types) {
    if (t.tag < 2) continue;
    types[t.tag] = {t.name.c_str(), &IgnorePayload, nullptr};
    if (!t.schema.empty()) meta.marker_schemas.push_back(t.schema);
  }
  inputs.marker_type = [&types](uint8_t tag) -> const profile::MarkerTypeFunctions* {
    return types[tag].type_name ? &types[tag] : nullptr;
  };
  for (const ThreadFacts& t : contents.threads) {
    profile::CaptureThread thread;
    thread.tid = ThreadId::FromNumber(t.tid);
    thread.name = t.is_main ? "GeckoMain" : (t.name.empty() ? "Thread" : t.name);
    thread.register_time = TimeStamp::FromNanoseconds(t.register_ns);
    if (t.unregister_ns != 0) thread.unregister_time = TimeStamp::FromNanoseconds(t.unregister_ns);
    thread.is_main = t.is_main;
    inputs.threads.push_back(std::move(thread));
  }
  for (const CounterFacts& c : contents.counters) {
    inputs.counters.push_back(c.present ? profile::CaptureCounter{c.name.c_str(), c.category.c_str(),
                                                                  c.description.c_str()}
                                        : profile::CaptureCounter{});
  }
  const std::vector<profile::LibraryLifetime> libraries = contents.libraries;
  inputs.library_history = [&libraries] { return libraries; };
  inputs.profiling_log = [&](JsonWriter& w) {
    w.StringProperty("profiler", "base (recovered from a flight recorder file)");
    w.StringProperty("features", session.feature_names);
    w.DoubleProperty("requestedInterval", session.interval_ms);
    w.StringProperty("recoveredEnd", end_name + ": " + end_text);
    w.UintProperty("recoveredChunks", contents.chunks_read);
    w.UintProperty("damagedChunks", contents.chunks_damaged);
    w.UintProperty("droppedBlocks", contents.blocks_dropped);
    w.UintProperty("missingBytes", contents.bytes_missing);
  };
  return profile::WriteProfile(inputs, buffer, out, error);
}

}  // namespace flight
}  // namespace strata
