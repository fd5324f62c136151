#include "tools/strata/pprof_decoder.h"

#include <zlib.h>

#include <functional>
#include <map>
#include <set>

namespace strata {
namespace cli {
namespace {

// One protobuf message's fields, read in order.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool done() const { return p_ >= end_; }
  bool ok() const { return ok_; }

  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return Fail();
      const uint8_t b = static_cast<uint8_t>(*p_++);
      *v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return Fail();
  }

  // Next field: number, wire type; for wire type 2 also the bytes, for 0 the value.
  bool Next(int* field, int* wire, uint64_t* value, std::string_view* bytes) {
    uint64_t key = 0;
    if (!Varint(&key)) return false;
    *field = static_cast<int>(key >> 3);
    *wire = static_cast<int>(key & 7);
    if (*field == 0) return Fail();
    switch (*wire) {
      case 0:
        return Varint(value);
      case 1:
        if (end_ - p_ < 8) return Fail();
        p_ += 8;
        return true;
      case 5:
        if (end_ - p_ < 4) return Fail();
        p_ += 4;
        return true;
      case 2: {
        uint64_t size = 0;
        if (!Varint(&size) || size > static_cast<uint64_t>(end_ - p_)) return Fail();
        *bytes = std::string_view(p_, static_cast<size_t>(size));
        p_ += size;
        return true;
      }
      default:
        return Fail();
    }
  }

 private:
  bool Fail() {
    ok_ = false;
    return false;
  }
  const char* p_;
  const char* end_;
  bool ok_ = true;
};

using FieldFn = std::function<bool(int field, int wire, uint64_t value, std::string_view bytes)>;

bool ForEachField(std::string_view message, const FieldFn& fn) {
  Reader r(message);
  while (!r.done()) {
    int field = 0, wire = 0;
    uint64_t value = 0;
    std::string_view bytes;
    if (!r.Next(&field, &wire, &value, &bytes)) return false;
    if (!fn(field, wire, value, bytes)) return false;
  }
  return r.ok();
}

// A repeated varint field, packed (wire 2) or not (wire 0).
template <typename T>
bool Repeated(int wire, uint64_t value, std::string_view bytes, std::vector<T>* out) {
  if (wire == 0) {
    out->push_back(static_cast<T>(value));
    return true;
  }
  if (wire != 2) return false;
  Reader r(bytes);
  while (!r.done()) {
    uint64_t v = 0;
    if (!r.Varint(&v)) return false;
    out->push_back(static_cast<T>(v));
  }
  return true;
}

bool ValueTypeOf(std::string_view bytes, PprofProfile::ValueType* out) {
  return ForEachField(bytes, [&](int field, int wire, uint64_t value, std::string_view) {
    if (wire == 0 && field == 1) out->type = static_cast<int64_t>(value);
    if (wire == 0 && field == 2) out->unit = static_cast<int64_t>(value);
    return true;
  });
}

bool Gunzip(std::string_view in, std::string* out) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return false;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  char buffer[1 << 16];
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof(buffer);
    status = inflate(&z, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END) {
      inflateEnd(&z);
      return false;
    }
    out->append(buffer, sizeof(buffer) - z.avail_out);
  }
  inflateEnd(&z);
  return true;
}

}  // namespace

