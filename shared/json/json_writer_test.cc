#include "shared/json/json_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "catch2/catch.hpp"
#include "rapidjson/document.h"

namespace strata {
namespace {

// Writes one value with `f` and returns the text.
template <typename F>
std::string One(F&& f) {
  ChunkedJsonWriter w;
  f(w);
  REQUIRE(w.ok());
  return w.TakeString();
}

std::string Str(std::string_view s) {
  return One([&](JsonWriter& w) { w.String(s); });
}

std::string Time(int64_t ns) {
  return One([&](JsonWriter& w) { w.TimeMs(ns); });
}

std::string Dbl(double d) {
  return One([&](JsonWriter& w) { w.Double(d); });
}

TEST_CASE("strings are escaped") {
  CHECK(Str("plain") == R"("plain")");
  CHECK(Str("a\"b\\c") == R"("a\"b\\c")");
  CHECK(Str("\n\r\t\b\f") == R"("\n\r\t\b\f")");
  CHECK(Str(std::string_view("\x01\x1f\0", 3)) == R"("\u0001\u001f\u0000")");
  CHECK(Str("/ and \x7f stay") == "\"/ and \x7f stay\"");
  CHECK(Str("") == R"("")");
}

TEST_CASE("valid UTF-8 is kept, invalid bytes become U+FFFD") {
  CHECK(Str("µs é 中 😀") == "\"µs é 中 😀\"");
  // A thread name cut by the 16-byte kernel limit in the middle of a character.
  CHECK(Str("worker-\xE4\xB8") == "\"worker-\xEF\xBF\xBD\xEF\xBF\xBD\"");
  CHECK(Str("\xFF") == "\"\xEF\xBF\xBD\"");
  CHECK(Str("\xC0\xAF") == "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");          // Overlong '/'.
  CHECK(Str("\xED\xA0\x80") == "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // Surrogate.
  CHECK(Str("\xF4\x90\x80\x80").find("\xEF\xBF\xBD") != std::string::npos);  // > U+10FFFF.
  CHECK(Str("a\x80z") == "\"a\xEF\xBF\xBDz\"");
  // Whatever the input, RapidJSON (with UTF-8 validation) parses the result.
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  std::string text = Str(all + all);
  rapidjson::Document d;
  d.Parse<rapidjson::kParseValidateEncodingFlag>(text.c_str(), text.size());
  REQUIRE_FALSE(d.HasParseError());
  CHECK(d.IsString());
}

// The escaping rules one byte at a time, as a reference for the writer's word-at-a-time
// fast path and its pieces of 4096 input bytes.
std::string ReferenceEscaped(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20) {
      char escape[8];
      snprintf(escape, sizeof(escape), "\\u%04x", c);
      out += c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : escape;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c == 0xC3 && i + 1 < text.size() &&
               (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
      out += text.substr(i, 2);  // The only multi-byte sequences the test writes: é and friends.
      ++i;
    } else {
      out += "\xEF\xBF\xBD";
    }
  }
  return out + "\"";
}

TEST_CASE("long strings: every special byte at every offset of the 8-byte fast path") {
  // Plain text with one special byte (or an é, or a stray continuation byte) placed at each
  // offset around word and piece boundaries.
  const std::string specials[] = {"\"", "\\", "\n", std::string(1, '\0'), "\x1f", "\x7f",
                                  "\xC3\xA9", "\x80", "\xC3"};
  for (const std::string& special : specials) {
    for (size_t length : {size_t{7}, size_t{8}, size_t{9}, size_t{17}, size_t{4095},
                          size_t{4096}, size_t{4097}, size_t{9000}}) {
      for (size_t at : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, length / 2, length - 1}) {
        if (at >= length) continue;
        std::string text;
        for (size_t i = 0; i < length; ++i) text += static_cast<char>('a' + i % 26);
        text.replace(at, 1, special);
        INFO("special byte " << static_cast<int>(static_cast<unsigned char>(special[0]))
                             << ", length " << length << ", at " << at);
        REQUIRE(Str(text) == ReferenceEscaped(text));
      }
    }
  }
  // A 4-byte character straddling the end of a 4096-byte piece is copied whole.
  std::string straddling(4094, 'x');
  straddling += "\xF0\x9F\x98\x80tail";
  CHECK(Str(straddling) == "\"" + straddling + "\"");
}

TEST_CASE("many values: output crosses chunk boundaries intact") {
  // Tiny chunks force a flush after nearly every value; the text must be the same as with
  // one big chunk.
  auto write = [](size_t chunk_size) {
    ChunkedJsonWriter w(chunk_size);
    w.StartArray();
    for (int i = 0; i < 5000; ++i) {
      w.StartArray();
      w.Uint(static_cast<uint64_t>(i) * 7919);
      w.TimeMs(int64_t{i} * 1000001);
      w.Null();
      w.Int(-i);
      w.String(std::string(static_cast<size_t>(i % 40), 'q'));
      w.EndArray();
    }
    w.EndArray();
    return w.TakeString();
  };
  const std::string reference = write(1 << 24);
  CHECK(write(1) == reference);
  CHECK(write(100) == reference);
  CHECK(write(JsonWriter::kDefaultChunkSize) == reference);
  CHECK(reference.find("[7919,1.000001,null,-1,\"q\"]") != std::string::npos);
}

TEST_CASE("integers") {
  CHECK(One([](JsonWriter& w) { w.Int(0); }) == "0");
  CHECK(One([](JsonWriter& w) { w.Int(-42); }) == "-42");
  CHECK(One([](JsonWriter& w) { w.Int(INT64_MIN); }) == "-9223372036854775808");
  CHECK(One([](JsonWriter& w) { w.Uint(UINT64_MAX); }) == "18446744073709551615");
}

TEST_CASE("doubles: shortest round trip, no NaN or Infinity tokens") {
  CHECK(Dbl(1.0) == "1");
  CHECK(Dbl(0.5) == "0.5");
  CHECK(Dbl(0.1 + 0.2) == "0.30000000000000004");
  CHECK(Dbl(1e21) == "1e+21");
  CHECK(Dbl(std::nan("")) == "null");
  CHECK(Dbl(std::numeric_limits<double>::infinity()) == "null");
  CHECK(Dbl(-std::numeric_limits<double>::infinity()) == "null");
  for (double v : {1.5e-7, 123456.789, 1700000000123.456, -2.25, 5e-324}) {
    std::string text = Dbl(v);
    rapidjson::Document d;
    d.Parse<rapidjson::kParseFullPrecisionFlag>(text.c_str());
    REQUIRE(d.IsNumber());
    CHECK(d.GetDouble() == v);
  }
}

TEST_CASE("times: milliseconds with nanosecond precision, no trailing digits") {
  CHECK(Time(0) == "0");
  CHECK(Time(1) == "0.000001");
  CHECK(Time(1000) == "0.001");
  CHECK(Time(1500000) == "1.5");
  CHECK(Time(2000000) == "2");
  CHECK(Time(1500001) == "1.500001");
  CHECK(Time(123456789) == "123.456789");
  CHECK(Time(-500) == "-0.0005");
  CHECK(Time(-2000000) == "-2");
  // Epoch start times: ~1.7e12 ms with 6 decimals.
  CHECK(Time(1700000000123456789) == "1700000000123.456789");
  CHECK(Time(INT64_MIN) == "-9223372036854.775808");
  CHECK(One([](JsonWriter& w) { w.TimeMs(TimeDuration::FromMicroseconds(2.5)); }) == "0.0025");
}

TEST_CASE("structure, commas and property helpers") {
  std::string text = One([](JsonWriter& w) {
    w.StartObject();
    w.IntProperty("a", 1);
    w.StartArrayProperty("b");
    w.Null();
    w.Bool(true);
    w.NullElements(2);
    w.StartObject();
    w.EndObject();
    w.StartArray();
    w.EndArray();
    w.EndArray();
    w.StringProperty("c", "x");
    w.SpliceProperty("d", R"({"raw":[1,2]})");
    w.EndObject();
  });
  CHECK(text == R"({"a":1,"b":[null,true,null,null,{},[]],"c":"x","d":{"raw":[1,2]}})");
}

TEST_CASE("top-level values form a comma-separated fragment") {
  std::string text = One([](JsonWriter& w) {
    w.Int(1);
    w.StartArray();
    w.EndArray();
  });
  CHECK(text == "1,[]");
}

TEST_CASE("misuse is latched, not crashing") {
  ChunkedJsonWriter w;
  w.StartObject();
  w.Int(1);  // No key.
  CHECK_FALSE(w.ok());
  CHECK(w.error().find("without a key") != std::string::npos);

  ChunkedJsonWriter w2;
  w2.StartArray();
  w2.EndObject();
  CHECK_FALSE(w2.ok());

  ChunkedJsonWriter w3;
  w3.StartArray();
  w3.Key("k");
  CHECK_FALSE(w3.ok());

  ChunkedJsonWriter w4;
  w4.StartObject();
  w4.Key("k");
  w4.Splice(ChunkedJsonOutput());
  w4.EndObject();
  CHECK(w4.error().find("empty fragment") != std::string::npos);
  CHECK(w4.TakeString() == R"({"k":null})");
}

TEST_CASE("splicing chunked fragments, big and small, with tiny chunks") {
  for (size_t chunk_size : {size_t{1}, size_t{7}, size_t{64}, JsonWriter::kDefaultChunkSize}) {
    ChunkedJsonWriter rows(chunk_size);
    rows.StartArray();
    for (int i = 0; i < 1000; ++i) {
      rows.StartArray();
      rows.Int(i);
      rows.String("row \"" + std::to_string(i) + "\"");
      rows.EndArray();
    }
    rows.EndArray();
    ChunkedJsonWriter small(chunk_size);
    small.StartObject();
    small.IntProperty("x", 5);
    small.EndObject();

    ChunkedJsonWriter doc(chunk_size);
    doc.StartObject();
    doc.Key("rows");
    doc.Splice(rows.TakeOutput());
    doc.Key("small");
    doc.Splice(small.TakeOutput());
    doc.Key("empty");
    ChunkedJsonWriter empty_array(chunk_size);
    empty_array.StartArray();
    empty_array.EndArray();
    doc.Splice(empty_array.TakeOutput());
    doc.EndObject();
    REQUIRE(doc.ok());
    std::string text = doc.TakeString();

    rapidjson::Document d;
    d.Parse(text.c_str(), text.size());
    INFO("chunk size " << chunk_size);
    REQUIRE_FALSE(d.HasParseError());
    REQUIRE(d["rows"].Size() == 1000);
    CHECK(d["rows"][999][0].GetInt() == 999);
    CHECK(std::string(d["rows"][7][1].GetString()) == "row \"7\"");
    CHECK(d["small"]["x"].GetInt() == 5);
    CHECK(d["empty"].Size() == 0);
  }
}

TEST_CASE("ChunkedJsonOutput keeps chunks and moves them on splice") {
  ChunkedJsonWriter big(16);
  big.StartArray();
  for (int i = 0; i < 100; ++i) big.Int(i);
  big.EndArray();
  ChunkedJsonOutput fragment = big.TakeOutput();
  CHECK(fragment.chunks().size() > 1);
  size_t fragment_size = fragment.size();

  ChunkedJsonOutput target;
  {
    JsonWriter w(&target, 16);
    w.StartArray();
    w.Splice(std::move(fragment));
    w.EndArray();
  }
  CHECK(fragment.empty());
  CHECK(target.size() == fragment_size + 2);  // "[" + fragment + "]".
  CHECK(target.ToString().substr(0, 5) == "[[0,1");
}

TEST_CASE("fd output writes everything and reports write errors") {
  char path[] = "/tmp/strata_json_writer_test.XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  {
    FdJsonOutput out(fd, path);
    JsonWriter w(&out, 8);
    w.StartArray();
    for (int i = 0; i < 10000; ++i) w.Int(i);
    w.EndArray();
    w.Flush();
    CHECK(w.ok());
    CHECK(out.bytes_written() > 40000);
  }
  close(fd);
  unlink(path);

  int full = open("/dev/full", O_WRONLY);
  if (full >= 0) {
    FdJsonOutput out(full, "/dev/full");
    JsonWriter w(&out, 8);
    w.StartArray();
    w.String("0123456789");
    w.EndArray();
    w.Flush();
    CHECK_FALSE(w.ok());
    CHECK(w.error() == "write(/dev/full): No space left on device");
    close(full);
  }
}

TEST_CASE("stdio output") {
  FILE* f = tmpfile();
  REQUIRE(f != nullptr);
  {
    StdioJsonOutput out(f, "tmpfile");
    JsonWriter w(&out);
    w.StartObject();
    w.StringProperty("k", "v");
    w.EndObject();
  }
  rewind(f);
  char buffer[64] = {};
  CHECK(fread(buffer, 1, sizeof(buffer) - 1, f) == 9);
  CHECK(std::string(buffer) == R"({"k":"v"})");
  fclose(f);
}

}  // namespace
}  // namespace strata
