#include "tools/strata/profile_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "rapidjson/error/en.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "tools/strata/progress.h"

namespace strata {
namespace cli {
namespace {

std::string Errno(int error_number) { return std::strerror(error_number); }

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A rapidjson input stream over a string that moves a progress bar.
class ProgressStream {
 public:
  using Ch = char;
  ProgressStream(const std::string& text, Progress* progress)
      : begin_(text.data()), current_(text.data()), end_(text.data() + text.size()), progress_(progress) {}
  Ch Peek() const { return current_ < end_ ? *current_ : '\0'; }
  Ch Take() {
    if (current_ >= end_) return '\0';
    if ((reinterpret_cast<uintptr_t>(current_) & 0xFFFFF) == 0) progress_->Set(Tell());
    return *current_++;
  }
  size_t Tell() const { return static_cast<size_t>(current_ - begin_); }
  Ch* PutBegin() { return nullptr; }
  void Put(Ch) {}
  void Flush() {}
  size_t PutEnd(Ch*) { return 0; }

 private:
  const Ch* begin_;
  const Ch* current_;
  const Ch* end_;
  Progress* progress_;
};

// Gecko profiles nest a few levels deep (threads > tables > rows > cells). RapidJSON's
// parser, our readers and its writer all recurse once per level, so a hostile file of
// 100 000 '[' would overflow the stack: refuse anything nested deeper than this first.
constexpr size_t kMaxNestingDepth = 1000;

// The offset where `text` first nests deeper than `limit` arrays/objects (outside strings),
// or npos.
size_t TooDeepAt(const std::string& text, size_t limit) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string::npos;
}

}  // namespace

bool ReadFileContents(const std::string& path, std::string* contents, std::string* error) {
  contents->clear();
  const int fd = path == "-" ? dup(STDIN_FILENO) : open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = path + ": cannot open: " + Errno(errno);
    return false;
  }
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    close(fd);
    *error = path + ": is a directory";
    return false;
  }
  const uint64_t size_on_disk = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  gzFile in = gzdopen(fd, "rb");  // Reads plain files as they are.
  if (in == nullptr) {
    close(fd);
    *error = path + ": cannot read: out of memory";
    return false;
  }
  // Buffers sized to the file (a 1 MiB read buffer and 1 MiB steps of the string, each
  // zero-filled by resize, made `strata record`'s merge of 1000 small profiles spend most of
  // its time faulting in and clearing pages; issue 38).
  constexpr size_t kChunk = 1 << 20;
  constexpr size_t kMinimumStep = 4096;
  gzbuffer(in, static_cast<unsigned>(std::clamp<uint64_t>(size_on_disk, 8192, kChunk)));
  Progress progress("read " + BaseName(path), size_on_disk);
  contents->reserve(static_cast<size_t>(size_on_disk) + 1);
  for (;;) {
    const size_t at = contents->size();
    // What the file still holds (one byte more, to see its end), or half again what was read
    // (compressed input), between kMinimumStep and kChunk.
    const uint64_t expected = size_on_disk + 1 > at ? size_on_disk + 1 - at : at / 2;
    const size_t step = static_cast<size_t>(std::clamp<uint64_t>(expected, kMinimumStep, kChunk));
    contents->resize(at + step);
    const int n = gzread(in, &(*contents)[at], static_cast<unsigned>(step));
    if (n < 0) {
      int zerr = 0;
      const char* message = gzerror(in, &zerr);
      *error = path + ": cannot read: " +
               (zerr == Z_ERRNO ? Errno(errno) : std::string("corrupt gzip data (") + message + ")");
      gzclose(in);
      contents->clear();
      return false;
    }
    contents->resize(at + static_cast<size_t>(n));
    if (n == 0) break;
    progress.Set(static_cast<uint64_t>(gzoffset(in)));
  }
  int zerr = Z_OK;
  gzerror(in, &zerr);
  gzclose(in);
  if (zerr != Z_OK && zerr != Z_BUF_ERROR) {
    *error = path + ": cannot read: corrupt gzip data";
    return false;
  }
  if (zerr == Z_BUF_ERROR) {
    *error = path + ": truncated gzip data (the file ends in the middle of the compressed stream)";
    return false;
  }
  return true;
}

