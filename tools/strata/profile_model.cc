#include "tools/strata/profile_model.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <unordered_map>
#include <utility>

#include "shared/json/location.h"

namespace strata {
namespace cli {
namespace {

using rapidjson::Value;

int Column(const Value& table, const char* name) {
  if (!table.IsObject() || !table.HasMember("schema")) return -1;
  const Value& schema = table["schema"];
  if (!schema.IsObject() || !schema.HasMember(name) || !schema[name].IsInt()) return -1;
  return schema[name].GetInt();
}

const Value* Cell(const Value& row, int column) {
  if (column < 0 || !row.IsArray() || static_cast<rapidjson::SizeType>(column) >= row.Size()) return nullptr;
  return &row[static_cast<rapidjson::SizeType>(column)];
}

double NumberOr(const Value* value, double fallback) {
  return value != nullptr && value->IsNumber() ? value->GetDouble() : fallback;
}

int64_t IntOr(const Value& object, const char* key, int64_t fallback) {
  if (!object.IsObject() || !object.HasMember(key)) return fallback;
  const Value& v = object[key];
  if (v.IsInt64()) return v.GetInt64();
  if (v.IsNumber()) return static_cast<int64_t>(v.GetDouble());
  if (v.IsString()) return std::strtoll(v.GetString(), nullptr, 10);
  return fallback;
}

std::string StringOr(const Value& object, const char* key, const std::string& fallback = "") {
  if (!object.IsObject() || !object.HasMember(key) || !object[key].IsString()) return fallback;
  return std::string(object[key].GetString(), object[key].GetStringLength());
}

const Value* Table(const Value& thread, const char* name) {
  if (!thread.HasMember(name)) return nullptr;
  const Value& table = thread[name];
  if (!table.IsObject() || !table.HasMember("data") || !table["data"].IsArray()) return nullptr;
  return &table;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The program a main thread belongs to: its processName without the " (<pid>)" children carry
// (gecko_profile_writer.h, ChildProcessName), else the product, else "main".
std::string ProgramNameOf(const Thread& thread, const std::string& product) {
  std::string name = thread.process_name;
  const std::string suffix = " (" + std::to_string(thread.pid) + ")";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    name.resize(name.size() - suffix.size());
  }
  if (name.empty()) name = product;
  return name.empty() ? std::string("main") : name;
}

class ModelBuilder {
 public:
  ModelBuilder(Profile* profile, std::string* error) : profile_(profile), error_(error) {}

