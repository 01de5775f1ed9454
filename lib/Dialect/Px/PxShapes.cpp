//===- PxShapes.cpp - ONNX shape rules ------------------------------------===//

#include "parallax/Dialect/Px/PxShapes.h"

#include <algorithm>

namespace parallax::px {

std::optional<Shape> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                     llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  Shape result(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the trailing dimension, as numpy does.
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    result[i] = da == 1 ? db : da;
  }
  return result;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

int64_t numElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeToString(llvm::ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += "x";
    s += std::to_string(shape[i]);
  }
  return s;
}

} // namespace parallax::px
