// gperf_count: counts samples in a gperftools CPU profile (CPUPROFILE=...), overall and per
// group of functions of one binary, so that the scenarios can compare each Strata worker
// thread with what gperftools took from the same thread's functions at the same requested rate.
//
// Usage: gperf_count PROFILE BINARY [GROUP=SYM[,SYM...]]...
//   SYM is a substring of a symbol name in BINARY's .symtab (mangled, e.g. "alpha_work_loop"
//   matches _Z15alpha_work_loopl).
// Output:
//   gperf samples=N period_us=P stacks=S
//   gperf group=GROUP samples=K
// A sample belongs to a group when any frame of its stack is in one of the group's functions
// (return addresses are looked up at address - 1, as pprof does).
//
// The profile format (gperftools' "legacy CPU profile", in native machine words): a header
// {0, 3, 0, period_us, 0}; records {count, depth, pc[depth]}; a trailer {0, 1, 0}; then the
// text of /proc/self/maps, which gives where BINARY was loaded.
#include <elf.h>
#include <limits.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace {

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "gperf_count: %s\n", message.c_str());
  std::exit(2);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot open " + path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct Range {
  uint64_t begin, end;  // File virtual addresses, [begin, end).
};

struct Group {
  std::string name;
  std::vector<std::string> symbols;
  std::vector<Range> ranges;
  uint64_t samples = 0;
};

struct Segment {
  uint64_t vaddr, offset, filesz;
};