  bool AddProcess(const Value& document, double root_start) {
    const Value& meta = document["meta"];
    Process process;
    process.start_offset = NumberOr(meta.HasMember("startTime") ? &meta["startTime"] : nullptr, root_start) - root_start;
    if (document.HasMember("pausedRanges") && document["pausedRanges"].IsArray()) {
      for (const Value& range : document["pausedRanges"].GetArray()) {
        if (!range.IsObject()) continue;
        const double start = NumberOr(range.HasMember("startTime") ? &range["startTime"] : nullptr, NAN);
        const double end = NumberOr(range.HasMember("endTime") ? &range["endTime"] : nullptr, INFINITY);
        if (std::isnan(start) || std::isnan(end)) continue;
        process.paused_ranges.emplace_back(start + process.start_offset, end + process.start_offset);
      }
    }
    if (document.HasMember("libs") && document["libs"].IsArray()) {
      for (const Value& lib : document["libs"].GetArray()) {
        Library library;
        if (lib.IsObject()) {
          const auto number = [&lib](const char* key) -> uint64_t {
            return lib.HasMember(key) && lib[key].IsUint64() ? lib[key].GetUint64() : 0;
          };
          library.start = number("start");
          library.end = number("end");
          library.offset = number("offset");
          library.name = StringOr(lib, "name");
          library.path = StringOr(lib, "path");
          library.code_id = StringOr(lib, "codeId");
        }
        process.libs.push_back(std::move(library));  // Kept by position: frames index it.
      }
    }
    const size_t process_index = profile_->processes.size();
    profile_->processes.push_back(process);
    double start = std::numeric_limits<double>::infinity();
    double end = -std::numeric_limits<double>::infinity();
    const Value& threads = document["threads"];
    for (rapidjson::SizeType i = 0; i < threads.Size(); ++i) {
      Thread thread;
      if (!AddThread(threads[i], process_index, process.start_offset, &thread)) return false;
      Process& p = profile_->processes[process_index];
      if (p.pid == 0) p.pid = thread.pid;
      if (p.name.empty() || thread.is_main) {
        if (!thread.process_name.empty()) p.name = thread.process_name;
      }
      if (thread.is_main && StringOr(meta, "product").find("Firefox") == std::string::npos) {
        // "GeckoMain" tells the front-end which thread is main (it keeps that name in the
        // file); our own outputs name the main thread of other programs after the program.
        thread.name = ProgramNameOf(thread, StringOr(meta, "product"));
      }
      start = std::min(start, thread.register_time);
      if (!thread.sample_time.empty()) {
        start = std::min(start, thread.sample_time.front());
        end = std::max(end, thread.sample_time.back());
      }
      if (!std::isnan(thread.unregister_time)) end = std::max(end, thread.unregister_time);
      for (const Marker& m : thread.markers) {
        if (!std::isnan(m.start)) start = std::min(start, m.start), end = std::max(end, m.start);
        if (!std::isnan(m.end)) end = std::max(end, m.end);
      }
      profile_->total_samples += thread.sample_count();
      p.threads.push_back(profile_->threads.size());
      profile_->threads.push_back(std::move(thread));
    }
    Process& p = profile_->processes[process_index];
    if (p.name.empty()) p.name = StringOr(meta, "product");
    // A process that lived without a sample (a compiler driver waiting for its child) still
    // has its lifetime: its own profiling range (a parent's is widened to cover its children,
    // so only a process without samples takes it).
    bool sampled = false;
    for (size_t t : p.threads) sampled = sampled || profile_->threads[t].sample_count() > 0;
    if (!sampled && meta.HasMember("profilingEndTime") && meta["profilingEndTime"].IsNumber()) {
      end = std::max(end, meta["profilingEndTime"].GetDouble() + process.start_offset);
    }
    p.start_time = std::isfinite(start) ? start : p.start_offset;
    p.end_time = std::isfinite(end) ? std::max(end, p.start_time) : p.start_time;
    if (document.HasMember("processes") && document["processes"].IsArray()) {
      for (const Value& child : document["processes"].GetArray()) {
        if (!child.IsObject() || !child.HasMember("meta") || !child["meta"].IsObject() ||
            !child.HasMember("threads") || !child["threads"].IsArray()) {
          *error_ = "a sub-process profile has no meta or threads";
          return false;
        }
        if (!AddProcess(child, root_start)) return false;
      }
    }
    return true;
  }

 private:
  bool Fail(const Thread& thread, const std::string& what) {
    *error_ = "thread '" + thread.name + "' (pid " + std::to_string(thread.pid) + ", tid " +
              std::to_string(thread.tid) + "): " + what;
    return false;
  }

  uint32_t FunctionFor(const std::string& location) {
    auto it = location_functions_.find(location);
    if (it != location_functions_.end()) return it->second;
    ParsedLocation parsed = ParseLocation(location);
    auto key = std::make_pair(parsed.name, parsed.library);
    auto [f, inserted] = function_ids_.emplace(key, static_cast<uint32_t>(profile_->functions.size()));
    if (inserted) {
      Function function;
      function.name = std::move(parsed.name);
      function.library = std::move(parsed.library);
      function.file = std::move(parsed.file);
      function.is_address = parsed.is_address;
      profile_->functions.push_back(std::move(function));
    } else if (profile_->functions[f->second].file.empty() && !parsed.file.empty()) {
      profile_->functions[f->second].file = parsed.file;
    }
    location_functions_.emplace(location, f->second);
    return f->second;
  }

