//===- DType.cpp - runtime element types ----------------------------------===//

#include "parallax/Runtime/DType.h"

namespace parallax::rt {

namespace {
struct Entry {
  DType type;
  const char *name;
  size_t size;
  int32_t onnx; // onnx::TensorProto::DataType
};
// ONNX codes: FLOAT 1, UINT8 2, INT8 3, INT16 5, INT32 6, INT64 7, BOOL 9,
// FLOAT16 10, DOUBLE 11, BFLOAT16 16.
constexpr Entry kTypes[] = {
    {DType::F32, "f32", 4, 1},  {DType::F64, "f64", 8, 11},
    {DType::F16, "f16", 2, 10}, {DType::BF16, "bf16", 2, 16},
    {DType::I64, "i64", 8, 7},  {DType::I32, "i32", 4, 6},
    {DType::I16, "i16", 2, 5},  {DType::I8, "i8", 1, 3},
    {DType::U8, "ui8", 1, 2},   {DType::Bool, "i1", 1, 9},
};
const Entry &entry(DType t) { return kTypes[static_cast<int>(t)]; }
} // namespace

size_t sizeOf(DType t) { return entry(t).size; }
const char *nameOf(DType t) { return entry(t).name; }
int32_t onnxTypeOf(DType t) { return entry(t).onnx; }

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 ||
         t == DType::BF16;
}

std::optional<DType> dtypeFromName(std::string_view name) {
  for (const Entry &e : kTypes)
    if (name == e.name)
      return e.type;
  return std::nullopt;
}

std::optional<DType> dtypeFromOnnx(int32_t onnxType) {
  for (const Entry &e : kTypes)
    if (onnxType == e.onnx)
      return e.type;
  return std::nullopt;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace parallax::rt
