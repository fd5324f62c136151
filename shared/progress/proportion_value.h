// ProportionValue: a proportion from 0 to 1 (0% to 100%) in fixed point, after Firefox's
// ProportionValue. 1.0 is 2^30, so values and the product of two values fit in integers;
// arithmetic is integer arithmetic: 0 and 1 are exact, a sum of parts made by SplitPoint()
// is exactly the whole, and nothing drifts the way sums of doubles do.
//
// An invalid value (from a ratio with a zero denominator, a double outside [0, 1], a sum
// over 1 or a difference under 0) stays invalid through arithmetic and compares greater than
// every valid value.
//
//   ProportionValue half = ProportionValue::FromRatio(1, 2);
//   ProportionValue third = ProportionValue::SplitPoint(ProportionValue::Zero(),
//                                                       ProportionValue::One(), 1, 3);
//   double d = (half * third).ToDouble();  // ~0.1666
//
// Thread safety: a value type (4 bytes, std::atomic<ProportionValue> is lock-free).
// Async-signal safety: yes.
#ifndef STRATA_SHARED_PROGRESS_PROPORTION_VALUE_H_
#define STRATA_SHARED_PROGRESS_PROPORTION_VALUE_H_

#include <cstdint>
#include <limits>

namespace strata {

class ProportionValue {
 public:
  using Underlying = uint32_t;
  static constexpr int kFractionBits = 30;
  static constexpr Underlying kOneUnderlying = Underlying{1} << kFractionBits;
  static constexpr Underlying kInvalidUnderlying = std::numeric_limits<Underlying>::max();

  // 0.
  constexpr ProportionValue() = default;
  // The nearest representable value; NaN and values outside [0, 1] are invalid.
  explicit constexpr ProportionValue(double value) : value_(FromDouble(value)) {}

  static constexpr ProportionValue Zero() { return ProportionValue(); }
  static constexpr ProportionValue One() { return FromUnderlying(kOneUnderlying); }
  static constexpr ProportionValue Invalid() { return FromUnderlying(kInvalidUnderlying); }
  // Any underlying value above kOneUnderlying is invalid.
  static constexpr ProportionValue FromUnderlying(Underlying value) {
    ProportionValue p;
    p.value_ = value > kOneUnderlying ? kInvalidUnderlying : value;
    return p;
  }
  // numerator / denominator, rounded to the nearest; exact at 0 and at 1. Invalid when
  // denominator is 0 or numerator > denominator.
  static constexpr ProportionValue FromRatio(uint64_t numerator, uint64_t denominator) {
    if (denominator == 0 || numerator > denominator) return Invalid();
    const unsigned __int128 scaled =
        (static_cast<unsigned __int128>(numerator) << kFractionBits) + denominator / 2;
    return FromUnderlying(static_cast<Underlying>(scaled / denominator));
  }
  // The boundary `index` of `count` equal parts of [from, to] (from <= to): from at 0, to
  // exactly at count, never decreasing with index, so consecutive parts tile the range with
  // no gap or overlap. Invalid for index > count, count == 0, from > to or invalid bounds.
  static constexpr ProportionValue SplitPoint(ProportionValue from, ProportionValue to,
                                              uint64_t index, uint64_t count) {
    if (count == 0 || index > count || !from.IsValid() || !to.IsValid() || from > to) {
      return Invalid();
    }
    const unsigned __int128 width = to.value_ - from.value_;
    return FromUnderlying(from.value_ + static_cast<Underlying>(width * index / count));
  }
  // from + (to - from) * t, for from <= to (otherwise invalid).
  static constexpr ProportionValue Interpolate(ProportionValue from, ProportionValue to,
                                               ProportionValue t) {
    if (from > to) return Invalid();
    return from + (to - from) * t;
  }

  constexpr bool IsValid() const { return value_ != kInvalidUnderlying; }
  constexpr bool IsInvalid() const { return value_ == kInvalidUnderlying; }
  constexpr bool IsExactlyZero() const { return value_ == 0; }
  constexpr bool IsExactlyOne() const { return value_ == kOneUnderlying; }

  constexpr Underlying ToUnderlying() const { return value_; }
  // NaN when invalid.
  constexpr double ToDouble() const {
    return IsValid() ? static_cast<double>(value_) / kOneUnderlying
                     : std::numeric_limits<double>::quiet_NaN();
  }

  // Invalid when an operand is invalid or the result leaves [0, 1].
  friend constexpr ProportionValue operator+(ProportionValue a, ProportionValue b) {
    if (!a.IsValid() || !b.IsValid()) return Invalid();
    return FromUnderlying(a.value_ + b.value_);  // At most 2^31: no overflow.
  }
  friend constexpr ProportionValue operator-(ProportionValue a, ProportionValue b) {
    if (!a.IsValid() || !b.IsValid() || a.value_ < b.value_) return Invalid();
    return FromUnderlying(a.value_ - b.value_);
  }
  // Rounded to the nearest; exact when either side is 0 or 1.
  friend constexpr ProportionValue operator*(ProportionValue a, ProportionValue b) {
    if (!a.IsValid() || !b.IsValid()) return Invalid();
    const uint64_t product = uint64_t{a.value_} * b.value_;
    return FromUnderlying(
        static_cast<Underlying>((product + (uint64_t{1} << (kFractionBits - 1))) >> kFractionBits));
  }

  friend constexpr bool operator==(ProportionValue a, ProportionValue b) {
    return a.value_ == b.value_;
  }
  friend constexpr bool operator!=(ProportionValue a, ProportionValue b) {
    return a.value_ != b.value_;
  }
  friend constexpr bool operator<(ProportionValue a, ProportionValue b) {
    return a.value_ < b.value_;
  }
  friend constexpr bool operator<=(ProportionValue a, ProportionValue b) {
    return a.value_ <= b.value_;
  }
  friend constexpr bool operator>(ProportionValue a, ProportionValue b) {
    return a.value_ > b.value_;
  }
  friend constexpr bool operator>=(ProportionValue a, ProportionValue b) {
    return a.value_ >= b.value_;
  }

 private:
  static constexpr Underlying FromDouble(double value) {
    // NaN fails both comparisons.
    if (!(value >= 0.0 && value <= 1.0)) return kInvalidUnderlying;
    return static_cast<Underlying>(value * kOneUnderlying + 0.5);
  }

  Underlying value_ = 0;
};

}  // namespace strata

#endif  // STRATA_SHARED_PROGRESS_PROPORTION_VALUE_H_
