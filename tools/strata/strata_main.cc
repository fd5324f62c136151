// The `strata` command line (docs/cli.md):
//   strata record [-o FILE] [-i MS] [--features ...] [--filters ...] [--follow all|exec|none] -- CMD ARGS
//   strata symbolicate FILE [-o OUT]
//   strata recover FILE.flight [-o OUT] [--raw] [--reason TEXT]
//   strata summary FILE... [--top N] [--weight wall|cpu|samples|bytes|retained] [--tree] [FILTERS]
//   strata tree FILE [--weight wall|cpu|samples] [--depth N] [--min-percent P] [FILTERS]
//   strata convert FILE --to chrome|pprof|collapsed -o OUT [--weight wall|cpu|samples] [FILTERS]
//   strata report FILE [-o report.html] [--weight wall|cpu|samples] [FILTERS]
//   strata view FILE [--port N] [--no-open] [FILTERS]
// FILTERS: --pid, --tid, --process, --thread, --range (filter_options.h).
// Arguments are parsed with CLI11 (Debian libcli11-dev, header-only).
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "rapidjson/document.h"
#include "shared/symbols/dwarf_symbolizer.h"
#include "tools/strata/attach/attach_record.h"
#include "tools/strata/call_tree.h"
#include "tools/strata/convert.h"
#include "tools/strata/filter_options.h"
#include "tools/strata/function_stats.h"
#include "tools/strata/profile_io.h"
#include "tools/strata/profile_merge.h"
#include "tools/strata/profile_symbolication.h"
#include "tools/strata/profile_model.h"
#include "tools/strata/profile_summary.h"
#include "tools/strata/record.h"
#include "tools/strata/recover.h"
#include "tools/strata/report.h"
#include "tools/strata/terminal_text.h"
#include "tools/strata/version.h"
#include "tools/strata/view.h"
#include "tools/js/exec_strata_js.h"

