// Reading and writing profile files for the `strata` command: plain or gzip-compressed
// (recognised by content when reading, by a ".gz" suffix when writing), JSON parsing with a
// progress bar, and atomic writes (temporary file in the destination's directory, renamed
// into place: a reader never sees half a file). Every error message names the file and what
// is wrong with it.
//
// Thread safety: none needed (functions of their arguments).
#ifndef STRATA_TOOLS_STRATA_PROFILE_IO_H_
#define STRATA_TOOLS_STRATA_PROFILE_IO_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "rapidjson/document.h"

namespace strata {
namespace cli {

// Reads the whole file, decompressing gzip content. "-" is standard input.
bool ReadFileContents(const std::string& path, std::string* contents, std::string* error);

// Parses a Gecko profile (JSON object with "meta" and "threads"). A document constructed on
// a shared allocator keeps its values there (documents that share one can move values
// between them at no cost). Errors: "PATH: not JSON (offset 123: Missing a comma...)", "PATH: not a
// Gecko profile (no \"meta\" object)".
bool ParseProfileJson(const std::string& path, const std::string& text, rapidjson::Document* document,
                      std::string* error);

// What a file that is certainly not JSON is ("this is a perf.data file ...": perf.data, ELF,
// zip, doubly gzipped data, pprof), from its first bytes; null otherwise. ParseProfileJson
// gives this message instead of a JSON parse error.
const char* KnownNonProfileFormat(std::string_view text);

// ReadFileContents + ParseProfileJson.
bool LoadProfileDocument(const std::string& path, rapidjson::Document* document, std::string* error);

// Whether `path` names a gzip output (ends in ".gz").
bool WantsGzip(std::string_view path);

// A file written to a temporary name and renamed into place by Commit(); removed if never
// committed. With gzip, the bytes are compressed on the way. "-" writes to standard output
// (no rename).
class OutputFile {
 public:
  OutputFile(std::string path, bool gzip);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  void Write(std::string_view bytes);
  // Flushes, syncs and renames; false with error() set on any failure (the destination is
  // then untouched).
  bool Commit();
  // Bytes written so far (before compression).
  uint64_t bytes() const { return bytes_; }

 private:
  struct Gzip;
  void Fail(const std::string& step, int error_number);
  void WriteRaw(const char* data, size_t size);

  std::string path_;
  std::string temporary_path_;
  int fd_ = -1;
  bool to_stdout_ = false;
  bool committed_ = false;
  uint64_t bytes_ = 0;
  std::unique_ptr<Gzip> gzip_;
  std::string error_;
};

// Writes `contents` to `path` atomically (gzip when the name ends in ".gz").
bool WriteFileAtomically(const std::string& path, std::string_view contents, std::string* error);

// Writes `value` as compact JSON to `path` atomically (gzip when the name ends in ".gz"),
// streaming (no copy of the whole text). *bytes: the JSON's size before compression.
bool WriteJsonAtomically(const std::string& path, const rapidjson::Value& value, uint64_t* bytes,
                         std::string* error);

// Serializes `value` as compact JSON.
std::string ToJson(const rapidjson::Value& value);

// "1.2 MB", "340 kB", "12 B".
std::string HumanBytes(uint64_t bytes);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_PROFILE_IO_H_
