//===- PxShapes.cpp - ONNX shape rules ------------------------------------===//

#include "parallax/Dialect/Px/PxShapes.h"

#include "llvm/ADT/STLExtras.h"

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

std::optional<Regrouping> Regrouping::of(llvm::ArrayRef<int64_t> in,
                                         llvm::ArrayRef<int64_t> out) {
  auto dynamic = [](int64_t d) { return d < 0; };
  if (llvm::any_of(in, dynamic) || llvm::any_of(out, dynamic))
    return std::nullopt;
  llvm::SmallVector<int64_t> i, o;
  for (auto [d, n] : llvm::enumerate(in))
    if (n != 1)
      i.push_back(d);
  for (auto [d, n] : llvm::enumerate(out))
    if (n != 1)
      o.push_back(d);
  Regrouping g;
  size_t a = 0, b = 0;
  while (a < i.size() && b < o.size()) {
    g.leads.push_back({i[a], o[b]});
    int64_t p = in[i[a++]], q = out[o[b++]];
    while (p != q) {
      if (p < q && a < i.size())
        p *= in[i[a++]];
      else if (q < p && b < o.size())
        q *= out[o[b++]];
      else
        return std::nullopt;
    }
  }
  if (a != i.size() || b != o.size())
    return std::nullopt;
  return g;
}

std::optional<int64_t> Regrouping::outputDimOf(int64_t inDim) const {
  for (auto [i, o] : leads)
    if (i == inDim)
      return o;
  return std::nullopt;
}

std::optional<int64_t> Regrouping::inputDimOf(int64_t outDim) const {
  for (auto [i, o] : leads)
    if (o == outDim)
      return i;
  return std::nullopt;
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
