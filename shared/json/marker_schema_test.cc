#include "shared/json/marker_schema.h"

#include <string>

#include "catch2/catch.hpp"
#include "rapidjson/document.h"
#include "shared/json/json_writer.h"

namespace strata {
namespace {

using MS = MarkerSchema;

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str(), json.size());
  REQUIRE_FALSE(d.HasParseError());
  REQUIRE(d.IsObject());
  return d;
}

std::string Str(const rapidjson::Value& v) { return std::string(v.GetString(), v.GetStringLength()); }

TEST_CASE("a minimal schema has name, display and an empty data array") {
  const std::string json = MS{MS::Location::kMarkerTable}.ToJson("Minimal");
  CHECK(json == R"({"name":"Minimal","display":["marker-table"],"data":[]})");
}

TEST_CASE("the full schema shape (Gecko flavour: data, not fields)") {
  MS schema{MS::Location::kMarkerChart, MS::Location::kMarkerTable,
            MS::Location::kTimelineOverview};
  schema.SetChartLabel("{marker.data.url}")
      .SetTooltipLabel("{marker.name} {marker.data.status}")
      .SetTableLabel("{marker.data.url} ({marker.data.status})")
      .SetIsStackBased()
      .SetColorField("colour")
      .AddKeyLabelFormat("url", "URL", MS::Format::kUrl, MS::Searchable::kYes)
      .AddKeyFormat("status", MS::Format::kInteger)
      .AddHiddenKeyFormat("colour", MS::Format::kString)
      .AddStaticLabelValue("Description", "One \"request\"")
      .AddGraph("status", MS::GraphType::kBar)
      .AddGraph("size", MS::GraphType::kFilledLine, MS::GraphColor::kMagenta);
  const rapidjson::Document d = Parse(schema.ToJson("Request"));

  CHECK(Str(d["name"]) == "Request");
  REQUIRE(d["display"].Size() == 3);
  CHECK(Str(d["display"][0]) == "marker-chart");
  CHECK(Str(d["display"][1]) == "marker-table");
  CHECK(Str(d["display"][2]) == "timeline-overview");
  CHECK(Str(d["chartLabel"]) == "{marker.data.url}");
  CHECK(Str(d["tooltipLabel"]) == "{marker.name} {marker.data.status}");
  CHECK(Str(d["tableLabel"]) == "{marker.data.url} ({marker.data.status})");
  CHECK(d["isStackBased"].GetBool());
  CHECK(Str(d["colorField"]) == "colour");
  CHECK_FALSE(d.HasMember("fields"));

  const rapidjson::Value& data = d["data"];
  REQUIRE(data.Size() == 4);
  CHECK(Str(data[0]["key"]) == "url");
  CHECK(Str(data[0]["label"]) == "URL");
  CHECK(Str(data[0]["format"]) == "url");
  CHECK(data[0]["searchable"].GetBool());
  CHECK_FALSE(data[0].HasMember("hidden"));
  CHECK(Str(data[1]["key"]) == "status");
  CHECK_FALSE(data[1].HasMember("label"));  // The front-end shows the key.
  CHECK(Str(data[1]["format"]) == "integer");
  CHECK_FALSE(data[1].HasMember("searchable"));
  CHECK(data[2]["hidden"].GetBool());
  CHECK(Str(data[3]["label"]) == "Description");
  CHECK(Str(data[3]["value"]) == "One \"request\"");
  CHECK_FALSE(data[3].HasMember("key"));  // Static rows have no key.
  CHECK_FALSE(data[3].HasMember("format"));

  const rapidjson::Value& graphs = d["graphs"];
  REQUIRE(graphs.Size() == 2);
  CHECK(Str(graphs[0]["key"]) == "status");
  CHECK(Str(graphs[0]["type"]) == "bar");
  CHECK_FALSE(graphs[0].HasMember("color"));
  CHECK(Str(graphs[1]["type"]) == "line-filled");
  CHECK(Str(graphs[1]["color"]) == "magenta");
}

TEST_CASE("optional parts are omitted when unset") {
  const rapidjson::Document d =
      Parse(MS(MS::Location::kMarkerChart).AddKeyFormat("k", MS::Format::kBytes).ToJson("T"));
  for (const char* member : {"chartLabel", "tooltipLabel", "tableLabel", "isStackBased",
                             "colorField", "graphs"}) {
    CAPTURE(member);
    CHECK_FALSE(d.HasMember(member));
  }
}

