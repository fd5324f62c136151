// profile_stats: reads a Gecko profile (format 36, as Strata writes it) and prints the numbers
// the scenario tests assert on, one `key=value` record per line (values never contain spaces;
// spaces in names are printed as '_'). It does not validate the format: that is the profile
// checker's job (tests/README.md); it only refuses what it cannot read.
//
// Usage: profile_stats PROFILE.json [THREAD:PATTERN[|PATTERN...]]...
//
// Output:
//   profile version=36 interval=1 presymbolicated=1 product=NAME cpu_unit=µs threads=3
//           libs=12 processes=0
//   thread index=I name=NAME processName=NAME pid=P tid=T samples=N cpu_samples=C cpu_ms=X
//          cpu_interval_ms=I span_ms=S mean_interval_ms=M median_interval_ms=D
//          real_mean_interval_ms=RM real_median_interval_ms=RD frames=F hex_frames=H
//          cpu_all_ms=A cpu_excess_max_ms=E cpu_delta_median_ms=DM cpu_delta_max_ms=DX
//          cpu_delta_quarter_medians_ms=Q1,Q2,Q3,Q4
//   match thread=NAME patterns=P1|P2 count=K samples=N pct=Q real_count=R
//         real_cpu_delta_median_ms=QM
//   lib name=NAME
//
// - cpu_samples: samples whose threadCPUDelta is > 0 (the thread ran since its previous
//   sample); samples with a null delta count too (unknown means "assume running").
// - cpu_ms: the sum of threadCPUDelta (first sample excluded, as the front-end does), in ms.
// - cpu_interval_ms: cpu_ms / the number of samples (after the first) with a CPU delta > 0:
//   the sampling interval measured on the thread's own CPU time, i.e. while it ran.
// - mean_interval_ms: (last sample time - first sample time) / (samples - 1), wall clock;
//   median_interval_ms: the median time between consecutive samples.
// - real_mean_interval_ms, real_median_interval_ms: the same over the samples taken while the
//   thread ran (the cpu_samples).
// - hex_frames: frames whose location starts with "0x" (unsymbolicated addresses).
// - cpu_all_ms: the sum of every sample's threadCPUDelta, the first included (Strata's first
//   sample carries the CPU used since sampling started), in ms; -1 when the unit is unknown.
// - cpu_excess_max_ms: the most a sample's CPU delta exceeds the wall time since the thread's
//   previous sample (since its registerTime for the first), in ms (CPU accounting, issue 17).
// - cpu_delta_median_ms, cpu_delta_max_ms: the median and the largest threadCPUDelta of the
//   samples after the first with a delta > 0, in ms: the thread's own CPU between two samples
//   taken while it ran (with CPU-time sampling the median is the source's period however
//   many overflows a loaded kernel leaves out, which only lengthen some deltas; issue 35).
// - cpu_delta_quarter_medians_ms: the same median in each quarter of the thread's sampled CPU
//   (a delta belongs to the quarter where the CPU carried up to its sample ends), 0 for a
//   quarter without one: a source that changes its period or stops part way shows there.
// - match: samples of every thread named NAME whose stack has a frame whose location contains
//   any of the patterns (substring match), over those threads' samples; real_count: those of
//   the K taken while the thread ran (as cpu_samples); real_cpu_delta_median_ms: the median
//   CPU delta of those R (the first sample of a thread left out), 0 when there is none.
// Exit status: 0, or 2 when the file cannot be read or is not shaped like a Gecko profile.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "rapidjson/document.h"

namespace {

using rapidjson::Value;

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "profile_stats: %s\n", message.c_str());
  std::exit(2);
}

std::string NoSpaces(std::string s) {
  for (char& c : s) {
    if (c == ' ' || c == '\t' || c == '\n') c = '_';
  }
  return s.empty() ? "-" : s;
}

const Value& Member(const Value& object, const char* key, const std::string& where) {
  if (!object.IsObject() || !object.HasMember(key)) Fail(where + ": no \"" + key + "\"");
  return object[key];
}

// Column position of `name` in a {schema, data} table, or -1.
int Column(const Value& table, const char* name) {
  const Value& schema = table["schema"];
  if (!schema.IsObject() || !schema.HasMember(name) || !schema[name].IsInt()) return -1;
  return schema[name].GetInt();
}

const Value* Cell(const Value& row, int column) {
  if (column < 0 || !row.IsArray() || static_cast<unsigned>(column) >= row.Size()) return nullptr;
  return &row[column];
}

