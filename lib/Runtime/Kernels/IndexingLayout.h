//===- IndexingLayout.h - checks of gather and scatter kernels --*- C++ -*-===//
//
// The bind-time checks of gather, gather_elements, scatter_add and
// scatter_elements_add (index and element types, axis, shapes), shared by
// the CPU kernels (Indexing.cpp) and the CUDA ones (Cuda/Kernels/Indexing.cu)
// so that both accept the same operands with the same messages.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_INDEXINGLAYOUT_H
#define PARALLAX_RUNTIME_KERNELS_INDEXINGLAYOUT_H

#include "KernelUtil.h"
#include "ShapeMath.h"

#include "parallax/Runtime/Grid.h"

#include <cstdint>
#include <string>
#include <vector>

namespace parallax::rt::detail {

inline void checkIndexType(const KernelArgs &args, const TensorView &indices,
                           const char *op) {
  if (indices.dtype != DType::I64 && indices.dtype != DType::I32)
    args.fail(std::string(op) + ": indices must be i32 or i64, got " +
              nameOf(indices.dtype));
}

/// Checks the shapes common to gather_elements and scatter_elements_add.
inline void checkElementShapes(const KernelArgs &args, const TensorView &indices,
                               const TensorView &data, int64_t axis, const char *op,
                               const char *dataName) {
  if (indices.rank() != data.rank())
    args.fail(std::string(op) + ": " + dataName + " " + shapeStr(data.shape) +
              " and indices " + shapeStr(indices.shape) +
              " must have the same rank");
  for (int64_t d = 0; d < data.rank(); ++d)
    if (d != axis && indices.dim(d) > data.dim(d))
      args.fail(std::string(op) + ": indices dimension " + std::to_string(d) +
                " of size " + std::to_string(indices.dim(d)) + " exceeds the " +
                dataName + "'s size " + std::to_string(data.dim(d)));
}

/// `full`'s shape with dimension `axis` replaced by the whole of `inserted`.
inline std::vector<int64_t> insertAt(const std::vector<int64_t> &full, int64_t axis,
                                     const std::vector<int64_t> &inserted) {
  std::vector<int64_t> s(full.begin(), full.begin() + axis);
  s.insert(s.end(), inserted.begin(), inserted.end());
  s.insert(s.end(), full.begin() + axis + 1, full.end());
  return s;
}

/// Where this rank's rows lie in the whole table, for the ops that read or
/// differentiate a row block (px.gather and px.make_sparse_grad `block of`
/// a grid: the kernel's "grid_shape" and "grid_axes"): the rank at place b
/// of its group of G holds rows [b R, (b + 1) R) of G R. Without a grid the
/// kernel holds the whole table.
struct RowBlock {
  int64_t first = 0, rows = 0, tableRows = 0;
  /// The block's row of the whole table's row `i` (in [0, tableRows)), or
  /// -1 when another rank holds it.
  PX_HD int64_t local(int64_t i) const {
    i -= first;
    return i >= 0 && i < rows ? i : -1;
  }
};

inline RowBlock rowBlockOf(const KernelArgs &args, int64_t blockRows, const char *op,
                           const char *axes = "grid_axes") {
  BlockPlace place = blockPlaceOf(args, op, axes);
  RowBlock b{place.index * blockRows, blockRows, blockRows * place.count};
  // A padded vocabulary (the plan's "rows"): ids name its real rows only.
  if (args.has("rows")) {
    int64_t rows = args.i64("rows");
    if (rows < 0 || rows > b.tableRows)
      args.fail(std::string(op) + ": rows " + std::to_string(rows) + " of a table of " +
                std::to_string(b.tableRows));
    b.tableRows = rows;
  }
  return b;
}

/// gather(data, indices) -> out: checks it, returns the (non-negative) axis.
inline int64_t gatherAxis(const KernelArgs &args) {
  const TensorView &data = args.in(0), &indices = args.in(1), &out = args.out(0);
  checkIndexType(args, indices, "gather");
  if (data.rank() < 1)
    args.fail("gather: data must have rank >= 1");
  int64_t axis = normalizeAxis(args, args.i64Or("axis", 0), data.rank(), "gather");
  if (out.dtype != data.dtype)
    args.fail(std::string("gather: result must have the data's element type ") +
              nameOf(data.dtype) + ", got " + nameOf(out.dtype));
  std::vector<int64_t> expected = insertAt(data.shape, axis, indices.shape);
  if (out.shape != expected)
    args.fail("gather: result shape " + shapeStr(out.shape) + " must be " +
              shapeStr(expected));
  if (axis != 0 && args.has("grid_shape"))
    args.fail("gather: a row block (grid_shape) is gathered on axis 0 only, not " +
              std::to_string(axis));
  return axis;
}

/// make_sparse_grad(indices, values) -> (block indices, values) of a row
/// block of "block_rows" rows: checks it, returns the block.
inline RowBlock makeSparseGradBlock(const KernelArgs &args) {
  const TensorView &indices = args.in(0), &values = args.in(1);
  const TensorView &outIndices = args.out(0), &outValues = args.out(1);
  if (indices.dtype != DType::I64 || indices.rank() != 1 || outIndices.dtype != DType::I64 ||
      outIndices.shape != indices.shape)
    args.fail("make_sparse_grad: indices and the block's indices must be i64 " +
              shapeStr({indices.numElements()}));
  if (values.rank() < 1 || values.dim(0) != indices.dim(0) || outValues.shape != values.shape ||
      outValues.dtype != values.dtype)
    args.fail("make_sparse_grad: values " + shapeStr(values.shape) +
              " must have one row per index, as the result's " + shapeStr(outValues.shape));
  int64_t rows = args.i64("block_rows");
  if (rows < 1)
    args.fail("make_sparse_grad: block_rows must be positive, got " + std::to_string(rows));
  return rowBlockOf(args, rows, "make_sparse_grad");
}

/// gather_elements(data, indices) -> out: checks it, returns the axis.
inline int64_t gatherElementsAxis(const KernelArgs &args) {
  const TensorView &data = args.in(0), &indices = args.in(1), &out = args.out(0);
  checkIndexType(args, indices, "gather_elements");
  if (data.rank() < 1)
    args.fail("gather_elements: data must have rank >= 1");
  int64_t axis = normalizeAxis(args, args.i64Or("axis", 0), data.rank(),
                               "gather_elements");
  checkElementShapes(args, indices, data, axis, "gather_elements", "data");
  if (out.dtype != data.dtype || out.shape != indices.shape)
    args.fail(std::string("gather_elements: result must be ") +
              nameOf(data.dtype) + " " + shapeStr(indices.shape) + ", got " +
              nameOf(out.dtype) + " " + shapeStr(out.shape));
  return axis;
}

/// Checks the types common to scatter_add and scatter_elements_add
/// (indices, updates) -> out.
inline void checkScatterTypes(const KernelArgs &args, const char *op) {
  const TensorView &indices = args.in(0), &updates = args.in(1), &out = args.out(0);
  checkIndexType(args, indices, op);
  if (out.dtype != updates.dtype)
    args.fail(std::string(op) + ": result must have the updates' element type " +
              nameOf(updates.dtype) + ", got " + nameOf(out.dtype));
  if (out.rank() < 1)
    args.fail(std::string(op) + ": the result must have rank >= 1");
}

/// scatter_add(indices, updates) -> out: checks it, returns the axis.
inline int64_t scatterAddAxis(const KernelArgs &args) {
  checkScatterTypes(args, "scatter_add");
  const TensorView &indices = args.in(0), &updates = args.in(1), &out = args.out(0);
  int64_t axis = normalizeAxis(args, args.i64Or("axis", 0), out.rank(), "scatter_add");
  std::vector<int64_t> expected = insertAt(out.shape, axis, indices.shape);
  if (updates.shape != expected)
    args.fail("scatter_add: updates must have shape " + shapeStr(expected) +
              ", got " + shapeStr(updates.shape));
  return axis;
}

/// scatter_elements_add(indices, updates) -> out: checks it, returns the axis.
inline int64_t scatterElementsAddAxis(const KernelArgs &args) {
  checkScatterTypes(args, "scatter_elements_add");
  const TensorView &indices = args.in(0), &updates = args.in(1), &out = args.out(0);
  int64_t axis = normalizeAxis(args, args.i64Or("axis", 0), out.rank(),
                               "scatter_elements_add");
  if (updates.shape != indices.shape)
    args.fail("scatter_elements_add: updates " + shapeStr(updates.shape) +
              " and indices " + shapeStr(indices.shape) +
              " must have the same shape");
  checkElementShapes(args, indices, out, axis, "scatter_elements_add", "output");
  return axis;
}

/// f(T{}, I{}) for a scatter's update type T (f32, f64) and index type I.
template <typename F>
KernelFn dispatchScatter(const KernelArgs &args, const char *op, F &&f) {
  const TensorView &indices = args.in(0), &updates = args.in(1);
  bool i64 = indices.dtype == DType::I64;
  switch (updates.dtype) {
  case DType::F32: return i64 ? f(float{}, int64_t{}) : f(float{}, int32_t{});
  case DType::F64: return i64 ? f(double{}, int64_t{}) : f(double{}, int32_t{});
  default:
    args.fail(std::string(op) + ": element type " + nameOf(updates.dtype) +
              " is not supported by the CPU runtime");
  }
}

} // namespace parallax::rt::detail

#endif // PARALLAX_RUNTIME_KERNELS_INDEXINGLAYOUT_H
