// make_test_profile: writes the realistic test profile (test_profiles.h), or one of its
// broken variants, with the real writer and an atomic file write.
//
//   make_test_profile OUT.json                 the realistic profile
//   make_test_profile --variant=NAME OUT.json  a broken variant
//   make_test_profile --list                   "name code accepts-silently hangs" per line
#include <cstdio>
#include <string>

#include "shared/json/atomic_file.h"
#include "tests/format/test_profiles.h"

int main(int argc, char** argv) {
  std::string variant;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--list") {
      for (const strata::BrokenVariant& v : strata::BrokenVariants()) {
        printf("%s %s %s %s\n", v.name, v.checker_code,
               v.importer_accepts_silently ? "silent" : "loud", v.importer_hangs ? "hangs" : "-");
      }
      return 0;
    }
    if (arg.rfind("--variant=", 0) == 0) {
      variant = arg.substr(10);
    } else {
      out = arg;
    }
  }
  if (out.empty()) {
    fprintf(stderr, "usage: make_test_profile [--variant=NAME] OUT.json | --list\n");
    return 2;
  }
  std::string profile = strata::MakeRealisticProfile();
  if (!variant.empty()) {
    profile = strata::MakeBrokenVariant(profile, variant);
    if (profile.empty()) {
      fprintf(stderr, "unknown variant %s\n", variant.c_str());
      return 2;
    }
  }
  strata::AtomicJsonFile file(out);
  file.writer().Splice(profile);
  if (!file.Commit()) {
    fprintf(stderr, "make_test_profile: %s\n", file.error().c_str());
    return 1;
  }
  return 0;
}
