#include "tools/strata/convert.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tools/strata/function_stats.h"
#include "tools/strata/profile_io.h"
#include "tools/strata/progress.h"
#include "tools/strata/terminal_text.h"

namespace strata {
namespace cli {
namespace {

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof(escape), "\\u%04x", static_cast<unsigned>(c));
          *out += escape;
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// Milliseconds -> microseconds with ns precision, no exponent, no float tail.
void AppendMicros(std::string* out, double ms) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.3f", ms * 1000.0);
  *out += text;
}

std::string ProcessLabel(const Profile& profile, const Process& p) {
  return (p.name.empty() ? profile.product : p.name) + " (" + std::to_string(p.pid) + ")";
}

bool WriteText(const std::string& path, const std::string& text, bool gzip, ConvertStats* stats, std::string* error) {
  OutputFile file(path, gzip);
  Progress progress("write", text.size());
  constexpr size_t kChunk = 1 << 20;
  for (size_t at = 0; at < text.size() && file.ok(); at += kChunk) {
    file.Write(std::string_view(text).substr(at, kChunk));
    progress.Set(at);
  }
  progress.Done();
  if (!file.Commit()) {
    *error = file.error();
    return false;
  }
  stats->bytes = text.size();
  return true;
}

// --- Chrome trace ---------------------------------------------------------------------------

// Text produced piece by piece and handed to `flush` in ~1 MiB parts.
using Flush = std::function<void(const std::string&)>;

class ChromeTraceWriter {
 public:
  ChromeTraceWriter(const Profile& profile, Weight weight, Flush flush)
      : profile_(profile), off_cpu_ends_slices_(weight == Weight::kCpu && ProfileHasCpu(profile)), flush_(std::move(flush)) {}

  void Run() {
    out_.reserve(1 << 21);
    out_ += "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"source\":\"strata convert\",\"product\":";
    AppendJsonString(&out_, profile_.product);
    out_ += "},\"traceEvents\":[\n";
    for (size_t pi = 0; pi < profile_.processes.size(); ++pi) {
      const Process& p = profile_.processes[pi];
      Metadata(p.pid, 0, "process_name", ProcessLabel(profile_, p));
      MetadataNumber(p.pid, 0, "process_sort_index", static_cast<double>(pi));
      for (size_t t : p.threads) {
        const Thread& thread = profile_.threads[t];
        Metadata(thread.pid, thread.tid, "thread_name", thread.name);
      }
    }
    Progress progress("convert", profile_.threads.size());
    for (const Thread& thread : profile_.threads) {
      Samples(thread);
      Markers(thread);
      progress.Advance(1);
    }
    out_ += "]}\n";
    flush_(out_);
    out_.clear();
  }

 private:
  void Begin(char phase, int64_t pid, int64_t tid) {
    if (out_.size() >= (1 << 20)) {
      flush_(out_);
      out_.clear();
    }
    out_ += first_ ? "{\"ph\":\"" : ",\n{\"ph\":\"";
    first_ = false;
    out_.push_back(phase);
    out_ += "\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid);
  }
  void End() { out_ += "}"; }

  void Metadata(int64_t pid, int64_t tid, const char* what, const std::string& name) {
    Begin('M', pid, tid);
    out_ += ",\"name\":\"";
    out_ += what;
    out_ += "\",\"args\":{\"name\":";
    AppendJsonString(&out_, name);
    out_ += "}";
    End();
  }
  void MetadataNumber(int64_t pid, int64_t tid, const char* what, double value) {
    Begin('M', pid, tid);
    out_ += ",\"name\":\"";
    out_ += what;
    out_ += "\",\"args\":{\"sort_index\":" + std::to_string(static_cast<int64_t>(value)) + "}";
    End();
  }