namespace strata {
namespace cli {
namespace {

// Levenshtein distance, for suggesting the nearest command.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The option of `command` nearest to `given` ("--frequncy" -> "--frequency"), or "" when none
// is near.
std::string NearestOption(const CLI::App& command, const std::string& given) {
  std::string nearest;
  size_t best = SIZE_MAX;
  for (const CLI::Option* option : command.get_options()) {
    std::vector<std::string> names;
    for (const std::string& s : option->get_snames()) names.push_back("-" + s);
    for (const std::string& l : option->get_lnames()) names.push_back("--" + l);
    for (const std::string& name : names) {
      const size_t distance = EditDistance(given, name);
      if (distance < best) {
        best = distance;
        nearest = name;
      }
    }
  }
  return best <= std::max<size_t>(2, given.size() / 3) ? nearest : "";
}

constexpr const char* kFeatureNames[] = {"stackwalk",    "threads",      "cpu",
                                         "precise",      "framepointers", "rawaddresses",
                                         "waitstacks",   "ownframes",     "nativeallocations"};

// CLI11 check for --features: a comma list of known names, each optionally with '-'.
std::string CheckFeatures(const std::string& value) {
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    std::string item = value.substr(start, comma - start);
    if (!item.empty() && item[0] == '-') item.erase(0, 1);
    bool known = item.empty();
    for (const char* name : kFeatureNames) known = known || item == name;
    if (!known) {
      std::string list;
      for (const char* name : kFeatureNames) list += std::string(list.empty() ? "" : ", ") + name;
      return "unknown feature '" + item + "' (known: " + list + "; '-name' removes one)";
    }
    start = comma + 1;
  }
  return "";
}

int RunSymbolicate(const std::string& input, std::string output) {
  if (output.empty()) output = input;
  rapidjson::Document document;
  std::string error;
  if (!LoadProfileDocument(input, &document, &error)) {
    std::fprintf(stderr, "strata symbolicate: %s\n", TerminalSafe(error).c_str());
    return 1;
  }
  if (!HasAddressesToSymbolicate(document)) {
    std::fprintf(stderr,
                 "strata symbolicate: %s has nothing to symbolicate: no raw addresses, and no names saved with "
                 "their addresses (already symbolicated with DWARF, or saved by an older Strata)%s\n",
                 input.c_str(), output == input ? "" : "; writing it unchanged");
    if (output == input) return 0;
  }
  auto cache = std::make_shared<DwarfModuleCache>();
  SymbolicateStats stats;
  SymbolicateProfile(&document, [&](std::vector<SharedLibrary> libs) -> std::unique_ptr<Symbolizer> {
    return std::make_unique<DwarfSymbolizer>(std::move(libs), cache);
  }, &stats);
  uint64_t bytes = 0;
  if (!WriteJsonAtomically(output, document, &bytes, &error)) {
    std::fprintf(stderr, "strata symbolicate: %s\n", TerminalSafe(error).c_str());
    return 1;
  }
  const DwarfModuleCache::Stats files = cache->GetStats();
  std::fprintf(stderr,
               "strata symbolicate: %s: %zu of %zu addresses named (%zu with file:line, %zu inline frames) from %zu "
               "files (%zu with DWARF)\n",
               output.c_str(), stats.named, stats.lookups, stats.with_line, stats.inline_frames, files.files,
               files.files_with_dwarf);
  return 0;
}

// CLI11 check for --weight.
std::string CheckWeight(const std::string& value) {
  Weight weight;
  if (ParseWeight(value, &weight)) return "";
  return "unknown weight '" + value + "' (accepted: " + WeightNames() + ")";
}

Weight WeightOr(const std::string& name, Weight fallback) {
  Weight weight = fallback;
  if (!name.empty()) ParseWeight(name, &weight);
  return weight;
}

// A note on stderr when CPU weights are asked of a profile without CPU deltas.
void NoteCpuFallback(const char* command, const Profile& profile, Weight weight) {
  if (weight == Weight::kCpu && !ProfileHasCpu(profile)) {
    std::fprintf(stderr, "strata %s: the profile has no CPU deltas; --weight cpu %s\n", command,
                 std::string(command) == "convert" ? "falls back to samples (pprof: no cpu sample type)"
                                                   : "counts one interval per sample");
  }
}

// `tree_options` null: no call tree.
int RunSummary(const std::vector<std::string>& files, size_t top, Weight weight, const ProfileFilter& filter,
               CallTreeOptions* tree_options) {
  if (tree_options != nullptr && IsAllocationWeight(weight)) {
    std::fprintf(stderr, "strata summary: --tree takes --weight wall, cpu or samples (not %s)\n", WeightName(weight));
    return 2;
  }
  int status = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    Profile profile;
    std::string note;
    if (const int load_status = LoadFilteredProfile("summary", files[i], filter, &profile, &note); load_status != 0) {
      status = std::max(status, load_status);
      continue;
    }
    if (files.size() > 1) std::printf("%s== %s ==\n", i > 0 ? "\n" : "", TerminalSafe(files[i]).c_str());
    NoteCpuFallback("summary", profile, weight);
    std::fputs(SummarizeProfile(profile, top, weight, note).c_str(), stdout);
    if (tree_options != nullptr) {
      tree_options->weight = weight;
      std::printf("\n%s", FormatCallTree(profile, *tree_options).c_str());
    }
  }
  return status;
}

int RunTree(const std::string& input, const CallTreeOptions& options, const ProfileFilter& filter) {
  if (IsAllocationWeight(options.weight)) {
    std::fprintf(stderr, "strata tree: --weight %s is for strata summary only (accepted here: wall, cpu, samples)\n",
                 WeightName(options.weight));
    return 2;
  }
  Profile profile;
  std::string note;
  if (const int status = LoadFilteredProfile("tree", input, filter, &profile, &note); status != 0) return status;
  NoteCpuFallback("tree", profile, options.weight);
  if (note.size() > options.width && note.rfind(": ") != std::string::npos) {
    const size_t cut = note.rfind(": ");  // Before the counts: two lines that fit the width.
    note = note.substr(0, cut + 1) + "\n  " + note.substr(cut + 2);
  }
  if (!note.empty()) std::printf("%s\n", note.c_str());
  std::fputs(FormatCallTree(profile, options).c_str(), stdout);
  return 0;
}

int RunConvert(const std::string& input, const std::string& format, const std::string& output,
               const std::string& weight_name, const ProfileFilter& filter) {
  if (Weight w; ParseWeight(weight_name, &w) && IsAllocationWeight(w)) {
    std::fprintf(stderr, "strata convert: --weight %s is for strata summary only (accepted here: wall, cpu, "
                 "samples)\n", weight_name.c_str());
    return 2;
  }
  Profile profile;
  std::string note;
  if (const int status = LoadFilteredProfile("convert", input, filter, &profile, &note); status != 0) return status;
  if (!note.empty()) std::fprintf(stderr, "strata convert: %s\n", note.c_str());
  // collapsed counts samples unless told otherwise (its values are counts by convention).
  Weight weight = WeightOr(weight_name, format == "collapsed" ? Weight::kSamples : Weight::kWall);
  NoteCpuFallback("convert", profile, weight);
  if (weight == Weight::kCpu && !ProfileHasCpu(profile) && format == "collapsed") weight = Weight::kSamples;
  std::string error;
  ConvertStats stats;
  bool ok = false;
  if (format == "chrome") {
    ok = WriteChromeTrace(profile, weight, output, &stats, &error);
  } else if (format == "pprof") {
    ok = WritePprof(profile, weight, output, &stats, &error);
  } else {
    ok = WriteCollapsed(profile, weight, output, &stats, &error);
  }
  if (!ok) {
    std::fprintf(stderr, "strata convert: %s\n", TerminalSafe(error).c_str());
    return 1;
  }
  if (output != "-") {
    // The file's size (compressed, for pprof and .gz outputs).
    struct stat written;
    const uint64_t bytes = stat(output.c_str(), &written) == 0 ? static_cast<uint64_t>(written.st_size) : stats.bytes;
    std::fprintf(stderr, "strata convert: %s: %zu samples, %s\n", output.c_str(), stats.samples,
                 HumanBytes(bytes).c_str());
  }
  return 0;
}

int RunReport(const std::string& input, const std::string& output, const ReportOptions& options,
              const ProfileFilter& filter) {
  if (IsAllocationWeight(options.weight)) {
    std::fprintf(stderr, "strata report: --weight %s is for strata summary only (accepted here: wall, cpu, "
                 "samples)\n", WeightName(options.weight));
    return 2;
  }
  Profile profile;
  std::string note;
  if (const int status = LoadFilteredProfile("report", input, filter, &profile, &note); status != 0) return status;
  if (!note.empty()) std::fprintf(stderr, "strata report: %s\n", note.c_str());
  NoteCpuFallback("report", profile, options.weight);
  std::string error;
  uint64_t bytes = 0;
  // The page's title names the file and, when narrowed, the filters.
  const std::string source = note.empty() ? input : input + " (" + note + ")";
  if (!WriteReport(profile, source, options, output, &bytes, &error)) {
    std::fprintf(stderr, "strata report: %s\n", TerminalSafe(error).c_str());
    return 1;
  }
  std::fprintf(stderr, "strata report: %s (%s)\n", output.c_str(), HumanBytes(bytes).c_str());
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"strata: record, symbolicate, recover, summarise, report and convert profiles (Gecko profile JSON)", "strata"};
  app.require_subcommand(1);
  app.set_version_flag("-v,--version", std::string("strata ") + STRATA_VERSION);
  app.set_help_all_flag("--help-all", "Help for every subcommand");

