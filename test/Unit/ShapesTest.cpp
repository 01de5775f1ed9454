// Unit tests for the ONNX shape rules shared by the px verifiers and the
// importer (include/parallax/Dialect/Px/PxShapes.h).

#include "parallax/Dialect/Px/PxShapes.h"

#include <gtest/gtest.h>

using namespace parallax::px;

TEST(Broadcast, AlignsFromTheTrailingDimension) {
  EXPECT_EQ(*broadcastShapes({8, 1, 6, 1}, {7, 1, 5}), (Shape{8, 7, 6, 5}));
  EXPECT_EQ(*broadcastShapes({}, {3, 4}), (Shape{3, 4}));
  EXPECT_EQ(*broadcastShapes({4}, {3, 1}), (Shape{3, 4}));
}

TEST(Broadcast, RejectsMismatchedDimensions) {
  EXPECT_FALSE(broadcastShapes({2, 3}, {3, 2}).has_value());
  EXPECT_FALSE(broadcastShapes({4}, {5}).has_value());
}

TEST(Axis, NormalisesNegativeAndRejectsOutOfRange) {
  EXPECT_EQ(*normalizeAxis(-1, 3), 2);
  EXPECT_EQ(*normalizeAxis(0, 3), 0);
  EXPECT_FALSE(normalizeAxis(3, 3).has_value());
  EXPECT_FALSE(normalizeAxis(-4, 3).has_value());
}

TEST(Window, ConvolutionOutputSizes) {
  // 32x32 input, 3x3 kernel, stride 1, pad 1: same size.
  EXPECT_EQ(windowOutputSize(32, 3, 1, 1, 1, 1, false), 32);
  // Stride 2: halves (rounded down).
  EXPECT_EQ(windowOutputSize(32, 3, 2, 1, 1, 1, false), 16);
  // Dilation 2 makes a 3-tap kernel span 5.
  EXPECT_EQ(windowOutputSize(10, 3, 1, 0, 0, 2, false), 6);
  // A window that does not fit.
  EXPECT_LT(windowOutputSize(2, 5, 1, 0, 0, 1, false), 1);
}

TEST(Window, CeilModeDropsAWindowStartingInTheTrailingPad) {
  // PyTorch/ONNX: MaxPool(k=3, s=2, ceil) on 6 -> 3 (windows start 0, 2, 4).
  EXPECT_EQ(windowOutputSize(6, 3, 2, 0, 0, 1, true), 3);
  EXPECT_EQ(windowOutputSize(6, 3, 2, 0, 0, 1, false), 2);
  // With pad 1 on both sides, 5 -> ceil((5+2-3)/2)+1 = 3, and the last
  // window starts at 4 < 5 + 1, so it is kept.
  EXPECT_EQ(windowOutputSize(5, 3, 2, 1, 1, 1, true), 3);
  // 5 with k=2, s=2, pad 1: ceil gives 4 windows, but the fourth would
  // start at 6 = in + padBegin, entirely in the trailing pad: dropped.
  EXPECT_EQ(windowOutputSize(5, 2, 2, 1, 1, 1, true), 3);
}

TEST(Shape, ElementsAndText) {
  EXPECT_EQ(numElements({8, 20, 256}), 8 * 20 * 256);
  EXPECT_EQ(numElements({}), 1);
  EXPECT_EQ(shapeToString({100000, 256}), "100000x256");
  EXPECT_EQ(shapeToString({}), "scalar");
}
