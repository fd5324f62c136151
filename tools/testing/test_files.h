// Small file helpers for tests: a whole file as text, a directory's entries.
// Thread-compatible; not for signal handlers (they allocate).
#ifndef STRATA_TOOLS_TESTING_TEST_FILES_H_
#define STRATA_TOOLS_TESTING_TEST_FILES_H_

#include <optional>
#include <string>
#include <vector>

namespace strata {
namespace testing {

// The whole file at `path`; empty when it cannot be read.
std::string ReadTextFile(const std::string& path);

// The names in directory `path` (without "." and ".."), in readdir order; nullopt when it
// cannot be opened.
std::optional<std::vector<std::string>> ListDirectory(const std::string& path);

}  // namespace testing
}  // namespace strata

#endif  // STRATA_TOOLS_TESTING_TEST_FILES_H_