  void Slice(char phase, const Thread& thread, uint32_t function, double ms) {
    Begin(phase, thread.pid, thread.tid);
    out_ += ",\"ts\":";
    AppendMicros(&out_, ms);
    {
      // Both ends carry the name and category: consumers match an "E" to its "B" by them
      // (speedscope mis-nests without; the Firefox Profiler's importer refuses any event
      // without a name).
      const Function& f = profile_.functions[function];
      out_ += ",\"name\":";
      AppendJsonString(&out_, f.name);
      out_ += ",\"cat\":";
      AppendJsonString(&out_, f.library.empty() ? std::string("label") : f.library);
    }
    End();
  }

  void Samples(const Thread& thread) {
    const double gap = std::max(100.0, 20 * profile_.interval_ms);
    std::vector<uint32_t> open;  // Functions of the open slices, root first.
    std::unordered_map<int32_t, std::vector<uint32_t>> stack_cache;
    double previous = NAN;
    auto close_to = [&](size_t depth, double at) {
      while (open.size() > depth) {
        Slice('E', thread, open.back(), at);
        open.pop_back();
      }
    };
    for (size_t i = 0; i < thread.sample_count(); ++i) {
      const double t = thread.sample_time[i];
      if (!std::isnan(previous) && t - previous > gap) close_to(0, previous + profile_.interval_ms);
      // --weight cpu: a sample that carries no CPU (a wait, a copy of an idle thread) shows
      // the thread off CPU: every open slice ends.
      const bool off_cpu = off_cpu_ends_slices_ && thread.sample_cpu_ms[i] == 0;
      const int32_t stack = off_cpu ? -1 : thread.sample_stack[i];
      static const std::vector<uint32_t> kEmpty;
      const std::vector<uint32_t>* functions = &kEmpty;
      if (stack >= 0) {
        auto it = stack_cache.find(stack);
        if (it == stack_cache.end()) {
          if (stack_cache.size() > 100000) stack_cache.clear();
          it = stack_cache.emplace(stack, thread.StackFunctions(stack)).first;
        }
        functions = &it->second;
      }
      size_t common = 0;
      while (common < open.size() && common < functions->size() && open[common] == (*functions)[common]) ++common;
      close_to(common, t);
      for (size_t d = common; d < functions->size(); ++d) {
        Slice('B', thread, (*functions)[d], t);
        open.push_back((*functions)[d]);
      }
      previous = t;
    }
    if (!std::isnan(previous)) close_to(0, previous + profile_.interval_ms);
  }

  void Async(char phase, const Thread& thread, const std::string& name, uint64_t id, double ms) {
    Begin(phase, thread.pid, thread.tid);
    out_ += ",\"cat\":\"marker\",\"id\":" + std::to_string(id) + ",\"ts\":";
    AppendMicros(&out_, ms);
    out_ += ",\"name\":";
    AppendJsonString(&out_, name);
    End();
  }

  void Markers(const Thread& thread) {
    for (const MarkerSpan& m : MarkerSpans(profile_, thread)) {
      if (m.instant) {
        Begin('i', thread.pid, thread.tid);
        out_ += ",\"s\":\"t\",\"cat\":\"marker\",\"ts\":";
        AppendMicros(&out_, m.start);
        out_ += ",\"name\":";
        AppendJsonString(&out_, m.name);
        End();
      } else {
        Interval(thread, m.name, m.start, m.end);
      }
    }
  }

  void Interval(const Thread& thread, const std::string& name, double start, double end) {
    const uint64_t id = ++next_async_id_;
    Async('b', thread, name, id, start);
    Async('e', thread, name, id, std::max(start, end));
  }

