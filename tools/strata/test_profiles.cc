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
  const bool inline_depths = !t.inline_depths.empty();
  out += "]},\"frameTable\":{\"schema\":{\"location\":0,\"relevantForJS\":1,\"innerWindowID\":2,\"implementation\":3,"
         "\"line\":4,\"column\":5,\"category\":6,\"subcategory\":7";
  out += inline_depths ? ",\"inlineDepth\":8},\"data\":[" : "},\"data\":[";
  for (size_t i = 0; i < t.frames.size(); ++i) {
    const int category = t.frames[i].second;
    out += std::string(i ? "," : "") + "[" + std::to_string(t.frames[i].first) + ",false,0,null,null,null," +
           (category < 0 ? std::string("null,null") : std::to_string(category) + ",0");
    if (inline_depths) out += "," + std::to_string(t.inline_depths.at(i));
    out += "]";
  }
  out += "]},\"stringTable\":[";
  for (size_t i = 0; i < t.strings.size(); ++i) out += std::string(i ? "," : "") + Quoted(t.strings[i]);
  out += "]}";
  return out;
}

}  // namespace

TestThread InlinedLeafThread() {
  TestThread t;
  t.strings = {"main (in prog)", "malloc (in libc.so.6)", "tcache_get (in libc.so.6)"};
  t.frames = {{0, 0}, {1, -1}, {2, -1}};
  t.stacks = {{-1, 0}, {0, 1}, {1, 2}};
  t.inline_depths = {0, 0, 1};
  return t;
}

std::string MakeProfileJson(const TestProcess& p, const std::vector<std::string>& subprocesses) {
  std::string out = "{\"meta\":{\"version\":36,\"startTime\":" + Number(p.start_time) +
                    ",\"shutdownTime\":null,\"interval\":1,\"processType\":0,\"product\":" + Quoted(p.product) +
                    ",\"stackwalk\":1,\"debug\":0,\"presymbolicated\":false,"
                    "\"sampleUnits\":{\"time\":\"ms\",\"eventDelay\":\"ms\",\"threadCPUDelta\":\"ns\"},"
                    "\"categories\":" + p.categories + ",\"markerSchema\":" + p.marker_schema + p.extra_meta + "},";
  out += "\"libs\":" + p.libs + ",\"pausedRanges\":" + p.paused_ranges + ",\"threads\":[";
  for (size_t i = 0; i < p.threads.size(); ++i) out += std::string(i ? "," : "") + ThreadJson(p.threads[i]);
  out += "],\"processes\":[";
  for (size_t i = 0; i < subprocesses.size(); ++i) out += std::string(i ? "," : "") + subprocesses[i];
  out += "]}";
  return out;
}

std::string WaitingProfileJson(bool cpu) {
  const double ms = cpu ? 1e6 : -1;
  TestProcess p;
  p.paused_ranges = R"([{"startTime":302.5,"endTime":310,"reason":"profiler-paused"},)"
                    R"({"startTime":60,"endTime":290,"reason":"profiler-paused"}])";
  TestThread busy;
  busy.name = "busy";
  busy.tid = 11;
  busy.strings = {"main (in prog)", "busy_loop (in prog)"};
  busy.frames = {{0, 0}, {1, 0}};
  busy.stacks = {{-1, 0}, {0, 1}};
  for (int t = 0; t < 10; ++t) busy.samples.push_back({1, static_cast<double>(t), ms});
  TestThread blocked;
  blocked.name = "blocked";
  blocked.tid = 12;
  blocked.strings = {"main (in prog)", "prepare (in prog)", "wait_here (in prog)", "poll (in libc.so.6)",
                     "after (in prog)"};
  blocked.frames = {{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}};
  blocked.stacks = {{-1, 0}, {0, 1}, {0, 2}, {2, 3}, {0, 4}};
  for (int t = 0; t < 3; ++t) blocked.samples.push_back({1, static_cast<double>(t), ms});
  for (int t = 3; t <= 52; ++t) blocked.samples.push_back({3, static_cast<double>(t), cpu ? 0.0 : -1.0});
  blocked.samples.push_back({4, 300.0, cpu ? 0.5e6 : -1.0});
  for (int t : {301, 302, 311, 312}) blocked.samples.push_back({4, static_cast<double>(t), ms});
  p.threads = {busy, blocked};
  return MakeProfileJson(p);
}

}  // namespace testing
}  // namespace cli
}  // namespace strata
