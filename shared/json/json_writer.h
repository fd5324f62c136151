// A small streaming JSON writer for big profiles.
//
// JsonWriter formats compact JSON into a pending chunk of text; each full chunk is handed to
// a JsonOutput, which either keeps it (ChunkedJsonOutput: an in-memory list of chunks that
// can later be spliced into another writer without copying) or writes it to a file
// descriptor / FILE* (FdJsonOutput, StdioJsonOutput) and reuses the memory.
//
// Why our own writer rather than rapidjson::Writer: the profile writer needs (1) splicing of
// already-written fragments by moving chunk lists, (2) repair of invalid UTF-8 (thread names
// cut by the 16-byte kernel limit, odd symbol names: the front-end rejects the whole file on
// one bad byte), (3) NaN/Infinity written as null instead of failing, (4) times written
// exactly from integer nanoseconds. rapidjson::Writer offers none of these without wrapping
// every call, and this writer is ~400 lines with no dependency beyond libstdc++.
//
// Usage:
//   ChunkedJsonWriter w;
//   w.StartObject();
//   w.Key("name"); w.String("main");
//   w.Key("time"); w.TimeMs(TimeDuration::FromNanoseconds(1500001));  // 1.500001
//   w.EndObject();
//   std::string text = w.TakeString();
//
// Errors: structural misuse (EndArray in an object, a value after a value in an object
// without Key, ...) and output errors are latched: the first one is kept in error(), later
// output is dropped. Check ok() when done.
//
// Thread safety: none; one writer per thread. Async-signal safety: none (allocates).
#ifndef STRATA_SHARED_JSON_JSON_WRITER_H_
#define STRATA_SHARED_JSON_JSON_WRITER_H_

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "platform/time_stamp.h"

namespace strata {

// Where a JsonWriter's finished chunks go.
class JsonOutput {
 public:
  JsonOutput() = default;
  JsonOutput(JsonOutput&&) = default;
  JsonOutput& operator=(JsonOutput&&) = default;
  virtual ~JsonOutput();

  // Takes the text in *chunk: either steals its storage (leaving *chunk empty) or copies the
  // text out and leaves *chunk as it was (the writer then reuses its storage as it is).
  virtual void Consume(std::string* chunk) = 0;

  // Takes whole chunks produced elsewhere (a splice). The default consumes them one by one.
  virtual void ConsumeChunks(std::vector<std::string>&& chunks);

  // The first output error ("write(/tmp/p.json): No space left on device"), or "".
  const std::string& error() const { return error_; }
  bool ok() const { return error_.empty(); }

 protected:
  // Keeps the first error only.
  void SetError(std::string message);

 private:
  std::string error_;
};

// Keeps the chunks in memory, in order. Splicing it into another writer moves the chunks.
class ChunkedJsonOutput final : public JsonOutput {
 public:
  void Consume(std::string* chunk) override;
  void ConsumeChunks(std::vector<std::string>&& chunks) override;

  // Total bytes held.
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::vector<std::string>& chunks() const { return chunks_; }

  // Moves the chunks out; this output is empty afterwards.
  std::vector<std::string> TakeChunks();
  // Concatenates the chunks (for tests and small documents).
  std::string ToString() const;

 private:
  std::vector<std::string> chunks_;
  size_t size_ = 0;
};

// Writes every chunk to a file descriptor (loops on short writes and EINTR). Does not own or
// close the descriptor. `name` is used in error messages. On a regular file, a write that
// would pass the file size limit (RLIMIT_FSIZE, `ulimit -f`) is not made: the kernel would
// send SIGXFSZ, which terminates the program by default. It is an error instead.
class FdJsonOutput final : public JsonOutput {
 public:
  FdJsonOutput(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
  void Consume(std::string* chunk) override;
  size_t bytes_written() const { return bytes_written_; }

 private:
  // False (and the error set) when writing `bytes` more would pass the file size limit.
  bool FitsFileSizeLimit(size_t bytes);

  int fd_;
  std::string name_;
  size_t bytes_written_ = 0;
};

// Writes every chunk with fwrite. Does not own or close the FILE; does not flush it.
class StdioJsonOutput final : public JsonOutput {
 public:
  StdioJsonOutput(FILE* file, std::string name) : file_(file), name_(std::move(name)) {}
  void Consume(std::string* chunk) override;

 private:
  FILE* file_;
  std::string name_;
};

class JsonWriter {
 public:
  static constexpr size_t kDefaultChunkSize = 64 * 1024;

  // `output` must outlive the writer. Text reaches it in chunks of about `chunk_size` bytes,
  // and on Flush().
  explicit JsonWriter(JsonOutput* output, size_t chunk_size = kDefaultChunkSize);
  // Flushes.
  ~JsonWriter();
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  // Structure. At the top level several values may follow each other; they are separated by
  // commas (a fragment of array elements).
  void StartObject();
  void EndObject();
  void StartArray();
  void EndArray();
  // The name of the next property; must be followed by exactly one value.
  void Key(std::string_view name);