  // record
  RecordOptions record;
  CLI::App* record_command = app.add_subcommand(
      "record",
      "Run a command with the profiler preloaded into it and every process it starts; write one "
      "multi-process profile. The exit status is the command's.");
  record_command->add_option("-o,--output", record.output, "Profile to write; .json.gz compresses")
      ->capture_default_str();
  std::string attach_pids;
  record_command->add_option("-p,--pid", attach_pids,
                             "Attach to running processes PID[,PID...] instead of running a command "
                             "(docs/attach.md); Ctrl-C or --duration stops, they keep running");
  double frequency_hz = 0;
  record_command->add_option("-F,--frequency", frequency_hz,
                             "Sampling frequency in Hz (1-20000), as perf's -F: the interval is 1000/HZ ms")
      ->check(CLI::Range(1.0, 20000.0));
  record_command->add_option("--duration", record.duration_seconds,
                             "Stop the command after S seconds, as Ctrl-C does (its profiles are saved)")
      ->check(CLI::Range(0.001, 1e9));
  std::string call_graph;
  record_command->add_option("-g,--call-graph", call_graph,
                             "Stack walker: fp (frame pointers) or dwarf/libunwind (unwind tables, the "
                             "default), as perf's --call-graph")
      ->check(CLI::IsMember({"fp", "dwarf", "libunwind"}));
  record_command->add_option("-i,--interval", record.interval_ms, "Sampling interval in milliseconds (0.05-1000)")
      ->check(CLI::Range(0.05, 1000.0));
  record_command->add_option("--features", record.features,
                             "Features added to the defaults, comma-separated, '-name' removes one: stackwalk, "
                             "threads, cpu, precise, framepointers, rawaddresses, waitstacks, nativeallocations "
                             "(sampled allocations: docs/memory.md)")
      ->check(CLI::Validator(CheckFeatures, "LIST"));
  record_command->add_option("--filters", record.filters,
                             "Profile only threads whose name contains one of these (comma-separated)");
  record_command->add_option("--buffer-mb", record.buffer_mb, "Buffer limit per process in MiB (1-4096)")
      ->check(CLI::Range(1, 4096));
  bool no_children = false;
  record_command->add_flag("--no-children", no_children, "Profile the command's own process only (--follow none)");
  std::string follow;
  record_command->add_option("--follow", follow,
                             "Which processes are profiled: all (default: the command and every process it "
                             "starts), exec (the command's own process across the programs it execs, e.g. a "
                             "shell shim's `exec python3`; not the processes it starts), none (the command's "
                             "first program only)")
      ->check(CLI::IsMember({"all", "exec", "none"}));
  bool no_flight_recorder = false;
  record_command->add_flag("--no-flight-recorder", no_flight_recorder,
                           "Do not keep each process's buffer in a file (a process that dies without saving is then "
                           "missing from the profile)");
  bool no_symbolicate = false;
  record_command->add_flag("--no-symbolicate", no_symbolicate,
                           "Keep the names the processes found themselves (ELF symbols, no inline frames or "
                           "file:line) instead of recording raw addresses and symbolicating them with DWARF");
  record_command->add_flag("--view", record.view,
                           "Then serve the profile to the Firefox Profiler (strata view) until Ctrl-C; the file "
                           "keeps raw addresses, which the viewer's symbol server names");
  record_command->add_option("--port", record.view_port, "With --view: first port tried (0: any)")
      ->check(CLI::Range(0, 65535));
  bool record_no_open = false;
  record_command->add_flag("--no-open", record_no_open, "With --view: print the address, do not open a browser");
  record_command->add_option("--lib", record.base_library, "libstrata_base.so to preload (default: next to strata)");
  record_command->add_flag("-q,--quiet", record.quiet, "No messages but errors");
  record_command->prefix_command();
  record_command->footer(
      "Usage: strata record [OPTIONS] -- CMD [ARGS...]\nExample: strata record -o build.json -- make -j2");

