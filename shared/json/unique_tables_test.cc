#include <string>

#include "catch2/catch.hpp"
#include "rapidjson/document.h"
#include "shared/json/json_writer.h"
#include "shared/json/location.h"
#include "shared/json/unique_stacks.h"
#include "shared/json/unique_strings.h"

namespace strata {
namespace {

rapidjson::Document Parse(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

TEST_CASE("UniqueStrings gives each distinct string one index, in first-use order") {
  UniqueStrings strings;
  CHECK(strings.Index("a") == 0);
  CHECK(strings.Index("b") == 1);
  CHECK(strings.Index("a") == 0);
  CHECK(strings.Index(std::string("b")) == 1);
  CHECK(strings.Index("") == 2);
  CHECK(strings.Index(std::string_view("a\0b", 3)) == 3);
  CHECK(strings.size() == 4);
  CHECK(strings.Get(1) == "b");
  // Many strings: indexes stay stable while the storage grows.
  for (int i = 0; i < 10000; ++i) strings.Index("s" + std::to_string(i));
  CHECK(strings.Index("s0") == 4);
  CHECK(strings.Index("s9999") == 10003);
  CHECK(strings.Get(10003) == "s9999");

  ChunkedJsonWriter w;
  UniqueStrings small;
  small.Index("x\"y");
  small.Index("z");
  small.WriteArray(w);
  CHECK(w.TakeString() == R"(["x\"y","z"])");
}

TEST_CASE("UniqueStacks de-duplicates frames by every column") {
  UniqueStrings strings;
  UniqueStacks stacks(strings);
  FrameInfo f;
  f.location = "main";
  f.category = 1;
  uint32_t a = stacks.Frame(f);
  CHECK(stacks.Frame(f) == a);
  FrameInfo g = f;
  g.line = 10;
  uint32_t b = stacks.Frame(g);
  CHECK(b != a);
  g.column = 3;
  CHECK(stacks.Frame(g) != b);
  FrameInfo h = f;
  h.subcategory = 2;
  CHECK(stacks.Frame(h) != a);
  h = f;
  h.relevant_for_js = true;
  CHECK(stacks.Frame(h) != a);
  h = f;
  h.category = std::nullopt;
  CHECK(stacks.Frame(h) != a);
  h = f;
  h.implementation = "ion";
  CHECK(stacks.Frame(h) != a);
  h = f;
  h.inner_window_id = 7;
  CHECK(stacks.Frame(h) != a);
  CHECK(stacks.frame_count() == 8);
  // Location strings are shared with the string table.
  CHECK(strings.Index("main") == 0);
}

TEST_CASE("address, symbol and label frames") {
  UniqueStrings strings;
  UniqueStacks stacks(strings);
  uint32_t a = stacks.AddressFrame(0x1230);
  CHECK(stacks.AddressFrame(0x1230) == a);
  CHECK(stacks.AddressFrame(0x1231) != a);
  CHECK(stacks.AddressFrame(0x1230, 2u) != a);
  // Same frame through the generic path.
  FrameInfo f;
  f.location = "0x1230";
  CHECK(stacks.Frame(f) == a);

  uint32_t s = stacks.NativeSymbolFrame("Foo::run", "libfoo.so", std::nullopt, std::nullopt, 12);
  uint32_t l = stacks.LabelFrame("worker:12", 1);
  uint32_t l2 = stacks.LabelFrame("worker:12", 1);
  CHECK(l == l2);

  ChunkedJsonWriter w;
  stacks.WriteFrameTable(w);
  rapidjson::Document d = Parse(w.TakeString());
  const auto& schema = d["schema"];
  const auto& data = d["data"];
  const auto location = [&](uint32_t frame) {
    return std::string(strings.Get(data[frame][schema["location"].GetUint()].GetUint()));
  };
  CHECK(location(a) == "0x1230");
  CHECK(location(s) == "Foo::run (in libfoo.so)");
  CHECK(ClassifyLocation(location(s)) == LocationKind::kNative);
  CHECK(data[s][schema["line"].GetUint()].GetUint() == 12);
  CHECK(location(l) == "worker:12 ");
  CHECK(ClassifyLocation(location(l)) == LocationKind::kLabel);
  // Null category for address frames: inherit from the caller's label.
  CHECK(data[a][schema["category"].GetUint()].IsNull());
  CHECK(data[a][schema["subcategory"].GetUint()].IsNull());
  // A category without subcategory is written with subcategory 0.
  CHECK(data[l][schema["category"].GetUint()].GetUint() == 1);
  CHECK(data[l][schema["subcategory"].GetUint()].GetUint() == 0);
  for (const char* column : {"location", "relevantForJS", "innerWindowID", "implementation",
                             "line", "column", "category", "subcategory"}) {
    INFO(column);
    CHECK(schema.HasMember(column));
  }
}

TEST_CASE("named native frames keep their library and lib-relative address") {
  UniqueStrings strings;
  UniqueStacks stacks(strings);
  // Without any native address: the schema has no address/lib columns (files unchanged).
  {
    UniqueStrings plain_strings;
    UniqueStacks plain(plain_strings);
    plain.NativeSymbolFrame("Foo::run", "libfoo.so");
    ChunkedJsonWriter w;
    plain.WriteFrameTable(w);
    rapidjson::Document d = Parse(w.TakeString());
    CHECK_FALSE(d["schema"].HasMember("address"));
    CHECK_FALSE(d["schema"].HasMember("lib"));
  }
  const uint32_t at_10 = stacks.NativeSymbolFrame("Foo::run", "libfoo.so", std::nullopt, std::nullopt,
                                                  std::nullopt, NativeAddress{0x10, 2});
  const uint32_t at_20 = stacks.NativeSymbolFrame("Foo::run", "libfoo.so", std::nullopt, std::nullopt,
                                                  std::nullopt, NativeAddress{0x20, 2});
  const uint32_t other_lib = stacks.NativeSymbolFrame("Foo::run", "libfoo.so", std::nullopt, std::nullopt,
                                                      std::nullopt, NativeAddress{0x10, 3});
  const uint32_t no_address = stacks.NativeSymbolFrame("Foo::run", "libfoo.so");
  const uint32_t label = stacks.LabelFrame("main", 0);
  // One frame per address: the address is part of the frame's identity.
  CHECK(at_10 != at_20);
  CHECK(at_10 != other_lib);
  CHECK(at_10 != no_address);
  CHECK(stacks.NativeSymbolFrame("Foo::run", "libfoo.so", std::nullopt, std::nullopt, std::nullopt,
                                 NativeAddress{0x10, 2}) == at_10);

  ChunkedJsonWriter w;
  stacks.WriteFrameTable(w);
  rapidjson::Document d = Parse(w.TakeString());
  const auto& schema = d["schema"];
  const auto& data = d["data"];
  REQUIRE(schema.HasMember("address"));
  REQUIRE(schema.HasMember("lib"));
  const unsigned address = schema["address"].GetUint();
  const unsigned lib = schema["lib"].GetUint();
  CHECK(data[at_20][address].GetUint64() == 0x20);
  CHECK(data[at_20][lib].GetUint() == 2);
  CHECK(data[other_lib][lib].GetUint() == 3);
  CHECK(data[no_address][address].IsNull());
  CHECK(data[no_address][lib].IsNull());
  CHECK(data[label][address].IsNull());
  // Still read as a native function of libfoo.so by the front-end.
  CHECK(ClassifyLocation(std::string(strings.Get(data[at_10][schema["location"].GetUint()].GetUint()))) ==
        LocationKind::kNative);
}

TEST_CASE("label frames keep their push site in a pushSite column") {
  for (bool with_native : {false, true}) {
    INFO("with native addresses: " << with_native);
    UniqueStrings strings;
    UniqueStacks stacks(strings);
    {
      UniqueStrings plain_strings;
      UniqueStacks plain(plain_strings);
      plain.LabelFrame("Parse", 0);
      ChunkedJsonWriter w;
      plain.WriteFrameTable(w);
      CHECK_FALSE(Parse(w.TakeString())["schema"].HasMember("pushSite"));
    }
    const uint32_t native =
        with_native ? stacks.NativeSymbolFrame("Foo::run", "libfoo.so", std::nullopt, std::nullopt,
                                               std::nullopt, NativeAddress{0x10, 2})
                    : stacks.AddressFrame(0x1234);
    const uint32_t at_a = stacks.LabelFrame("Parse", 0, 0, false, std::nullopt, 0x5555000010a0);
    const uint32_t at_b = stacks.LabelFrame("Parse", 0, 0, false, std::nullopt, 0x5555000020b0);
    const uint32_t unknown = stacks.LabelFrame("Parse", 0);
    CHECK(at_a != at_b);
    CHECK(at_a != unknown);
    CHECK(stacks.LabelFrame("Parse", 0, 0, false, std::nullopt, 0x5555000010a0) == at_a);
    ChunkedJsonWriter w;
    stacks.WriteFrameTable(w);
    rapidjson::Document d = Parse(w.TakeString());
    const auto& schema = d["schema"];
    REQUIRE(schema.HasMember("pushSite"));
    CHECK(schema.HasMember("address") == with_native);
    const unsigned column = schema["pushSite"].GetUint();
    CHECK(column == (with_native ? 10u : 8u));
    CHECK(d["data"][at_a][column].GetUint64() == 0x5555000010a0);
    CHECK(d["data"][at_b][column].GetUint64() == 0x5555000020b0);
    CHECK(d["data"][unknown][column].IsNull());
    CHECK(d["data"][native][column].IsNull());
  }
}

TEST_CASE("stacks are de-duplicated by (prefix, frame); prefixes come first") {
  UniqueStrings strings;
  UniqueStacks stacks(strings);
  uint32_t fa = stacks.LabelFrame("A", 0);
  uint32_t fb = stacks.LabelFrame("B", 0);
  uint32_t fc = stacks.LabelFrame("C", 0);
  uint32_t fd = stacks.LabelFrame("D", 0);
  // The example of the Firefox docs: A->B->C, A->B, A->B->D.
  const uint32_t abc[] = {fa, fb, fc};
  const uint32_t ab[] = {fa, fb};
  const uint32_t abd[] = {fa, fb, fd};
  CHECK(*stacks.StackFromFrames(abc, 3) == 2);
  CHECK(*stacks.StackFromFrames(ab, 2) == 1);
  CHECK(*stacks.StackFromFrames(abd, 3) == 3);
  CHECK_FALSE(stacks.StackFromFrames(abc, 0).has_value());
  CHECK(stacks.stack_count() == 4);
  // Root B differs from A->B.
  CHECK(stacks.Stack(std::nullopt, fb) == 4);
  // Prefix 0 vs no prefix.
  CHECK(stacks.Stack(0u, fa) == 5);
  CHECK(stacks.Stack(std::nullopt, fa) == 0);

  ChunkedJsonWriter w;
  stacks.WriteStackTable(w);
  CHECK(w.TakeString() ==
        R"({"schema":{"prefix":0,"frame":1},"data":[[null,0],[0,1],[1,2],[1,3],[null,1],[0,0]]})");
}

}  // namespace
}  // namespace strata
