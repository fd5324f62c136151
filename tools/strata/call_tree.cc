#include "tools/strata/call_tree.h"

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "tools/strata/terminal_text.h"

namespace strata {
namespace cli {
namespace {

constexpr size_t kMinWidth = 60;
constexpr size_t kMaxGuideLevels = 12;  // Indentation stops growing after this many levels.
constexpr size_t kColumnsWidth = 27;    // "%6.1f%% %6.1f%% %9.1f  "

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  return buffer;
}

// Characters (UTF-8 code points) in `s`.
size_t Columns(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

// `s` cut to `width` characters, "..." marking the cut (never inside a UTF-8 sequence).
std::string CutToColumns(const std::string& s, size_t width) {
  if (Columns(s) <= width) return s;
  if (width <= 3) return std::string(width, '.');
  size_t kept = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (kept == width - 3) break;
      ++kept;
    }
  }
  return s.substr(0, i) + "...";
}

// "(anonymous namespace)::f(int, char const*) const [clone .constprop.0]" -> "f()": a C++
// name without its parameter list, qualifiers, GCC clone suffixes and anonymous namespaces,
// for lines too narrow for the whole name. Other names are returned as they are.
std::string WithoutParameters(const std::string& name) {
  std::string s = name;
  for (size_t clone; (clone = s.rfind(" [clone ")) != std::string::npos && s.back() == ']';) s.resize(clone);
  for (size_t anonymous; (anonymous = s.find("(anonymous namespace)::")) != std::string::npos;) {
    s.erase(anonymous, 23);
  }
  for (const char* qualifier : {" const", " volatile", " &&", " &"}) {
    const std::string q = qualifier;
    if (s.size() > q.size() && s.compare(s.size() - q.size(), q.size(), q) == 0) s.resize(s.size() - q.size());
  }
  if (s.empty() || s.back() != ')') return s;
  int depth = 0;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) return i > 0 ? s.substr(0, i) + "()" : s;
  }
  return s;
}

struct Node {
  uint32_t function = 0;
  int32_t parent = -1;
  double self = 0;
  double total = 0;
  std::string label;  // Thread roots: "renderer (pid 1, tid 2)".
  std::vector<uint32_t> children;
};

class TreePrinter {
 public:
  TreePrinter(const Profile& profile, const CallTreeOptions& options, const std::vector<Node>& nodes, double all)
      : profile_(profile), options_(options), nodes_(nodes), all_(all),
        width_(std::max(options.width, kMinWidth)) {}

  void PrintRoot(uint32_t root, std::string* out) {
    Line(nodes_[root].total, nodes_[root].self, TerminalSafe(nodes_[root].label), "", out);
    PrintChildren(root, 0, "", out);
  }

 private:
  std::string Name(uint32_t node) const { return TerminalSafe(profile_.functions[nodes_[node].function].name); }

  void Line(double total, double self, const std::string& name, const std::string& prefix, std::string* out) const {
    std::string columns = Format("%6.1f%% ", 100.0 * total / all_);
    columns += self < 0 ? std::string(8, ' ') : Format("%6.1f%% ", 100.0 * self / all_);
    columns += Format(options_.weight == Weight::kSamples ? "%9.0f  " : "%9.1f  ", total);
    const size_t room = width_ > kColumnsWidth + Columns(prefix) ? width_ - kColumnsWidth - Columns(prefix) : 4;
    *out += columns + prefix + CutToColumns(name, std::max<size_t>(room, 4)) + "\n";
  }