  // symbolicate
  std::string symbolicate_input, symbolicate_output;
  CLI::App* symbolicate_command = app.add_subcommand(
      "symbolicate", "Replace raw native addresses (0x...), and names saved with their addresses, by function names, inline frames and file:line (DWARF)");
  symbolicate_command->add_option("FILE", symbolicate_input, "Profile (.json or .json.gz)")->required();
  symbolicate_command->add_option("-o,--output", symbolicate_output, "Where to write (default: FILE itself)");
  symbolicate_command->footer("Example: strata symbolicate raw.json -o named.json");

  // recover
  RecoverOptions recover;
  CLI::App* recover_command = app.add_subcommand(
      "recover",
      "Turn the flight recorder file a crashed or killed process left (STRATA_FLIGHT_RECORDER=DIR) into a "
      "profile, with a marker where its data ends");
  recover_command->add_option("FILE", recover.input, "The .flight file")->required();
  recover_command->add_option("-o,--output", recover.output, "Profile to write (default: FILE with .json for .flight)");
  recover_command->add_flag("--raw", recover.raw, "Keep raw addresses (then: strata symbolicate)");
  recover_command->add_option("--reason", recover.reason,
                              "Why the process ended, for the end marker (e.g. \"killed by SIGKILL\"); marks it crashed");
  recover_command->add_flag("-q,--quiet", recover.quiet, "No messages but errors");
  recover_command->footer("Example: strata recover /tmp/flight/strata-1234-5678.flight -o crash.json");