  const Profile& profile_;
  const bool off_cpu_ends_slices_;
  Flush flush_;
  std::string out_;
  bool first_ = true;
  uint64_t next_async_id_ = 0;
};

// --- pprof ----------------------------------------------------------------------------------

// Protocol-buffer encoding of the few shapes profile.proto needs.
class ProtoWriter {
 public:
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void Tag(int field, int wire_type) { Varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type)); }
  // A varint field; proto3 leaves zero values out.
  void Int(int field, int64_t v) {
    if (v == 0) return;
    Tag(field, 0);
    Varint(static_cast<uint64_t>(v));
  }
  void Bytes(int field, std::string_view bytes) {
    Tag(field, 2);
    Varint(bytes.size());
    out_.append(bytes.data(), bytes.size());
  }
  void Message(int field, const ProtoWriter& message) { Bytes(field, message.out_); }
  // A packed repeated varint field.
  template <typename T>
  void Packed(int field, const std::vector<T>& values) {
    if (values.empty()) return;
    ProtoWriter packed;
    for (const T v : values) packed.Varint(static_cast<uint64_t>(v));
    Message(field, packed);
  }
  const std::string& data() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class PprofBuilder {
 public:
  PprofBuilder(const Profile& profile, Weight weight) : profile_(profile), weight_(weight) { String(""); }

  std::string Run() {
    const bool cpu = ProfileHasCpu(profile_);
    const int64_t ns_unit = String("nanoseconds");
    // Sample types: samples/count, wall/nanoseconds, and cpu/nanoseconds with CPU deltas.
    std::vector<std::pair<int64_t, int64_t>> types = {{String("samples"), String("count")},
                                                      {String("wall"), ns_unit}};
    if (cpu) types.emplace_back(String("cpu"), ns_unit);
    const int64_t cpu_type = cpu ? types[2].first : types[1].first;  // The sampling period's.
    int64_t default_type = types[1].first;
    if (weight_ == Weight::kSamples || (weight_ == Weight::kCpu && !cpu)) default_type = types[0].first;
    if (weight_ == Weight::kCpu && cpu) default_type = types[2].first;
    ProtoWriter out;
    for (const auto& [type, unit] : types) {
      ProtoWriter value_type;
      value_type.Int(1, type);
      value_type.Int(2, unit);
      out.Message(1, value_type);
    }

    // pprof takes the first mapping for the main binary ("File:"): the parent process's
    // executable, the library named as the process.
    if (!profile_.processes.empty()) {
      const Process& parent = profile_.processes.front();
      for (size_t lib = 0; lib < parent.libs.size(); ++lib) {
        if (parent.libs[lib].name != parent.name) continue;
        mapping_index_.emplace(std::make_pair(size_t{0}, static_cast<int32_t>(lib)), 1);
        mapping_keys_.emplace_back(0, static_cast<int32_t>(lib));
        break;
      }
    }

    // Samples: one per distinct (thread, stack).
    const int64_t key_process = String("process"), key_pid = String("pid"), key_thread = String("thread"),
                  key_tid = String("thread_id");
    Progress progress("convert", profile_.total_samples);
    for (const Thread& thread : profile_.threads) {
      // By stack + 1 (0: no stack): count, wall ns, CPU ns.
      struct Values {
        int64_t count = 0;
        double wall_ns = 0;
        double cpu_ns = 0;
      };
      std::vector<Values> by_stack(thread.stack_prefix.size() + 1);
      const std::vector<double> wall = SampleWallMs(profile_, thread);
      for (size_t i = 0; i < thread.sample_count(); ++i) {
        Values& entry = by_stack[static_cast<size_t>(thread.sample_stack[i] + 1)];
        entry.count += 1;
        entry.wall_ns += wall[i] * 1e6;
        entry.cpu_ns += SampleCpuMs(thread, i, true, profile_.interval_ms) * 1e6;
      }
      progress.Advance(thread.sample_count());
      const int64_t process_name =
          String(ProcessLabel(profile_, profile_.processes[thread.process]));
      const int64_t thread_name = String(thread.name);
      std::vector<uint64_t> locations;
      std::vector<const Frame*> inlined;  // Leaf first: frames inlined into the next outer one.
      for (size_t index = 0; index < by_stack.size(); ++index) {
        const auto& value = by_stack[index];
        if (value.count == 0) continue;
        const int32_t stack = static_cast<int32_t>(index) - 1;
        ProtoWriter sample;
        locations.clear();
        // One location per address: a function and the functions inlined into it (inlineDepth
        // > 0, from DWARF) are one location's lines, innermost first, as pprof encodes inlining
        // (`pprof -noinlines` then reports by the outer function, as perf --no-inline does).
        inlined.clear();
        for (int32_t s = stack; s >= 0; s = thread.stack_prefix[static_cast<size_t>(s)]) {
          const Frame& frame = thread.frames[thread.stack_frame[static_cast<size_t>(s)]];
          if (frame.is_label && !inlined.empty()) {
            // A label between inline levels (docs/symbols.md, "Labels"): the inlined frames
            // below it are a location of their own, at their physical frame's address.
            locations.push_back(LocationFor(inlined, thread.process, locations.empty()));
            inlined.clear();
          }
          inlined.push_back(&frame);
          if (frame.inline_depth > 0 && thread.stack_prefix[static_cast<size_t>(s)] >= 0) continue;
          locations.push_back(LocationFor(inlined, thread.process, locations.empty()));
          inlined.clear();
        }
        sample.Packed(1, locations);
        std::vector<int64_t> values = {value.count, std::llround(value.wall_ns)};
        if (cpu) values.push_back(std::llround(value.cpu_ns));
        sample.Packed(2, values);
        for (const auto& [key, str, num] : {std::make_tuple(key_process, process_name, int64_t{0}),
                                            std::make_tuple(key_pid, int64_t{0}, thread.pid),
                                            std::make_tuple(key_thread, thread_name, int64_t{0}),
                                            std::make_tuple(key_tid, int64_t{0}, thread.tid)}) {
          ProtoWriter label;
          label.Int(1, key);
          label.Int(2, str);
          label.Int(3, num);
          sample.Message(3, label);
        }
        out.Message(2, sample);
      }
    }

    // Mappings (field 3): the libraries the locations are in, so that pprof knows the files
    // (and build ids) and can symbolize again.
    for (size_t i = 0; i < mapping_keys_.size(); ++i) {
      const auto [process, lib] = mapping_keys_[i];
      const Library& library = profile_.processes[process].libs[static_cast<size_t>(lib)];
      ProtoWriter mapping;
      mapping.Int(1, static_cast<int64_t>(i + 1));
      mapping.Int(2, static_cast<int64_t>(library.start));
      mapping.Int(3, static_cast<int64_t>(library.end));
      mapping.Int(4, static_cast<int64_t>(library.offset));
      mapping.Int(5, String(library.path.empty() ? library.name : library.path));
      mapping.Int(6, String(library.code_id));
      mapping.Int(7, 1);  // has_functions
      mapping.Int(8, 1);  // has_filenames
      mapping.Int(9, 1);  // has_line_numbers
      mapping.Int(10, 1);  // has_inline_frames
      out.Message(3, mapping);
    }
    for (size_t i = 0; i < location_keys_.size(); ++i) {
      ProtoWriter location;
      location.Int(1, static_cast<int64_t>(i + 1));
      location.Int(2, static_cast<int64_t>(location_places_[i].mapping));
      location.Int(3, static_cast<int64_t>(location_places_[i].address));
      for (const auto& [function_id, line_number] : location_keys_[i]) {
        ProtoWriter line;
        line.Int(1, static_cast<int64_t>(function_id));
        line.Int(2, line_number);
        location.Message(4, line);
      }
      out.Message(4, location);
    }
    for (size_t i = 0; i < function_ids_.size(); ++i) {
      const Function& f = profile_.functions[function_ids_[i]];
      ProtoWriter function;
      function.Int(1, static_cast<int64_t>(i + 1));
      const int64_t name = String(f.name);
      function.Int(2, name);
      function.Int(3, name);
      function.Int(4, String(f.file));
      out.Message(5, function);
    }
    const int64_t comment = String("converted by strata from a Gecko profile of " + profile_.product);
    for (const std::string& s : strings_) out.Bytes(6, s);
    out.Int(9, static_cast<int64_t>(std::llround((profile_.start_epoch_ms + profile_.start_time) * 1e6)));
    out.Int(10, static_cast<int64_t>(std::llround(profile_.duration() * 1e6)));
    ProtoWriter period_type;
    period_type.Int(1, cpu_type);
    period_type.Int(2, ns_unit);
    out.Message(11, period_type);
    out.Int(12, static_cast<int64_t>(std::llround(profile_.interval_ms * 1e6)));
    out.Packed(13, std::vector<int64_t>{comment});
    out.Int(14, default_type);
    return out.Take();
  }

 private:
  // Strings must all be interned before the string table is written (it is written last).
  int64_t String(const std::string& s) {
    auto [it, inserted] = string_ids_.emplace(s, static_cast<int64_t>(strings_.size()));
    if (inserted) strings_.push_back(s);
    return it->second;
  }

  // The location of `frames` (innermost first; the last is the outer function, whose
  // library and address place it) in process `process`. `leaf`: the sample's leaf, whose
  // address is its pc; a caller's is its return address less 1, inside the call, as pprof
  // expects of a non-leaf address.
  uint64_t LocationFor(const std::vector<const Frame*>& frames, size_t process, bool leaf) {
    LocationKey key;
    for (const Frame* frame : frames) {
      auto f = function_index_.find(frame->function);
      if (f == function_index_.end()) {
        f = function_index_.emplace(frame->function, function_ids_.size() + 1).first;
        function_ids_.push_back(frame->function);
      }
      key.emplace_back(f->second, frame->line);
    }
    Place place;
    const Frame& outer = *frames.back();
    if (outer.lib >= 0) {
      const Library& library = profile_.processes[process].libs[static_cast<size_t>(outer.lib)];
      auto [m, added] = mapping_index_.emplace(std::make_pair(process, outer.lib),
                                               mapping_keys_.size() + 1);
      if (added) mapping_keys_.emplace_back(process, outer.lib);
      place.mapping = m->second;
      place.address = library.start - library.offset + outer.address - (leaf ? 0 : 1);
    }
    auto [it, inserted] =
        location_index_.emplace(std::make_pair(place, key), location_keys_.size() + 1);
    if (inserted) {
      location_keys_.push_back(std::move(key));
      location_places_.push_back(place);
    }
    return it->second;
  }

  const Profile& profile_;
  const Weight weight_;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, int64_t> string_ids_;
  std::unordered_map<uint32_t, uint64_t> function_index_;  // Profile function -> pprof id.
  std::vector<uint32_t> function_ids_;                     // pprof id - 1 -> profile function.
  // A location's lines, innermost first: (function id, line).
  using LocationKey = std::vector<std::pair<uint64_t, int64_t>>;
  // Where a location is: its mapping id (0: none) and absolute address.
  struct Place {
    uint64_t mapping = 0;
    uint64_t address = 0;
    bool operator<(const Place& other) const {
      return mapping != other.mapping ? mapping < other.mapping : address < other.address;
    }
  };
  std::map<std::pair<Place, LocationKey>, uint64_t> location_index_;
  std::vector<LocationKey> location_keys_;  // id - 1 -> lines
  std::vector<Place> location_places_;      // id - 1 -> place
  std::map<std::pair<size_t, int32_t>, uint64_t> mapping_index_;  // (process, lib) -> id
  std::vector<std::pair<size_t, int32_t>> mapping_keys_;          // id - 1 -> (process, lib)
};

