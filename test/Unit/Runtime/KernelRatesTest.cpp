//===- KernelRatesTest.cpp - a calibrated rate against a call's work ------===//

#include "parallax/Runtime/KernelRates.h"

#include <gtest/gtest.h>

using namespace parallax::rt;

TEST(KernelRates, ARateCurveInterpolatesInLogWorkAndClampsBeyondItsPoints) {
  RateCurve curve{{{1e3, 1e9}, {1e5, 3e9}}};
  EXPECT_DOUBLE_EQ(curve.at(1e3), 1e9);
  EXPECT_DOUBLE_EQ(curve.at(1e5), 3e9);
  // Half way in log(work): half way in rate.
  EXPECT_NEAR(curve.at(1e4), 2e9, 1e-3);
  // Beyond the points, the nearer one's rate; no work at all too.
  EXPECT_DOUBLE_EQ(curve.at(10), 1e9);
  EXPECT_DOUBLE_EQ(curve.at(0), 1e9);
  EXPECT_DOUBLE_EQ(curve.at(1e9), 3e9);
}

TEST(KernelRates, OnePointIsAConstantRateAndNoneIsNoRate) {
  EXPECT_DOUBLE_EQ((RateCurve{{{0, 5e9}}}.at(123)), 5e9);
  EXPECT_DOUBLE_EQ(RateCurve{}.at(123), 0);
}

TEST(KernelRates, TheUnitsOfWork) {
  EXPECT_EQ(*ratedWorkOf("conv_grad_filter"), KernelWork::Flops);
  EXPECT_EQ(*ratedWorkOf("max_pool"), KernelWork::WindowTaps);
  EXPECT_EQ(*ratedWorkOf("elementwise"), KernelWork::Bytes);
  EXPECT_EQ(*ratedWorkOf("costly_per_element"), KernelWork::Bytes);
  EXPECT_FALSE(ratedWorkOf("softmax").has_value());
  EXPECT_EQ(*ratedWorkOf("product_bytes"), KernelWork::Bytes);
  // Collectives, per group size.
  EXPECT_EQ(collectiveRateName("all_reduce", 4), "all_reduce/4");
  EXPECT_EQ(*ratedWorkOf("all_reduce/4"), KernelWork::SentBytes);
  EXPECT_EQ(*ratedWorkOf("reduce_scatter/16"), KernelWork::SentBytes);
  EXPECT_EQ(*ratedWorkOf("all_gather/2"), KernelWork::SentBytes);
  for (const char *bad : {"all_reduce/1", "all_reduce/", "all_reduce/04", "all_reduce/x",
                          "all_to_all/4", "gather/4", "all_reduce/1234567"})
    EXPECT_FALSE(ratedWorkOf(bad).has_value()) << bad;
  // gru_classifier's GRU: 12 steps of 16, 7680 weights.
  EXPECT_DOUBLE_EQ(recurrentFlops(12, 16, 7680, false), 2949120);
  EXPECT_DOUBLE_EQ(recurrentFlops(12, 16, 7680, true), 5898240);
  // cnn's first convolution: 16 x 16 x 32 x 32 outputs, 3 x 3 x 3 each.
  EXPECT_DOUBLE_EQ(convFlops(262144, 27), 14155776);
  EXPECT_DOUBLE_EQ(windowTaps(262144, 9), 2359296);
}
