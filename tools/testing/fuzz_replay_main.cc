// main() that turns a libFuzzer target into an ordinary test (built with the project's gcc
// toolchain, no libFuzzer needed): every file of the directories and files named on the
// command line is fed once to LLVMFuzzerTestOneInput, in name order.
//
//   fuzz_replay <corpus dir or file>...
//
// Exit status 0 when every input ran (the target aborts on a failed check, and a sanitizer
// build reports memory errors, either of which fails the test); 1 when an argument cannot be
// read or the corpus holds no input at all (a replay of nothing proves nothing). Relative
// paths are taken from the working directory, which under `bazel test` is the runfiles root.
//
// Thread safety: a program's main. LLVMFuzzerInitialize is called first when the target
// defines it, as libFuzzer does.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

// Appends the regular files of `path` (itself, or its entries when it is a directory).
bool CollectInputs(const std::string& path, std::vector<std::string>* inputs) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "fuzz_replay: %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    inputs->push_back(path);
    return true;
  }
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) {
    std::fprintf(stderr, "fuzz_replay: %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  std::vector<std::string> found;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string child = path + "/" + name;
    struct stat child_st {};
    if (stat(child.c_str(), &child_st) == 0 && S_ISREG(child_st.st_mode)) found.push_back(child);
  }
  closedir(dir);
  std::sort(found.begin(), found.end());
  inputs->insert(inputs->end(), found.begin(), found.end());
  return true;
}

bool ReadWholeFile(const std::string& path, std::vector<uint8_t>* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  bytes->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <corpus dir or file>...\n", argv[0]);
    return 1;
  }
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!CollectInputs(argv[i], &inputs)) return 1;
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "fuzz_replay: no inputs in the corpus; nothing was tested\n");
    return 1;
  }
  size_t total_bytes = 0;
  std::vector<uint8_t> bytes;
  for (const std::string& input : inputs) {
    if (!ReadWholeFile(input, &bytes)) {
      std::fprintf(stderr, "fuzz_replay: cannot read %s\n", input.c_str());
      return 1;
    }
    total_bytes += bytes.size();
    // A copy of exactly the input's size, so that a sanitizer build sees any overrun.
    std::vector<uint8_t> exact(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(exact.data(), exact.size());
  }
  std::printf("fuzz_replay: %zu inputs (%zu bytes) ran without a failed check\n", inputs.size(),
              total_bytes);
  return 0;
}
