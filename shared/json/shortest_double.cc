#include "shared/json/shortest_double.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rapidjson/internal/dtoa.h"

namespace strata {
namespace {

int DecimalDigits(int value) { return value >= 100 ? 3 : value >= 10 ? 2 : 1; }

// The correctly rounded `precision`-digit decimal of `value` (> 0) as digits and exponent
// (value ~ digits * 10^exponent), from printf's exact conversion. The radix character of
// the current locale is skipped, not assumed.
void RoundedDigits(double value, int precision, char* digits, int* count, int* exponent) {
  char text[48];
  snprintf(text, sizeof(text), "%.*e", precision - 1, value);
  *count = 0;
  const char* p = text;
  for (; *p && *p != 'e'; ++p) {
    if (*p >= '0' && *p <= '9') digits[(*count)++] = *p;
  }
  const int scientific_exponent = *p == 'e' ? static_cast<int>(strtol(p + 1, nullptr, 10)) : 0;
  *exponent = scientific_exponent - (*count - 1);
}

// Whether digits * 10^exponent reads back as `value`. The text has no radix character, so
// strtod's result does not depend on the locale.
bool ReadsBackAs(double value, const char* digits, int count, int exponent) {
  char text[48];
  std::memcpy(text, digits, static_cast<size_t>(count));
  snprintf(text + count, sizeof(text) - static_cast<size_t>(count), "e%d", exponent);
  return strtod(text, nullptr) == value;
}

// Grisu2 is fast and its digits always read back as the value, but when it needs 16 or 17
// of them they are sometimes not the shortest (2259624.5277030004 for 2259624.527703) or not
// the closest (0.30000000000000007 for 0.1 + 0.2). Then: the shortest correctly rounded
// decimal that reads back, which is what std::to_chars writes (the closest decimal of a
// given length reads back whenever any decimal of that length does).
void ExactShortestDigits(double value, char* digits, int* count, int* exponent) {
  for (int precision = 15; precision <= 17; ++precision) {
    char candidate[24];
    int candidate_count = 0, candidate_exponent = 0;
    RoundedDigits(value, precision, candidate, &candidate_count, &candidate_exponent);
    if (candidate_count != precision) return;  // Unexpected text: keep Grisu2's digits.
    if (precision == 17 || ReadsBackAs(value, candidate, candidate_count, candidate_exponent)) {
      std::memcpy(digits, candidate, static_cast<size_t>(candidate_count));
      *count = candidate_count;
      *exponent = candidate_exponent;
      return;
    }
  }
}

}  // namespace

char* FormatRoundTripDouble(double value, char* out) {
  if (!std::isfinite(value)) {
    std::memcpy(out, "null", 4);
    return out + 4;
  }
  if (std::signbit(value)) {
    *out++ = '-';
    value = -value;
  }
  if (value == 0) {
    *out++ = '0';
    return out;
  }
  // value = digits * 10^exponent, digits without leading or trailing zeros.
  char digits[24];
  int count = 0, exponent = 0;
  rapidjson::internal::Grisu2(value, digits, &count, &exponent);
  if (count > 15) ExactShortestDigits(value, digits, &count, &exponent);
  while (count > 1 && digits[count - 1] == '0') {
    --count;
    ++exponent;
  }
  const int point = count + exponent;  // Digits before the decimal point in the fixed form.

  const int fixed_length = point >= count ? point : point > 0 ? count + 1 : 2 - point + count;
  const int scientific_exponent = point - 1;
  const int exponent_magnitude = scientific_exponent < 0 ? -scientific_exponent : scientific_exponent;
  const int scientific_length = count + (count > 1 ? 1 : 0) + 2 +
                                (exponent_magnitude < 10 ? 2 : DecimalDigits(exponent_magnitude));

  if (fixed_length <= scientific_length) {
    if (point >= count) {  // 1200
      std::memcpy(out, digits, static_cast<size_t>(count));
      out += count;
      std::memset(out, '0', static_cast<size_t>(point - count));
      return out + (point - count);
    }
    if (point > 0) {  // 12.5
      std::memcpy(out, digits, static_cast<size_t>(point));
      out += point;
      *out++ = '.';
      std::memcpy(out, digits + point, static_cast<size_t>(count - point));
      return out + (count - point);
    }
    *out++ = '0';  // 0.0125
    *out++ = '.';
    std::memset(out, '0', static_cast<size_t>(-point));
    out += -point;
    std::memcpy(out, digits, static_cast<size_t>(count));
    return out + count;
  }
  // 1.25e+21, 5e-324
  *out++ = digits[0];
  if (count > 1) {
    *out++ = '.';
    std::memcpy(out, digits + 1, static_cast<size_t>(count - 1));
    out += count - 1;
  }
  *out++ = 'e';
  *out++ = scientific_exponent < 0 ? '-' : '+';
  if (exponent_magnitude < 10) *out++ = '0';
  char reversed[3];
  int length = 0;
  for (int rest = exponent_magnitude; length == 0 || rest > 0; rest /= 10) {
    reversed[length++] = static_cast<char>('0' + rest % 10);
  }
  while (length > 0) *out++ = reversed[--length];
  return out;
}

}  // namespace strata
