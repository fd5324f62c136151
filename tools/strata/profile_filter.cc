#include "tools/strata/profile_filter.h"

#include <fnmatch.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "tools/strata/terminal_text.h"

namespace strata {
namespace cli {
namespace {

using rapidjson::Value;

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr const char* kRangeForms = "START,END in ms from the profile's start (either may be left out), or a marker name";

std::string Ms(double ms) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.1f", ms);
  return text;
}

// A whole number or decimal ("12", "12.5"); false for anything else, NaN and infinities.
bool ParseMs(const std::string& text, double* value) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v)) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+')) return false;  // No "0x", "e", "inf".
  }
  *value = v;
  return true;
}

bool LooksNumeric(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789.+- ") == std::string::npos;
}

bool Matches(const std::string& glob, const std::string& name) { return fnmatch(glob.c_str(), name.c_str(), 0) == 0; }

// "python3 (1234)" -> "python3".
std::string WithoutPidSuffix(const std::string& name, int64_t pid) {
  const std::string suffix = " (" + std::to_string(pid) + ")";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return name.substr(0, name.size() - suffix.size());
  }
  return name;
}

bool ProcessMatches(const Profile& profile, const Thread& thread, const std::string& glob) {
  const Process& process = profile.processes[thread.process];
  for (const std::string& name : {process.name, thread.process_name}) {
    if (!name.empty() && (Matches(glob, name) || Matches(glob, WithoutPidSuffix(name, thread.pid)))) return true;
  }
  return false;
}

bool ThreadMatches(const Thread& thread, const std::string& glob) {
  return Matches(glob, thread.name) || (thread.is_main && Matches(glob, "GeckoMain"));
}

template <typename T>
std::string Join(const std::vector<T>& values, const std::string& separator) {
  std::string out;
  for (const T& v : values) {
    if (!out.empty()) out += separator;
    if constexpr (std::is_same_v<T, std::string>) {
      out += "'" + TerminalSafe(v) + "'";
    } else {
      out += std::to_string(v);
    }
  }
  return out;
}

// Up to `limit` distinct values, "a, b, c (and 4 more)".
std::string Listing(const std::vector<std::string>& values, size_t limit = 8) {
  std::vector<std::string> distinct;
  for (const std::string& v : values) {
    if (std::find(distinct.begin(), distinct.end(), v) == distinct.end()) distinct.push_back(v);
  }
  std::string out;
  for (size_t i = 0; i < distinct.size() && i < limit; ++i) out += (i ? ", " : "") + TerminalSafe(distinct[i]);
  if (distinct.size() > limit) out += " (and " + std::to_string(distinct.size() - limit) + " more)";
  return out.empty() ? "none" : out;
}

bool InIntervals(const std::vector<std::pair<double, double>>& intervals, double t) {
  if (intervals.empty()) return true;
  // The first interval that ends at or after t.
  auto it = std::lower_bound(intervals.begin(), intervals.end(), t,
                             [](const std::pair<double, double>& r, double v) { return r.second < v; });
  return it != intervals.end() && it->first <= t;
}

bool OverlapsIntervals(const std::vector<std::pair<double, double>>& intervals, double start, double end) {
  if (intervals.empty()) return true;
  auto it = std::lower_bound(intervals.begin(), intervals.end(), start,
                             [](const std::pair<double, double>& r, double v) { return r.second < v; });
  return it != intervals.end() && it->first <= end;
}

// Schema column of a Gecko table; -1 when absent.
int Column(const Value& table, const char* name) {
  if (!table.IsObject() || !table.HasMember("schema") || !table["schema"].IsObject()) return -1;
  const Value& schema = table["schema"];
  return schema.HasMember(name) && schema[name].IsInt() ? schema[name].GetInt() : -1;
}

