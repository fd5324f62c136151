#include "full/internal/sub_process_end.h"

#include <cmath>
#include <string>

#include "rapidjson/memorystream.h"
#include "rapidjson/reader.h"

namespace strata {
namespace full {
namespace {

// Follows the nesting; records meta's two numbers; stops (returns false) when meta closes.
class MetaHandler : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, MetaHandler> {
 public:
  bool Default() { return ValueDone(); }
  bool Double(double d) { return Number(d); }
  bool Int(int i) { return Number(i); }
  bool Uint(unsigned u) { return Number(u); }
  bool Int64(int64_t i) { return Number(static_cast<double>(i)); }
  bool Uint64(uint64_t u) { return Number(static_cast<double>(u)); }
  bool Key(const char* text, rapidjson::SizeType length, bool) {
    key_.assign(text, length);
    return true;
  }
  bool StartObject() {
    in_meta_ = in_meta_ || (depth_ == 1 && key_ == "meta");
    ++depth_;
    key_.clear();
    return true;
  }
  bool EndObject(rapidjson::SizeType) {
    --depth_;
    if (in_meta_ && depth_ == 1) {
      meta_done_ = true;
      return false;  // Stop: the rest is not needed.
    }
    return ValueDone();
  }
  bool StartArray() {
    ++depth_;
    return true;
  }
  bool EndArray(rapidjson::SizeType) {
    --depth_;
    return ValueDone();
  }

  bool meta_done() const { return meta_done_; }
  std::optional<double> start_ms, range_start_ms, end_ms;

 private:
  bool Number(double value) {
    if (in_meta_ && depth_ == 2) {
      if (key_ == "startTime") start_ms = value;
      if (key_ == "profilingStartTime") range_start_ms = value;
      if (key_ == "profilingEndTime") end_ms = value;
    }
    return ValueDone();
  }
  bool ValueDone() {
    key_.clear();
    return true;
  }

  int depth_ = 0;
  bool in_meta_ = false;
  bool meta_done_ = false;
  std::string key_;
};

}  // namespace

std::optional<EpochRangeNs> SubProcessProfileRangeEpochNs(std::string_view json) {
  MetaHandler handler;
  rapidjson::MemoryStream stream(json.data(), json.size());
  rapidjson::Reader reader;
  reader.Parse(stream, handler);
  if (!handler.meta_done() || !handler.start_ms || !handler.range_start_ms || !handler.end_ms) {
    return std::nullopt;
  }
  // Epoch nanoseconds do not fit a double exactly (1.7e18 > 2^53): whole milliseconds and
  // the rest are converted apart.
  const double base_ms = *handler.start_ms;
  if (!std::isfinite(base_ms) || base_ms <= 0 || base_ms > 9.2e12 ||
      !std::isfinite(*handler.range_start_ms) || !std::isfinite(*handler.end_ms) ||
      std::fabs(*handler.range_start_ms) > 1e12 || std::fabs(*handler.end_ms) > 1e12) {
    return std::nullopt;
  }
  const double whole_ms = std::floor(base_ms);
  const int64_t base_ns = static_cast<int64_t>(whole_ms) * 1000000 +
                          static_cast<int64_t>(std::llround((base_ms - whole_ms) * 1e6));
  const int64_t start_ns = base_ns + static_cast<int64_t>(std::llround(*handler.range_start_ms * 1e6));
  const int64_t end_ns = base_ns + static_cast<int64_t>(std::llround(*handler.end_ms * 1e6));
  return EpochRangeNs{start_ns, end_ns};
}

}  // namespace full
}  // namespace strata