  // summary
  std::vector<std::string> summary_files;
  size_t top = 15;
  CLI::App* summary_command = app.add_subcommand(
      "summary",
      "Duration, processes, threads with samples, wall and CPU time, top functions (wall and CPU columns), markers");
  summary_command->add_option("FILE", summary_files, "Profiles")->required();
  summary_command->add_option("--top", top, "How many functions to list (1-1000000)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1000000}));
  std::string summary_weight;
  summary_command->add_option("--weight", summary_weight,
                              "What sorts the function tables (both wall and CPU columns are shown): wall "
                              "(default), cpu or samples; or bytes / retained: the tables of native "
                              "allocations' estimated bytes, allocated / not freed at the end "
                              "(--features nativeallocations; docs/memory.md)")
      ->check(CLI::Validator(CheckWeight, "WEIGHT"));
  ProfileFilter summary_filter;
  AddFilterOptions(summary_command, &summary_filter);
  bool summary_tree = false;
  summary_command->add_flag("--tree", summary_tree, "Then the call tree (as strata tree), by --weight");
  CallTreeOptions summary_tree_options;
  AddCallTreeOptions(summary_command, &summary_tree_options);

  // tree
  std::string tree_input, tree_weight;
  CallTreeOptions tree_options;
  CLI::App* tree_command = app.add_subcommand(
      "tree", "Call tree in the terminal: total and self % per function, by wall or CPU time or samples, "
              "single-callee chains folded (as perf report --stdio --children)");
  tree_command->add_option("FILE", tree_input, "Profile")->required();
  tree_command->add_option("--weight", tree_weight, "wall (default), cpu or samples")
      ->check(CLI::Validator(CheckWeight, "WEIGHT"));
  AddCallTreeOptions(tree_command, &tree_options);
  ProfileFilter tree_filter;
  AddFilterOptions(tree_command, &tree_filter);
  tree_command->footer("Example: strata tree strata-profile.json --weight cpu --thread worker --depth 8");
  summary_command->footer("Example: strata summary strata-profile.json --top 30\n"
                          "         strata summary p.json --process 'python*' --thread main --range 1000,2500");

  // convert
  std::string convert_input, convert_format, convert_output;
  CLI::App* convert_command =
      app.add_subcommand("convert", "Convert a profile to Chrome trace JSON, pprof or collapsed stacks");
  convert_command->add_option("FILE", convert_input, "Profile")->required();
  convert_command->add_option("--to", convert_format,
                              "chrome: Trace Event JSON (Perfetto UI, chrome://tracing); pprof: gzipped "
                              "profile.proto; collapsed: flamegraph.pl input")
      ->required()
      ->check(CLI::IsMember({"chrome", "pprof", "collapsed"}));
  convert_command->add_option("-o,--output", convert_output, "Output file ('-' for standard output)")->required();
  std::string convert_weight;
  convert_command->add_option("--weight", convert_weight,
                              "wall, cpu or samples: pprof's default sample type (default wall; all are in "
                              "the file), collapsed's values (default samples; wall and cpu in µs), chrome: "
                              "cpu ends the slices at samples without CPU (default wall)")
      ->check(CLI::Validator(CheckWeight, "WEIGHT"));
  ProfileFilter convert_filter;
  AddFilterOptions(convert_command, &convert_filter);
  convert_command->footer("Example: strata convert strata-profile.json --to pprof -o profile.pb.gz");

  // js: run by main() before this parser (tools/js, a binary of its own); listed for --help.
  app.add_subcommand("js", "Run a JavaScript file in SpiderMonkey and profile its JS stacks (strata js --help)")
      ->footer("Example: strata js script.js -o js-profile.json")
      ->allow_extras();

  // view
  ViewOptions view_options;
  bool view_no_open = false;
  CLI::App* view_command = app.add_subcommand(
      "view",
      "Serve a profile to the Firefox Profiler (profiler.firefox.com) from this machine, with its symbols "
      "and sources, and open it; Ctrl-C stops");
  view_command->add_option("FILE", view_options.profile, "Profile (.json or .json.gz)")->required();
  view_command->add_option("--port", view_options.port, "First port tried, then the next 9 (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  view_command->add_flag("--no-open", view_no_open, "Print the address, do not open a browser");
  view_command->add_option("--source-root", view_options.source_root,
                           "Directory that relative source file names are read under (default: here)");
  ProfileFilter view_filter;
  AddFilterOptions(view_command, &view_filter);
  view_command->footer("Example: strata view strata-profile.json");

  // report
  std::string report_input, report_output = "report.html";
  ReportOptions report_options;
  CLI::App* report_command = app.add_subcommand(
      "report", "One self-contained HTML file: flame graph and timeline per thread, top functions");
  report_command->add_option("FILE", report_input, "Profile")->required();
  report_command->add_option("-o,--output", report_output, "HTML file to write")->capture_default_str();
  ProfileFilter report_filter;
  AddFilterOptions(report_command, &report_filter);
  report_command->footer("Example: strata report strata-profile.json -o report.html");
  report_command->add_option("--max-samples", report_options.max_samples,
                             "Samples kept in the page over all threads (more are thinned evenly)")
      ->capture_default_str();
  std::string report_weight;
  report_command->add_option("--weight", report_weight,
                             "What the flame graph and the table weigh when the page opens (a control in the "
                             "page switches it): wall (default), cpu or samples")
      ->check(CLI::Validator(CheckWeight, "WEIGHT"));

  // `record ... -- CMD ARGS`: everything after the first "--" is the command, untouched
  // (CLI11 would still look at it); without "--", the command starts at the first
  // positional argument (prefix_command).
  std::vector<std::string> command_after_dashes;
  if (argc >= 2 && std::string(argv[1]) == "record") {
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]) == "--") {
        command_after_dashes.assign(argv + i + 1, argv + argc);
        argc = i;
        break;
      }
    }
  }
  // `strata --version` (or -v) alone needs no command (require_subcommand would refuse it).
  if (argc == 2 && (std::string(argv[1]) == "--version" || std::string(argv[1]) == "-v")) {
    std::printf("strata %s\n", STRATA_VERSION);
    return 0;
  }
  // `strata help [COMMAND]`, as git and perf have it.
  if (argc >= 2 && std::string(argv[1]) == "help") {
    if (argc == 2) {
      std::printf("%s", app.help().c_str());
      return 0;
    }
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->get_name() == argv[2]) {
        std::printf("%s", sub->help().c_str());
        return 0;
      }
    }
    std::fprintf(stderr, "strata help: unknown command '%s'\nRun 'strata --help' for the commands.\n",
                 TerminalSafe(argv[2]).c_str());
    return 2;
  }
  // An unknown command: say so, and suggest the nearest one.
  if (argc >= 2 && argv[1][0] != '-') {
    const std::string given = argv[1];
    bool known = false;
    std::string nearest;
    size_t nearest_distance = SIZE_MAX;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known = known || sub->get_name() == given;
      const size_t distance = EditDistance(given, sub->get_name());
      if (distance < nearest_distance) {
        nearest_distance = distance;
        nearest = sub->get_name();
      }
    }
    if (!known) {
      std::fprintf(stderr, "strata: unknown command '%s'", TerminalSafe(given).c_str());
      if (nearest_distance <= std::max<size_t>(2, given.size() / 3)) {
        std::fprintf(stderr, "; did you mean '%s'?", nearest.c_str());
      }
      std::fprintf(stderr, "\nRun 'strata --help' for the commands.\n");
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --help-all exit 0; every usage error (unknown option, bad value, missing
    // argument) exits 2 (docs/cli.md), whatever CLI11's own code for it; its message on stderr.
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (*record_command) {
    std::vector<std::string> command = record_command->remaining();
    if (!command.empty() && command[0] == "--") command.erase(command.begin());
    if (!command.empty() && !command_after_dashes.empty() &&
        !(command[0].size() > 1 && command[0][0] == '-')) {
      std::fprintf(stderr, "strata record: unexpected arguments before '--': %s\n",
                   TerminalSafe(command[0]).c_str());
      return 2;
    }
    if (command.empty()) command = command_after_dashes;
    if (!attach_pids.empty()) {
      record.command = command;  // Refused by AttachRecord: -p or a command.
      if (record.view || no_children) {
        std::fprintf(stderr, "strata record: %s is for a command, not with -p (then: strata view FILE)\n",
                     record.view ? "--view" : "--no-children");
        return 2;
      }
      if (frequency_hz > 0) record.interval_ms = 1000.0 / frequency_hz;
      if (call_graph == "fp") record.features += std::string(record.features.empty() ? "" : ",") + "framepointers";
      record.symbolicate = !no_symbolicate;
      record.flight_recorder = !no_flight_recorder;
      return AttachRecord(attach_pids, record);
    }
    if (command.empty()) {
      std::fprintf(stderr, "strata record: no command given\n%s", record_command->help().c_str());
      return 2;
    }
    if (command[0].size() > 1 && command[0][0] == '-') {
      // An option this command does not know, before the command: never run as a program.
      const std::string option = command[0].substr(0, command[0].find('='));
      std::fprintf(stderr, "strata record: unknown option '%s'", TerminalSafe(option).c_str());
      if (const std::string nearest = NearestOption(*record_command, option); !nearest.empty()) {
        std::fprintf(stderr, "; did you mean '%s'?", nearest.c_str());
      }
      std::fprintf(stderr, "\nUsage: strata record [OPTIONS] -- CMD [ARGS...]\n");
      return 2;
    }
    if (frequency_hz > 0) {
      if (record_command->count("--interval") > 0) {
        std::fprintf(stderr, "strata record: give -F/--frequency or -i/--interval, not both\n");
        return 2;
      }
      record.interval_ms = 1000.0 / frequency_hz;
    }
    if (call_graph == "fp") {
      record.features += std::string(record.features.empty() ? "" : ",") + "framepointers";
    }
    record.command = command;
    if (no_children && !follow.empty() && follow != "none") {
      std::fprintf(stderr, "strata record: --no-children is --follow none, not --follow %s\n", follow.c_str());
      return 2;
    }
    record.children = !no_children && follow != "none";
    record.exec_only = follow == "exec";
    record.symbolicate = !no_symbolicate;
    record.flight_recorder = !no_flight_recorder;
    record.view_open_browser = !record_no_open;
    return Record(record);
  }
  if (*symbolicate_command) return RunSymbolicate(symbolicate_input, symbolicate_output);
  if (*recover_command) return RunRecover(recover);
  if (*summary_command) {
    return RunSummary(summary_files, top, WeightOr(summary_weight, Weight::kWall), summary_filter,
                      summary_tree ? &summary_tree_options : nullptr);
  }
  if (*tree_command) {
    tree_options.weight = WeightOr(tree_weight, Weight::kWall);
    return RunTree(tree_input, tree_options, tree_filter);
  }
  if (*convert_command) {
    return RunConvert(convert_input, convert_format, convert_output, convert_weight, convert_filter);
  }
  if (*report_command) {
    report_options.weight = WeightOr(report_weight, Weight::kWall);
    return RunReport(report_input, report_output, report_options, report_filter);
  }
  if (*view_command) {
    view_options.open_browser = !view_no_open;
    if (!view_filter.empty()) {
      std::string note;
      const int status = FilteredProfileJson("view", view_options.profile, view_filter, &view_options.served_json, &note);
      if (status != 0) return status;
      std::fprintf(stderr, "strata view: %s\n", note.c_str());
    }
    return RunView(view_options);
  }
  return 2;
}

}  // namespace
}  // namespace cli
}  // namespace strata

int main(int argc, char** argv) {
  // `strata js FILE.js -o profile.json`: the SpiderMonkey runner (tools/js), a separate
  // binary because it links libmozjs.
  if (argc >= 2 && std::string(argv[1]) == "js") {
    return strata::tools::ExecStrataJs(argc - 1, argv + 1);
  }
  return strata::cli::Main(argc, argv);
}
