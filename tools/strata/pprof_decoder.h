// A decoder for pprof profiles (profile.proto, github.com/google/pprof/proto/profile.proto),
// written from the schema independently of the encoder in convert.cc, for the tests: the
// `convert --to pprof` output must decode with the schema and have consistent references.
// Handles gzip-compressed or raw bytes, packed and unpacked repeated fields, unknown fields
// (skipped by wire type).
//
// Thread safety: pure functions.
#ifndef STRATA_TOOLS_STRATA_PPROF_DECODER_H_
#define STRATA_TOOLS_STRATA_PPROF_DECODER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata {
namespace cli {

struct PprofProfile {
  struct ValueType {
    int64_t type = 0;  // String index.
    int64_t unit = 0;
  };
  struct Label {
    int64_t key = 0;
    int64_t str = 0;
    int64_t num = 0;
    int64_t num_unit = 0;
  };
  struct Sample {
    std::vector<uint64_t> location_ids;  // Leaf first.
    std::vector<int64_t> values;         // One per sample type.
    std::vector<Label> labels;
  };
  struct Line {
    uint64_t function_id = 0;
    int64_t line = 0;
  };
  struct Location {
    uint64_t id = 0;
    uint64_t mapping_id = 0;
    uint64_t address = 0;
    std::vector<Line> lines;
  };
  struct Function {
    uint64_t id = 0;
    int64_t name = 0;
    int64_t system_name = 0;
    int64_t filename = 0;
    int64_t start_line = 0;
  };
  struct Mapping {
    uint64_t id = 0;
  };

  std::vector<ValueType> sample_types;
  std::vector<Sample> samples;
  std::vector<Mapping> mappings;
  std::vector<Location> locations;
  std::vector<Function> functions;
  std::vector<std::string> strings;
  int64_t time_nanos = 0;
  int64_t duration_nanos = 0;
  ValueType period_type;
  int64_t period = 0;
  std::vector<int64_t> comments;
  int64_t default_sample_type = 0;
};

// Decodes gzip-compressed or raw profile.proto bytes.
bool DecodePprof(std::string_view bytes, PprofProfile* profile, std::string* error);

// "" when every reference holds (string_table[0] == "", string indexes in range, ids unique
// and non-zero, every sample's location ids and every line's function id defined, values
// as many as sample types); otherwise what is wrong.
std::string ValidatePprof(const PprofProfile& profile);

// The sum of values[index] over all samples.
int64_t PprofTotal(const PprofProfile& profile, size_t index);

// The function name of each location of a sample, leaf first.
std::vector<std::string> PprofStack(const PprofProfile& profile, const PprofProfile::Sample& sample);

}  // namespace cli
}  // namespace strata

#endif  // STRATA_TOOLS_STRATA_PPROF_DECODER_H_