  // The names of a folded chain in `room` characters: all of them; else without parameter
  // lists; else the first and as many of the last ones as fit ("a > ... > y > z"); else the
  // last ones only (cut by Line() when even the last alone is too long).
  static std::string ChainName(const std::vector<std::string>& full_names, size_t room) {
    auto join = [](const std::vector<std::string>& names, size_t from) {
      std::string joined;
      for (size_t i = from; i < names.size(); ++i) joined += (i > from ? " > " : "") + names[i];
      return joined;
    };
    if (Columns(join(full_names, 0)) <= room) return join(full_names, 0);
    std::vector<std::string> names;
    for (const std::string& n : full_names) names.push_back(WithoutParameters(n));
    if (Columns(join(names, 0)) <= room || names.size() == 1) return join(names, 0);
    std::string best = "... > " + names.back();
    for (size_t from = names.size() - 1; from-- > 1;) {
      const std::string with_first = names.front() + " > ... > " + join(names, from);
      const std::string without_first = "... > " + join(names, from);
      if (Columns(with_first) <= room) {
        best = with_first;
      } else if (Columns(without_first) <= room) {
        best = without_first;
      } else {
        break;
      }
    }
    return best;
  }

  void PrintChildren(uint32_t parent, size_t depth, const std::string& guide, std::string* out) {
    const Node& p = nodes_[parent];
    const double threshold = all_ * options_.min_percent / 100.0;
    std::vector<uint32_t> shown;
    size_t hidden = 0;
    double hidden_total = 0;
    for (uint32_t c : p.children) {
      if (nodes_[c].total >= threshold && nodes_[c].total > 0) {
        shown.push_back(c);
      } else if (nodes_[c].total > 0) {
        ++hidden;
        hidden_total += nodes_[c].total;
      }
    }
    for (size_t i = 0; i < shown.size(); ++i) {
      const bool last = i + 1 == shown.size() && hidden == 0;
      // The chain this line stands for.
      std::vector<uint32_t> chain = {shown[i]};
      while (options_.fold && nodes_[chain.back()].children.size() == 1 && nodes_[chain.back()].self == 0) {
        chain.push_back(nodes_[chain.back()].children[0]);
      }
      const uint32_t end = chain.back();
      const size_t level = depth + 1;
      const bool capped = level > kMaxGuideLevels;
      const std::string prefix = guide + (last ? "`- " : "|- ") + (capped ? "[" + std::to_string(level) + "] " : "");
      const std::string child_guide = capped ? guide : guide + (last ? "  " : "| ");
      std::vector<std::string> names;
      for (uint32_t n : chain) names.push_back(Name(n));
      const bool cut_here = options_.max_depth > 0 && level >= options_.max_depth && !nodes_[end].children.empty();
      const std::string deeper = cut_here ? " [+" + std::to_string(nodes_[end].children.size()) + " deeper]" : "";
      const size_t room = width_ - std::min(width_, kColumnsWidth + Columns(prefix) + deeper.size());
      Line(nodes_[shown[i]].total, nodes_[end].self, ChainName(names, room) + deeper, prefix, out);
      if (!cut_here) PrintChildren(end, level, child_guide, out);
    }
    if (hidden > 0) {
      const std::string prefix = guide + "`- ";
      Line(hidden_total, -1, std::to_string(hidden) + " more under " + Format("%.1f%%", options_.min_percent), prefix,
           out);
    }
  }

  const Profile& profile_;
  const CallTreeOptions& options_;
  const std::vector<Node>& nodes_;
  const double all_;
  const size_t width_;
};

}  // namespace