double Number(const Value* v, double fallback) {
  return v != nullptr && v->IsNumber() ? v->GetDouble() : fallback;
}

struct Query {
  std::string thread;
  std::vector<std::string> patterns;
  std::string text;
  long count = 0;
  long real_count = 0;  // Of `count`, the samples taken while the thread ran (cpu_samples).
  long samples = 0;
  std::vector<double> real_cpu_deltas_ms;  // Of the `real_count` samples, after a thread's first.
};

// The median of `values` (the upper one of an even count), 0 when empty.
double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

struct ThreadData {
  std::vector<std::string> locations;  // Per frame.
  std::vector<long> stack_prefix;      // Per stack; -1 = root.
  std::vector<long> stack_frame;
};

ThreadData ReadTables(const Value& thread, const std::string& where) {
  ThreadData data;
  const Value& strings = Member(thread, "stringTable", where);
  const Value& frames = Member(thread, "frameTable", where);
  const Value& stacks = Member(thread, "stackTable", where);
  if (!strings.IsArray()) Fail(where + ": stringTable is not an array");
  int location = Column(frames, "location");
  if (location < 0) Fail(where + ": frameTable has no location column");
  for (const Value& row : frames["data"].GetArray()) {
    const Value* cell = Cell(row, location);
    if (cell == nullptr || !cell->IsUint() || cell->GetUint() >= strings.Size() ||
        !strings[cell->GetUint()].IsString()) {
      Fail(where + ": frame location out of range");
    }
    data.locations.emplace_back(strings[cell->GetUint()].GetString());
  }
  int prefix = Column(stacks, "prefix");
  int frame = Column(stacks, "frame");
  if (prefix < 0 || frame < 0) Fail(where + ": stackTable schema lacks prefix/frame");
  for (const Value& row : stacks["data"].GetArray()) {
    const Value* p = Cell(row, prefix);
    const Value* f = Cell(row, frame);
    long index = static_cast<long>(data.stack_prefix.size());
    long prefix_index = (p == nullptr || p->IsNull()) ? -1 : (p->IsInt64() ? p->GetInt64() : -2);
    if (prefix_index < -1 || prefix_index >= index) Fail(where + ": stack prefix not before it");
    if (f == nullptr || !f->IsUint() || f->GetUint() >= data.locations.size()) {
      Fail(where + ": stack frame out of range");
    }
    data.stack_prefix.push_back(prefix_index);
    data.stack_frame.push_back(f->GetUint());
  }
  return data;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PROFILE.json [THREAD:PATTERN[|PATTERN...]]...\n", argv[0]);
    return 2;
  }
  std::vector<Query> queries;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    size_t colon = arg.find(':');
    if (colon == std::string::npos) Fail("bad query (want THREAD:PATTERN): " + arg);
    Query q;
    q.thread = arg.substr(0, colon);
    q.text = arg.substr(colon + 1);
    size_t start = colon + 1;
    for (;;) {
      size_t bar = arg.find('|', start);
      q.patterns.push_back(arg.substr(start, bar == std::string::npos ? bar : bar - start));
      if (bar == std::string::npos) break;
      start = bar + 1;
    }
    queries.push_back(q);
  }

  std::ifstream in(argv[1], std::ios::binary);
  if (!in) Fail(std::string("cannot open ") + argv[1]);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  rapidjson::Document doc;
  doc.Parse(text.c_str(), text.size());
  if (doc.HasParseError()) {
    Fail(std::string("not valid JSON at offset ") + std::to_string(doc.GetErrorOffset()));
  }
  const Value& meta = Member(doc, "meta", "profile");
  const Value& threads = Member(doc, "threads", "profile");
  const Value& libs = Member(doc, "libs", "profile");
  if (!threads.IsArray() || !libs.IsArray()) Fail("threads or libs is not an array");

  std::string cpu_unit = "-";
  if (meta.HasMember("sampleUnits") && meta["sampleUnits"].IsObject() &&
      meta["sampleUnits"].HasMember("threadCPUDelta") &&
      meta["sampleUnits"]["threadCPUDelta"].IsString()) {
    cpu_unit = meta["sampleUnits"]["threadCPUDelta"].GetString();
  }
  double cpu_unit_to_ms = 0;  // 0: unknown unit, cpu_ms not computed.
  if (cpu_unit == "ns") cpu_unit_to_ms = 1e-6;
  if (cpu_unit == "\xC2\xB5s") cpu_unit_to_ms = 1e-3;

  bool presymbolicated = meta.HasMember("presymbolicated") && meta["presymbolicated"].IsBool() &&
                         meta["presymbolicated"].GetBool();
  std::printf("profile version=%d interval=%g presymbolicated=%d product=%s cpu_unit=%s "
              "threads=%u libs=%u processes=%u\n",
              meta.HasMember("version") && meta["version"].IsInt() ? meta["version"].GetInt() : -1,
              meta.HasMember("interval") ? Number(&meta["interval"], -1) : -1,
              presymbolicated ? 1 : 0,
              NoSpaces(meta.HasMember("product") && meta["product"].IsString()
                           ? meta["product"].GetString()
                           : "")
                  .c_str(),
              cpu_unit.c_str(), threads.Size(), libs.Size(),
              doc.HasMember("processes") && doc["processes"].IsArray() ? doc["processes"].Size()
                                                                       : 0u);

  for (unsigned t = 0; t < threads.Size(); ++t) {
    const Value& thread = threads[t];
    std::string where = "thread " + std::to_string(t);
    std::string name = thread.HasMember("name") && thread["name"].IsString()
                           ? thread["name"].GetString()
                           : "";
    ThreadData data = ReadTables(thread, where);

    // Which stacks match each query that names this thread (prefixes come first).
    std::vector<std::vector<char>> stack_matches;
    std::vector<Query*> thread_queries;
    for (Query& q : queries) {
      if (q.thread != name) continue;
      thread_queries.push_back(&q);
      std::vector<char> matches(data.stack_prefix.size(), 0);
      for (size_t s = 0; s < matches.size(); ++s) {
        const std::string& location = data.locations[data.stack_frame[s]];
        bool here = false;
        for (const std::string& p : q.patterns) here = here || location.find(p) != std::string::npos;
        matches[s] = here || (data.stack_prefix[s] >= 0 && matches[data.stack_prefix[s]]);
      }
      stack_matches.push_back(std::move(matches));
    }

    const Value& samples = Member(thread, "samples", where);
    int stack_col = Column(samples, "stack");
    int time_col = Column(samples, "time");
    int cpu_col = Column(samples, "threadCPUDelta");
    if (stack_col < 0 || time_col < 0) Fail(where + ": samples schema lacks stack/time");
    long count = 0, cpu_samples = 0, cpu_deltas = 0;
    double cpu_total = 0, cpu_all = 0;
    double cpu_excess_max = -1e300;
    double previous_time = thread.HasMember("registerTime") && thread["registerTime"].IsNumber()
                               ? thread["registerTime"].GetDouble()
                               : -1e300;
    std::vector<double> times;
    std::vector<double> real_times;  // Of the samples taken while the thread ran.
    std::vector<double> cpu_deltas_ms;  // The deltas > 0 after the first sample, in ms.
    for (const Value& row : samples["data"].GetArray()) {
      const Value* stack = Cell(row, stack_col);
      times.push_back(Number(Cell(row, time_col), 0));
      const Value* cpu = Cell(row, cpu_col);
      bool ran = cpu == nullptr || cpu->IsNull() || (cpu->IsNumber() && cpu->GetDouble() > 0);
      if (ran) {
        ++cpu_samples;
        real_times.push_back(times.back());
      }
      const bool measured_delta = count > 0 && Number(cpu, 0) > 0 && cpu_unit_to_ms > 0;
      if (count > 0) {
        cpu_total += Number(cpu, 0);
        if (Number(cpu, 0) > 0) ++cpu_deltas;
      }
      if (measured_delta) cpu_deltas_ms.push_back(Number(cpu, 0) * cpu_unit_to_ms);
      cpu_all += Number(cpu, 0);
      if (cpu_unit_to_ms > 0) {
        cpu_excess_max = std::max(cpu_excess_max,
                                  Number(cpu, 0) * cpu_unit_to_ms - (times.back() - previous_time));
      }
      previous_time = times.back();
      for (size_t k = 0; k < thread_queries.size(); ++k) {
        ++thread_queries[k]->samples;
        if (stack != nullptr && stack->IsUint() && stack->GetUint() < data.stack_prefix.size() &&
            stack_matches[k][stack->GetUint()]) {
          ++thread_queries[k]->count;
          if (ran) ++thread_queries[k]->real_count;
          if (measured_delta) thread_queries[k]->real_cpu_deltas_ms.push_back(cpu_deltas_ms.back());
        }
      }
      ++count;
    }
    double span = times.size() >= 2 ? times.back() - times.front() : 0;
    auto median_delta = [](const std::vector<double>& t) {
      std::vector<double> deltas;
      for (size_t i = 1; i < t.size(); ++i) deltas.push_back(t[i] - t[i - 1]);
      std::sort(deltas.begin(), deltas.end());
      return deltas.empty() ? 0.0 : deltas[deltas.size() / 2];
    };
    double median = median_delta(times);
    double cpu_carried_ms = 0;
    for (double d : cpu_deltas_ms) cpu_carried_ms += d;
    std::vector<double> quarters[4];
    double carried_so_far_ms = 0;
    for (double d : cpu_deltas_ms) {
      carried_so_far_ms += d;
      const int quarter = static_cast<int>(4 * carried_so_far_ms / cpu_carried_ms);
      quarters[std::min(quarter, 3)].push_back(d);
    }
    std::string quarter_medians;
    for (const std::vector<double>& q : quarters) {
      char text[32];
      std::snprintf(text, sizeof(text), "%s%.4f", quarter_medians.empty() ? "" : ",", Median(q));
      quarter_medians += text;
    }
    double real_span = real_times.size() >= 2 ? real_times.back() - real_times.front() : 0;
    double real_mean = real_times.size() >= 2 ? real_span / (real_times.size() - 1) : 0;
    double real_median = median_delta(real_times);
    long hex_frames = 0;
    for (const std::string& location : data.locations) {
      if (location.rfind("0x", 0) == 0) ++hex_frames;
    }
    std::printf("thread index=%u name=%s processName=%s pid=%s tid=%s samples=%ld cpu_samples=%ld "
                "cpu_ms=%.3f cpu_interval_ms=%.4f span_ms=%.3f mean_interval_ms=%.4f "
                "median_interval_ms=%.4f real_mean_interval_ms=%.4f real_median_interval_ms=%.4f "
                "frames=%zu hex_frames=%ld cpu_all_ms=%.3f cpu_excess_max_ms=%.4f "
                "cpu_delta_median_ms=%.4f cpu_delta_max_ms=%.4f cpu_delta_quarter_medians_ms=%s\n",
                t, NoSpaces(name).c_str(),
                NoSpaces(thread.HasMember("processName") && thread["processName"].IsString()
                             ? thread["processName"].GetString()
                             : "")
                    .c_str(),
                thread.HasMember("pid") && thread["pid"].IsNumber()
                    ? std::to_string(thread["pid"].GetInt64()).c_str()
                    : (thread.HasMember("pid") && thread["pid"].IsString() ? thread["pid"].GetString()
                                                                           : "-"),
                thread.HasMember("tid") && thread["tid"].IsNumber()
                    ? std::to_string(thread["tid"].GetInt64()).c_str()
                    : "-",
                count, cpu_samples, cpu_unit_to_ms > 0 ? cpu_total * cpu_unit_to_ms : -1.0,
                cpu_unit_to_ms > 0 && cpu_deltas > 0 ? cpu_total * cpu_unit_to_ms / cpu_deltas : 0.0,
                span,
                count >= 2 ? span / static_cast<double>(count - 1) : 0.0, median, real_mean,
                real_median,
                data.locations.size(), hex_frames, cpu_unit_to_ms > 0 ? cpu_all * cpu_unit_to_ms : -1.0,
                count > 0 && cpu_unit_to_ms > 0 ? cpu_excess_max : 0.0, Median(cpu_deltas_ms),
                cpu_deltas_ms.empty() ? 0.0
                                      : *std::max_element(cpu_deltas_ms.begin(), cpu_deltas_ms.end()),
                quarter_medians.c_str());
  }
  for (const Query& q : queries) {
    std::printf("match thread=%s patterns=%s count=%ld samples=%ld pct=%.1f real_count=%ld "
                "real_cpu_delta_median_ms=%.4f\n",
                NoSpaces(q.thread).c_str(), NoSpaces(q.text).c_str(), q.count, q.samples,
                q.samples > 0 ? 100.0 * static_cast<double>(q.count) / q.samples : 0.0,
                q.real_count, Median(q.real_cpu_deltas_ms));
  }
  for (const Value& lib : libs.GetArray()) {
    if (lib.IsObject() && lib.HasMember("name") && lib["name"].IsString()) {
      std::printf("lib name=%s\n", NoSpaces(lib["name"].GetString()).c_str());
    }
  }
  return 0;
}