double CellNumber(const Value& row, int column) {
  if (column < 0 || !row.IsArray() || static_cast<rapidjson::SizeType>(column) >= row.Size()) return NAN;
  return row[static_cast<rapidjson::SizeType>(column)].IsNumber() ? row[static_cast<rapidjson::SizeType>(column)].GetDouble()
                                                                   : NAN;
}

// Keeps the rows of `table` (a Gecko table with schema and data) for which keep(row) is true.
template <typename Keep>
void KeepRows(Value* table, rapidjson::Document::AllocatorType& allocator, Keep keep) {
  if (!table->IsObject() || !table->HasMember("data") || !(*table)["data"].IsArray()) return;
  Value& rows = (*table)["data"];
  Value kept(rapidjson::kArrayType);
  for (Value& row : rows.GetArray()) {
    if (keep(row)) kept.PushBack(row.Move(), allocator);
  }
  rows = kept;
}

class DocumentFilter {
 public:
  DocumentFilter(const Profile& profile, const FilterSelection& selection, rapidjson::Document* document)
      : profile_(profile), selection_(selection), allocator_(document->GetAllocator()) {}

  // Walks processes in LoadProfileModel's order (threads, then sub-processes, depth first).
  // Returns how many threads of this process (and its sub-processes) are kept.
  size_t FilterProcess(Value* process) {
    if (!process->IsObject() || !process->HasMember("threads") || !(*process)["threads"].IsArray()) return 0;
    const double offset = process_index_ < profile_.processes.size()
                              ? profile_.processes[process_index_].start_offset
                              : 0;
    ++process_index_;
    Value& threads = (*process)["threads"];
    Value kept(rapidjson::kArrayType);
    size_t kept_count = 0;
    for (Value& thread : threads.GetArray()) {
      const size_t index = thread_index_++;
      if (index >= selection_.keep_thread.size() || !selection_.keep_thread[index]) continue;
      FilterThread(&thread, offset);
      kept.PushBack(thread.Move(), allocator_);
      ++kept_count;
    }
    threads = kept;
    if (process->HasMember("processes") && (*process)["processes"].IsArray()) {
      Value& children = (*process)["processes"];
      Value kept_children(rapidjson::kArrayType);
      for (Value& child : children.GetArray()) {
        const size_t n = FilterProcess(&child);
        kept_count += n;
        if (n > 0) kept_children.PushBack(child.Move(), allocator_);
      }
      children = kept_children;
    }
    return kept_count;
  }

 private:
  void FilterThread(Value* thread, double offset) {
    const auto& intervals = selection_.intervals;
    if (intervals.empty()) return;
    if (thread->HasMember("samples")) {
      Value& samples = (*thread)["samples"];
      const int time = Column(samples, "time");
      KeepRows(&samples, allocator_, [&](const Value& row) { return InIntervals(intervals, CellNumber(row, time) + offset); });
    }
    if (thread->HasMember("markers")) {
      Value& markers = (*thread)["markers"];
      const int start = Column(markers, "startTime");
      const int end = Column(markers, "endTime");
      const int phase = Column(markers, "phase");
      const double envelope_start = intervals.front().first, envelope_end = intervals.back().second;
      KeepRows(&markers, allocator_, [&](const Value& row) {
        const double s = CellNumber(row, start) + offset, e = CellNumber(row, end) + offset;
        switch (static_cast<int>(CellNumber(row, phase))) {
          case 0: return OverlapsIntervals(intervals, s, s);
          case 1: return OverlapsIntervals(intervals, s, e);
          case 2: return s >= envelope_start && s <= envelope_end;
          case 3: return e >= envelope_start && e <= envelope_end;
          default: return false;
        }
      });
    }
  }

  const Profile& profile_;
  const FilterSelection& selection_;
  rapidjson::Document::AllocatorType& allocator_;
  size_t process_index_ = 0;
  size_t thread_index_ = 0;
};

}  // namespace

