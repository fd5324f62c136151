#include "shared/json/json_writer.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include "shared/json/shortest_double.h"

namespace strata {

// ---- Outputs ------------------------------------------------------------------------------

JsonOutput::~JsonOutput() = default;

void JsonOutput::ConsumeChunks(std::vector<std::string>&& chunks) {
  for (std::string& chunk : chunks) Consume(&chunk);
  chunks.clear();
}

void JsonOutput::SetError(std::string message) {
  if (error_.empty()) error_ = std::move(message);
}

void ChunkedJsonOutput::Consume(std::string* chunk) {
  if (chunk->empty()) return;
  size_ += chunk->size();
  chunks_.push_back(std::move(*chunk));
  chunk->clear();  // A moved-from string is valid but unspecified.
}

void ChunkedJsonOutput::ConsumeChunks(std::vector<std::string>&& chunks) {
  for (std::string& chunk : chunks) {
    if (chunk.empty()) continue;
    size_ += chunk.size();
    chunks_.push_back(std::move(chunk));
  }
  chunks.clear();
}

std::vector<std::string> ChunkedJsonOutput::TakeChunks() {
  size_ = 0;
  return std::exchange(chunks_, {});
}

std::string ChunkedJsonOutput::ToString() const {
  std::string out;
  out.reserve(size_);
  for (const std::string& chunk : chunks_) out += chunk;
  return out;
}

bool FdJsonOutput::FitsFileSizeLimit(size_t bytes) {
  rlimit limit{};
  if (getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return true;
  struct stat st {};
  if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) return true;  // Pipes have no such limit.
  const off_t offset = lseek(fd_, 0, SEEK_CUR);
  if (offset < 0 || static_cast<uint64_t>(offset) + bytes <= limit.rlim_cur) return true;
  SetError("write(" + name_ + "): the profile is larger than the file size limit (ulimit -f)");
  return false;
}

void FdJsonOutput::Consume(std::string* chunk) {
  if (!ok() || !FitsFileSizeLimit(chunk->size())) return;
  const char* data = chunk->data();
  size_t left = chunk->size();
  while (ok() && left > 0) {
    ssize_t n = write(fd_, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      SetError("write(" + name_ + "): " + strerror(errno));
      break;
    }
    data += n;
    left -= static_cast<size_t>(n);
    bytes_written_ += static_cast<size_t>(n);
  }
}

void StdioJsonOutput::Consume(std::string* chunk) {
  if (ok() && !chunk->empty() && fwrite(chunk->data(), 1, chunk->size(), file_) != chunk->size()) {
    SetError("fwrite(" + name_ + "): " + strerror(errno));
  }
}

// ---- JsonWriter ---------------------------------------------------------------------------

namespace {
// Room beyond the chunk size in the pending area: a value that crosses the chunk size still
// fits without growing (values are flushed after, never split).
constexpr size_t kPendingSlack = 1024;
// A writer's first area: small documents (a schema, an idle thread's rows) stay small.
constexpr size_t kFirstArea = 4096;
}  // namespace

JsonWriter::JsonWriter(JsonOutput* output, size_t chunk_size)
    : output_(output), chunk_size_(chunk_size == 0 ? 1 : chunk_size) {
  stack_.push_back(Level{Scope::kTop, false});
}

JsonWriter::~JsonWriter() { Flush(); }

const std::string& JsonWriter::error() const {
  return misuse_.empty() ? output_->error() : misuse_;
}

void JsonWriter::Misuse(const char* what) {
  if (misuse_.empty()) misuse_ = std::string("JSON writer misuse: ") + what;
}

void JsonWriter::Flush() {
  if (pos_ == 0) return;
  if (pos_ >= chunk_size_) filled_a_chunk_ = true;
  pending_.resize(pos_);  // Shrinking: no byte is written.
  output_->Consume(&pending_);
  pos_ = 0;
  // A file output left the text in place, a chunk list stole the storage: either way the
  // next write that needs more room takes it (Grow), never a flush. Growing back to full size
  // here zero-filled ~60 KiB after the last, small flush of every document (issue 38: a
  // short process's exit save).
}

void JsonWriter::Grow(size_t bytes) {
  // The area doubles from kFirstArea up to the chunk size plus slack (straight to that size
  // once a full chunk has been handed over: the writer is a big one); beyond that only for
  // one value larger than the slack (a long string or splice).
  const size_t full = chunk_size_ + kPendingSlack;
  size_t target;
  if (pending_.size() >= full) {
    target = pending_.size() * 2;
  } else if (filled_a_chunk_) {
    target = full;
  } else {
    target = std::min(std::max(pending_.size() * 2, kFirstArea), full);
  }
  pending_.resize(std::max(target, pos_ + bytes));
}

void JsonWriter::Key(std::string_view name) {
  Level& level = stack_.back();
  if (level.scope != Scope::kObject || after_key_) {
    Misuse("key outside an object or after a key");
    return;
  }
  if (level.has_value) Put(',');
  level.has_value = true;
  WriteEscaped(name);
  Put(':');
  after_key_ = true;
}

void JsonWriter::StartObject() {
  if (!BeforeValue()) return;
  Put('{');
  stack_.push_back(Level{Scope::kObject, false});
}

void JsonWriter::EndObject() {
  if (stack_.back().scope != Scope::kObject || after_key_) {
    Misuse("EndObject without a matching StartObject, or after a key");
    return;
  }
  stack_.pop_back();
  Put('}');
  MaybeFlush();
}

void JsonWriter::StartArray() {
  if (!BeforeValue()) return;
  Put('[');
  stack_.push_back(Level{Scope::kArray, false});
}

void JsonWriter::EndArray() {
  if (stack_.back().scope != Scope::kArray) {
    Misuse("EndArray without a matching StartArray");
    return;
  }
  stack_.pop_back();
  Put(']');
  MaybeFlush();
}

void JsonWriter::Bool(bool value) {
  if (!BeforeValue()) return;
  Put(value ? std::string_view("true") : std::string_view("false"));
  MaybeFlush();
}

void JsonWriter::Double(double value) {
  if (!BeforeValue()) return;
  if (!std::isfinite(value)) {
    Put("null");
  } else {
    // Round-trip form; exponents look like "1e+21" / "1.5e-07", both valid JSON.
    char buffer[kMaxRoundTripDoubleChars];
    const char* const end = FormatRoundTripDouble(value, buffer);
    Put(std::string_view(buffer, static_cast<size_t>(end - buffer)));
  }
  MaybeFlush();
}

size_t JsonWriter::FormatTimeMs(int64_t nanoseconds, char* out) {
  // Work on the magnitude as unsigned so that INT64_MIN is fine.
  const uint64_t magnitude = nanoseconds < 0 ? 0 - static_cast<uint64_t>(nanoseconds)
                                             : static_cast<uint64_t>(nanoseconds);
  char* p = out;
  if (nanoseconds < 0) *p++ = '-';
  p = std::to_chars(p, out + kMaxNumberChars, magnitude / 1000000).ptr;
  uint32_t fraction = static_cast<uint32_t>(magnitude % 1000000);
  if (fraction != 0) {
    // Six decimals written as three pairs, then the trailing zeros dropped.
    static constexpr char kPairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";
    *p = '.';
    for (int i = 2; i >= 0; --i) {
      std::memcpy(p + 1 + 2 * i, &kPairs[2 * (fraction % 100)], 2);
      fraction /= 100;
    }
    int length = 6;
    while (p[length] == '0') --length;
    p += 1 + length;
  }
  return static_cast<size_t>(p - out);
}

void JsonWriter::NullElements(size_t count) {
  for (size_t i = 0; i < count; ++i) Null();
}

void JsonWriter::String(std::string_view value) {
  if (!BeforeValue()) return;
  WriteEscaped(value);
  MaybeFlush();
}

void JsonWriter::Splice(std::string_view json_value) {
  if (!BeforeValue()) return;
  if (json_value.empty()) {
    Misuse("splice of an empty fragment (null written instead)");
    json_value = "null";
  }
  Put(json_value);
  MaybeFlush();
}

void JsonWriter::Splice(ChunkedJsonOutput&& json_value) {
  if (json_value.empty()) {
    Splice(std::string_view());
    return;
  }
  if (!BeforeValue()) return;
  // Small fragments are copied (keeps chunks reasonably big); big ones are moved.
  if (json_value.size() < chunk_size_ / 4) {
    for (const std::string& chunk : json_value.chunks()) Put(chunk);
    json_value.TakeChunks();
    MaybeFlush();
    return;
  }
  Flush();
  output_->ConsumeChunks(json_value.TakeChunks());
}

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not valid (bad lead
// byte, bad or missing continuation, overlong form, surrogate, or above U+10FFFF).
size_t ValidUtf8Length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char lead = byte(i);
  size_t length;
  unsigned char min2 = 0x80, max2 = 0xBF;  // Allowed range of the second byte.
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) min2 = 0xA0;  // Overlong.
    if (lead == 0xED) max2 = 0x9F;  // Surrogates.
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) min2 = 0x90;  // Overlong.
    if (lead == 0xF4) max2 = 0x8F;  // Above U+10FFFF.
  } else {
    return 0;
  }
  if (i + length > s.size()) return 0;
  if (byte(i + 1) < min2 || byte(i + 1) > max2) return 0;
  for (size_t k = 2; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  return length;
}

}  // namespace