  bool AddThread(const Value& json, size_t process_index, double offset, Thread* thread) {
    if (!json.IsObject()) {
      *error_ = "a thread is not an object";
      return false;
    }
    thread->name = StringOr(json, "name", "?");
    thread->is_main = thread->name == "GeckoMain";
    thread->process_name = StringOr(json, "processName");
    thread->pid = IntOr(json, "pid", 0);
    thread->tid = IntOr(json, "tid", 0);
    thread->process = process_index;
    thread->register_time = NumberOr(json.HasMember("registerTime") ? &json["registerTime"] : nullptr, 0) + offset;
    thread->unregister_time = NumberOr(json.HasMember("unregisterTime") ? &json["unregisterTime"] : nullptr, NAN) + offset;

    if (!json.HasMember("stringTable") || !json["stringTable"].IsArray()) return Fail(*thread, "no stringTable");
    const Value& strings = json["stringTable"];
    const Value* frames = Table(json, "frameTable");
    const Value* stacks = Table(json, "stackTable");
    const Value* samples = Table(json, "samples");
    if (frames == nullptr) return Fail(*thread, "no frameTable");
    if (stacks == nullptr) return Fail(*thread, "no stackTable");
    if (samples == nullptr) return Fail(*thread, "no samples table");

    // Frames: the location string decides the function.
    const int location = Column(*frames, "location");
    const int line = Column(*frames, "line");
    const int frame_category = Column(*frames, "category");
    const int inline_depth = Column(*frames, "inlineDepth");
    const int frame_lib = Column(*frames, "lib");
    const int frame_address = Column(*frames, "address");
    const Value& frame_rows = (*frames)["data"];
    thread->frames.reserve(frame_rows.Size());
    for (rapidjson::SizeType i = 0; i < frame_rows.Size(); ++i) {
      const Value* l = Cell(frame_rows[i], location);
      if (l == nullptr || !l->IsUint() || l->GetUint() >= strings.Size() || !strings[l->GetUint()].IsString()) {
        return Fail(*thread, "frame " + std::to_string(i) + " has no valid location string");
      }
      const Value& s = strings[l->GetUint()];
      Frame frame;
      frame.function = FunctionFor(std::string(s.GetString(), s.GetStringLength()));
      frame.is_label = ClassifyLocation(std::string_view(s.GetString(), s.GetStringLength())) == LocationKind::kLabel;
      const Value* ln = Cell(frame_rows[i], line);
      if (ln != nullptr && ln->IsUint()) frame.line = ln->GetUint();
      const Value* c = Cell(frame_rows[i], frame_category);
      if (c != nullptr && c->IsInt()) frame.category = c->GetInt();
      const Value* depth = Cell(frame_rows[i], inline_depth);
      if (depth != nullptr && depth->IsUint()) frame.inline_depth = depth->GetUint();
      const Value* lib = Cell(frame_rows[i], frame_lib);
      const Value* address = Cell(frame_rows[i], frame_address);
      if (lib != nullptr && lib->IsUint() && address != nullptr && address->IsUint64() &&
          lib->GetUint() < profile_->processes[process_index].libs.size()) {
        frame.lib = static_cast<int32_t>(lib->GetUint());
        frame.address = address->GetUint64();
      }
      thread->frames.push_back(frame);
    }

    // Stacks: parents before children.
    const int prefix = Column(*stacks, "prefix");
    const int frame = Column(*stacks, "frame");
    const Value& stack_rows = (*stacks)["data"];
    const size_t stack_count = stack_rows.Size();
    thread->stack_prefix.reserve(stack_count);
    thread->stack_frame.reserve(stack_count);
    thread->stack_category.reserve(stack_count);
    for (rapidjson::SizeType i = 0; i < stack_count; ++i) {
      const Value* p = Cell(stack_rows[i], prefix);
      const Value* f = Cell(stack_rows[i], frame);
      int32_t parent = -1;
      if (p != nullptr && !p->IsNull()) {
        if (!p->IsUint() || p->GetUint() >= i) {
          return Fail(*thread, "stack " + std::to_string(i) + " has a prefix that does not come before it");
        }
        parent = static_cast<int32_t>(p->GetUint());
      }
      if (f == nullptr || !f->IsUint() || f->GetUint() >= thread->frames.size()) {
        return Fail(*thread, "stack " + std::to_string(i) + " refers to a frame that does not exist");
      }
      thread->stack_prefix.push_back(parent);
      thread->stack_frame.push_back(f->GetUint());
      int32_t category = thread->frames[f->GetUint()].category;
      if (category < 0 && parent >= 0) category = thread->stack_category[static_cast<size_t>(parent)];
      thread->stack_category.push_back(category);
    }

    // Samples.
    const int stack_column = Column(*samples, "stack");
    const int time_column = Column(*samples, "time");
    const int cpu_column = Column(*samples, "threadCPUDelta");
    if (time_column < 0) return Fail(*thread, "the samples table has no time column");
    const Value& sample_rows = (*samples)["data"];
    const size_t sample_count = sample_rows.Size();
    thread->sample_time.reserve(sample_count);
    thread->sample_stack.reserve(sample_count);
    thread->sample_cpu_ms.reserve(sample_count);
    for (rapidjson::SizeType i = 0; i < sample_count; ++i) {
      const Value& row = sample_rows[i];
      const Value* t = Cell(row, time_column);
      if (t == nullptr || !t->IsNumber()) return Fail(*thread, "sample " + std::to_string(i) + " has no time");
      const Value* s = Cell(row, stack_column);
      int32_t stack = -1;
      if (s != nullptr && !s->IsNull()) {
        if (!s->IsUint() || s->GetUint() >= stack_count) {
          return Fail(*thread, "sample " + std::to_string(i) + " refers to a stack that does not exist");
        }
        stack = static_cast<int32_t>(s->GetUint());
      }
      thread->sample_time.push_back(t->GetDouble() + offset);
      thread->sample_stack.push_back(stack);
      thread->sample_cpu_ms.push_back(NumberOr(Cell(row, cpu_column), NAN) * cpu_to_ms_);
    }

    // Markers.
    if (const Value* markers = Table(json, "markers")) {
      const int name = Column(*markers, "name");
      const int start = Column(*markers, "startTime");
      const int end = Column(*markers, "endTime");
      const int phase = Column(*markers, "phase");
      const int category = Column(*markers, "category");
      const int data = Column(*markers, "data");
      for (const Value& row : (*markers)["data"].GetArray()) {
        Marker marker;
        const Value* n = Cell(row, name);
        if (n != nullptr && n->IsUint() && n->GetUint() < strings.Size() && strings[n->GetUint()].IsString()) {
          marker.name = strings[n->GetUint()].GetString();
        } else if (n != nullptr && n->IsString()) {
          marker.name = n->GetString();
        }
        marker.start = NumberOr(Cell(row, start), NAN) + offset;
        marker.end = NumberOr(Cell(row, end), NAN) + offset;
        const Value* ph = Cell(row, phase);
        marker.phase = ph != nullptr && ph->IsInt() ? ph->GetInt() : 0;
        const Value* c = Cell(row, category);
        marker.category = c != nullptr && c->IsInt() ? c->GetInt() : -1;
        const Value* d = Cell(row, data);
        if (d != nullptr && d->IsObject() && d->HasMember("type") && (*d)["type"].IsString()) {
          marker.type = (*d)["type"].GetString();
        }
        if (marker.type == "Native allocation") {
          NativeAllocation allocation;
          allocation.time = marker.start;
          const Value* size = d->HasMember("size") ? &(*d)["size"] : nullptr;
          const Value* address = d->HasMember("memoryAddress") ? &(*d)["memoryAddress"] : nullptr;
          if (size == nullptr || !size->IsInt64()) continue;  // Not one the front-end reads.
          allocation.bytes = size->GetInt64();
          if (address != nullptr && address->IsUint64()) allocation.address = address->GetUint64();
          // The stack: the first sample of the payload's "SyncProfile", in this thread's table.
          if (d->HasMember("stack") && (*d)["stack"].IsObject()) {
            const Value& stack = (*d)["stack"];
            if (stack.HasMember("samples") && stack["samples"].IsObject() &&
                stack["samples"].HasMember("data") && stack["samples"]["data"].IsArray() &&
                !stack["samples"]["data"].Empty() && stack["samples"]["data"][0].IsArray() &&
                !stack["samples"]["data"][0].Empty()) {
              const Value& index = stack["samples"]["data"][0][0];
              if (index.IsUint() && index.GetUint() < stack_count) {
                allocation.stack = static_cast<int32_t>(index.GetUint());
              }
            }
          }
          thread->native_allocations.push_back(allocation);
          continue;
        }
        thread->markers.push_back(std::move(marker));
      }
    }
    return true;
  }