bool ParseRangeText(const std::string& text, RangeSpec* range, std::string* error) {
  *range = RangeSpec();
  if (text.empty()) {
    *error = "--range: empty (accepted: " + std::string(kRangeForms) + ")";
    return false;
  }
  const size_t comma = text.find(',');
  const std::string first = comma == std::string::npos ? text : text.substr(0, comma);
  const std::string second = comma == std::string::npos ? std::string() : text.substr(comma + 1);
  if (comma != std::string::npos && (first.empty() || LooksNumeric(first)) && (second.empty() || LooksNumeric(second)) &&
      second.find(',') == std::string::npos) {
    range->start = -kInfinity;
    range->end = kInfinity;
    if ((!first.empty() && !ParseMs(first, &range->start)) || (!second.empty() && !ParseMs(second, &range->end))) {
      *error = "--range '" + TerminalSafe(text) + "': not a number (accepted: " + kRangeForms + ")";
      return false;
    }
    if (first.empty() && second.empty()) {
      *error = "--range ',': give START, END or both (accepted: " + std::string(kRangeForms) + ")";
      return false;
    }
    if ((std::isfinite(range->start) && range->start < 0) || (std::isfinite(range->end) && range->end < 0)) {
      *error = "--range '" + TerminalSafe(text) + "': times are ms from the profile's start, 0 or more";
      return false;
    }
    if (!(range->start < range->end)) {
      *error = "--range '" + TerminalSafe(text) + "': END must be after START";
      return false;
    }
    return true;
  }
  if (LooksNumeric(text)) {
    *error = "--range '" + TerminalSafe(text) + "': one number; give START,END (accepted: " + kRangeForms + ")";
    return false;
  }
  range->by_marker = true;
  range->marker = text;
  return true;
}

std::string CheckRangeText(const std::string& text) {
  RangeSpec range;
  std::string error;
  if (ParseRangeText(text, &range, &error)) return "";
  // CLI11 names the option itself.
  return error.compare(0, 8, "--range ") == 0 ? error.substr(8) : error;
}