namespace {

// True when one of the 8 bytes of `word` needs more than a copy: a control character
// (< 0x20), '"', '\\' or a byte of a multi-byte UTF-8 sequence (>= 0x80, to be validated).
inline bool NeedsEscapeOrCheck(uint64_t word) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHighs = 0x8080808080808080ULL;
  const auto has_zero_byte = [](uint64_t v) { return (v - kOnes) & ~v & kHighs; };
  const uint64_t below_space = (word - kOnes * 0x20) & ~word & kHighs;
  return (below_space | (word & kHighs) | has_zero_byte(word ^ (kOnes * '"')) |
          has_zero_byte(word ^ (kOnes * '\\'))) != 0;
}

}  // namespace

void JsonWriter::WriteEscaped(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  // The input is done in pieces, each with room reserved once for its worst case: 6 output
  // bytes per input byte ("\u001f"), plus the end of a UTF-8 sequence that starts inside the
  // piece (at most 3 more bytes, copied as they are).
  constexpr size_t kPiece = 4096;
  const char* const s = text.data();
  const size_t n = text.size();
  Put('"');
  size_t i = 0;
  while (i < n) {
    const size_t piece_end = i + std::min(n - i, kPiece);
    char* const start = Room(6 * (piece_end - i) + 8);
    char* p = start;
    while (i < piece_end) {
      // Fast path: 8 plain printable ASCII bytes at a time; the last few bytes of the piece
      // (all of a short string: keys, names) as one word padded with spaces, of which only
      // the real bytes count (the room reserved covers the 8 bytes stored).
      {
        const size_t left = piece_end - i;
        uint64_t word = 0x2020202020202020ULL;
        memcpy(&word, s + i, left < 8 ? left : 8);
        if (!NeedsEscapeOrCheck(word)) {
          memcpy(p, &word, 8);
          const size_t taken = left < 8 ? left : 8;
          p += taken;
          i += taken;
          continue;
        }
      }
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
        *p++ = static_cast<char>(c);
        ++i;
        continue;
      }
      if (c >= 0x80) {
        const size_t length = ValidUtf8Length(text, i);
        if (length != 0) {
          memcpy(p, s + i, length);
          p += length;
          i += length;
        } else {
          memcpy(p, "\xEF\xBF\xBD", 3);  // U+FFFD REPLACEMENT CHARACTER.
          p += 3;
          ++i;
        }
        continue;
      }
      *p++ = '\\';
      switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\n': *p++ = 'n'; break;
        case '\r': *p++ = 'r'; break;
        case '\t': *p++ = 't'; break;
        case '\b': *p++ = 'b'; break;
        case '\f': *p++ = 'f'; break;
        default: {
          const char escape[5] = {'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
          memcpy(p, escape, sizeof(escape));
          p += sizeof(escape);
        }
      }
      ++i;
    }
    pos_ += static_cast<size_t>(p - start);
  }
  Put('"');
}

// ---- ChunkedJsonWriter --------------------------------------------------------------------

ChunkedJsonOutput ChunkedJsonWriter::TakeOutput() {
  Flush();
  ChunkedJsonOutput out;
  out.ConsumeChunks(chunked_output_.TakeChunks());
  return out;
}

std::string ChunkedJsonWriter::TakeString() {
  Flush();
  std::string text = chunked_output_.ToString();
  chunked_output_.TakeChunks();
  return text;
}

size_t ChunkedJsonWriter::WrittenSize() {
  Flush();
  return chunked_output_.size();
}

}  // namespace strata