const char* KnownNonProfileFormat(std::string_view text) {
  if (text.substr(0, 8) == "PERFILE2" || text.substr(0, 8) == "PERFFILE") {
    return "this is a perf.data file (perf record's format), not a Gecko profile; record with "
           "`strata record -- CMD`, or load `perf script` output in profiler.firefox.com";
  }
  if (text.substr(0, 4) == "\x7f" "ELF") return "this is an ELF file (a program or library), not a profile";
  if (text.substr(0, 4) == "PK\x03\x04") {
    return "this is a zip archive; unpack the profile from it first";
  }
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f &&
      static_cast<unsigned char>(text[1]) == 0x8b) {
    return "gzip data inside gzip data (compressed twice?); decompress it once";
  }
  // pprof's profile.proto, gzipped (read back decompressed): field 1, sample_type (wire type 2).
  if (text.size() >= 2 && text[0] == 0x0a && static_cast<unsigned char>(text[1]) < 0x80 &&
      text.find('{') == std::string_view::npos) {
    return "this looks like a pprof profile (profile.proto), not a Gecko profile";
  }
  return nullptr;
}

bool ParseProfileJson(const std::string& path, const std::string& text, rapidjson::Document* document,
                      std::string* error) {
  if (text.empty()) {
    *error = path + ": empty file (not a profile)";
    return false;
  }
  if (const char* kind = KnownNonProfileFormat(text)) {
    *error = path + ": " + kind;
    return false;
  }
  const size_t too_deep = TooDeepAt(text, kMaxNestingDepth);
  if (too_deep != std::string::npos) {
    *error = path + ": not a Gecko profile (nested deeper than " + std::to_string(kMaxNestingDepth) +
             " levels at byte " + std::to_string(too_deep) + ")";
    return false;
  }
  Progress progress("parse " + BaseName(path), text.size());
  ProgressStream stream(text, &progress);
  document->ParseStream<rapidjson::kParseFullPrecisionFlag>(stream);
  progress.Done();
  if (document->HasParseError()) {
    *error = path + ": not JSON (at byte " + std::to_string(document->GetErrorOffset()) + ": " +
             rapidjson::GetParseError_En(document->GetParseError()) + ")";
    return false;
  }
  if (!document->IsObject()) {
    *error = path + ": not a Gecko profile (the JSON is not an object)";
    return false;
  }
  if (!document->HasMember("meta") || !(*document)["meta"].IsObject()) {
    *error = path + ": not a Gecko profile (no \"meta\" object)";
    return false;
  }
  if (!document->HasMember("threads") || !(*document)["threads"].IsArray()) {
    *error = path + ": not a Gecko profile (no \"threads\" array)";
    return false;
  }
  const rapidjson::Value& meta = (*document)["meta"];
  if (!meta.HasMember("version") || !meta["version"].IsNumber()) {
    *error = path + ": not a Gecko profile (no meta.version)";
    return false;
  }
  return true;
}

bool LoadProfileDocument(const std::string& path, rapidjson::Document* document, std::string* error) {
  std::string text;
  return ReadFileContents(path, &text, error) && ParseProfileJson(path, text, document, error);
}

bool WantsGzip(std::string_view path) {
  return path.size() > 3 && path.substr(path.size() - 3) == ".gz";
}

struct OutputFile::Gzip {
  z_stream stream{};
  bool initialized = false;
  std::string buffer = std::string(1 << 18, '\0');
};

