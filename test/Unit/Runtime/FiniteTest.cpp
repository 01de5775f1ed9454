// Finding NaN and infinity in loaded values (data files, initial values,
// trained values before they are written): every float type, the index and
// the kind of the first bad element.

#include "parallax/Runtime/Finite.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

using namespace parallax::rt;

namespace {

TEST(Finite, FindsTheFirstNanOrInfinityOfEveryFloatType) {
  std::vector<float> f(10000, 1.0f);
  EXPECT_EQ(firstNonFinite(f.data(), DType::F32, (int64_t)f.size()), -1);
  f[9000] = INFINITY;
  f[5000] = std::nanf("");
  EXPECT_EQ(firstNonFinite(f.data(), DType::F32, (int64_t)f.size()), 5000);
  // The largest finite float is finite.
  f[5000] = f[9000] = 3.4028235e38f;
  EXPECT_EQ(firstNonFinite(f.data(), DType::F32, (int64_t)f.size()), -1);

  std::vector<double> d{0.0, -1e308, -INFINITY};
  EXPECT_EQ(firstNonFinite(d.data(), DType::F64, 3), 2);
  // f16: 0x7c00 inf, 0x7e00 NaN, 0x7bff the largest finite; bf16: 0x7f80 inf.
  std::vector<uint16_t> h{0x3c00, 0x7bff, 0xfc00};
  EXPECT_EQ(firstNonFinite(h.data(), DType::F16, 3), 2);
  EXPECT_EQ(firstNonFinite(h.data(), DType::F16, 2), -1);
  std::vector<uint16_t> b{0x3f80, 0x7f7f, 0x7fc0};
  EXPECT_EQ(firstNonFinite(b.data(), DType::BF16, 3), 2);
  // Integers are always finite, whatever their bits.
  std::vector<int32_t> i{0x7f800000, -1};
  EXPECT_EQ(firstNonFinite(i.data(), DType::I32, 2), -1);
}

TEST(Finite, DescribesTheValueAndItsIndex) {
  std::vector<float> f(6, 0.0f);
  EXPECT_EQ(describeNonFinite(f.data(), DType::F32, {2, 3}), "");
  f[5] = -INFINITY;
  EXPECT_EQ(describeNonFinite(f.data(), DType::F32, {2, 3}),
            "-inf at index [1, 2] (element 5)");
  f[4] = INFINITY;
  EXPECT_EQ(describeNonFinite(f.data(), DType::F32, {2, 3}),
            "inf at index [1, 1] (element 4)");
  std::vector<uint16_t> h{0x7e00};
  EXPECT_EQ(describeNonFinite(h.data(), DType::F16, {1}), "NaN at index [0] (element 0)");
}

} // namespace
