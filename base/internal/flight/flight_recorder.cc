// The flight recorder's writer (flight_recorder.h; file format: shared/flight/flight_format.h).
#include "base/internal/flight/flight_recorder.h"

#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "base/categories.h"
#include "base/internal/flight/flight_file.h"
#include "base/internal/session/core.h"
#include "base/internal/settings/env_settings.h"
#include "base/internal/session/library_history.h"
#include "base/internal/settings/log.h"
#include "base/internal/registry/thread_registry.h"
#include "base/markers.h"
#include "platform/mutex.h"
#include "platform/never_destroyed.h"
#include "platform/private_fd.h"
#include "platform/raw_syscall.h"
#include "shared/flight/flight_format.h"
#include "shared/json/gecko_profile_writer.h"

namespace strata {
namespace base_internal {
namespace {

// ---------------------------------------------------------------------------------------
// The recorder's state: the configured directory and the running session's file.

struct Recorder {
  Mutex mutex{"strata flight recorder state"};
  std::string directory;  // Empty: off.
  std::string path;
  TimeStamp start_time;
  std::vector<FlightFile*> previous;  // Earlier sessions' files still mapped (chunks left).
  // Earlier sessions' files already unmapped: their small objects are kept for good (a
  // lock-free lookup may still hold one); each gave back its slots and metadata when released.
  std::vector<FlightFile*> released;
  // What the metadata records last said, to write only changes (sampler thread only).
  std::string threads_payload;
  unsigned long long loader_adds = ~0ull, loader_subs = ~0ull;
  size_t marker_type_count = SIZE_MAX;
  std::vector<std::pair<const char*, const char*>> counters;
  bool counters_written = false;
};

Recorder& GetRecorder() {
  static NeverDestroyed<Recorder> recorder;
  return recorder.get();
}

std::atomic<FlightFile*> g_file{nullptr};

// The files this process made and has not removed, for their removal when the process ends
// (RemoveFlightRecorderFilesAtProcessEnd): read without a lock, so that _exit and the exec
// wrappers, which must stay async-signal-safe, can unlink them. A slot's path is written
// before it is marked used and cleared after it is marked free. Under the recorder mutex
// otherwise.
constexpr int kEndPathSlots = 8;
char g_end_paths[kEndPathSlots][PATH_MAX];
std::atomic<bool> g_end_path_used[kEndPathSlots];

void TrackPathForProcessEnd(const std::string& path) {
  if (path.size() >= PATH_MAX) return;
  for (int i = 0; i < kEndPathSlots; ++i) {
    if (g_end_path_used[i].load(std::memory_order_acquire)) continue;
    std::memcpy(g_end_paths[i], path.c_str(), path.size() + 1);
    g_end_path_used[i].store(true, std::memory_order_release);
    return;
  }
  // More than kEndPathSlots files kept (sessions stopped without a save): this one stays
  // after the process ends, as every file did before issue 33.
}

void ForgetPathForProcessEnd(const std::string& path) {
  for (int i = 0; i < kEndPathSlots; ++i) {
    if (g_end_path_used[i].load(std::memory_order_acquire) && path == g_end_paths[i]) {
      g_end_path_used[i].store(false, std::memory_order_release);
    }
  }
}

std::string SessionPayload(TimeStamp start, const ProfilerSettings& settings) {
  PayloadWriter w;
  w.I64(start.ToNanoseconds());
  w.I64(EpochNanoseconds(start));
  w.F64(settings.interval_ms);
  w.U32(settings.features);
  w.String(FeatureNames(settings.features));
  w.U32(static_cast<uint32_t>(getpid()));
  const char* name = program_invocation_short_name;
  w.String(name && name[0] ? name : "program");
  w.U32(static_cast<uint32_t>(sizeof(kCategoryInfos) / sizeof(kCategoryInfos[0])));
  for (const CategoryInfo& c : kCategoryInfos) {
    w.String(c.name);
    w.String(c.color);
  }
  return w.bytes();
}

// The thread table is rewritten whole when it changes: bounded to a quarter of a metadata log
// (~6000 threads), so that it always fits and compacts. Past that the oldest threads of the
// registry are left out, never the main thread (docs/flight-recorder.md, "Limits").
constexpr size_t kThreadTableBudgetBytes = flight::kMetadataHalfBytes / 4;

void WriteThreadsIfChanged(FlightFile& file, Recorder& recorder) {
  PayloadWriter w;
  {
    Registry& registry = GetRegistry();
    AutoLock lock(registry.mutex);
    // A thread's entry: 25 bytes and its name. The main thread first, then the others newest
    // first, while within the budget.
    auto entry_bytes = [](const ThreadInfo& info) { return 25 + info.name.size(); };
    size_t bytes = 4, n = 0;
    for (const ThreadInfo& info : registry.infos) {
      if (!info.is_main) continue;
      bytes += entry_bytes(info);
      ++n;
    }
    size_t first = registry.infos.size();  // Other threads from this index on are listed.
    for (; first > 0; --first) {
      const ThreadInfo& info = registry.infos[first - 1];
      if (!info.profiled || info.is_main) continue;
      if (bytes + entry_bytes(info) > kThreadTableBudgetBytes) break;
      bytes += entry_bytes(info);
      ++n;
    }
    w.U32(n);
    for (size_t i = 0; i < registry.infos.size(); ++i) {
      const ThreadInfo& info = registry.infos[i];
      if (!info.is_main && (!info.profiled || i < first)) continue;
      w.U32(static_cast<uint32_t>(info.tid.ToNumber()));
      w.String(info.name);
      w.I64(info.register_time.ToNanoseconds());
      w.I64(info.unregister_time ? info.unregister_time->ToNanoseconds() : 0);
      w.U8(info.is_main);
    }
  }
  if (w.bytes() == recorder.threads_payload) return;
  recorder.threads_payload = w.bytes();
  file.AppendRecord(RecordType::kThreads, w.bytes());
}

void WriteLibrariesIfChanged(FlightFile& file, Recorder& recorder) {
  struct Counts {
    unsigned long long adds = 0, subs = 0;
  } counts;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t size, void* data) {
        if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
          static_cast<Counts*>(data)->adds = info->dlpi_adds;
          static_cast<Counts*>(data)->subs = info->dlpi_subs;
        }
        return 1;
      },
      &counts);
  if (counts.adds == recorder.loader_adds && counts.subs == recorder.loader_subs) return;
  recorder.loader_adds = counts.adds;
  recorder.loader_subs = counts.subs;
  const std::vector<profile::LibraryLifetime> libraries = LibraryHistorySince(recorder.start_time);
  PayloadWriter w;
  w.U32(static_cast<uint32_t>(libraries.size()));
  for (const profile::LibraryLifetime& l : libraries) {
    w.U64(l.library.start);
    w.U64(l.library.end);
    w.U64(l.library.offset);
    for (const std::string* s : {&l.library.name, &l.library.path, &l.library.debug_name,
                                 &l.library.debug_path, &l.library.breakpad_id,
                                 &l.library.code_id, &l.library.arch}) {
      w.String(*s);
    }
    w.I64(l.loaded.ToNanoseconds());
    w.I64(l.unloaded.ToNanoseconds());
  }
  file.AppendRecord(RecordType::kLibraries, w.bytes());
}

