//===- DType.h - element types of runtime tensors --------------*- C++ -*-===//
//
// The runtime's element types. Names match MLIR's spelling ("f32", "i64",
// "i1"), which is what the plan records, so a plan reads like its IR.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_DTYPE_H
#define PARALLAX_RUNTIME_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>
#include <string>
#include <string_view>

namespace parallax::rt {

enum class DType : uint8_t { F32, F64, F16, BF16, I64, I32, I16, I8, U8, Bool };

/// The most elements a tensor may have anywhere in Parallax: 2^50 (8 PiB of
/// f64), so that its bytes, and sums over thousands of such tensors, stay
/// far inside int64_t. The importer refuses larger shapes, the plan reader
/// too.
constexpr int64_t kMaxTensorElements = int64_t(1) << 50;

/// Bytes per element (Bool is one byte).
size_t sizeOf(DType t);
/// "f32", "f64", "f16", "bf16", "i64", "i32", "i16", "i8", "ui8", "i1".
const char *nameOf(DType t);
/// "[2, 3, 4]", for messages.
std::string shapeString(const std::vector<int64_t> &shape);
std::optional<DType> dtypeFromName(std::string_view name);
bool isFloat(DType t);

/// ONNX TensorProto::DataType of `t` and back (for .npy-free interchange
/// with ONNX files: initializers, saved models, backend test data).
int32_t onnxTypeOf(DType t);
std::optional<DType> dtypeFromOnnx(int32_t onnxType);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_DTYPE_H
