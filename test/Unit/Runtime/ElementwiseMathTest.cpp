// Tests of the element values the CPU and GPU element-wise kernels share
// (lib/Runtime/Kernels/ElementwiseMath.h), on the host: wrapping integer
// arithmetic, division and modulo semantics, integer powers, saturating
// casts, NaN handling, and the dropout draw against Random.h.
#include "../../../lib/Runtime/Kernels/ElementwiseMath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

using namespace parallax::rt;
namespace ew = parallax::rt::ew;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

TEST(ElementwiseMath, IntegerArithmeticWraps) {
  EXPECT_EQ(ew::Add{}(int8_t(100), int8_t(100)), int8_t(-56));
  EXPECT_EQ(ew::Sub{}(int8_t(-100), int8_t(100)), int8_t(56));
  EXPECT_EQ(ew::Mul{}(int8_t(127), int8_t(2)), int8_t(-2));
  EXPECT_EQ(ew::Mul{}(uint8_t(200), uint8_t(200)), uint8_t(64));
  EXPECT_EQ(ew::Mul{}(int16_t(-32768), int16_t(-1)), int16_t(-32768));
  EXPECT_EQ(ew::Neg{}(std::numeric_limits<int32_t>::min()), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(ew::Abs{}(std::numeric_limits<int64_t>::min()), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ew::Abs{}(int32_t(-5)), 5);
  EXPECT_EQ(ew::Abs{}(uint8_t(250)), 250);
  EXPECT_EQ(ew::Add{}(1.5f, 2.25f), 3.75f);
}

TEST(ElementwiseMath, DivisionTruncatesTowardZero) {
  EXPECT_EQ(ew::Div{}(7, 2), 3);
  EXPECT_EQ(ew::Div{}(-7, 2), -3);
  EXPECT_EQ(ew::Div{}(7, -2), -3);
  EXPECT_EQ(ew::Div{}(-7, -2), 3);
  EXPECT_EQ(ew::Div{}(std::numeric_limits<int32_t>::min(), -1),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(ew::Div{}(1.0, 4.0), 0.25);
  EXPECT_TRUE(ew::divisionFails(int32_t(0)));
  EXPECT_TRUE(ew::divisionFails(uint8_t(0)));
  EXPECT_FALSE(ew::divisionFails(int32_t(-1)));
  EXPECT_FALSE(ew::divisionFails(0.0f)); // float division by 0 is inf/NaN
}

TEST(ElementwiseMath, ModFollowsTheDivisorOrTheDividend) {
  // Python's % (sign of the divisor).
  EXPECT_EQ(ew::Mod<false>{}(7, 3), 1);
  EXPECT_EQ(ew::Mod<false>{}(-7, 3), 2);
  EXPECT_EQ(ew::Mod<false>{}(7, -3), -2);
  EXPECT_EQ(ew::Mod<false>{}(-7, -3), -1);
  EXPECT_EQ(ew::Mod<false>{}(std::numeric_limits<int32_t>::min(), -1), 0);
  EXPECT_EQ(ew::Mod<false>{}(uint8_t(250), uint8_t(7)), 5);
  EXPECT_DOUBLE_EQ(ew::Mod<false>{}(-7.5, 2.0), 0.5);
  EXPECT_DOUBLE_EQ(ew::Mod<false>{}(7.5, -2.0), -0.5);
  // C's fmod (sign of the dividend).
  EXPECT_EQ(ew::Mod<true>{}(-7, 3), -1);
  EXPECT_EQ(ew::Mod<true>{}(7, -3), 1);
  EXPECT_DOUBLE_EQ(ew::Mod<true>{}(-7.5, 2.0), -1.5);
  EXPECT_FLOAT_EQ(ew::Mod<true>{}(7.5f, -2.0f), 1.5f);
}

TEST(ElementwiseMath, MaxMinPropagateNaN) {
  EXPECT_TRUE(std::isnan(ew::Max{}(kNaN, 1.0)));
  EXPECT_TRUE(std::isnan(ew::Max{}(1.0, kNaN)));
  EXPECT_TRUE(std::isnan(ew::Min{}(kNaN, 1.0)));
  EXPECT_TRUE(std::isnan(ew::Min{}(1.0, kNaN)));
  EXPECT_EQ(ew::Max{}(-1, 2), 2);
  EXPECT_EQ(ew::Min{}(-1, 2), -1);
}

TEST(ElementwiseMath, Pow) {
  EXPECT_EQ(ew::Pow{}(int32_t(2), int32_t(10)), 1024);
  EXPECT_EQ(ew::Pow{}(int32_t(-3), int32_t(3)), -27);
  EXPECT_EQ(ew::Pow{}(int32_t(5), int32_t(0)), 1);
  EXPECT_EQ(ew::Pow{}(int32_t(1), int32_t(-4)), 1);
  EXPECT_EQ(ew::Pow{}(int32_t(-1), int32_t(-3)), -1);
  EXPECT_EQ(ew::Pow{}(int32_t(-1), int32_t(-4)), 1);
  EXPECT_EQ(ew::Pow{}(int32_t(7), int32_t(-1)), 0);
  EXPECT_EQ(ew::Pow{}(int8_t(2), int8_t(7)), int8_t(-128)); // wraps
  // A float exponent of an integer base truncates toward 0.
  EXPECT_EQ(ew::Pow{}(int32_t(2), 3.9f), 8);
  EXPECT_EQ(ew::Pow{}(int32_t(2), -0.5f), 1);
  EXPECT_TRUE(ew::powFails(int32_t(0), int32_t(-1)));
  EXPECT_TRUE(ew::powFails(int64_t(0), -1.5));
  EXPECT_FALSE(ew::powFails(int32_t(0), -0.5)); // truncates to 0: 0^0 = 1
  EXPECT_FALSE(ew::powFails(0.0, -1.0));        // inf, not an error
  EXPECT_EQ(ew::Pow{}(1.5, int64_t(2)), 2.25);
  EXPECT_EQ(ew::Square{}(3.0f, 2.0f), 9.0f);
  EXPECT_EQ(ew::Square{}(int8_t(16), int8_t(2)), int8_t(0));
}

TEST(ElementwiseMath, ComparisonsAndBool) {
  EXPECT_TRUE(ew::Equal{}(-0.0, 0.0));
  EXPECT_FALSE(ew::Equal{}(kNaN, kNaN));
  EXPECT_TRUE(ew::EqualBool{}(2, 1)); // any nonzero byte is true
  EXPECT_FALSE(ew::EqualBool{}(0, 1));
  EXPECT_TRUE(ew::Less{}(-1, 0));
  EXPECT_FALSE(ew::Greater{}(kNaN, 0.0));
  EXPECT_EQ(ew::Not{}(0), 1);
  EXPECT_EQ(ew::Not{}(1), 0);
}

TEST(ElementwiseMath, UnaryFunctions) {
  EXPECT_EQ(ew::Relu{}(-2.0f), 0.0f);
  EXPECT_EQ(ew::Relu{}(int8_t(-2)), 0);
  EXPECT_EQ(ew::Relu{}(3), 3);
  EXPECT_EQ(ew::Sign{}(-3.5), -1.0);
  EXPECT_EQ(ew::Sign{}(int16_t(-7)), -1);
  EXPECT_EQ(ew::Sign{}(uint8_t(7)), 1);
  EXPECT_EQ(ew::Sign{}(uint8_t(0)), 0);
  EXPECT_TRUE(std::signbit(ew::Sign{}(-0.0)));
  EXPECT_TRUE(std::isnan(ew::Sign{}(kNaN)));
  EXPECT_EQ(ew::Round{}(2.5), 2.0); // halves to even
  EXPECT_EQ(ew::Round{}(3.5f), 4.0f);
  EXPECT_EQ(ew::Round{}(-0.5), -0.0);
  EXPECT_EQ(ew::Floor{}(-1.5f), -2.0f);
  EXPECT_EQ(ew::Ceil{}(-1.5), -1.0);
  EXPECT_EQ(ew::Reciprocal{}(4.0f), 0.25f);
  EXPECT_EQ(ew::Sqrt{}(9.0), 3.0);
  EXPECT_EQ(ew::Exp{}(0.0f), 1.0f);
  EXPECT_DOUBLE_EQ(ew::Log{}(std::exp(2.0)), 2.0);
  EXPECT_DOUBLE_EQ(ew::Tanh{}(0.5), std::tanh(0.5));
  EXPECT_DOUBLE_EQ(ew::Erf{}(0.5), std::erf(0.5));
  EXPECT_FLOAT_EQ(ew::Atanh{}(0.5f), std::atanh(0.5f));
  // Sigmoid is stable at both ends.
  EXPECT_EQ(ew::Sigmoid{}(1000.0), 1.0);
  EXPECT_EQ(ew::Sigmoid{}(-1000.0), 0.0);
  EXPECT_DOUBLE_EQ(ew::Sigmoid{}(-40.0), std::exp(-40.0) / (1 + std::exp(-40.0)));
  EXPECT_EQ(ew::Sigmoid{}(0.0f), 0.5f);
  EXPECT_TRUE(std::isnan(ew::Sigmoid{}(kNaN)));
}

TEST(ElementwiseMath, LeakyReluAndClip) {
  ew::LeakyRelu<float> lr{0.1f};
  EXPECT_EQ(lr(2.0f), 2.0f);
  EXPECT_FLOAT_EQ(lr(-2.0f), -0.2f);
  EXPECT_EQ(lr(0.0f), 0.0f);
  ew::Clip<double> c{-1.0, 2.0};
  EXPECT_EQ(c(-3.0), -1.0);
  EXPECT_EQ(c(3.0), 2.0);
  EXPECT_EQ(c(0.5), 0.5);
  EXPECT_TRUE(std::isnan(c(kNaN)));
  ew::Clip<int32_t> ci{-4, 4};
  EXPECT_EQ(ci(-10), -4);
  EXPECT_EQ(ci(10), 4);
  ew::Clip<double> inverted{2.0, -2.0}; // min > max: every value is max
  EXPECT_EQ(inverted(0.0), -2.0);
}

TEST(ElementwiseMath, SaturatingCasts) {
  EXPECT_EQ(ew::saturatingCast<int32_t>(3.9), 3);
  EXPECT_EQ(ew::saturatingCast<int32_t>(-3.9), -3);
  EXPECT_EQ(ew::saturatingCast<int32_t>(kNaN), 0);
  EXPECT_EQ(ew::saturatingCast<int32_t>(kInf), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(ew::saturatingCast<int32_t>(-kInf), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(ew::saturatingCast<int32_t>(2147483648.0), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(ew::saturatingCast<int32_t>(2147483647.0), 2147483647);
  EXPECT_EQ(ew::saturatingCast<int64_t>(1e19), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(ew::saturatingCast<int64_t>(-1e19), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ew::saturatingCast<int64_t>(9223372036854775808.0f),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(ew::saturatingCast<uint8_t>(255.9), 255);
  EXPECT_EQ(ew::saturatingCast<uint8_t>(256.0), 255);
  EXPECT_EQ(ew::saturatingCast<uint8_t>(-0.9), 0);
  EXPECT_EQ(ew::saturatingCast<uint8_t>(-5.0), 0);
  EXPECT_EQ(ew::saturatingCast<int8_t>(-128.5), -128);
  EXPECT_EQ(ew::saturatingCast<int8_t>(-129.0), -128);
}

TEST(ElementwiseMath, CastRules) {
  // -> bool is value != 0 (NaN is true); bool -> number is 0 or 1.
  EXPECT_EQ((ew::Cast<ew::BoolT, float>{}(0.25f)), 1);
  EXPECT_EQ((ew::Cast<ew::BoolT, float>{}(-0.0f)), 0);
  EXPECT_EQ((ew::Cast<ew::BoolT, double>{}(kNaN)), 1);
  EXPECT_EQ((ew::Cast<ew::BoolT, int32_t>{}(-7)), 1);
  EXPECT_EQ((ew::Cast<float, ew::BoolT>{}(uint8_t(1))), 1.0f);
  EXPECT_EQ((ew::Cast<int64_t, ew::BoolT>{}(uint8_t(2))), 1);
  // float -> int saturates and truncates.
  EXPECT_EQ((ew::Cast<int8_t, double>{}(300.0)), 127);
  EXPECT_EQ((ew::Cast<int32_t, float>{}(-3.7f)), -3);
  EXPECT_EQ((ew::Cast<uint8_t, float>{}(kNaN)), 0);
  // int -> narrower int wraps, -> wider preserves.
  EXPECT_EQ((ew::Cast<int8_t, int32_t>{}(300)), 44);
  EXPECT_EQ((ew::Cast<uint8_t, int32_t>{}(-1)), 255);
  EXPECT_EQ((ew::Cast<int16_t, int64_t>{}(65537)), 1);
  EXPECT_EQ((ew::Cast<int64_t, int8_t>{}(-5)), -5);
  EXPECT_EQ((ew::Cast<int32_t, uint8_t>{}(200)), 200);
  // Between floats: rounding to nearest.
  EXPECT_EQ((ew::Cast<float, double>{}(0.1)), 0.1f);
  EXPECT_EQ((ew::Cast<double, int64_t>{}(int64_t(1) << 60)), std::ldexp(1.0, 60));
}

TEST(ElementwiseMath, DropoutDrawsTheRandomStream) {
  const uint64_t key = streamKey(42, 3, 7);
  int kept = 0;
  for (uint64_t c = 0; c < 10000; ++c) {
    bool k = ew::dropoutKeep(key, c, 0.25f);
    EXPECT_EQ(k, uniformAt(key, c) >= 0.25f);
    kept += k;
  }
  EXPECT_NEAR(kept / 10000.0, 0.75, 0.02);
  // ratio 0 keeps everything, ratio 1 nothing (uniformAt < 1).
  for (uint64_t c = 0; c < 1000; ++c) {
    EXPECT_TRUE(ew::dropoutKeep(key, c, 0.0f));
    EXPECT_FALSE(ew::dropoutKeep(key, c, 1.0f));
  }
}

TEST(ElementwiseMath, DropoutCounterNumbersTheGlobalBatch) {
  // Samples outermost (run = whole tensor): counter = base + e.
  EXPECT_EQ(ew::dropoutCounter(5, 100, 40, 0), 45u);
  // [T, b, H] = [4, 3, 500] on rank 1 of 2 (offset 3, global batch 6):
  // element (t, s, h) is global element (t, 3 + s, h).
  const int64_t H = 500, b = 3, B = 6, off = 3;
  const uint64_t base = off * H, runStride = B * H;
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t s = 0; s < b; ++s)
      for (int64_t h : {int64_t(0), int64_t(17), H - 1}) {
        int64_t e = (t * b + s) * H + h;
        EXPECT_EQ(ew::dropoutCounter(e, b * H, base, runStride),
                  (uint64_t)((t * B + off + s) * H + h));
      }
  // An empty tensor never divides by its run of 0.
  EXPECT_EQ(ew::dropoutCounter(0, 0, 7, 0), 7u);
  // Scaling: kept values are divided, dropped ones are +0.
  EXPECT_EQ(ew::dropoutScale(3.0f, true, 0.5f), 6.0f);
  EXPECT_EQ(ew::dropoutScale(3.0, false, 0.5), 0.0);
  EXPECT_FALSE(std::signbit(ew::dropoutScale(-3.0, false, 0.5)));
  EXPECT_EQ(ew::dropoutScale(kInf, false, 0.0), 0.0);
  // A block of two of four heads (runs of 6 elements in runs of 12),
  // the second block: element 7 is run 1, element 1 of it.
  EXPECT_EQ(ew::dropoutWholeIndex(7, 6, 12, 6), 12 + 6 + 1);
  EXPECT_EQ(ew::dropoutWholeIndex(7, 0, 12, 6), 7);
}

} // namespace
