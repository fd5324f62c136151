// Names for just-in-time compiled code from the perf map a runtime writes (issue 34): V8 and
// Node (`--perf-basic-prof`), Python 3.12+ (`-X perf`), LuaJIT, .NET and Java agents write
// /tmp/perf-<pid>.map, one line per code object: "START SIZE name", START and SIZE in hex
// (with or without 0x). Later lines win over earlier ones for the same range (code moved or
// recompiled).
//
// PerfMapSymbolizer wraps another symbolizer: addresses it leaves without a function and
// outside every module are looked up in the map, and named with the map's module name
// ("perf-<pid>.map", or "jit-<pid>.dump" when the names come from a jitdump only).
//
// jitdump files (perf's format, tools/perf/util/jitdump.h: Node/V8 `--perf-prof`, Python
// 3.12+ `-X perf_jit`, .NET, Java agents) are read too: a header ("JiTD", its size), then
// records {id, total_size, timestamp}: JIT_CODE_LOAD (pid, tid, vma, code_addr, code_size,
// code_index, name, code bytes) names [vma, vma + code_size); JIT_CODE_MOVE gives the code
// of an earlier load's index a new address; JIT_CODE_CLOSE ends the file; other records are
// skipped. A record cut short ends the reading (a runtime killed while writing). Only this
// machine's byte order is read. Where: /tmp (.NET's default, Python's), then the current
// directory (V8 writes it in its working directory), jit-<pid>.dump; the first one found.
//
// Read with plain POSIX calls (no iostreams), by `strata symbolicate`/`record` and by the
// capture in the profiled process (shared/profile/profile_capture.cc), which runs it at a
// save, never in a signal handler.
//
// Thread safety: thread-compatible. Memory: the map's entries and names, held until the
// object is destroyed (names handed out by Symbolize point into it).
#ifndef STRATA_SHARED_SYMBOLS_PERF_MAP_H_
#define STRATA_SHARED_SYMBOLS_PERF_MAP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shared/symbols/symbolizer.h"

namespace strata {

class PerfMap {
 public:
  struct Entry {
    uint64_t start = 0;
    uint64_t size = 0;
    std::string name;
  };
  // Reads `path`; an unreadable file gives an empty map, malformed lines are skipped.
  static PerfMap Read(const std::string& path);
  // Reads the jitdump file `path`; unreadable or not a jitdump: an empty map.
  static PerfMap ReadJitDump(const std::string& path);
  // Process `pid`'s perf map and jitdump together (the jitdump's entries after the map's).
  static PerfMap ForProcess(int64_t pid);
  // The module name frames named from ForProcess(pid) carry: "perf-<pid>.map" when the
  // process has a perf map, else "jit-<pid>.dump".
  static std::string ModuleNameFor(int64_t pid);
  // /tmp/perf-<pid>.map, where runtimes write it.
  static std::string PathFor(int64_t pid);
  // Where jit-<pid>.dump may be, in the order they are tried.
  static std::vector<std::string> JitDumpPathsFor(int64_t pid);
  // A map from entries in the order they were written: later ones win over earlier ones
  // for the same addresses.
  static PerfMap FromEntries(std::vector<Entry> in_order);

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  // The entry covering `address`, or null. O(log n).
  const Entry* Find(uint64_t address) const;

 private:
  static std::vector<Entry> ReadLines(const std::string& path);
  static std::vector<Entry> ReadJitDumpRecords(const std::string& path);

  std::vector<Entry> entries_;  // Sorted by start, non-overlapping (later lines won).
};

class PerfMapSymbolizer : public Symbolizer {
 public:
  // `module_name`: what the result says the module is ("perf-1234.map").
  PerfMapSymbolizer(std::unique_ptr<Symbolizer> inner, PerfMap map, std::string module_name);
  void Symbolize(absl::Span<const uint64_t> addresses, SymbolizeResult* result) override;

 private:
  std::unique_ptr<Symbolizer> inner_;
  PerfMap map_;
  std::string module_name_;
};

}  // namespace strata

#endif  // STRATA_SHARED_SYMBOLS_PERF_MAP_H_
