// MarkerSchema: how the front-end displays one marker type, written as a meta.markerSchema
// entry (Gecko flavour: "data", not the processed format's "fields"). After Firefox's
// MarkerSchema; the format as the front-end reads it is in gecko-format.md section 7.
//
//   struct RequestMarker {
//     static constexpr const char* MarkerTypeName() { return "Request"; }
//     static void StreamJSONMarkerData(strata::JsonWriter& w, const std::string& url,
//                                      int64_t status) {
//       w.StringProperty("url", url);
//       w.IntProperty("status", status);
//     }
//     static strata::MarkerSchema MarkerTypeDisplay() {
//       using MS = strata::MarkerSchema;
//       MS schema{MS::Location::kMarkerChart, MS::Location::kMarkerTable};
//       schema.SetTableLabel("{marker.data.url} ({marker.data.status})")
//           .AddKeyLabelFormat("url", "URL", MS::Format::kUrl, MS::Searchable::kYes)
//           .AddKeyLabelFormat("status", "Status", MS::Format::kInteger)
//           .AddStaticLabelValue("Description", "One HTTP request");
//       return schema;
//     }
//   };
//   std::string json = RequestMarker::MarkerTypeDisplay().ToJson("Request");
//
// Keys name the properties StreamJSONMarkerData writes. Labels are templates the front-end
// fills in: "{marker.name}", "{marker.data.<key>}" (formatted by the key's format),
// "{marker.data.<key> ? 'yes' : 'no'}", "{marker.start}", "{marker.duration}".
//
// What the front-end (profiler-cli 0.10 / profiler.firefox.com) does with each part:
// * Only dynamic fields (key + format) survive import, with key, label, format and hidden;
//   "searchable" is written (Firefox writes it) but the importer drops it: every string
//   field is searched.
// * Static rows (label + value): one becomes the schema's description (the one labelled
//   "Description", else the first); the others are dropped with a console warning.
// * A field whose value is missing or null is not shown.
//
// Thread safety: a value type. Async-signal safety: no (allocates).
#ifndef STRATA_SHARED_JSON_MARKER_SCHEMA_H_
#define STRATA_SHARED_JSON_MARKER_SCHEMA_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

class JsonWriter;

class MarkerSchema {
 public:
  // Where markers of this type are shown.
  enum class Location : uint8_t {
    kMarkerChart,       // "marker-chart"
    kMarkerTable,       // "marker-table"
    kTimelineOverview,  // "timeline-overview": the thread's track in the timeline header.
    kTimelineMemory,    // "timeline-memory": the memory track (or the main thread's).
    kTimelineIpc,       // "timeline-ipc": the IPC track.
    kTimelineFileIo,    // "timeline-fileio": the file I/O track.
    kTimelineNetwork,   // "timeline-network": the network track.
    kStackChart,        // "stack-chart": accepted, not displayed by the front-end yet.
    kSidebar,           // "sidebar": from older schemas; ignored by the current front-end.
  };

  // How a field's value is formatted.
  enum class Format : uint8_t {
    // Strings (JSON strings). kUrl, kFilePath and kSanitizedString are scrubbed when a
    // profile is uploaded with personal data removed; kString is shown as is: no URLs or
    // paths in it.
    kUrl,              // "url"
    kFilePath,         // "file-path"
    kSanitizedString,  // "sanitized-string"
    kString,           // "string"
    // Indexes into the thread's string table (write them with strings().WriteIndex()).
    kUniqueString,       // "unique-string"
    kFlowId,             // "flow-id": links markers of one flow (across threads).
    kTerminatingFlowId,  // "terminating-flow-id": ends the flow (its id may be reused).
    // Numbers (JSON numbers).
    kDuration,      // "duration": milliseconds, shown in the best unit ("5.2ms", "1.3s").
    kTime,          // "time": milliseconds since the profile's start.
    kSeconds,       // "seconds"
    kMilliseconds,  // "milliseconds"
    kMicroseconds,  // "microseconds"
    kNanoseconds,   // "nanoseconds"
    kBytes,         // "bytes": "4,096B", "12.3KB", ...
    kPercentage,    // "percentage": 0..1 shown as 0%..100%.
    kInteger,       // "integer": grouped digits, no decimals.
    kDecimal,       // "decimal"
    kHexadecimal,   // "hexadecimal"
    kPid,           // "pid": a process id, shown with its process's name when known.
    kTid,           // "tid": a thread id, shown with its thread's name when known.
    // A JSON array of strings, shown comma-separated.
    kList,  // "list"
  };

