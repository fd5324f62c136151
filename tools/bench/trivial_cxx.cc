// trivial_cxx: the smallest C++ program that uses libstdc++ (a std::string it cannot fold
// away), for tools/bench.sh's start-up row: process start-up with and without
// LD_PRELOAD=libstrata_base.so, the library inactive (no STRATA_STARTUP).
#include <string>

int main(int argc, char** argv) {
  const std::string name = argc > 0 ? argv[0] : "";
  return name.empty() ? 1 : 0;
}
