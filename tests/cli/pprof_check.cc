// pprof_check: decodes a pprof file (gzipped profile.proto) with the independent decoder of
// //tools/strata:pprof_decoder and checks its references.
//
// Usage: pprof_check FILE.pb.gz
// Prints "pprof samples=S total_count=N total_value1=V locations=L functions=F strings=K
// sample_types=T0,T1,..." (type/unit), "pprof_totals default=TYPE TYPE/UNIT=SUM..." (the
// sum of each sample type's values), "pprof_thread thread=NAME TYPE/UNIT=SUM..." per value of
// the "thread" label, and "pprof_function name=F" per function; exit status 1 when the file
// does not decode or its references are broken.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <vector>
#include <string>

#include "tools/strata/pprof_decoder.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pprof_check FILE\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "pprof_check: cannot open %s\n", argv[1]);
    return 1;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  strata::cli::PprofProfile profile;
  std::string error;
  if (!strata::cli::DecodePprof(bytes, &profile, &error)) {
    std::printf("FAIL: %s: %s\n", argv[1], error.c_str());
    return 1;
  }
  const std::string problem = strata::cli::ValidatePprof(profile);
  if (!problem.empty()) {
    std::printf("FAIL: %s: %s\n", argv[1], problem.c_str());
    return 1;
  }
  std::string types;
  for (const auto& t : profile.sample_types) {
    types += (types.empty() ? "" : ",") + profile.strings[static_cast<size_t>(t.type)] + "/" +
             profile.strings[static_cast<size_t>(t.unit)];
  }
  std::printf("pprof samples=%zu total_count=%lld total_value1=%lld locations=%zu functions=%zu strings=%zu "
              "sample_types=%s\n",
              profile.samples.size(), static_cast<long long>(strata::cli::PprofTotal(profile, 0)),
              static_cast<long long>(strata::cli::PprofTotal(profile, 1)), profile.locations.size(),
              profile.functions.size(), profile.strings.size(), types.c_str());
  const auto str = [&](int64_t i) { return profile.strings[static_cast<size_t>(i)]; };
  std::printf("pprof_totals default=%s", str(profile.default_sample_type).c_str());
  for (size_t i = 0; i < profile.sample_types.size(); ++i) {
    std::printf(" %s/%s=%lld", str(profile.sample_types[i].type).c_str(), str(profile.sample_types[i].unit).c_str(),
                static_cast<long long>(strata::cli::PprofTotal(profile, i)));
  }
  std::printf("\n");
  std::map<std::string, std::vector<long long>> by_thread;
  for (const auto& sample : profile.samples) {
    std::string thread = "?";
    for (const auto& label : sample.labels) {
      if (str(label.key) == "thread") thread = str(label.str);
    }
    auto& sums = by_thread[thread];
    sums.resize(profile.sample_types.size());
    for (size_t i = 0; i < sample.values.size() && i < sums.size(); ++i) sums[i] += sample.values[i];
  }
  for (const auto& [thread, sums] : by_thread) {
    std::printf("pprof_thread thread=%s", thread.c_str());
    for (size_t i = 0; i < sums.size(); ++i) {
      std::printf(" %s/%s=%lld", str(profile.sample_types[i].type).c_str(), str(profile.sample_types[i].unit).c_str(),
                  sums[i]);
    }
    std::printf("\n");
  }
  for (const auto& f : profile.functions) {
    std::printf("pprof_function name=%s\n", profile.strings[static_cast<size_t>(f.name)].c_str());
  }
  return 0;
}