bool DecodePprof(std::string_view bytes, PprofProfile* profile, std::string* error) {
  *profile = PprofProfile();
  std::string inflated;
  if (bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f && static_cast<uint8_t>(bytes[1]) == 0x8b) {
    if (!Gunzip(bytes, &inflated)) {
      *error = "corrupt gzip data";
      return false;
    }
    bytes = inflated;
  }
  const bool ok = ForEachField(bytes, [&](int field, int wire, uint64_t value, std::string_view sub) {
    switch (field) {
      case 1: {
        if (wire != 2) return false;
        PprofProfile::ValueType t;
        if (!ValueTypeOf(sub, &t)) return false;
        profile->sample_types.push_back(t);
        return true;
      }
      case 2: {
        if (wire != 2) return false;
        PprofProfile::Sample s;
        if (!ForEachField(sub, [&](int f, int w, uint64_t v, std::string_view b) {
              if (f == 1) return Repeated(w, v, b, &s.location_ids);
              if (f == 2) return Repeated(w, v, b, &s.values);
              if (f == 3 && w == 2) {
                PprofProfile::Label label;
                s.labels.push_back(label);
                return ForEachField(b, [&](int lf, int lw, uint64_t lv, std::string_view) {
                  if (lw != 0) return true;
                  if (lf == 1) s.labels.back().key = static_cast<int64_t>(lv);
                  if (lf == 2) s.labels.back().str = static_cast<int64_t>(lv);
                  if (lf == 3) s.labels.back().num = static_cast<int64_t>(lv);
                  if (lf == 4) s.labels.back().num_unit = static_cast<int64_t>(lv);
                  return true;
                });
              }
              return true;
            })) {
          return false;
        }
        profile->samples.push_back(std::move(s));
        return true;
      }
      case 3: {
        if (wire != 2) return false;
        PprofProfile::Mapping m;
        if (!ForEachField(sub, [&](int f, int w, uint64_t v, std::string_view) {
              if (f == 1 && w == 0) m.id = v;
              return true;
            })) {
          return false;
        }
        profile->mappings.push_back(m);
        return true;
      }
      case 4: {
        if (wire != 2) return false;
        PprofProfile::Location l;
        if (!ForEachField(sub, [&](int f, int w, uint64_t v, std::string_view b) {
              if (f == 1 && w == 0) l.id = v;
              if (f == 2 && w == 0) l.mapping_id = v;
              if (f == 3 && w == 0) l.address = v;
              if (f == 4 && w == 2) {
                PprofProfile::Line line;
                if (!ForEachField(b, [&](int lf, int lw, uint64_t lv, std::string_view) {
                      if (lf == 1 && lw == 0) line.function_id = lv;
                      if (lf == 2 && lw == 0) line.line = static_cast<int64_t>(lv);
                      return true;
                    })) {
                  return false;
                }
                l.lines.push_back(line);
              }
              return true;
            })) {
          return false;
        }
        profile->locations.push_back(std::move(l));
        return true;
      }
      case 5: {
        if (wire != 2) return false;
        PprofProfile::Function fn;
        if (!ForEachField(sub, [&](int f, int w, uint64_t v, std::string_view) {
              if (w != 0) return true;
              if (f == 1) fn.id = v;
              if (f == 2) fn.name = static_cast<int64_t>(v);
              if (f == 3) fn.system_name = static_cast<int64_t>(v);
              if (f == 4) fn.filename = static_cast<int64_t>(v);
              if (f == 5) fn.start_line = static_cast<int64_t>(v);
              return true;
            })) {
          return false;
        }
        profile->functions.push_back(fn);
        return true;
      }
      case 6:
        if (wire != 2) return false;
        profile->strings.emplace_back(sub);
        return true;
      case 9: profile->time_nanos = static_cast<int64_t>(value); return wire == 0;
      case 10: profile->duration_nanos = static_cast<int64_t>(value); return wire == 0;
      case 11: return wire == 2 && ValueTypeOf(sub, &profile->period_type);
      case 12: profile->period = static_cast<int64_t>(value); return wire == 0;
      case 13: return Repeated(wire, value, sub, &profile->comments);
      case 14: profile->default_sample_type = static_cast<int64_t>(value); return wire == 0;
      default:
        return true;  // Unknown or unused (drop_frames, keep_frames, ...).
    }
  });
  if (!ok) {
    *error = "not a valid profile.proto message (bad wire format or field type)";
    return false;
  }
  return true;
}

std::string ValidatePprof(const PprofProfile& p) {
  const int64_t strings = static_cast<int64_t>(p.strings.size());
  if (p.strings.empty() || !p.strings[0].empty()) return "string_table[0] must be the empty string";
  auto bad_string = [&](int64_t i) { return i < 0 || i >= strings; };
  for (const auto& t : p.sample_types) {
    if (bad_string(t.type) || bad_string(t.unit)) return "sample_type refers to a missing string";
  }
  if (p.sample_types.empty()) return "no sample_type";
  std::set<uint64_t> function_ids, location_ids;
  for (const auto& f : p.functions) {
    if (f.id == 0 || !function_ids.insert(f.id).second) return "function id 0 or duplicated";
    if (bad_string(f.name) || bad_string(f.system_name) || bad_string(f.filename)) {
      return "function " + std::to_string(f.id) + " refers to a missing string";
    }
  }
  for (const auto& l : p.locations) {
    if (l.id == 0 || !location_ids.insert(l.id).second) return "location id 0 or duplicated";
    for (const auto& line : l.lines) {
      if (function_ids.count(line.function_id) == 0) {
        return "location " + std::to_string(l.id) + " refers to missing function " + std::to_string(line.function_id);
      }
    }
  }
  for (const auto& s : p.samples) {
    if (s.values.size() != p.sample_types.size()) return "a sample has a different number of values than types";
    for (uint64_t id : s.location_ids) {
      if (location_ids.count(id) == 0) return "a sample refers to missing location " + std::to_string(id);
    }
    for (const auto& label : s.labels) {
      if (bad_string(label.key) || bad_string(label.str)) return "a label refers to a missing string";
    }
  }
  if (bad_string(p.period_type.type) || bad_string(p.period_type.unit)) return "period_type refers to a missing string";
  for (int64_t c : p.comments) {
    if (bad_string(c)) return "comment refers to a missing string";
  }
  if (bad_string(p.default_sample_type)) return "default_sample_type refers to a missing string";
  return "";
}

int64_t PprofTotal(const PprofProfile& profile, size_t index) {
  int64_t total = 0;
  for (const auto& s : profile.samples) {
    if (index < s.values.size()) total += s.values[index];
  }
  return total;
}

std::vector<std::string> PprofStack(const PprofProfile& profile, const PprofProfile::Sample& sample) {
  std::map<uint64_t, const PprofProfile::Location*> locations;
  for (const auto& l : profile.locations) locations[l.id] = &l;
  std::map<uint64_t, const PprofProfile::Function*> functions;
  for (const auto& f : profile.functions) functions[f.id] = &f;
  std::vector<std::string> names;
  for (uint64_t id : sample.location_ids) {
    auto l = locations.find(id);
    if (l == locations.end()) continue;
    for (const auto& line : l->second->lines) {
      auto f = functions.find(line.function_id);
      if (f != functions.end()) names.push_back(profile.strings[static_cast<size_t>(f->second->name)]);
    }
  }
  return names;
}

}  // namespace cli
}  // namespace strata