bool SelectWithFilter(const Profile& profile, const ProfileFilter& filter, FilterSelection* selection,
                      std::string* error) {
  *selection = FilterSelection();
  std::vector<std::string> parts;
  if (!filter.pids.empty()) parts.push_back("pid " + Join(filter.pids, ", "));
  if (!filter.tids.empty()) parts.push_back("tid " + Join(filter.tids, ", "));
  if (!filter.process_globs.empty()) parts.push_back("process " + Join(filter.process_globs, ", "));
  if (!filter.thread_globs.empty()) parts.push_back("thread " + Join(filter.thread_globs, ", "));

  // Threads.
  selection->keep_thread.assign(profile.threads.size(), true);
  size_t kept = 0;
  for (size_t i = 0; i < profile.threads.size(); ++i) {
    const Thread& t = profile.threads[i];
    bool keep = filter.pids.empty() || std::count(filter.pids.begin(), filter.pids.end(), t.pid) > 0;
    keep = keep && (filter.tids.empty() || std::count(filter.tids.begin(), filter.tids.end(), t.tid) > 0);
    keep = keep && (filter.process_globs.empty() ||
                    std::any_of(filter.process_globs.begin(), filter.process_globs.end(),
                                [&](const std::string& g) { return ProcessMatches(profile, t, g); }));
    keep = keep && (filter.thread_globs.empty() ||
                    std::any_of(filter.thread_globs.begin(), filter.thread_globs.end(),
                                [&](const std::string& g) { return ThreadMatches(t, g); }));
    selection->keep_thread[i] = keep;
    kept += keep ? 1 : 0;
  }
  if (kept == 0) {
    std::vector<std::string> pids, tids, processes, threads;
    for (const Process& p : profile.processes) pids.push_back(std::to_string(p.pid)), processes.push_back(p.name);
    for (const Thread& t : profile.threads) tids.push_back(std::to_string(t.tid)), threads.push_back(t.name);
    *error = "no thread matches ";
    for (size_t i = 0; i < parts.size(); ++i) *error += (i ? "; " : "") + parts[i];
    *error += " (the profile has pids " + Listing(pids) + "; processes " + Listing(processes) + "; threads " +
              Listing(threads) + "; tids " + Listing(tids) + ")";
    return false;
  }

  // Range.
  if (!filter.range_text.empty()) {
    RangeSpec range;
    if (!ParseRangeText(filter.range_text, &range, error)) return false;
    if (range.by_marker) {
      std::vector<std::string> names;
      size_t instants = 0;
      for (const Thread& t : profile.threads) {
        for (const MarkerSpan& m : MarkerSpans(profile, t)) {
          names.push_back(m.name);
          if (m.name != range.marker) continue;
          if (m.instant) {
            ++instants;
          } else {
            selection->intervals.emplace_back(m.start, m.end);
          }
        }
      }
      if (selection->intervals.empty()) {
        std::sort(names.begin(), names.end());
        *error = instants > 0 ? "--range '" + TerminalSafe(range.marker) +
                                    "': that marker is an instant (no interval); give START,END in ms instead"
                              : "--range '" + TerminalSafe(range.marker) + "': no marker of that name, and not " +
                                    "START,END (accepted: " + kRangeForms + "; the profile's markers: " +
                                    Listing(names, 12) + ")";
        return false;
      }
      std::sort(selection->intervals.begin(), selection->intervals.end());
      std::vector<std::pair<double, double>> merged;
      double covered = 0;
      for (const auto& interval : selection->intervals) {
        if (!merged.empty() && interval.first <= merged.back().second) {
          merged.back().second = std::max(merged.back().second, interval.second);
        } else {
          merged.push_back(interval);
        }
      }
      for (const auto& interval : merged) covered += interval.second - interval.first;
      const size_t count = selection->intervals.size();
      selection->intervals = std::move(merged);
      parts.push_back("range '" + TerminalSafe(range.marker) + "' (" + std::to_string(count) + " marker" +
                      (count == 1 ? "" : "s") + ", " + Ms(covered) + " ms)");
    } else {
      selection->intervals.emplace_back(range.start, range.end);
      parts.push_back("range " + (std::isfinite(range.start) ? Ms(range.start) : std::string("start")) + " to " +
                      (std::isfinite(range.end) ? Ms(range.end) + " ms" : std::string("end")));
      if (range.start > profile.end_time) {
        *error = "--range " + TerminalSafe(filter.range_text) + ": starts after the profile's end (" +
                 Ms(profile.end_time) + " ms)";
        return false;
      }
    }
  }
  for (size_t i = 0; i < parts.size(); ++i) selection->description += (i ? "; " : "") + parts[i];
  return true;
}