struct Mapping {
  uint64_t start, end, offset;
};

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s PROFILE BINARY [GROUP=SYM[,SYM...]]...\n", argv[0]);
    return 2;
  }
  std::vector<Group> groups;
  for (int i = 3; i < argc; ++i) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    if (eq == std::string::npos) Fail("bad group (want GROUP=SYM,...): " + arg);
    Group g;
    g.name = arg.substr(0, eq);
    std::stringstream list(arg.substr(eq + 1));
    for (std::string sym; std::getline(list, sym, ',');) g.symbols.push_back(sym);
    groups.push_back(g);
  }

  // Symbols and load segments of the binary.
  const std::string binary = ReadFile(argv[2]);
  if (binary.size() < sizeof(Elf64_Ehdr) || std::memcmp(binary.data(), ELFMAG, SELFMAG) != 0 ||
      binary[EI_CLASS] != ELFCLASS64) {
    Fail(std::string(argv[2]) + " is not a 64-bit ELF file");
  }
  const auto* ehdr = reinterpret_cast<const Elf64_Ehdr*>(binary.data());
  std::vector<Segment> segments;
  for (int i = 0; i < ehdr->e_phnum; ++i) {
    const auto* ph = reinterpret_cast<const Elf64_Phdr*>(binary.data() + ehdr->e_phoff +
                                                         i * ehdr->e_phentsize);
    if (ph->p_type == PT_LOAD) segments.push_back({ph->p_vaddr, ph->p_offset, ph->p_filesz});
  }
  const auto* shdrs = reinterpret_cast<const Elf64_Shdr*>(binary.data() + ehdr->e_shoff);
  size_t symbols_found = 0;
  for (int i = 0; i < ehdr->e_shnum; ++i) {
    if (shdrs[i].sh_type != SHT_SYMTAB) continue;
    const Elf64_Shdr& strtab = shdrs[shdrs[i].sh_link];
    const char* names = binary.data() + strtab.sh_offset;
    size_t n = shdrs[i].sh_size / sizeof(Elf64_Sym);
    const auto* syms = reinterpret_cast<const Elf64_Sym*>(binary.data() + shdrs[i].sh_offset);
    for (size_t s = 0; s < n; ++s) {
      if (ELF64_ST_TYPE(syms[s].st_info) != STT_FUNC || syms[s].st_size == 0) continue;
      std::string name = names + syms[s].st_name;
      for (Group& g : groups) {
        for (const std::string& want : g.symbols) {
          if (name.find(want) != std::string::npos) {
            g.ranges.push_back({syms[s].st_value, syms[s].st_value + syms[s].st_size});
            ++symbols_found;
            break;
          }
        }
      }
    }
  }
  for (const Group& g : groups) {
    if (g.ranges.empty()) Fail("no function symbol for group " + g.name + " in " + argv[2]);
  }

  // The profile.
  const std::string profile = ReadFile(argv[1]);
  const auto* words = reinterpret_cast<const uint64_t*>(profile.data());
  const size_t nwords = profile.size() / sizeof(uint64_t);
  if (nwords < 5 || words[0] != 0 || words[1] != 3 || words[2] != 0 || words[4] != 0) {
    Fail(std::string(argv[1]) + " is not a gperftools CPU profile");
  }
  const uint64_t period_us = words[3];
  struct Record {
    uint64_t count;
    std::vector<uint64_t> pcs;
  };
  std::vector<Record> records;
  size_t pos = 5;
  for (;;) {
    if (pos + 2 > nwords) Fail("truncated profile (no trailer)");
    uint64_t count = words[pos], depth = words[pos + 1];
    if (pos + 2 + depth > nwords) Fail("truncated profile record");
    if (count == 0 && depth == 1 && words[pos + 2] == 0) {
      pos += 3;
      break;
    }
    records.push_back({count, std::vector<uint64_t>(words + pos + 2, words + pos + 2 + depth)});
    pos += 2 + depth;
  }

  // Where the binary was mapped (from the maps text after the trailer).
  const std::string real_binary = RealPath(argv[2]);
  std::vector<Mapping> mappings;
  std::stringstream maps(profile.substr(pos * sizeof(uint64_t)));
  for (std::string line; std::getline(maps, line);) {
    unsigned long long start, end, offset;
    char perms[8], path[PATH_MAX];
    path[0] = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %4095s", &start, &end, perms,
                    &offset, path) < 4) {
      continue;
    }
    std::string p = path;
    if (p.empty()) continue;
    if (p == real_binary || RealPath(p) == real_binary) mappings.push_back({start, end, offset});
  }
  if (mappings.empty()) {
    // Fall back to the file name (the binary may have been copied since the run).
    maps.clear();
    maps.str(profile.substr(pos * sizeof(uint64_t)));
    for (std::string line; std::getline(maps, line);) {
      unsigned long long start, end, offset;
      char perms[8], path[PATH_MAX];
      path[0] = 0;
      if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %4095s", &start, &end, perms,
                      &offset, path) == 5 &&
          BaseName(path) == BaseName(real_binary)) {
        mappings.push_back({start, end, offset});
      }
    }
  }
  if (mappings.empty()) Fail("the profile's maps do not list " + real_binary);

  auto to_vaddr = [&](uint64_t pc, uint64_t* vaddr) {
    for (const Mapping& m : mappings) {
      if (pc < m.start || pc >= m.end) continue;
      uint64_t file_offset = pc - m.start + m.offset;
      for (const Segment& s : segments) {
        if (file_offset >= s.offset && file_offset < s.offset + s.filesz) {
          *vaddr = file_offset - s.offset + s.vaddr;
          return true;
        }
      }
    }
    return false;
  };

  uint64_t total = 0;
  for (const Record& r : records) {
    total += r.count;
    for (Group& g : groups) {
      bool in_group = false;
      for (size_t i = 0; i < r.pcs.size() && !in_group; ++i) {
        uint64_t vaddr;
        if (!to_vaddr(i == 0 ? r.pcs[i] : r.pcs[i] - 1, &vaddr)) continue;
        for (const Range& range : g.ranges) {
          if (vaddr >= range.begin && vaddr < range.end) {
            in_group = true;
            break;
          }
        }
      }
      if (in_group) g.samples += r.count;
    }
  }
  std::printf("gperf samples=%llu period_us=%llu stacks=%zu\n",
              static_cast<unsigned long long>(total), static_cast<unsigned long long>(period_us),
              records.size());
  for (const Group& g : groups) {
    std::printf("gperf group=%s samples=%llu\n", g.name.c_str(),
                static_cast<unsigned long long>(g.samples));
  }
  return 0;
}
