#include "tests/format/gecko_profile_checker.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "shared/json/location.h"
#include "shared/json/shared_libraries.h"
#include "tests/format/gecko_profile_checker_internal.h"

namespace strata {

bool CheckReport::HasError(std::string_view code) const {
  for (const CheckMessage& m : errors) {
    if (m.code == code) return true;
  }
  return false;
}

bool CheckReport::HasWarning(std::string_view code) const {
  for (const CheckMessage& m : warnings) {
    if (m.code == code) return true;
  }
  return false;
}

std::string CheckReport::ToString() const {
  std::string out;
  for (const CheckMessage& m : errors) out += "error: " + m.text + "\n";
  for (const CheckMessage& m : warnings) out += "warning: " + m.text + "\n";
  return out;
}

namespace gecko_profile_checker_internal {

std::string Str(const Value& v) {
  return v.IsString() ? std::string(v.GetString(), v.GetStringLength()) : "";
}

// What JSON.stringify would show, shortened.
std::string Show(const Value& v) {
  if (v.IsNull()) return "null";
  if (v.IsBool()) return v.GetBool() ? "true" : "false";
  if (v.IsString()) {
    std::string s = Str(v);
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return "\"" + s + "\"";
  }
  if (v.IsInt64()) return std::to_string(v.GetInt64());
  if (v.IsUint64()) return std::to_string(v.GetUint64());
  if (v.IsNumber()) {
    char buffer[40];
    snprintf(buffer, sizeof(buffer), "%.17g", v.GetDouble());
    return buffer;
  }
  if (v.IsArray()) return "an array";
  return "an object";
}

// A non-negative integral number, as JavaScript would use it for an index.
bool AsIndex(const Value& v, uint64_t* out) {
  if (v.IsUint64()) {
    *out = v.GetUint64();
    return true;
  }
  if (v.IsDouble()) {
    double d = v.GetDouble();
    if (d >= 0 && d == std::floor(d) && d < 1.8e19) {
      *out = static_cast<uint64_t>(d);
      return true;
    }
  }
  return false;
}

const Value* Member(const Value& object, const char* key) {
  if (!object.IsObject()) return nullptr;
  auto it = object.FindMember(key);
  return it == object.MemberEnd() ? nullptr : &it->value;
}

std::string At(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

// The "URL" part of a JS-classified location: "f (url:1:2)[3]" -> url, "url:1" -> url.
std::string_view JsUrl(std::string_view s) {
  if (!s.empty() && s.back() == ']') {
    size_t open = s.rfind('[');
    if (open != std::string_view::npos) s = s.substr(0, open);
  }
  bool in_parens = !s.empty() && s.back() == ')';
  if (in_parens) s.remove_suffix(1);
  for (int i = 0; i < 2; ++i) {  // ":line" and ":column".
    size_t end = s.size();
    while (end > 0 && s[end - 1] >= '0' && s[end - 1] <= '9') --end;
    if (end == s.size() || end == 0 || s[end - 1] != ':' || end == 1) break;
    s = s.substr(0, end - 1);
  }
  if (in_parens) {
    size_t open = s.rfind(" (");
    if (open != std::string_view::npos) s = s.substr(open + 2);
  }
  return s;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool LooksLikeScriptUrl(std::string_view url) {
  if (url.find("://") != std::string_view::npos) return true;
  for (std::string_view scheme : {"resource:", "chrome:", "moz-extension:", "blob:", "data:",
                                  "file:", "self-hosted", "about:"}) {
    if (url.substr(0, scheme.size()) == scheme) return true;
  }
  for (std::string_view ext : {".js", ".mjs", ".cjs", ".jsm", ".jsx", ".ts", ".tsx", ".wasm",
                               ".html", ".htm", ".xhtml"}) {
    if (EndsWith(url, ext)) return true;
  }
  return false;
}

void Checker::Run(std::string_view json) {
  if (json.size() >= 2 && static_cast<unsigned char>(json[0]) == 0x1f &&
      static_cast<unsigned char>(json[1]) == 0x8b) {
    Error("", "not-json", "the file is gzip-compressed; decompress it first");
    return;
  }
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseFullPrecisionFlag>(
      json.data(), json.size());
  if (doc.HasParseError()) {
    Error("", "not-json",
          std::string("not valid JSON (NaN/Infinity tokens and invalid UTF-8 included) at "
                      "byte ") +
              std::to_string(doc.GetErrorOffset()) + ": " +
              rapidjson::GetParseError_En(doc.GetParseError()));
    return;
  }
  const Value* root = &doc;
  if (const Value* wrapped = Member(doc, "profile"); wrapped && !Member(doc, "meta")) {
    Warn("", "wrapped", "profile wrapped as {\"profile\": ...}; the importer unwraps it");
    root = wrapped;
  }
  if (!root->IsObject()) {
    Error("", "top-level", "the profile must be a JSON object");
    return;
  }
  const Value* meta = Member(*root, "meta");
  if (!meta || !meta->IsObject()) {
    Error("meta", "meta", "missing or not an object (the importer rejects the file)");
    return;
  }
  if (Member(*meta, "preprocessedProfileVersion")) {
    Error("meta.preprocessedProfileVersion", "processed-format",
          "this is the front-end's processed format, not the Gecko format we write");
    return;
  }
  CheckCategories(*meta, "meta");
  if (const Value* units = Member(*meta, "sampleUnits")) CheckSampleUnits(*units);
  CheckProcess(*root, "", /*top=*/true);

  const Value* processes = Member(*root, "processes");
  if (!processes || !processes->IsArray()) {
    Error("processes", "processes",
          "missing or not an array at the top level (import fails: \"processes is not "
          "iterable\"); write []");
  } else {
    for (SizeType i = 0; i < processes->Size(); ++i) {
      const Value& p = (*processes)[i];
      std::string path = At("processes", i);
      if (!p.IsObject()) {
        Error(path, "processes", "a sub-process profile must be an object");
        continue;
      }
      CheckProcess(p, path + ".", /*top=*/false);
      if (const Value* nested = Member(p, "processes"); nested && nested->IsArray() &&
                                                         nested->Size() > 0) {
        Warn(path + ".processes", "nested-processes",
             "only one level of sub-processes is read; these are ignored");
      }
    }
  }
  // Pairs of "…per code" summaries.
  for (auto& [code, count] : counts_) {
    if (count.first > options_.max_messages_per_code) {
      std::string text = "... and " +
                         std::to_string(count.first - options_.max_messages_per_code) +
                         " more [" + code + "]";
      (count.second ? report_.errors : report_.warnings).push_back({code, text});
    }
  }
}

void Checker::Add(bool error, const std::string& path, const char* code, const std::string& text) {
  auto& count = counts_[code];
  count.second = count.second || error;
  if (++count.first > options_.max_messages_per_code) return;
  std::string full = (path.empty() ? "" : path + ": ") + text + " [" + code + "]";
  (error ? report_.errors : report_.warnings).push_back({code, full});
}

void Checker::Error(const std::string& path, const char* code, const std::string& text) {
  Add(true, path, code, text);
}

void Checker::Warn(const std::string& path, const char* code, const std::string& text) {
  Add(false, path, code, text);
}

void Checker::CheckCategories(const Value& meta, const std::string& path) {
  const Value* categories = Member(meta, "categories");
  if (!categories || !categories->IsArray() || categories->Size() == 0) {
    Error(path + ".categories", "categories",
          "missing or empty; frames and markers have no valid category (write at least one "
          "grey \"Other\" category)");
    return;
  }
  bool has_grey = false;
  for (SizeType i = 0; i < categories->Size(); ++i) {
    const Value& c = (*categories)[i];
    std::string cpath = At(path + ".categories", i);
    const Value* name = Member(c, "name");
    const Value* color = Member(c, "color");
    const Value* subs = Member(c, "subcategories");
    if (!name || !name->IsString()) Error(cpath + ".name", "categories", "must be a string");
    if (!color || !color->IsString() ||
        std::find_if(std::begin(kColors), std::end(kColors), [&](const char* k) {
          return Str(*color) == k;
        }) == std::end(kColors)) {
      Error(cpath + ".color", "category-color",
            "must be one of the front-end's palette names, got " +
                (color ? Show(*color) : "nothing"));
    } else if (Str(*color) == "grey") {
      has_grey = true;
    }
    size_t count = 0;
    if (!subs || !subs->IsArray() || subs->Size() == 0) {
      Error(cpath + ".subcategories", "categories",
            "must be a non-empty array of strings (index 0 is the category itself)");
    } else {
      for (SizeType k = 0; k < subs->Size(); ++k) {
        if (!(*subs)[k].IsString()) {
          Error(At(cpath + ".subcategories", k), "categories", "must be a string");
        }
      }
      count = subs->Size();
    }
    subcategory_counts_.push_back(count);
  }
  if (!has_grey) {
    Error(path + ".categories", "category-grey",
          "no category has color \"grey\"; the front-end uses the first grey one as the "
          "default category and silently gets it wrong without one");
  }
}

void Checker::CheckSampleUnits(const Value& units) {
  sample_units_present_ = true;
  if (!units.IsObject()) {
    Error("meta.sampleUnits", "sample-units", "must be an object");
    return;
  }
  const Value* cpu = Member(units, "threadCPUDelta");
  std::string unit = cpu && cpu->IsString() ? Str(*cpu) : "";
  if (unit != "ns" && unit != "\xC2\xB5s" && unit != "variable CPU cycles") {
    Error("meta.sampleUnits.threadCPUDelta", "sample-units",
          "must be \"ns\", \"\xC2\xB5s\" (U+00B5) or \"variable CPU cycles\", got " +
              (cpu ? Show(*cpu) : std::string("nothing")) +
              " (loading throws \"Unhandled threadCPUDelta unit\")");
  }
  const Value* time = Member(units, "time");
  if (time && (!time->IsString() || (Str(*time) != "ms" && Str(*time) != "bytes"))) {
    Error("meta.sampleUnits.time", "sample-units", "must be \"ms\" or \"bytes\"");
  }
  const Value* delay = Member(units, "eventDelay");
  if (delay && (!delay->IsString() || Str(*delay) != "ms")) {
    Error("meta.sampleUnits.eventDelay", "sample-units", "must be \"ms\"");
  }
}

void Checker::CheckMarkerSchemas(const Value& meta, const std::string& path) {
  const Value* schemas = Member(meta, "markerSchema");
  if (!schemas || !schemas->IsArray()) {
    Error(path + ".markerSchema", "marker-schema",
          "missing or not an array (required in every process's meta; may be [])");
    return;
  }
  for (SizeType i = 0; i < schemas->Size(); ++i) {
    const Value& s = (*schemas)[i];
    std::string spath = At(path + ".markerSchema", i);
    const Value* name = Member(s, "name");
    if (!name || !name->IsString()) {
      Error(spath + ".name", "marker-schema", "must be a string");
      continue;
    }
    const Value* data = Member(s, "data");
    if (!data) {
      Error(spath, "marker-schema",
            Member(s, "fields")
                ? "uses \"fields\" (the processed format's name); the Gecko format needs "
                  "\"data\" (import crashes: \"data2 is not iterable\")"
                : "has no \"data\" array (import crashes)");
      continue;
    }
    if (!data->IsArray()) {
      Error(spath + ".data", "marker-schema", "must be an array");
      continue;
    }
    if (const Value* display = Member(s, "display"); display && !display->IsArray()) {
      Error(spath + ".display", "marker-schema", "must be an array");
    }
    auto [it, inserted] = marker_schemas_.emplace(Str(*name), std::vector<std::string>());
    if (!inserted) continue;  // Merged by name, first one wins.
    for (SizeType k = 0; k < data->Size(); ++k) {
      const Value& field = (*data)[k];
      const Value* key = Member(field, "key");
      const Value* format = Member(field, "format");
      if (!key) continue;  // Static {label, value} entry.
      if (!key->IsString()) {
        Error(At(spath + ".data", k) + ".key", "marker-schema", "must be a string");
        continue;
      }
      if (!format) {
        Error(At(spath + ".data", k), "marker-schema", "a dynamic field needs a \"format\"");
        continue;
      }
      if (format->IsString()) {
        for (const char* f : kStringIndexFormats) {
          if (Str(*format) == f) it->second.push_back(Str(*key));
        }
      }
    }
  }
}

}  // namespace gecko_profile_checker_internal

CheckReport CheckGeckoProfile(std::string_view json, const CheckOptions& options) {
  CheckReport report;
  gecko_profile_checker_internal::Checker(options, report).Run(json);
  return report;
}

}  // namespace strata
