//===- ConstantEvaluator.h - fold ONNX shape computations ------*- C++ -*-===//
//
// PyTorch exports shape arithmetic as graph ops (Shape -> Gather -> Unsqueeze
// -> Concat -> Reshape, Range over a batch size, ...). Once every input shape
// is static these are compile-time constants; the importer evaluates them
// here instead of emitting ops, so px keeps static shapes throughout.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_LIB_IMPORTER_CONSTANTEVALUATOR_H
#define PARALLAX_LIB_IMPORTER_CONSTANTEVALUATOR_H

#include "onnx/onnx_pb.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace parallax::detail {

/// A small constant tensor. Values are held as doubles, which represent every
/// integer a shape computation produces (|x| < 2^53) exactly.
struct ConstTensor {
  int32_t dtype = onnx::TensorProto::INT64; // an onnx::TensorProto::DataType
  std::vector<int64_t> shape;
  std::vector<double> values;

  int64_t size() const { return (int64_t)values.size(); }
  std::vector<int64_t> asInts() const;
};

/// Tensors with more elements than this are not evaluated at import time.
constexpr int64_t kMaxFoldedElements = 1 << 16;

/// Reads an ONNX tensor (initializer or Constant value) if it is small and of
/// a numeric type; nullopt otherwise.
std::optional<ConstTensor> readTensor(const onnx::TensorProto &tensor);

/// Whether `opType` is one the evaluator knows.
bool isFoldable(const std::string &opType);

/// ONNX Slice normalised to one (begin, step, count) per dimension of `shape`.
struct NormalizedSlice {
  std::vector<int64_t> begin, step, count;
};
llvm::Expected<NormalizedSlice>
normalizeSlice(const std::vector<int64_t> &shape,
               const std::vector<int64_t> &starts,
               const std::vector<int64_t> &ends, std::vector<int64_t> axes,
               std::vector<int64_t> steps);

/// Evaluates `node` on constant `inputs` (absent optional inputs are
/// nullopt). Returns the node's outputs, or an error describing why the
/// values are invalid for the op.
llvm::Expected<std::vector<ConstTensor>>
evaluateNode(const onnx::NodeProto &node,
             const std::vector<std::optional<ConstTensor>> &inputs);

} // namespace parallax::detail

#endif