TEST_CASE("SetAllLabels sets the three labels") {
  const rapidjson::Document d =
      Parse(MS{MS::Location::kMarkerChart}.SetAllLabels("{marker.data.x}").ToJson("T"));
  CHECK(Str(d["chartLabel"]) == "{marker.data.x}");
  CHECK(Str(d["tooltipLabel"]) == "{marker.data.x}");
  CHECK(Str(d["tableLabel"]) == "{marker.data.x}");
}

TEST_CASE("every location and format has the front-end's spelling") {
  using L = MS::Location;
  const std::pair<L, const char*> locations[] = {
      {L::kMarkerChart, "marker-chart"},         {L::kMarkerTable, "marker-table"},
      {L::kTimelineOverview, "timeline-overview"}, {L::kTimelineMemory, "timeline-memory"},
      {L::kTimelineIpc, "timeline-ipc"},         {L::kTimelineFileIo, "timeline-fileio"},
      {L::kTimelineNetwork, "timeline-network"}, {L::kStackChart, "stack-chart"},
      {L::kSidebar, "sidebar"},
  };
  for (const auto& [location, name] : locations) CHECK(std::string(MS::LocationName(location)) == name);

  using F = MS::Format;
  const std::pair<F, const char*> formats[] = {
      {F::kUrl, "url"},
      {F::kFilePath, "file-path"},
      {F::kSanitizedString, "sanitized-string"},
      {F::kString, "string"},
      {F::kUniqueString, "unique-string"},
      {F::kFlowId, "flow-id"},
      {F::kTerminatingFlowId, "terminating-flow-id"},
      {F::kDuration, "duration"},
      {F::kTime, "time"},
      {F::kSeconds, "seconds"},
      {F::kMilliseconds, "milliseconds"},
      {F::kMicroseconds, "microseconds"},
      {F::kNanoseconds, "nanoseconds"},
      {F::kBytes, "bytes"},
      {F::kPercentage, "percentage"},
      {F::kInteger, "integer"},
      {F::kDecimal, "decimal"},
      {F::kHexadecimal, "hexadecimal"},
      {F::kPid, "pid"},
      {F::kTid, "tid"},
      {F::kList, "list"},
  };
  for (const auto& [format, name] : formats) {
    CHECK(std::string(MS::FormatName(format)) == name);
    // And through a whole schema.
    const rapidjson::Document d = Parse(MS{L::kMarkerTable}.AddKeyFormat("k", format).ToJson("T"));
    CHECK(Str(d["data"][0]["format"]) == name);
  }

  using C = MS::GraphColor;
  const std::pair<C, const char*> colors[] = {
      {C::kBlue, "blue"},       {C::kGreen, "green"},   {C::kGrey, "grey"}, {C::kInk, "ink"},
      {C::kMagenta, "magenta"}, {C::kOrange, "orange"}, {C::kPurple, "purple"},
      {C::kRed, "red"},         {C::kTeal, "teal"},     {C::kYellow, "yellow"},
  };
  for (const auto& [color, name] : colors) CHECK(std::string(MS::GraphColorName(color)) == name);
  CHECK(std::string(MS::GraphTypeName(MS::GraphType::kLine)) == "line");
}

TEST_CASE("strings are escaped and repaired to valid UTF-8") {
  MS schema{MS::Location::kMarkerTable};
  schema.SetTableLabel("a\"b\\c\n").AddKeyLabelFormat("k", "bad \xff byte", MS::Format::kString);
  const std::string json = schema.ToJson("Na\"me");
  const rapidjson::Document d = Parse(json);
  CHECK(Str(d["name"]) == "Na\"me");
  CHECK(Str(d["tableLabel"]) == "a\"b\\c\n");
  CHECK(Str(d["data"][0]["label"]) == "bad \xEF\xBF\xBD byte");  // U+FFFD
}

TEST_CASE("WriteJson writes the object as the next value of a writer") {
  ChunkedJsonWriter w;
  w.StartArray();
  MS{MS::Location::kMarkerChart}.WriteJson(w, "A");
  MS{MS::Location::kMarkerTable}.WriteJson(w, "B");
  w.EndArray();
  REQUIRE(w.ok());
  const std::string json = w.TakeString();
  rapidjson::Document d;
  d.Parse(json.c_str());
  REQUIRE(d.IsArray());
  REQUIRE(d.Size() == 2);
  CHECK(Str(d[1]["name"]) == "B");
}

}  // namespace
}  // namespace strata
