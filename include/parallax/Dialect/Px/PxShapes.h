//===- PxShapes.h - shape rules shared by verifiers and importer -*- C++ -*-===//
//
// The ONNX shape rules px ops follow, as plain functions over dimension
// vectors. The op verifiers (through inferReturnTypes) and the ONNX importer
// (which must compute result shapes of ops whose shape comes from a folded
// operand, such as Reshape or Expand) use the same code.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_DIALECT_PX_PXSHAPES_H
#define PARALLAX_DIALECT_PX_PXSHAPES_H

#include "parallax/Runtime/ConvTiling.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>
#include <optional>
#include <string>

namespace parallax::px {

using Shape = llvm::SmallVector<int64_t, 4>;

/// Multidirectional (numpy) broadcasting of two shapes; nullopt if they do not
/// broadcast.
std::optional<Shape> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                     llvm::ArrayRef<int64_t> b);

/// Normalises an axis in [-rank, rank) to [0, rank); nullopt if out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// Output length of one spatial dimension of a convolution or pooling window
/// (the runtime's, which the kernels size their loops by).
using rt::conv::windowOutputSize;

/// The number of elements of a static shape.
int64_t numElements(llvm::ArrayRef<int64_t> shape);

/// Renders a shape as "8x20" (or "scalar") for messages and reports.
std::string shapeToString(llvm::ArrayRef<int64_t> shape);

/// How a reshape regroups dimensions: runs of input and output dimensions
/// (size-1 dimensions left out) with equal products. A block of a group's
/// leading input dimension is a block of its leading output dimension (the
/// same contiguous run of the group's elements) when both divide by the
/// ranks: what carries a split through a reshape.
struct Regrouping {
  /// Per group, its leading input and output dimension.
  llvm::SmallVector<std::pair<int64_t, int64_t>> leads;

  /// nullopt for dynamic shapes or products that never meet.
  static std::optional<Regrouping> of(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out);
  std::optional<int64_t> outputDimOf(int64_t inDim) const;
  std::optional<int64_t> inputDimOf(int64_t outDim) const;
};

} // namespace parallax::px

#endif // PARALLAX_DIALECT_PX_PXSHAPES_H