 public:
  double cpu_to_ms_ = NAN;

 private:
  Profile* profile_;
  std::string* error_;
  std::unordered_map<std::string, uint32_t> location_functions_;
  std::map<std::pair<std::string, std::string>, uint32_t> function_ids_;
};

}  // namespace

std::vector<uint32_t> Thread::StackFunctions(int32_t stack) const {
  std::vector<uint32_t> functions;
  for (int32_t s = stack; s >= 0; s = stack_prefix[static_cast<size_t>(s)]) {
    functions.push_back(frames[stack_frame[static_cast<size_t>(s)]].function);
  }
  std::reverse(functions.begin(), functions.end());
  return functions;
}

uint32_t Thread::SelfFunction(int32_t stack) const {
  int32_t s = stack;
  // Up through inlined frames, and the labels placed between them (a label sits right below
  // the inlined function that pushed it, docs/symbols.md "Labels"), to the function the code
  // belongs to; a chain without its outer frame (odd input) keeps the root's.
  bool in_inline_chain = false;
  for (;;) {
    const Frame& frame = frames[stack_frame[static_cast<size_t>(s)]];
    const bool inlined = frame.inline_depth > 0;
    if ((!inlined && !(in_inline_chain && frame.is_label)) || stack_prefix[static_cast<size_t>(s)] < 0) break;
    in_inline_chain = true;
    s = stack_prefix[static_cast<size_t>(s)];
  }
  return frames[stack_frame[static_cast<size_t>(s)]].function;
}

double Thread::CpuMs() const {
  double total = 0;
  for (size_t i = 1; i < sample_cpu_ms.size(); ++i) {
    if (!std::isnan(sample_cpu_ms[i])) total += sample_cpu_ms[i];
  }
  return total;
}

bool Thread::has_cpu() const {
  for (size_t i = 1; i < sample_cpu_ms.size(); ++i) {
    if (!std::isnan(sample_cpu_ms[i])) return true;
  }
  return false;
}

ParsedLocation ParseLocation(std::string_view location) {
  ParsedLocation parsed;
  switch (ClassifyLocation(location)) {
    case LocationKind::kAddress:
      parsed.name = std::string(location);
      parsed.is_address = true;
      return parsed;
    case LocationKind::kNative: {
      // "name (in lib)", "name (in lib) + 12" or "name (in lib) (file:line)"; the name is
      // greedy, so the last " (in " that fits wins.
      for (size_t p = location.rfind(" (in "); p != std::string_view::npos;
           p = p == 0 ? std::string_view::npos : location.rfind(" (in ", p - 1)) {
        const size_t close = location.find(')', p + 5);
        if (close == std::string_view::npos) continue;
        const std::string_view rest = location.substr(close + 1);
        std::string_view file_line;
        if (rest.empty()) {
        } else if (rest.size() > 3 && rest.substr(0, 2) == " (" && rest.back() == ')' &&
                   rest.find(':') != std::string_view::npos) {
          file_line = rest.substr(2, rest.size() - 3);
        } else if (rest.size() > 3 && rest.substr(0, 3) == " + " && AllDigits(rest.substr(3))) {
        } else {
          continue;
        }
        parsed.name = std::string(location.substr(0, p));
        parsed.library = std::string(location.substr(p + 5, close - p - 5));
        if (!file_line.empty()) {
          const size_t colon = file_line.rfind(':');
          if (colon != std::string_view::npos && AllDigits(file_line.substr(colon + 1))) {
            parsed.file = std::string(file_line.substr(0, colon));
            parsed.line = static_cast<uint32_t>(std::strtoul(std::string(file_line.substr(colon + 1)).c_str(), nullptr, 10));
          } else {
            parsed.file = std::string(file_line);
          }
        }
        return parsed;
      }
      parsed.name = std::string(location);
      return parsed;
    }
    case LocationKind::kJs:
    case LocationKind::kLabel:
      break;
  }
  // LabelLocation() appends a space to labels that would read as JS or native, and
  // prefixes one to a label starting with "0x".
  std::string_view name = location;
  if (name.size() > 1 && name.back() == ' ') name.remove_suffix(1);
  if (name.size() > 3 && name.substr(0, 3) == " 0x") name.remove_prefix(1);
  parsed.name = std::string(name);
  return parsed;
}

double ThreadEnd(const Profile& profile, const Thread& thread) {
  return std::isnan(thread.unregister_time) ? profile.processes[thread.process].end_time : thread.unregister_time;
}

std::vector<MarkerSpan> MarkerSpans(const Profile& profile, const Thread& thread) {
  std::vector<MarkerSpan> spans;
  std::map<std::string, std::vector<size_t>> open;  // Name -> indexes of open starts in spans.
  const double end_of_thread = ThreadEnd(profile, thread);
  for (const Marker& m : thread.markers) {
    MarkerSpan span;
    span.name = m.name;
    span.type = m.type;
    switch (m.phase) {
      case 0:
        if (std::isnan(m.start)) continue;
        span.start = span.end = m.start;
        span.instant = true;
        spans.push_back(std::move(span));
        break;
      case 1:
        if (std::isnan(m.start) || std::isnan(m.end)) continue;
        span.start = m.start;
        span.end = std::max(m.start, m.end);
        spans.push_back(std::move(span));
        break;
      case 2:
        if (std::isnan(m.start)) continue;
        span.start = m.start;
        span.end = std::max(m.start, end_of_thread);
        open[m.name].push_back(spans.size());
        spans.push_back(std::move(span));
        break;
      case 3: {
        if (std::isnan(m.end)) continue;
        auto& starts = open[m.name];
        if (!starts.empty()) {
          MarkerSpan& start = spans[starts.back()];
          start.end = std::max(start.start, m.end);
          if (start.type.empty()) start.type = m.type;
          starts.pop_back();
        } else {
          span.start = std::min(thread.register_time, m.end);
          span.end = m.end;
          spans.push_back(std::move(span));
        }
        break;
      }
      default:
        break;
    }
  }
  std::stable_sort(spans.begin(), spans.end(), [](const MarkerSpan& a, const MarkerSpan& b) { return a.start < b.start; });
  return spans;
}

bool LoadProfileModel(const rapidjson::Value& document, Profile* profile, std::string* error) {
  *profile = Profile();
  if (!document.IsObject() || !document.HasMember("meta") || !document["meta"].IsObject() ||
      !document.HasMember("threads") || !document["threads"].IsArray()) {
    *error = "not a Gecko profile (meta and threads expected)";
    return false;
  }
  const Value& meta = document["meta"];
  profile->start_epoch_ms = NumberOr(meta.HasMember("startTime") ? &meta["startTime"] : nullptr, 0);
  profile->interval_ms = NumberOr(meta.HasMember("interval") ? &meta["interval"] : nullptr, 1);
  profile->product = StringOr(meta, "product");
  ModelBuilder builder(profile, error);
  if (meta.HasMember("sampleUnits") && meta["sampleUnits"].IsObject()) {
    profile->cpu_unit = StringOr(meta["sampleUnits"], "threadCPUDelta");
    if (profile->cpu_unit == "ns") builder.cpu_to_ms_ = 1e-6;
    if (profile->cpu_unit == "\xC2\xB5s") builder.cpu_to_ms_ = 1e-3;
  }
  if (document.HasMember("profilingLog") && document["profilingLog"].IsObject()) {
    for (const auto& process_log : document["profilingLog"].GetObject()) {
      const std::string source = StringOr(process_log.value, "samplingSource");
      if (!source.empty()) {
        profile->sampling_sources.push_back(std::string(process_log.name.GetString()) + ": " +
                                            source);
      }
      for (const char* key :
           {"samplingStopped", "foreignSamplingSignals", "attached", "notEntered"}) {
        const std::string note = StringOr(process_log.value, key);
        if (!note.empty()) {
          profile->sampling_notes.push_back(std::string(process_log.name.GetString()) + ": " +
                                            key + ": " + note);
        }
      }
    }
  }
  if (meta.HasMember("categories") && meta["categories"].IsArray()) {
    for (const Value& c : meta["categories"].GetArray()) {
      profile->categories.push_back(Category{StringOr(c, "name"), StringOr(c, "color")});
    }
  }
  if (!builder.AddProcess(document, profile->start_epoch_ms)) return false;
  profile->start_time = std::numeric_limits<double>::infinity();
  profile->end_time = -std::numeric_limits<double>::infinity();
  for (const Process& p : profile->processes) {
    if (p.threads.empty()) continue;
    profile->start_time = std::min(profile->start_time, p.start_time);
    profile->end_time = std::max(profile->end_time, p.end_time);
  }
  if (!std::isfinite(profile->start_time)) profile->start_time = profile->end_time = 0;
  return true;
}

}  // namespace cli
}  // namespace strata