void WriteMarkerTypesIfChanged(FlightFile& file, Recorder& recorder) {
  const std::vector<MarkerTypeFunctions> types = RegisteredMarkerTypes();
  if (types.size() == recorder.marker_type_count) return;
  recorder.marker_type_count = types.size();
  PayloadWriter w;
  w.U32(static_cast<uint32_t>(types.size()));
  for (size_t i = 0; i < types.size(); ++i) {
    w.U8(static_cast<uint8_t>(i + 2));  // Tags 0 and 1 are untyped and Text (markers.cc).
    w.String(types[i].type_name ? types[i].type_name : "");
    w.String(types[i].schema ? types[i].schema() : std::string());
  }
  file.AppendRecord(RecordType::kMarkerTypes, w.bytes());
}

void WriteCountersIfChanged(FlightFile& file, Recorder& recorder) {
  const std::vector<CounterDescription> counters = CounterDescriptions();
  std::vector<std::pair<const char*, const char*>> key;
  for (const CounterDescription& c : counters) key.emplace_back(c.name, c.category);
  if (recorder.counters_written && key == recorder.counters) return;
  recorder.counters = std::move(key);
  recorder.counters_written = true;
  PayloadWriter w;
  w.U32(static_cast<uint32_t>(counters.size()));
  for (const CounterDescription& c : counters) {
    w.U8(c.name != nullptr);
    w.String(c.name ? c.name : "");
    w.String(c.category ? c.category : "");
    w.String(c.description ? c.description : "");
  }
  file.AppendRecord(RecordType::kCounters, w.bytes());
}

}  // namespace

void ConfigureFlightRecorder(const char* directory) {
  if (directory == nullptr) return;
  struct stat st {};
  char resolved[PATH_MAX];
  const bool usable = directory[0] != '\0' && stat(directory, &st) == 0 && S_ISDIR(st.st_mode) &&
                      access(directory, W_OK | X_OK) == 0 && realpath(directory, resolved);
  if (!usable) {  // (STRATA_FLIGHT_RECORDER's value was checked and reported already.)
    LogError("flight recorder: the directory is not usable; recording without it");
    return;
  }
  Recorder& recorder = GetRecorder();
  AutoLock lock(recorder.mutex);
  recorder.directory = resolved;
}

