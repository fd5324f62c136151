// Reading a flight recorder file (flight_format.h) that a process left behind, whatever state
// it is in: every checksum and bound is checked, nothing in the file is trusted. What is
// consistent is kept; what is not is counted and described in `problems`.
//
// Chunks are taken in global-index order: done chunks (sealed ones only when their data
// checksum matches) and the chunk being written up to its published committed bytes. Blocks
// are cut out of them as the buffer wrote them (a block may straddle two consecutive chunks);
// a block that is not whole — cut by a missing or damaged chunk, or past the committed bytes —
// is dropped.
//
// Thread safety: value types and pure functions. Async-signal safety: no (allocates).
#ifndef STRATA_SHARED_FLIGHT_FLIGHT_READER_H_
#define STRATA_SHARED_FLIGHT_FLIGHT_READER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shared/flight/flight_format.h"
#include "shared/profile/library_timeline.h"

namespace strata {
namespace flight {

struct SessionFacts {
  int64_t start_ns = 0;
  int64_t start_epoch_ns = 0;
  double interval_ms = 1;
  uint32_t features = 0;
  std::string feature_names;
  uint32_t pid = 0;
  std::string program;
  std::vector<std::pair<std::string, std::string>> categories;  // name, color
};

struct ThreadFacts {
  int32_t tid = 0;
  std::string name;
  int64_t register_ns = 0;
  int64_t unregister_ns = 0;  // 0: still running.
  bool is_main = false;
};

struct MarkerTypeFacts {
  uint8_t tag = 0;
  std::string name;
  std::string schema;
};

struct CounterFacts {
  bool present = false;
  std::string name, category, description;
};

struct FlightContents {
  FileHeader header{};
  bool clean_end = false;
  int64_t end_ns = 0;
  std::optional<SessionFacts> session;
  std::vector<ThreadFacts> threads;
  std::vector<profile::LibraryLifetime> libraries;
  std::vector<MarkerTypeFacts> marker_types;
  std::vector<CounterFacts> counters;
  // The recovered blocks' entries (without their size headers), oldest first.
  std::vector<std::string> entries;
  // What was found.
  size_t chunks_read = 0;      // Chunks whose blocks were taken.
  size_t chunks_damaged = 0;   // Bad descriptors, bad checksums, impossible fields.
  size_t chunks_unsealed = 0;  // Done chunks taken without a data checksum (not sealed yet).
  size_t blocks_dropped = 0;   // Blocks cut by a gap, a damaged chunk or the committed end.
  uint64_t bytes_missing = 0;  // Global-index bytes between the chunks read.
  std::vector<std::string> problems;  // Human-readable, one per kind of trouble.
};

// Reads `bytes` of a file's contents. False with *error when nothing can be recovered (not a
// flight recorder file, unknown version, damaged header); true otherwise, with what is
// consistent in *out (problems listed there).
bool ReadFlightContents(const uint8_t* data, size_t bytes, FlightContents* out, std::string* error);

// Maps and reads the file at `path` (a truncated file is read as far as it goes).
bool ReadFlightFile(const std::string& path, FlightContents* out, std::string* error);

}  // namespace flight
}  // namespace strata

#endif  // STRATA_SHARED_FLIGHT_FLIGHT_READER_H_