OutputFile::OutputFile(std::string path, bool gzip) : path_(std::move(path)) {
  if (path_ == "-") {
    to_stdout_ = true;
    fd_ = STDOUT_FILENO;
  } else {
    static std::atomic<int> counter{0};
    const size_t slash = path_.rfind('/');
    const std::string directory = slash == std::string::npos ? "" : path_.substr(0, slash + 1);
    const std::string name = slash == std::string::npos ? path_ : path_.substr(slash + 1);
    if (name.empty()) {
      error_ = path_ + ": not a file name";
      return;
    }
    temporary_path_ = directory + "." + name + ".tmp-" + std::to_string(getpid()) + "-" +
                      std::to_string(counter++);
    fd_ = open(temporary_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0) {
      const int e = errno;
      fd_ = -1;
      error_ = path_ + ": cannot create " + temporary_path_ + ": " + Errno(e);
      return;
    }
  }
  if (gzip) {
    gzip_ = std::make_unique<Gzip>();
    if (deflateInit2(&gzip_->stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      error_ = path_ + ": cannot start gzip compression";
      return;
    }
    gzip_->initialized = true;
  }
}

OutputFile::~OutputFile() {
  if (gzip_ && gzip_->initialized) deflateEnd(&gzip_->stream);
  if (!to_stdout_ && fd_ >= 0) close(fd_);
  if (!committed_ && !temporary_path_.empty()) unlink(temporary_path_.c_str());
}

void OutputFile::Fail(const std::string& step, int error_number) {
  if (error_.empty()) error_ = path_ + ": " + step + ": " + Errno(error_number);
}

void OutputFile::WriteRaw(const char* data, size_t size) {
  while (size > 0 && ok()) {
    const ssize_t n = write(fd_, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      Fail("write" + (temporary_path_.empty() ? std::string() : " " + temporary_path_), errno);
      return;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void OutputFile::Write(std::string_view bytes) {
  if (!ok()) return;
  bytes_ += bytes.size();
  if (!gzip_) {
    WriteRaw(bytes.data(), bytes.size());
    return;
  }
  z_stream& z = gzip_->stream;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  while (z.avail_in > 0 && ok()) {
    z.next_out = reinterpret_cast<Bytef*>(&gzip_->buffer[0]);
    z.avail_out = static_cast<uInt>(gzip_->buffer.size());
    deflate(&z, Z_NO_FLUSH);
    WriteRaw(gzip_->buffer.data(), gzip_->buffer.size() - z.avail_out);
  }
}

bool OutputFile::Commit() {
  if (ok() && gzip_) {
    z_stream& z = gzip_->stream;
    z.next_in = nullptr;
    z.avail_in = 0;
    int status = Z_OK;
    while (status != Z_STREAM_END && ok()) {
      z.next_out = reinterpret_cast<Bytef*>(&gzip_->buffer[0]);
      z.avail_out = static_cast<uInt>(gzip_->buffer.size());
      status = deflate(&z, Z_FINISH);
      if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR) {
        error_ = path_ + ": gzip compression failed";
        break;
      }
      WriteRaw(gzip_->buffer.data(), gzip_->buffer.size() - z.avail_out);
    }
  }
  if (!ok()) return false;
  if (to_stdout_) {
    committed_ = true;
    return true;
  }
  if (fsync(fd_) != 0 && errno != EINVAL) {
    Fail("fsync " + temporary_path_, errno);
    return false;
  }
  if (close(fd_) != 0) {
    fd_ = -1;
    Fail("close " + temporary_path_, errno);
    return false;
  }
  fd_ = -1;
  if (rename(temporary_path_.c_str(), path_.c_str()) != 0) {
    Fail("rename from " + temporary_path_, errno);
    return false;
  }
  committed_ = true;
  return true;
}

bool WriteFileAtomically(const std::string& path, std::string_view contents, std::string* error) {
  OutputFile file(path, WantsGzip(path));
  Progress progress("write " + BaseName(path), contents.size());
  constexpr size_t kChunk = 1 << 20;
  for (size_t at = 0; at < contents.size() && file.ok(); at += kChunk) {
    file.Write(contents.substr(at, kChunk));
    progress.Set(at);
  }
  progress.Done();
  if (!file.Commit()) {
    *error = file.error();
    return false;
  }
  return true;
}

std::string ToJson(const rapidjson::Value& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  value.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

namespace {

// A rapidjson output stream into an OutputFile, in 1 MiB pieces.
class OutputFileStream {
 public:
  using Ch = char;
  OutputFileStream(OutputFile* file, Progress* progress) : file_(file), progress_(progress) {
    buffer_.reserve(kSize);
  }
  void Put(Ch c) {
    buffer_.push_back(c);
    if (buffer_.size() >= kSize) Flush();
  }
  void Flush() {
    file_->Write(buffer_);
    buffer_.clear();
    progress_->Set(file_->bytes());
  }

 private:
  static constexpr size_t kSize = 1 << 20;
  OutputFile* file_;
  Progress* progress_;
  std::string buffer_;
};

}  // namespace

bool WriteJsonAtomically(const std::string& path, const rapidjson::Value& value, uint64_t* bytes,
                         std::string* error) {
  OutputFile file(path, WantsGzip(path));
  if (!file.ok()) {
    *error = file.error();
    return false;
  }
  Progress progress("write " + BaseName(path), 0);
  OutputFileStream stream(&file, &progress);
  rapidjson::Writer<OutputFileStream> writer(stream);
  if (!value.Accept(writer)) {
    *error = path + ": the document cannot be written as JSON (a NaN or infinite number?)";
    return false;
  }
  stream.Flush();
  progress.Done();
  if (!file.Commit()) {
    *error = file.error();
    return false;
  }
  if (bytes != nullptr) *bytes = file.bytes();
  return true;
}

std::string HumanBytes(uint64_t bytes) {
  char text[32];
  if (bytes >= 1000 * 1000) {
    std::snprintf(text, sizeof(text), "%.1f MB", bytes / 1e6);
  } else if (bytes >= 1000) {
    std::snprintf(text, sizeof(text), "%.0f kB", bytes / 1e3);
  } else {
    std::snprintf(text, sizeof(text), "%llu B", static_cast<unsigned long long>(bytes));
  }
  return text;
}

}  // namespace cli
}  // namespace strata