  enum class Searchable : uint8_t { kNo, kYes };

  // A track of its own in the timeline for markers of this type, one graph per key (a
  // numeric field every such marker has).
  enum class GraphType : uint8_t { kLine, kBar, kFilledLine };
  enum class GraphColor : uint8_t {
    kBlue, kGreen, kGrey, kInk, kMagenta, kOrange, kPurple, kRed, kTeal, kYellow,
  };

  // At least one location (an empty list is written as such: the markers then show only in
  // the places every marker does, the marker chart and table of their thread).
  MarkerSchema(std::initializer_list<Location> locations) : locations_(locations) {}
  template <typename... More>
  explicit MarkerSchema(Location location, More... more) : locations_{location, more...} {}

  // Label templates (see the top of this file). Unset: the marker's name.
  MarkerSchema& SetChartLabel(std::string label);
  MarkerSchema& SetTooltipLabel(std::string label);
  MarkerSchema& SetTableLabel(std::string label);
  MarkerSchema& SetAllLabels(const std::string& label);

  // Promises that markers of this type nest properly on a thread (no partial overlap).
  MarkerSchema& SetIsStackBased();
  // The key of a string field that chooses the markers' colour (a GraphColor name).
  MarkerSchema& SetColorField(std::string key);

  // A field of the payload. Without a label the front-end shows the key.
  MarkerSchema& AddKeyFormat(std::string key, Format format,
                             Searchable searchable = Searchable::kNo);
  MarkerSchema& AddKeyLabelFormat(std::string key, std::string label, Format format,
                                  Searchable searchable = Searchable::kNo);
  // A field used by labels, graphs or search, not listed in tooltips and the sidebar.
  MarkerSchema& AddHiddenKeyFormat(std::string key, Format format);
  // A fixed row (see the top of this file: only a "Description" row is kept by the
  // front-end).
  MarkerSchema& AddStaticLabelValue(std::string label, std::string value);

  MarkerSchema& AddGraph(std::string key, GraphType type);
  MarkerSchema& AddGraph(std::string key, GraphType type, GraphColor color);

  // The meta.markerSchema entry for markers whose data.type is `name` (one JSON object,
  // compact, valid UTF-8).
  std::string ToJson(std::string_view name) const;
  // The same object written as the next value of `writer`.
  void WriteJson(JsonWriter& writer, std::string_view name) const;

  // The JSON spellings.
  static const char* LocationName(Location location);
  static const char* FormatName(Format format);
  static const char* GraphTypeName(GraphType type);
  static const char* GraphColorName(GraphColor color);

 private:
  struct Field {
    bool is_static = false;
    std::string key;    // Dynamic rows.
    std::string label;  // Both; optional for dynamic rows.
    bool has_label = false;
    Format format = Format::kString;
    Searchable searchable = Searchable::kNo;
    bool hidden = false;
    std::string value;  // Static rows.
  };
  struct Graph {
    std::string key;
    GraphType type;
    bool has_color;
    GraphColor color;
  };

  std::vector<Location> locations_;
  std::string chart_label_;
  std::string tooltip_label_;
  std::string table_label_;
  std::string color_field_;
  bool is_stack_based_ = false;
  std::vector<Field> fields_;
  std::vector<Graph> graphs_;
};

}  // namespace strata

#endif  // STRATA_SHARED_JSON_MARKER_SCHEMA_H_