// --- collapsed ------------------------------------------------------------------------------

// One collapsed-stack field: no ';' (the separator), no line break, no control character
// (the output may go to a terminal: `-o -`).
std::string Sanitized(std::string s) {
  for (char& c : s) {
    if (c == ';') c = ':';
    if (c == '\n' || c == '\r') c = ' ';
  }
  return TerminalSafe(s);
}

void WriteCollapsedLines(const Profile& profile, Weight weight, const Flush& flush) {
  std::string out;
  Progress progress("convert", profile.threads.size());
  const bool cpu = ProfileHasCpu(profile);
  for (const Thread& thread : profile.threads) {
    const std::string prefix = Sanitized(ProcessLabel(profile, profile.processes[thread.process])) + ";" +
                               Sanitized(thread.name + " (" + std::to_string(thread.tid) + ")");
    // Per stack + 1 ([0]: no stack): samples, or µs of wall or CPU time (rounded per line).
    std::vector<uint64_t> counts(thread.stack_prefix.size() + 1, 0);
    if (weight == Weight::kSamples) {
      for (int32_t s : thread.sample_stack) counts[static_cast<size_t>(s + 1)]++;
    } else {
      std::vector<double> ms(counts.size(), 0.0);
      const std::vector<double> wall = weight == Weight::kWall ? SampleWallMs(profile, thread) : std::vector<double>();
      for (size_t i = 0; i < thread.sample_count(); ++i) {
        ms[static_cast<size_t>(thread.sample_stack[i] + 1)] +=
            weight == Weight::kWall ? wall[i] : SampleCpuMs(thread, i, cpu, profile.interval_ms);
      }
      for (size_t i = 0; i < ms.size(); ++i) counts[i] = static_cast<uint64_t>(std::llround(ms[i] * 1000));
    }
    std::vector<std::string> names;  // Sanitized function names, by frame.
    names.reserve(thread.frames.size());
    for (const Frame& f : thread.frames) names.push_back(Sanitized(profile.functions[f.function].name));
    std::vector<uint32_t> path;
    for (size_t i = 0; i < counts.size(); ++i) {
      if (counts[i] == 0) continue;
      out += prefix;
      if (i > 0) {
        path.clear();
        for (int32_t s = static_cast<int32_t>(i) - 1; s >= 0; s = thread.stack_prefix[static_cast<size_t>(s)]) {
          path.push_back(thread.stack_frame[static_cast<size_t>(s)]);
        }
        for (size_t j = path.size(); j-- > 0;) {
          out += ';';
          out += names[path[j]];
        }
      }
      out += ' ';
      out += std::to_string(counts[i]);
      out += '\n';
      if (out.size() >= (1 << 20)) {
        flush(out);
        out.clear();
      }
    }
    progress.Advance(1);
  }
  flush(out);
}