Profile ApplySelection(const Profile& profile, const FilterSelection& selection) {
  Profile out;
  out.start_epoch_ms = profile.start_epoch_ms;
  out.interval_ms = profile.interval_ms;
  out.product = profile.product;
  out.cpu_unit = profile.cpu_unit;
  out.sampling_sources = profile.sampling_sources;
  out.sampling_notes = profile.sampling_notes;
  out.categories = profile.categories;
  out.functions = profile.functions;
  const auto& intervals = selection.intervals;
  const double envelope_start = intervals.empty() ? -kInfinity : intervals.front().first;
  const double envelope_end = intervals.empty() ? kInfinity : intervals.back().second;
  // The time outside the intervals: paused, for the wall weights.
  std::vector<std::pair<double, double>> outside;
  if (!intervals.empty()) {
    outside.emplace_back(-kInfinity, intervals.front().first);
    for (size_t i = 0; i + 1 < intervals.size(); ++i) outside.emplace_back(intervals[i].second, intervals[i + 1].first);
    outside.emplace_back(intervals.back().second, kInfinity);
  }
  std::vector<size_t> new_process(profile.processes.size(), SIZE_MAX);
  for (size_t i = 0; i < profile.threads.size(); ++i) {
    if (!selection.keep_thread[i]) continue;
    const Thread& source = profile.threads[i];
    if (new_process[source.process] == SIZE_MAX) {
      new_process[source.process] = out.processes.size();
      Process process = profile.processes[source.process];
      process.threads.clear();
      process.paused_ranges.insert(process.paused_ranges.end(), outside.begin(), outside.end());
      process.start_time = std::max(process.start_time, envelope_start);
      process.end_time = std::max(process.start_time, std::min(process.end_time, envelope_end));
      out.processes.push_back(std::move(process));
    }
    Thread thread = source;
    thread.process = new_process[source.process];
    // The thread's life within the range (the summary's CPU % is of it).
    thread.register_time = std::max(thread.register_time, envelope_start);
    if (!std::isnan(thread.unregister_time)) {
      thread.unregister_time = std::max(thread.register_time, std::min(thread.unregister_time, envelope_end));
    }
    if (!intervals.empty()) {
      thread.sample_time.clear();
      thread.sample_stack.clear();
      thread.sample_cpu_ms.clear();
      for (size_t s = 0; s < source.sample_count(); ++s) {
        if (!InIntervals(intervals, source.sample_time[s])) continue;
        thread.sample_time.push_back(source.sample_time[s]);
        thread.sample_stack.push_back(source.sample_stack[s]);
        thread.sample_cpu_ms.push_back(source.sample_cpu_ms[s]);
      }
      // Markers as the spans they make, kept when they overlap the range.
      thread.markers.clear();
      for (const MarkerSpan& span : MarkerSpans(profile, source)) {
        if (!OverlapsIntervals(intervals, span.start, span.end)) continue;
        Marker marker;
        marker.name = span.name;
        marker.type = span.type;
        marker.start = span.start;
        marker.end = span.instant ? NAN : span.end;
        marker.phase = span.instant ? 0 : 1;
        thread.markers.push_back(std::move(marker));
      }
    }
    out.total_samples += thread.sample_count();
    out.processes[thread.process].threads.push_back(out.threads.size());
    out.threads.push_back(std::move(thread));
  }
  out.start_time = kInfinity;
  out.end_time = -kInfinity;
  for (const Process& p : out.processes) {
    out.start_time = std::min(out.start_time, p.start_time);
    out.end_time = std::max(out.end_time, p.end_time);
  }
  if (!std::isfinite(out.start_time)) out.start_time = out.end_time = 0;
  return out;
}

void ApplySelectionToDocument(const Profile& profile, const FilterSelection& selection, rapidjson::Document* document) {
  DocumentFilter filter(profile, selection, document);
  filter.FilterProcess(document);
  if (!selection.intervals.empty() && document->HasMember("meta") && (*document)["meta"].IsObject()) {
    Value& meta = (*document)["meta"];
    const double start = std::max(selection.intervals.front().first, profile.start_time);
    const double end = std::min(selection.intervals.back().second, profile.end_time);
    if (meta.HasMember("profilingStartTime") && meta["profilingStartTime"].IsNumber()) {
      meta["profilingStartTime"].SetDouble(start);
    }
    if (meta.HasMember("profilingEndTime") && meta["profilingEndTime"].IsNumber()) {
      meta["profilingEndTime"].SetDouble(std::max(start, end));
    }
  }
}

std::string FilterNote(const Profile& before, const Profile& after, const FilterSelection& selection) {
  return "Filtered: " + selection.description + ": " + std::to_string(after.threads.size()) + " of " +
         std::to_string(before.threads.size()) + " threads, " + std::to_string(after.processes.size()) + " of " +
         std::to_string(before.processes.size()) + " processes, " + std::to_string(after.total_samples) + " of " +
         std::to_string(before.total_samples) + " samples";
}

}  // namespace cli
}  // namespace strata
