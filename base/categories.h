// Profile categories: the coloured bands of the front-end's activity graph. Labels, markers
// and frames carry one; a frame without one inherits its caller's.
//
// The list is fixed (both tiers write the same meta.categories); append, never renumber.
//
// Thread safety: constants. Async-signal safety: yes.
#ifndef STRATA_BASE_CATEGORIES_H_
#define STRATA_BASE_CATEGORIES_H_

#include <cstdint>

namespace strata {

// X(enumerator, name shown, colour). "Other" must stay first and grey: the front-end's
// default category for frames without one.
#define STRATA_FOR_EACH_CATEGORY(X)            \
  X(kOther, "Other", "grey")                   \
  X(kIdle, "Idle", "transparent")              \
  X(kStartup, "Startup", "lightblue")          \
  X(kIo, "IO", "green")                        \
  X(kNetwork, "Network", "blue")               \
  X(kGraphics, "Graphics", "magenta")          \
  X(kLayout, "Layout", "purple")               \
  X(kJavaScript, "JavaScript", "yellow")       \
  X(kGc, "GC / CC", "orange")                  \
  X(kMemory, "Memory", "brown")                \
  X(kProfiler, "Profiler", "lightred")         \
  X(kApplication, "Application", "darkgrey")

enum class Category : uint8_t {
#define STRATA_CATEGORY_ENUMERATOR(enumerator, name, color) enumerator,
  STRATA_FOR_EACH_CATEGORY(STRATA_CATEGORY_ENUMERATOR)
#undef STRATA_CATEGORY_ENUMERATOR
      kCount
};

// Arrays, not pointers: a table of pointers costs the library a dynamic relocation each.
struct CategoryInfo {
  char name[12];
  char color[12];
};

inline constexpr CategoryInfo kCategoryInfos[] = {
#define STRATA_CATEGORY_INFO(enumerator, name, color) {name, color},
    STRATA_FOR_EACH_CATEGORY(STRATA_CATEGORY_INFO)
#undef STRATA_CATEGORY_INFO
};

}  // namespace strata

#endif  // STRATA_BASE_CATEGORIES_H_