std::string FormatCallTree(const Profile& profile, const CallTreeOptions& options) {
  const bool cpu = ProfileHasCpu(profile);
  std::vector<Node> nodes;
  std::vector<uint32_t> roots;
  std::unordered_map<uint64_t, uint32_t> child_of;  // (parent << 32 | function) -> node.
  size_t stacks = 0;
  for (const Thread& thread : profile.threads) stacks += thread.stack_prefix.size() + 1;
  child_of.reserve(stacks);
  nodes.reserve(stacks);
  auto child = [&](uint32_t parent, uint32_t function) -> uint32_t {
    const uint64_t key = (static_cast<uint64_t>(parent) << 32) | function;
    auto it = child_of.find(key);
    if (it != child_of.end()) return it->second;
    const uint32_t index = static_cast<uint32_t>(nodes.size());
    Node node;
    node.function = function;
    node.parent = static_cast<int32_t>(parent);
    nodes.push_back(std::move(node));
    nodes[parent].children.push_back(index);
    child_of.emplace(key, index);
    return index;
  };
  for (const Thread& thread : profile.threads) {
    const uint32_t root = static_cast<uint32_t>(nodes.size());
    Node node;
    node.label = thread.name + " (pid " + std::to_string(thread.pid) + ", tid " + std::to_string(thread.tid) + ")";
    nodes.push_back(std::move(node));
    roots.push_back(root);
    std::vector<uint32_t> stack_node(thread.stack_prefix.size());
    for (size_t s = 0; s < stack_node.size(); ++s) {
      const int32_t prefix = thread.stack_prefix[s];
      const uint32_t parent = prefix < 0 ? root : stack_node[static_cast<size_t>(prefix)];
      stack_node[s] = child(parent, thread.frames[thread.stack_frame[s]].function);
    }
    const std::vector<double> wall = options.weight == Weight::kWall ? SampleWallMs(profile, thread) : std::vector<double>();
    for (size_t i = 0; i < thread.sample_count(); ++i) {
      const double w = options.weight == Weight::kWall  ? wall[i]
                       : options.weight == Weight::kCpu ? SampleCpuMs(thread, i, cpu, profile.interval_ms)
                                                        : 1.0;
      const int32_t s = thread.sample_stack[i];
      nodes[s < 0 ? root : stack_node[static_cast<size_t>(s)]].self += w;
    }
  }
  for (Node& n : nodes) n.total += n.self;
  for (size_t i = nodes.size(); i-- > 0;) {
    if (nodes[i].parent >= 0) nodes[static_cast<size_t>(nodes[i].parent)].total += nodes[i].total;
  }
  for (Node& n : nodes) {
    std::sort(n.children.begin(), n.children.end(), [&](uint32_t a, uint32_t b) {
      if (nodes[a].total != nodes[b].total) return nodes[a].total > nodes[b].total;
      return profile.functions[nodes[a].function].name < profile.functions[nodes[b].function].name;
    });
  }
  std::stable_sort(roots.begin(), roots.end(), [&](uint32_t a, uint32_t b) { return nodes[a].total > nodes[b].total; });
  double all = 0;
  for (uint32_t r : roots) all += nodes[r].total;

  const char* unit = options.weight == Weight::kWall ? "wall ms" : options.weight == Weight::kCpu ? "CPU ms" : "samples";
  const char* what = options.weight == Weight::kWall ? "wall time"
                     : options.weight == Weight::kCpu ? (cpu ? "CPU time" : "CPU time (samples x interval)")
                                                      : "samples";
  std::string out = Format("Call tree by %s: %.1f %s in %zu thread(s), %% of all.\n", what, all,
                           options.weight == Weight::kSamples ? "samples" : "ms", profile.threads.size());
  std::string notes;
  if (options.fold) notes += "single-callee chains folded (a > b)";
  if (options.min_percent > 0) notes += Format("%snodes under %.1f%% summed", notes.empty() ? "" : "; ", options.min_percent);
  if (options.max_depth > 0) notes += Format("%sdepth %zu", notes.empty() ? "" : "; ", options.max_depth);
  if (!notes.empty()) {
    notes[0] = static_cast<char>(notes[0] - 'a' + 'A');
    out += CutToColumns(notes + ".", std::max(options.width, kMinWidth)) + "\n";
  }
  if (!(all > 0)) return out + "No samples with this weight.\n";
  out += Format("%7s %7s %9s  %s\n", "total", "self", unit, "function");
  TreePrinter printer(profile, options, nodes, all);
  size_t hidden_threads = 0;
  double hidden_total = 0;
  for (uint32_t r : roots) {
    if (nodes[r].total <= 0) continue;
    if (nodes[r].total < all * options.min_percent / 100.0) {
      ++hidden_threads;
      hidden_total += nodes[r].total;
      continue;
    }
    printer.PrintRoot(r, &out);
  }
  if (hidden_threads > 0) {
    out += Format("%6.1f%% %7s %9s  %zu more thread(s) under %.1f%%\n", 100.0 * hidden_total / all, "", "",
                  hidden_threads, options.min_percent);
  }
  return out;
}

}  // namespace cli
}  // namespace strata