  // Values. The integer, null and time writers are inline: profile rows are made of them.
  void Null() {
    if (!BeforeValue()) return;
    std::memcpy(Room(4), "null", 4);
    pos_ += 4;
    MaybeFlush();
  }
  void Bool(bool value);
  void Int(int64_t value) {
    if (!BeforeValue()) return;
    char* p = Room(kMaxNumberChars);
    pos_ += static_cast<size_t>(std::to_chars(p, p + kMaxNumberChars, value).ptr - p);
    MaybeFlush();
  }
  void Uint(uint64_t value) {
    if (!BeforeValue()) return;
    char* p = Room(kMaxNumberChars);
    pos_ += static_cast<size_t>(std::to_chars(p, p + kMaxNumberChars, value).ptr - p);
    MaybeFlush();
  }
  // Shortest text that reads back as the same double; NaN and +-Infinity become null.
  void Double(double value);
  // Escaped; invalid UTF-8 bytes become U+FFFD.
  void String(std::string_view value);
  // Milliseconds with up to 6 decimals, exact: 1500001 ns -> 1.500001, 2000000 ns -> 2,
  // -500 ns -> -0.0005. No binary-floating-point noise.
  void TimeMs(int64_t nanoseconds) {
    if (!BeforeValue()) return;
    pos_ += FormatTimeMs(nanoseconds, Room(kMaxNumberChars));
    MaybeFlush();
  }
  void TimeMs(TimeDuration duration) { TimeMs(duration.ToNanoseconds()); }
  // `count` nulls (array elements).
  void NullElements(size_t count);
  // One complete, valid JSON value written elsewhere, inserted verbatim. Not checked,
  // except that an empty fragment is misuse (null is written, the document stays valid).
  void Splice(std::string_view json_value);
  // The same, taking the chunks of another output (no copy when this writer's output is a
  // ChunkedJsonOutput). The fragment must hold exactly one complete JSON value.
  void Splice(ChunkedJsonOutput&& json_value);

  // Key + value helpers.
  void NullProperty(std::string_view name) { Key(name); Null(); }
  void BoolProperty(std::string_view name, bool v) { Key(name); Bool(v); }
  void IntProperty(std::string_view name, int64_t v) { Key(name); Int(v); }
  void UintProperty(std::string_view name, uint64_t v) { Key(name); Uint(v); }
  void DoubleProperty(std::string_view name, double v) { Key(name); Double(v); }
  void StringProperty(std::string_view name, std::string_view v) { Key(name); String(v); }
  void TimeMsProperty(std::string_view name, int64_t ns) { Key(name); TimeMs(ns); }
  void TimeMsProperty(std::string_view name, TimeDuration d) { Key(name); TimeMs(d); }
  void StartObjectProperty(std::string_view name) { Key(name); StartObject(); }
  void StartArrayProperty(std::string_view name) { Key(name); StartArray(); }
  void SpliceProperty(std::string_view name, std::string_view json) { Key(name); Splice(json); }

  // Hands the pending text to the output.
  void Flush();

  // Open objects/arrays.
  size_t depth() const { return stack_.size() - 1; }
  // First structural or output error, or "".
  const std::string& error() const;
  bool ok() const { return error().empty(); }

  // The longest integer or time text (sign, 20 digits, point, 6 decimals) with room to spare.
  static constexpr size_t kMaxNumberChars = 32;
  // Writes TimeMs's text at `out` (room for kMaxNumberChars) and returns its length (for
  // text made outside a writer and spliced: GeckoThreadWriter::WriteMarkerStack).
  static size_t FormatTimeMs(int64_t nanoseconds, char* out);

 private:
  enum class Scope : uint8_t { kTop, kObject, kArray };
  struct Level {
    Scope scope;
    bool has_value;  // A comma is needed before the next value or key.
  };


  // Comma handling before a value; returns false (and latches an error) on misuse.
  __attribute__((always_inline)) bool BeforeValue() {
    if (after_key_) {
      after_key_ = false;
      return true;
    }
    Level& level = stack_.back();
    if (__builtin_expect(level.scope == Scope::kObject, 0)) {
      Misuse("value in an object without a key");
      return false;
    }
    if (level.has_value) Put(',');
    level.has_value = true;
    return true;
  }
  // Writable room for `bytes` more bytes at pending_.data() + pos_ (the caller advances pos_
  // by what it wrote). The pending area is a string kept at its full size, so that writing
  // needs no per-call capacity bookkeeping of std::string.
  __attribute__((always_inline)) char* Room(size_t bytes) {
    if (__builtin_expect(pos_ + bytes > pending_.size(), 0)) Grow(bytes);
    return pending_.data() + pos_;
  }
  void Grow(size_t bytes);
  void Put(char c) {
    *Room(1) = c;
    ++pos_;
  }
  void Put(std::string_view text) {
    std::memcpy(Room(text.size()), text.data(), text.size());
    pos_ += text.size();
  }
  void MaybeFlush() {
    if (pos_ >= chunk_size_) Flush();
  }
  void WriteEscaped(std::string_view text);
  void Misuse(const char* what);

  JsonOutput* output_;
  size_t chunk_size_;
  std::string pending_;  // The first pos_ bytes are text not yet handed to output_.
  size_t pos_ = 0;
  bool filled_a_chunk_ = false;  // A full chunk was handed over: areas start at full size.
  std::vector<Level> stack_;
  bool after_key_ = false;
  std::string misuse_;
};

// A JsonWriter with its own ChunkedJsonOutput: the building block for fragments (one per
// thread table, the string table, ...) that are spliced into the final document.
namespace json_internal {
struct ChunkedOutputHolder {
  ChunkedJsonOutput chunked_output_;
};
}  // namespace json_internal

class ChunkedJsonWriter : private json_internal::ChunkedOutputHolder, public JsonWriter {
 public:
  explicit ChunkedJsonWriter(size_t chunk_size = kDefaultChunkSize)
      : JsonWriter(&chunked_output_, chunk_size) {}

  // Flushes and moves everything written so far out, for JsonWriter::Splice().
  ChunkedJsonOutput TakeOutput();
  // Flushes and returns everything written so far as one string; the writer is empty after.
  std::string TakeString();
  // Bytes written so far (flushed or pending is not distinguished: flushes first).
  size_t WrittenSize();
};

}  // namespace strata

#endif  // STRATA_SHARED_JSON_JSON_WRITER_H_
