#include "tools/strata/test_profiles.h"

#include <cstdio>

namespace strata {
namespace cli {
namespace testing {
namespace {

std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20) {  // JSON forbids raw control characters.
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\u%04x", static_cast<unsigned>(c));
      out += escape;
      continue;
    }
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

std::string Number(double v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.6f", v);
  return text;
}

std::string ThreadJson(const TestThread& t) {
  std::string out = "{\"name\":" + Quoted(t.name) + ",\"processType\":\"default\",\"processName\":\"prog\",\"pid\":" +
                    std::to_string(t.pid) + ",\"tid\":" + std::to_string(t.tid) +
                    ",\"registerTime\":" + Number(t.register_time) + ",\"unregisterTime\":null,";
  out += "\"samples\":{\"schema\":{\"stack\":0,\"time\":1,\"eventDelay\":2,\"threadCPUDelta\":3},\"data\":[";
  for (size_t i = 0; i < t.samples.size(); ++i) {
    const TestSample& s = t.samples[i];
    out += std::string(i ? "," : "") + "[" + (s.stack < 0 ? std::string("null") : std::to_string(s.stack)) + "," +
           Number(s.time) + ",null," + (s.cpu_ns < 0 ? std::string("null") : std::to_string(static_cast<long long>(s.cpu_ns))) +
           "]";
  }
  out += "]},\"markers\":{\"schema\":{\"name\":0,\"startTime\":1,\"endTime\":2,\"phase\":3,\"category\":4,\"data\":5},"
         "\"data\":" + t.markers_data + "},";
  out += "\"stackTable\":{\"schema\":{\"prefix\":0,\"frame\":1},\"data\":[";
  for (size_t i = 0; i < t.stacks.size(); ++i) {
    out += std::string(i ? "," : "") + "[" +
           (t.stacks[i].first < 0 ? std::string("null") : std::to_string(t.stacks[i].first)) + "," +
           std::to_string(t.stacks[i].second) + "]";
  }
  out += "]},\"frameTable\":{\"schema\":{\"location\":0,\"relevantForJS\":1,\"innerWindowID\":2,\"implementation\":3,"
         "\"line\":4,\"column\":5,\"category\":6,\"subcategory\":7},\"data\":[";
  for (size_t i = 0; i < t.frames.size(); ++i) {
    const int category = t.frames[i].second;
    out += std::string(i ? "," : "") + "[" + std::to_string(t.frames[i].first) + ",false,0,null,null,null," +
           (category < 0 ? std::string("null,null") : std::to_string(category) + ",0") + "]";
  }
  out += "]},\"stringTable\":[";
  for (size_t i = 0; i < t.strings.size(); ++i) out += std::string(i ? "," : "") + Quoted(t.strings[i]);
  out += "]}";
  return out;
}

}  // namespace

std::string MakeProfileJson(const TestProcess& p, const std::vector<std::string>& subprocesses) {
  std::string out = "{\"meta\":{\"version\":36,\"startTime\":" + Number(p.start_time) +
                    ",\"shutdownTime\":null,\"interval\":1,\"processType\":0,\"product\":" + Quoted(p.product) +
                    ",\"stackwalk\":1,\"debug\":0,\"presymbolicated\":false,"
                    "\"sampleUnits\":{\"time\":\"ms\",\"eventDelay\":\"ms\",\"threadCPUDelta\":\"ns\"},"
                    "\"categories\":" + p.categories + ",\"markerSchema\":" + p.marker_schema + p.extra_meta + "},";
  out += "\"libs\":" + p.libs + ",\"threads\":[";
  for (size_t i = 0; i < p.threads.size(); ++i) out += std::string(i ? "," : "") + ThreadJson(p.threads[i]);
  out += "],\"processes\":[";
  for (size_t i = 0; i < subprocesses.size(); ++i) out += std::string(i ? "," : "") + subprocesses[i];
  out += "]}";
  return out;
}

}  // namespace testing
}  // namespace cli
}  // namespace strata