// Streams into an output file; false with *error on failure.
bool WriteStreamed(const std::string& path, bool gzip, const std::function<void(const Flush&)>& produce,
                   ConvertStats* stats, std::string* error) {
  OutputFile file(path, gzip);
  if (!file.ok()) {
    *error = file.error();
    return false;
  }
  produce([&](const std::string& text) { file.Write(text); });
  stats->bytes = file.bytes();
  if (!file.Commit()) {
    *error = file.error();
    return false;
  }
  return true;
}

}  // namespace

std::string ChromeTraceJson(const Profile& profile, Weight weight) {
  std::string all;
  ChromeTraceWriter(profile, weight, [&](const std::string& text) { all += text; }).Run();
  return all;
}

std::string PprofProtobuf(const Profile& profile, Weight weight) { return PprofBuilder(profile, weight).Run(); }

std::string CollapsedStacks(const Profile& profile, Weight weight) {
  std::string all;
  WriteCollapsedLines(profile, weight, [&](const std::string& text) { all += text; });
  return all;
}

bool WriteChromeTrace(const Profile& profile, Weight weight, const std::string& path, ConvertStats* stats,
                      std::string* error) {
  stats->samples = profile.total_samples;
  return WriteStreamed(path, WantsGzip(path),
                       [&](const Flush& flush) { ChromeTraceWriter(profile, weight, flush).Run(); }, stats, error);
}

bool WritePprof(const Profile& profile, Weight weight, const std::string& path, ConvertStats* stats,
                std::string* error) {
  stats->samples = profile.total_samples;
  return WriteText(path, PprofProtobuf(profile, weight), true, stats, error);
}

bool WriteCollapsed(const Profile& profile, Weight weight, const std::string& path, ConvertStats* stats,
                    std::string* error) {
  stats->samples = profile.total_samples;
  return WriteStreamed(path, WantsGzip(path),
                       [&](const Flush& flush) { WriteCollapsedLines(profile, weight, flush); }, stats, error);
}

}  // namespace cli
}  // namespace strata
