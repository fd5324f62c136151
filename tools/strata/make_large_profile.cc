// make_large_profile: writes a large synthetic multi-process Gecko profile shaped like the
// ones the base tier writes (same tables and columns, C++-like function names "(in lib)" with
// file:line, stacks that evolve by a random walk over a call graph where each function calls
// 4 others, (prefix, frame) pairs shared, CPU deltas in ns, interval markers), for benchmarking the `strata` commands on 100 MB profiles
// (docs/benchmarks.md). Deterministic for a given seed.
//
//   make_large_profile OUT.json [--mb N] [--processes P] [--threads T] [--seed S]
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct Options {
  double mb = 100;
  int processes = 4;
  int threads = 4;
  unsigned seed = 1;
};

void Append(std::string* out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void Append(std::string* out, const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  const int n = vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  out->append(buffer, static_cast<size_t>(std::min(n, static_cast<int>(sizeof(buffer) - 1))));
}

std::string Thread(std::mt19937_64& rng, int pid, int tid, const char* name, size_t samples) {
  // Functions: ~600 per thread, names 40-90 characters.
  static const char* kNamespaces[] = {"engine", "render", "net", "storage", "util", "parser", "sched"};
  static const char* kLibraries[] = {"app", "libengine.so", "libc.so.6", "libstdc++.so.6"};
  std::vector<std::string> strings;
  const int kFunctions = 600;
  for (int f = 0; f < kFunctions; ++f) {
    char text[256];
    snprintf(text, sizeof(text), "%s::detail::Component%d::Process%dStep(std::vector<double> const&, int) (in %s) (src/%s/component%d.cc:%d)",
             kNamespaces[f % 7], f / 7, f % 13, kLibraries[f % 4], kNamespaces[f % 7], f / 7, 10 + f % 400);
    strings.push_back(text);
  }
  // Stacks: parents first; a random walk over depth 12-40.
  std::string stacks = "[";
  std::string frames = "[";
  for (int f = 0; f < kFunctions; ++f) {
    Append(&frames, "%s[%d,false,0,null,%d,null,%s,%s]", f ? "," : "", f, 10 + f % 400, f < 8 ? "0" : "null",
           f < 8 ? "0" : "null");
  }
  frames += "]";
  std::vector<int> path;           // Stack indexes of the current stack, root first.
  std::vector<std::pair<int, int>> stack_rows;  // (prefix, frame)
  std::string sample_rows = "[";
  std::string markers = "[";
  const int name_string = kFunctions;  // "Frame" marker name.
  double time = 1.0;
  std::unordered_map<uint64_t, int> stack_ids;
  std::uniform_int_distribution<int> pops(0, 4);
  std::uniform_int_distribution<int> pushes(0, 4);
  std::uniform_int_distribution<int> cpu(200000, 1200000);
  for (size_t i = 0; i < samples; ++i) {
    if (path.empty()) {
      stack_rows.push_back({-1, 0});
      path.push_back(0);
    }
    int pop = pops(rng);
    while (pop-- > 0 && path.size() > 12) path.pop_back();
    int push = pushes(rng);
    while (push-- > 0 && path.size() < 40) {
      // A callee among 4 of the caller's (programs call few functions from each place);
      // (prefix, frame) pairs are shared, as the profile writer's stack table does.
      const int caller = stack_rows[static_cast<size_t>(path.back())].second;
      const int callee = 8 + (caller * 31 + static_cast<int>(path.size()) * 7 + static_cast<int>(rng() % 4)) %
                                 (kFunctions - 8);
      const uint64_t key = static_cast<uint64_t>(path.back()) << 32 | static_cast<uint32_t>(callee);
      auto [it, inserted] = stack_ids.emplace(key, static_cast<int>(stack_rows.size()));
      if (inserted) stack_rows.push_back({path.back(), callee});
      path.push_back(it->second);
    }
    time += 1.0 + (rng() % 1000) / 1e4;
    Append(&sample_rows, "%s[%d,%.6f,null,%d]", i ? "," : "", path.back(), time, i ? cpu(rng) : 0);
    if (i % 50 == 0) {
      Append(&markers, "%s[%d,%.6f,%.6f,1,0,null]", i ? "," : "", name_string, time, time + 3.5);
    }
  }
  sample_rows += "]";
  markers += "]";
  for (size_t s = 0; s < stack_rows.size(); ++s) {
    if (stack_rows[s].first < 0) {
      Append(&stacks, "%s[null,%d]", s ? "," : "", stack_rows[s].second);
    } else {
      Append(&stacks, "%s[%d,%d]", s ? "," : "", stack_rows[s].first, stack_rows[s].second);
    }
  }
  stacks += "]";
  std::string out;
  Append(&out, "{\"name\":\"%s\",\"processType\":\"default\",\"processName\":\"synthetic-%d\",\"pid\":%d,\"tid\":%d,"
               "\"registerTime\":0,\"unregisterTime\":null,",
         name, pid, pid, tid);
  out += "\"samples\":{\"schema\":{\"stack\":0,\"time\":1,\"eventDelay\":2,\"threadCPUDelta\":3},\"data\":" + sample_rows + "},";
  out += "\"markers\":{\"schema\":{\"name\":0,\"startTime\":1,\"endTime\":2,\"phase\":3,\"category\":4,\"data\":5},\"data\":" +
         markers + "},";
  out += "\"stackTable\":{\"schema\":{\"prefix\":0,\"frame\":1},\"data\":" + stacks + "},";
  out += "\"frameTable\":{\"schema\":{\"location\":0,\"relevantForJS\":1,\"innerWindowID\":2,\"implementation\":3,"
         "\"line\":4,\"column\":5,\"category\":6,\"subcategory\":7},\"data\":" + frames + "},";
  out += "\"stringTable\":[";
  for (size_t s = 0; s < strings.size(); ++s) out += std::string(s ? "," : "") + "\"" + strings[s] + "\"";
  out += ",\"Frame\"]}";
  return out;
}

std::string Process(std::mt19937_64& rng, const Options& o, int index, size_t samples_per_thread,
                    const std::vector<std::string>& subprocesses) {
  const int pid = 1000 + index;
  std::string out;
  Append(&out, "{\"meta\":{\"version\":36,\"startTime\":%.3f,\"shutdownTime\":null,\"interval\":1,\"processType\":0,"
               "\"product\":\"synthetic\",\"stackwalk\":1,\"debug\":0,\"presymbolicated\":true,"
               "\"sampleUnits\":{\"time\":\"ms\",\"eventDelay\":\"ms\",\"threadCPUDelta\":\"ns\"},"
               "\"categories\":[{\"name\":\"Other\",\"color\":\"grey\",\"subcategories\":[\"Other\"]}],"
               "\"markerSchema\":[]},\"libs\":[],\"threads\":[",
         1700000000000.0 + index * 25.0);
  for (int t = 0; t < o.threads; ++t) {
    char name[32];
    snprintf(name, sizeof(name), t == 0 ? "GeckoMain" : "worker-%d", t);
    out += (t ? "," : "") + Thread(rng, pid, pid + t, name, samples_per_thread);
  }
  out += "],\"processes\":[";
  for (size_t i = 0; i < subprocesses.size(); ++i) out += (i ? "," : "") + subprocesses[i];
  out += "]}";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const char* path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mb") == 0 && i + 1 < argc) o.mb = std::atof(argv[++i]);
    else if (std::strcmp(argv[i], "--processes") == 0 && i + 1 < argc) o.processes = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) o.threads = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) o.seed = static_cast<unsigned>(std::atoi(argv[++i]));
    else path = argv[i];
  }
  if (path == nullptr || o.processes < 1 || o.threads < 1) {
    std::fprintf(stderr, "usage: make_large_profile OUT.json [--mb N] [--processes P] [--threads T] [--seed S]\n");
    return 2;
  }
  // ~48 bytes per sample: its row, a share of the stack table, markers.
  const size_t samples = static_cast<size_t>(o.mb * 1e6 / 48 / (o.processes * o.threads));
  std::mt19937_64 rng(o.seed);
  std::vector<std::string> children;
  for (int p = 1; p < o.processes; ++p) children.push_back(Process(rng, o, p, samples, {}));
  const std::string profile = Process(rng, o, 0, samples, children);
  FILE* out = std::fopen(path, "w");
  if (out == nullptr || std::fwrite(profile.data(), 1, profile.size(), out) != profile.size() || std::fclose(out) != 0) {
    std::fprintf(stderr, "make_large_profile: cannot write %s\n", path);
    return 1;
  }
  std::printf("make_large_profile: %s: %.1f MB, %d processes x %d threads x %zu samples\n", path, profile.size() / 1e6,
              o.processes, o.threads, samples);
  return 0;
}
