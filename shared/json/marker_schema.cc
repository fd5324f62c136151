#include "shared/json/marker_schema.h"

#include <utility>

#include "shared/json/json_writer.h"

namespace strata {

MarkerSchema& MarkerSchema::SetChartLabel(std::string label) {
  chart_label_ = std::move(label);
  return *this;
}

MarkerSchema& MarkerSchema::SetTooltipLabel(std::string label) {
  tooltip_label_ = std::move(label);
  return *this;
}

MarkerSchema& MarkerSchema::SetTableLabel(std::string label) {
  table_label_ = std::move(label);
  return *this;
}

MarkerSchema& MarkerSchema::SetAllLabels(const std::string& label) {
  chart_label_ = label;
  tooltip_label_ = label;
  table_label_ = label;
  return *this;
}

MarkerSchema& MarkerSchema::SetIsStackBased() {
  is_stack_based_ = true;
  return *this;
}

MarkerSchema& MarkerSchema::SetColorField(std::string key) {
  color_field_ = std::move(key);
  return *this;
}

MarkerSchema& MarkerSchema::AddKeyFormat(std::string key, Format format, Searchable searchable) {
  Field f;
  f.key = std::move(key);
  f.format = format;
  f.searchable = searchable;
  fields_.push_back(std::move(f));
  return *this;
}

MarkerSchema& MarkerSchema::AddKeyLabelFormat(std::string key, std::string label, Format format,
                                              Searchable searchable) {
  Field f;
  f.key = std::move(key);
  f.label = std::move(label);
  f.has_label = true;
  f.format = format;
  f.searchable = searchable;
  fields_.push_back(std::move(f));
  return *this;
}

MarkerSchema& MarkerSchema::AddHiddenKeyFormat(std::string key, Format format) {
  Field f;
  f.key = std::move(key);
  f.format = format;
  f.hidden = true;
  fields_.push_back(std::move(f));
  return *this;
}

MarkerSchema& MarkerSchema::AddStaticLabelValue(std::string label, std::string value) {
  Field f;
  f.is_static = true;
  f.label = std::move(label);
  f.has_label = true;
  f.value = std::move(value);
  fields_.push_back(std::move(f));
  return *this;
}

MarkerSchema& MarkerSchema::AddGraph(std::string key, GraphType type) {
  graphs_.push_back(Graph{std::move(key), type, false, GraphColor::kBlue});
  return *this;
}

MarkerSchema& MarkerSchema::AddGraph(std::string key, GraphType type, GraphColor color) {
  graphs_.push_back(Graph{std::move(key), type, true, color});
  return *this;
}

void MarkerSchema::WriteJson(JsonWriter& w, std::string_view name) const {
  w.StartObject();
  w.StringProperty("name", name);
  w.StartArrayProperty("display");
  for (Location location : locations_) w.String(LocationName(location));
  w.EndArray();
  if (!chart_label_.empty()) w.StringProperty("chartLabel", chart_label_);
  if (!tooltip_label_.empty()) w.StringProperty("tooltipLabel", tooltip_label_);
  if (!table_label_.empty()) w.StringProperty("tableLabel", table_label_);
  if (is_stack_based_) w.BoolProperty("isStackBased", true);
  if (!color_field_.empty()) w.StringProperty("colorField", color_field_);
  // "data" even when empty: the Gecko importer iterates it unconditionally.
  w.StartArrayProperty("data");
  for (const Field& f : fields_) {
    w.StartObject();
    if (f.is_static) {
      w.StringProperty("label", f.label);
      w.StringProperty("value", f.value);
    } else {
      w.StringProperty("key", f.key);
      if (f.has_label) w.StringProperty("label", f.label);
      w.StringProperty("format", FormatName(f.format));
      if (f.searchable == Searchable::kYes) w.BoolProperty("searchable", true);
      if (f.hidden) w.BoolProperty("hidden", true);
    }
    w.EndObject();
  }
  w.EndArray();
  if (!graphs_.empty()) {
    w.StartArrayProperty("graphs");
    for (const Graph& g : graphs_) {
      w.StartObject();
      w.StringProperty("key", g.key);
      w.StringProperty("type", GraphTypeName(g.type));
      if (g.has_color) w.StringProperty("color", GraphColorName(g.color));
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
}

std::string MarkerSchema::ToJson(std::string_view name) const {
  ChunkedJsonWriter w;
  WriteJson(w, name);
  return w.TakeString();
}

const char* MarkerSchema::LocationName(Location location) {
  switch (location) {
    case Location::kMarkerChart: return "marker-chart";
    case Location::kMarkerTable: return "marker-table";
    case Location::kTimelineOverview: return "timeline-overview";
    case Location::kTimelineMemory: return "timeline-memory";
    case Location::kTimelineIpc: return "timeline-ipc";
    case Location::kTimelineFileIo: return "timeline-fileio";
    case Location::kTimelineNetwork: return "timeline-network";
    case Location::kStackChart: return "stack-chart";
    case Location::kSidebar: return "sidebar";
  }
  return "marker-table";
}

const char* MarkerSchema::FormatName(Format format) {
  switch (format) {
    case Format::kUrl: return "url";
    case Format::kFilePath: return "file-path";
    case Format::kSanitizedString: return "sanitized-string";
    case Format::kString: return "string";
    case Format::kUniqueString: return "unique-string";
    case Format::kFlowId: return "flow-id";
    case Format::kTerminatingFlowId: return "terminating-flow-id";
    case Format::kDuration: return "duration";
    case Format::kTime: return "time";
    case Format::kSeconds: return "seconds";
    case Format::kMilliseconds: return "milliseconds";
    case Format::kMicroseconds: return "microseconds";
    case Format::kNanoseconds: return "nanoseconds";
    case Format::kBytes: return "bytes";
    case Format::kPercentage: return "percentage";
    case Format::kInteger: return "integer";
    case Format::kDecimal: return "decimal";
    case Format::kHexadecimal: return "hexadecimal";
    case Format::kPid: return "pid";
    case Format::kTid: return "tid";
    case Format::kList: return "list";
  }
  return "string";
}

const char* MarkerSchema::GraphTypeName(GraphType type) {
  switch (type) {
    case GraphType::kLine: return "line";
    case GraphType::kBar: return "bar";
    case GraphType::kFilledLine: return "line-filled";
  }
  return "line";
}

const char* MarkerSchema::GraphColorName(GraphColor color) {
  switch (color) {
    case GraphColor::kBlue: return "blue";
    case GraphColor::kGreen: return "green";
    case GraphColor::kGrey: return "grey";
    case GraphColor::kInk: return "ink";
    case GraphColor::kMagenta: return "magenta";
    case GraphColor::kOrange: return "orange";
    case GraphColor::kPurple: return "purple";
    case GraphColor::kRed: return "red";
    case GraphColor::kTeal: return "teal";
    case GraphColor::kYellow: return "yellow";
  }
  return "grey";
}

}  // namespace strata
