#include "shared/json/json_writer.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <utility>

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

void FdJsonOutput::Consume(std::string* chunk) {
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
  chunk->clear();  // Keeps the capacity for the writer's next chunk.
}

void StdioJsonOutput::Consume(std::string* chunk) {
  if (ok() && !chunk->empty() && fwrite(chunk->data(), 1, chunk->size(), file_) != chunk->size()) {
    SetError("fwrite(" + name_ + "): " + strerror(errno));
  }
  chunk->clear();
}

// ---- JsonWriter ---------------------------------------------------------------------------

JsonWriter::JsonWriter(JsonOutput* output, size_t chunk_size)
    : output_(output), chunk_size_(chunk_size == 0 ? 1 : chunk_size) {
  pending_.reserve(chunk_size_ + 256);
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
  if (pending_.empty()) return;
  output_->Consume(&pending_);
  if (pending_.capacity() < chunk_size_) pending_.reserve(chunk_size_ + 256);
}

bool JsonWriter::BeforeValue() {
  Level& level = stack_.back();
  if (after_key_) {
    after_key_ = false;
    return true;
  }
  if (level.scope == Scope::kObject) {
    Misuse("value in an object without a key");
    return false;
  }
  if (level.has_value) Put(',');
  level.has_value = true;
  return true;
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

void JsonWriter::Null() {
  if (!BeforeValue()) return;
  Put("null");
  MaybeFlush();
}

void JsonWriter::Bool(bool value) {
  if (!BeforeValue()) return;
  Put(value ? std::string_view("true") : std::string_view("false"));
  MaybeFlush();
}

void JsonWriter::Int(int64_t value) {
  if (!BeforeValue()) return;
  char buffer[24];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  Put(std::string_view(buffer, static_cast<size_t>(result.ptr - buffer)));
  MaybeFlush();
}

void JsonWriter::Uint(uint64_t value) {
  if (!BeforeValue()) return;
  char buffer[24];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  Put(std::string_view(buffer, static_cast<size_t>(result.ptr - buffer)));
  MaybeFlush();
}

void JsonWriter::Double(double value) {
  if (!BeforeValue()) return;
  if (!std::isfinite(value)) {
    Put("null");
  } else {
    // Shortest round-trip form; exponents look like "1e+21" / "1.5e-07", both valid JSON.
    char buffer[32];
    auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    Put(std::string_view(buffer, static_cast<size_t>(result.ptr - buffer)));
  }
  MaybeFlush();
}

void JsonWriter::TimeMs(int64_t nanoseconds) {
  if (!BeforeValue()) return;
  // Work on the magnitude as unsigned so that INT64_MIN is fine.
  uint64_t magnitude = nanoseconds < 0 ? 0 - static_cast<uint64_t>(nanoseconds)
                                       : static_cast<uint64_t>(nanoseconds);
  char buffer[32];
  char* p = buffer;
  if (nanoseconds < 0) *p++ = '-';
  p = std::to_chars(p, buffer + sizeof(buffer), magnitude / 1000000).ptr;
  uint32_t fraction = static_cast<uint32_t>(magnitude % 1000000);
  if (fraction != 0) {
    *p++ = '.';
    char digits[6];
    for (int i = 5; i >= 0; --i) {
      digits[i] = static_cast<char>('0' + fraction % 10);
      fraction /= 10;
    }
    int length = 6;
    while (digits[length - 1] == '0') --length;
    memcpy(p, digits, static_cast<size_t>(length));
    p += length;
  }
  Put(std::string_view(buffer, static_cast<size_t>(p - buffer)));
  MaybeFlush();
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

void JsonWriter::WriteEscaped(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  Put('"');
  size_t run_start = 0;
  size_t i = 0;
  const auto flush_run = [&]() {
    if (i > run_start) Put(text.substr(run_start, i - run_start));
  };
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      size_t length = ValidUtf8Length(text, i);
      if (length != 0) {
        i += length;
        continue;
      }
      flush_run();
      Put("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER.
      run_start = ++i;
      continue;
    }
    flush_run();
    switch (c) {
      case '"': Put("\\\""); break;
      case '\\': Put("\\\\"); break;
      case '\n': Put("\\n"); break;
      case '\r': Put("\\r"); break;
      case '\t': Put("\\t"); break;
      case '\b': Put("\\b"); break;
      case '\f': Put("\\f"); break;
      default: {
        char escape[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
        Put(std::string_view(escape, sizeof(escape)));
      }
    }
    run_start = ++i;
  }
  flush_run();
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
