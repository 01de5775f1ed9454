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

/// `v` as an int64, saturating: 2^63 (what INT64_MAX, the usual "slice to
/// the end" sentinel, becomes as a double) would overflow a plain cast.
int64_t toInt64(double v);

/// Tensors with more elements than this are not evaluated at import time.
constexpr int64_t kMaxFoldedElements = 1 << 16;

/// Results of evaluateNode larger than this are an error: a shape
/// computation never needs them, and the importer would run out of memory.
constexpr int64_t kMaxEvaluatedElements = 1 << 24;

/// Reads an ONNX tensor (initializer or Constant value) if it has at most
/// `maxElements` elements and a numeric type; nullopt otherwise. FLOAT16 and
/// BFLOAT16 values are decoded to their numeric values.
std::optional<ConstTensor> readTensor(const onnx::TensorProto &tensor,
                                      int64_t maxElements = kMaxFoldedElements);

/// `v` rounded as a value of element type `dtype` (an onnx::TensorProto
/// DataType) holds it: float/half precision, integer truncation and wrap.
double castTo(int32_t dtype, double v);

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
