// The text of a double that reads back as the same double, in the style of std::to_chars
// without a format ("1", "0.5", "1e+21", "1.5e-07"): for JSON numbers.
//
// Why not std::to_chars(double): libstdc++ implements it with Ryu tables (its
// floating_to_chars.o is 171 KB), which would push libstrata_base.so, that links libstdc++
// statically to stay out of a C program's start-up (docs/benchmarks.md), past its size
// target. This uses Grisu2 (header-only RapidJSON's digit generator, a few KB): the digits
// always read back as the same double; they are the shortest such digits in all but about
// 0.1 % of values, where there is one digit more than std::to_chars writes.
//
// Thread safety: a pure function. Async-signal safety: yes (no allocation, no locale).
#ifndef STRATA_SHARED_JSON_SHORTEST_DOUBLE_H_
#define STRATA_SHARED_JSON_SHORTEST_DOUBLE_H_

#include <cstddef>

namespace strata {

// Room FormatRoundTripDouble needs: sign, 17 digits, point, zeros of the fixed form that are
// shorter than the exponent form, "e-324".
constexpr size_t kMaxRoundTripDoubleChars = 32;

// Writes `value` (finite) at `out`, which has room for kMaxRoundTripDoubleChars; returns
// the end. The fixed form is used unless the exponent form is shorter (as std::to_chars
// does); -0 is written "-0". Non-finite values are the caller's business (JSON has no token
// for them): they are written "null".
char* FormatRoundTripDouble(double value, char* out);

}  // namespace strata

#endif  // STRATA_SHARED_JSON_SHORTEST_DOUBLE_H_