// Files of earlier sessions whose chunks are all gone are unmapped (their lookups freed).
// Recorder mutex held.
static void ReleaseUnusedFilesLocked(Recorder& recorder) {
  std::vector<FlightFile*> kept;
  for (FlightFile* f : recorder.previous) {
    if (!f->ReleaseIfUnused()) {
      kept.push_back(f);
    } else {
      recorder.released.push_back(f);
    }
  }
  recorder.previous = std::move(kept);
}

void ReleaseStoppedFlightRecorderFiles() {
  Recorder& recorder = GetRecorder();
  AutoLock lock(recorder.mutex);
  ReleaseUnusedFilesLocked(recorder);
  recorder.directory.clear();  // The next session records without a file unless configured.
}

ChunkStorage* StartFlightRecorderLocked(size_t limit_bytes, size_t chunk_bytes,
                                        TimeStamp start_time, const ProfilerSettings& settings) {
  Recorder& recorder = GetRecorder();
  AutoLock lock(recorder.mutex);
  if (FlightFile* last = g_file.exchange(nullptr, std::memory_order_acq_rel)) {
    recorder.previous.push_back(last);
  }
  ReleaseUnusedFilesLocked(recorder);
  recorder.path.clear();
  if (recorder.directory.empty()) return nullptr;
  std::string path, error;
  FlightFile* file =
      FlightFile::Create(recorder.directory, limit_bytes, chunk_bytes, start_time, &path, &error);
  if (file != nullptr && !ChunkStorage::Register(file)) {
    error = "too many sessions with a flight recorder in this process";
    file = nullptr;  // Leaked with its mapping: chunks are never made in it.
    unlink(path.c_str());
  }
  if (file == nullptr) {
    LogError("flight recorder: %s; recording without it", error.c_str());
    return nullptr;
  }
  recorder.path = path;
  TrackPathForProcessEnd(path);
  recorder.start_time = start_time;
  recorder.threads_payload.clear();
  recorder.loader_adds = recorder.loader_subs = ~0ull;
  recorder.marker_type_count = SIZE_MAX;
  recorder.counters_written = false;
  file->AppendRecord(RecordType::kSession, SessionPayload(start_time, settings));
  g_file.store(file, std::memory_order_release);
  LogInfo("flight recorder: %s", path.c_str());
  return file;
}

void FlightRecorderPublishChunks(ChunkedBuffer& buffer) {
  FlightFile* file = g_file.load(std::memory_order_acquire);
  if (file == nullptr) return;
  buffer.WithSettledCurrentChunk([file](const BufferChunk* chunk) {
    if (chunk) file->Publish(*chunk);
  });
  file->SealDoneChunks(kSealBudgetBytesPerLoop);
}

bool FlightRecorderStats(size_t* file_bytes, size_t* heap_chunks) {
  FlightFile* file = g_file.load(std::memory_order_acquire);
  if (file == nullptr) return false;
  file->Stats(file_bytes, heap_chunks);
  return true;
}

void FlightRecorderOnSamplerLoop() {
  FlightFile* file = g_file.load(std::memory_order_acquire);
  if (file == nullptr) return;
  FlightRecorderPublishChunks(SessionBuffer());
  Recorder& recorder = GetRecorder();
  WriteThreadsIfChanged(*file, recorder);
  WriteLibrariesIfChanged(*file, recorder);
  WriteMarkerTypesIfChanged(*file, recorder);
  WriteCountersIfChanged(*file, recorder);
}

void StopFlightRecorderLocked() {
  FlightFile* file = g_file.load(std::memory_order_acquire);
  if (file == nullptr) return;
  FlightRecorderOnSamplerLoop();  // The sampler thread has stopped: the last loop's worth.
  file->SealDoneChunks(SIZE_MAX);
  file->Freeze(TimeStamp::Now());
  g_file.store(nullptr, std::memory_order_release);
  Recorder& recorder = GetRecorder();
  AutoLock lock(recorder.mutex);
  recorder.previous.push_back(file);  // Unmapped by a later start once its chunks are gone.
}

void RemoveFlightRecorderFile() {
  Recorder& recorder = GetRecorder();
  AutoLock lock(recorder.mutex);
  if (g_file.load(std::memory_order_acquire) == nullptr || recorder.path.empty()) return;
  unlink(recorder.path.c_str());
  ForgetPathForProcessEnd(recorder.path);
  LogInfo("flight recorder: %s removed (profile saved)", recorder.path.c_str());
}

void RemoveFlightRecorderFilesAtProcessEnd() {
  const int saved_errno = errno;
  for (int i = 0; i < kEndPathSlots; ++i) {
    if (!g_end_path_used[i].exchange(false, std::memory_order_acq_rel)) continue;
    (void)RawSyscall(SYS_unlink, reinterpret_cast<long>(g_end_paths[i]));
  }
  errno = saved_errno;
}

std::string FlightRecorderPath() {
  Recorder& recorder = GetRecorder();
  AutoLock lock(recorder.mutex);
  return g_file.load(std::memory_order_acquire) ? recorder.path : std::string();
}

}  // namespace base_internal
}  // namespace strata
