//===- Indexing.cpp - gather, gather_elements and their gradients ---------===//
//
// px.gather (ONNX Gather; on axis 0 the embedding lookup: one memcpy per
// row; of a row block, zeros for the rows other ranks hold),
// px.gather_elements (ONNX GatherElements), their dense gradients
// px.scatter_add and px.scatter_elements_add, which start from zeros and
// accumulate (repeated indices add up), and the row-block form of
// px.make_sparse_grad, which moves a gradient's rows into the block. The
// scatters split work only over dimensions where distinct work items write
// distinct output elements, so they need no atomics.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Kernel.h"

#include "IndexingLayout.h"
#include "KernelUtil.h"
#include "ShapeMath.h"

#include <algorithm>
#include <cstring>
#include <memory>

namespace parallax::rt {
namespace {

using namespace detail;

[[noreturn]] void badIndex(const char *op, int64_t index, int64_t position,
                           int64_t size, int64_t axis) {
  throw KernelError(std::string(op) + ": index " + std::to_string(index) +
                    " (at position " + std::to_string(position) +
                    " of indices) is out of range [" + std::to_string(-size) +
                    ", " + std::to_string(size) + ") of axis " +
                    std::to_string(axis));
}

/// Index `v` wrapped into [0, size), or a KernelError.
inline int64_t wrapIndex(int64_t v, int64_t size, const char *op,
                         int64_t position, int64_t axis) {
  int64_t w = wrappedIndex(v, size);
  if (w < 0)
    badIndex(op, v, position, size, axis);
  return w;
}

/// With the plan's "nonnegative_ids" (an embedding lookup: a trainable
/// table read with ids from the data), refuses a negative id before any row
/// is read, in position order, so that the message names the first one.
template <typename I>
void refuseNegativeIds(const I *idx, int64_t n, int64_t rows, const char *op) {
  bool any = false;
  for (int64_t p = 0; p < n; ++p)
    any |= idx[p] < 0;
  if (!any)
    return;
  for (int64_t p = 0; p < n; ++p)
    if (idx[p] < 0)
      throw negativeIdError(op, (int64_t)idx[p], p, rows);
}

/// Fixed-size element copies for the common element sizes.
template <int Size> struct Elem;
template <> struct Elem<1> { using type = uint8_t; };
template <> struct Elem<2> { using type = uint16_t; };
template <> struct Elem<4> { using type = uint32_t; };
template <> struct Elem<8> { using type = uint64_t; };

//===----------------------------------------------------------------------===//
// gather
//===----------------------------------------------------------------------===//

/// ElemSize > 0: each row is one element of that size; 0: memcpy rows.
/// Indices name rows of the whole table; a row another rank's block holds
/// reads as zeros.
template <typename I, int ElemSize>
KernelFn gatherImpl(const char *data, const I *idx, char *out, int64_t outer,
                    RowBlock block, int64_t nIdx, int64_t rowBytes,
                    int64_t axis, int threads, bool nonnegative) {
  int64_t rows = outer * nIdx, axisLen = block.rows;
  int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(rowBytes, 1));
  return [=] {
    if (nonnegative)
      refuseNegativeIds(idx, nIdx, block.tableRows, "gather");
    parallelFor(threads, rows, grain, [&](int64_t r0, int64_t r1) {
      int64_t o = r0 / nIdx, p = r0 % nIdx;
      for (int64_t r = r0; r < r1; ++r) {
        int64_t i = block.local(
            wrapIndex((int64_t)idx[p], block.tableRows, "gather", p, axis));
        char *dst = out + r * rowBytes;
        if (i < 0) {
          std::memset(dst, 0, rowBytes);
        } else {
          const char *src = data + (o * axisLen + i) * rowBytes;
          if constexpr (ElemSize > 0) {
            using E = typename Elem<ElemSize>::type;
            *reinterpret_cast<E *>(dst) = *reinterpret_cast<const E *>(src);
          } else {
            std::memcpy(dst, src, rowBytes);
          }
        }
        if (++p == nIdx) {
          p = 0;
          ++o;
        }
      }
    });
  };
}

template <typename I>
KernelFn gatherTyped(KernelArgs &args, int64_t axis) {
  const TensorView &data = args.in(0), &indices = args.in(1), &out = args.out(0);
  int64_t outer = product(data.shape, 0, axis);
  RowBlock block = rowBlockOf(args, data.dim(axis), "gather");
  int64_t inner = product(data.shape, axis + 1, data.shape.size());
  int64_t nIdx = indices.numElements();
  int64_t es = (int64_t)sizeOf(data.dtype), rowBytes = inner * es;
  const char *d = static_cast<const char *>(data.data);
  const I *idx = indices.as<I>();
  char *o = static_cast<char *>(out.data);
  int threads = args.env.threads;
  bool nn = args.flag("nonnegative_ids");
  if (inner == 1) {
    switch (es) {
    case 1: return gatherImpl<I, 1>(d, idx, o, outer, block, nIdx, es, axis, threads, nn);
    case 2: return gatherImpl<I, 2>(d, idx, o, outer, block, nIdx, es, axis, threads, nn);
    case 4: return gatherImpl<I, 4>(d, idx, o, outer, block, nIdx, es, axis, threads, nn);
    case 8: return gatherImpl<I, 8>(d, idx, o, outer, block, nIdx, es, axis, threads, nn);
    }
  }
  return gatherImpl<I, 0>(d, idx, o, outer, block, nIdx, rowBytes, axis,
                          threads, nn);
}

KernelFn gatherFactory(KernelArgs &args) {
  const int64_t axis = gatherAxis(args);
  return args.in(1).dtype == DType::I64 ? gatherTyped<int64_t>(args, axis)
                                        : gatherTyped<int32_t>(args, axis);
}

//===----------------------------------------------------------------------===//
// Element-wise indexing (gather_elements, scatter_elements_add): the
// indices are split into "lines" along the axis; each line has fixed
// coordinates off the axis, so it reads (or writes) one line of the data.
//===----------------------------------------------------------------------===//

struct Lines {
  int64_t count = 0;    ///< number of lines
  int64_t length = 0;   ///< indices' size along the axis
  int64_t idxStep = 0;  ///< indices stride along the axis
  int64_t dataStep = 0; ///< data stride along the axis
  int64_t dataLen = 0;  ///< data size along the axis
  int64_t axis = 0;
  std::vector<int64_t> dims, idxStrides, dataStrides; ///< off-axis dims

  Lines(const std::vector<int64_t> &idxShape,
        const std::vector<int64_t> &dataShape, int64_t axis)
      : axis(axis) {
    auto is = stridesOf(idxShape), ds = stridesOf(dataShape);
    count = 1;
    for (size_t d = 0; d < idxShape.size(); ++d) {
      if ((int64_t)d == axis)
        continue;
      dims.push_back(idxShape[d]);
      idxStrides.push_back(is[d]);
      dataStrides.push_back(ds[d]);
      count *= idxShape[d];
    }
    length = idxShape[axis];
    idxStep = is[axis];
    dataStep = ds[axis];
    dataLen = dataShape[axis];
  }

  /// Offsets of line `l`'s first element in the indices and in the data.
  void offsets(int64_t l, int64_t &idxBase, int64_t &dataBase) const {
    idxBase = dataBase = 0;
    for (size_t d = dims.size(); d-- > 0;) {
      int64_t c = l % dims[d];
      l /= dims[d];
      idxBase += c * idxStrides[d];
      dataBase += c * dataStrides[d];
    }
  }
};

template <typename I, typename E>
KernelFn gatherElementsImpl(KernelArgs &args, int64_t axis) {
  const TensorView &data = args.in(0), &indices = args.in(1), &out = args.out(0);
  auto lines = std::make_shared<Lines>(indices.shape, data.shape, axis);
  const E *d = static_cast<const E *>(data.data);
  const I *idx = indices.as<I>();
  E *o = static_cast<E *>(out.data);
  int threads = args.env.threads;
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, lines->length));
  return [=] {
    const Lines &L = *lines;
    parallelFor(threads, L.count, grain, [&](int64_t l0, int64_t l1) {
      for (int64_t l = l0; l < l1; ++l) {
        int64_t ib, db;
        L.offsets(l, ib, db);
        for (int64_t j = 0; j < L.length; ++j) {
          int64_t pos = ib + j * L.idxStep;
          int64_t i = wrapIndex((int64_t)idx[pos], L.dataLen,
                                "gather_elements", pos, L.axis);
          o[pos] = d[db + i * L.dataStep];
        }
      }
    });
  };
}

template <typename I>
KernelFn gatherElementsTyped(KernelArgs &args, int64_t axis) {
  switch (sizeOf(args.in(0).dtype)) {
  case 1: return gatherElementsImpl<I, uint8_t>(args, axis);
  case 2: return gatherElementsImpl<I, uint16_t>(args, axis);
  case 4: return gatherElementsImpl<I, uint32_t>(args, axis);
  case 8: return gatherElementsImpl<I, uint64_t>(args, axis);
  }
  args.fail("gather_elements: unsupported element size");
}

KernelFn gatherElementsFactory(KernelArgs &args) {
  const int64_t axis = gatherElementsAxis(args);
  return args.in(1).dtype == DType::I64 ? gatherElementsTyped<int64_t>(args, axis)
                                        : gatherElementsTyped<int32_t>(args, axis);
}

//===----------------------------------------------------------------------===//
// scatter_add, scatter_elements_add
//===----------------------------------------------------------------------===//

template <typename T>
void zeroFill(T *p, int64_t n, int threads) {
  parallelFor(threads, n, 1 << 16, [&](int64_t b, int64_t e) {
    std::fill(p + b, p + e, T(0));
  });
}

template <typename T, typename I>
KernelFn scatterAddTyped(KernelArgs &args, int64_t axis) {
  const TensorView &indices = args.in(0), &updates = args.in(1), &out = args.out(0);
  int64_t outer = product(out.shape, 0, axis), axisLen = out.dim(axis);
  int64_t inner = product(out.shape, axis + 1, out.shape.size());
  int64_t nIdx = indices.numElements(), total = out.numElements();
  const I *idx = indices.as<I>();
  const T *u = updates.as<T>();
  T *o = out.as<T>();
  int threads = args.env.threads;
  auto wrapped = std::make_shared<std::vector<int64_t>>(nIdx);
  // Rows of the output (outer) are independent; when there are too few of
  // them, split the columns (inner) instead: never the indices, which may
  // repeat.
  bool byOuter = outer >= 2 * threads || inner < 4 * threads;
  return [=] {
    int64_t *w = wrapped->data();
    for (int64_t p = 0; p < nIdx; ++p)
      w[p] = wrapIndex((int64_t)idx[p], axisLen, "scatter_add", p, axis);
    zeroFill(o, total, threads);
    if (byOuter) {
      int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, nIdx * inner));
      parallelFor(threads, outer, grain, [&](int64_t o0, int64_t o1) {
        for (int64_t b = o0; b < o1; ++b)
          for (int64_t p = 0; p < nIdx; ++p) {
            T *dst = o + (b * axisLen + w[p]) * inner;
            const T *src = u + (b * nIdx + p) * inner;
            for (int64_t j = 0; j < inner; ++j)
              dst[j] += src[j];
          }
      });
    } else {
      int64_t grain = std::max<int64_t>(
          16, 32768 / std::max<int64_t>(1, nIdx * outer));
      parallelFor(threads, inner, grain, [&](int64_t c0, int64_t c1) {
        for (int64_t b = 0; b < outer; ++b)
          for (int64_t p = 0; p < nIdx; ++p) {
            T *dst = o + (b * axisLen + w[p]) * inner;
            const T *src = u + (b * nIdx + p) * inner;
            for (int64_t j = c0; j < c1; ++j)
              dst[j] += src[j];
          }
      });
    }
  };
}

template <typename T, typename I>
KernelFn scatterElementsAddTyped(KernelArgs &args, int64_t axis) {
  const TensorView &indices = args.in(0), &updates = args.in(1), &out = args.out(0);
  auto lines = std::make_shared<Lines>(indices.shape, out.shape, axis);
  const I *idx = indices.as<I>();
  const T *u = updates.as<T>();
  T *o = out.as<T>();
  int64_t total = out.numElements();
  int threads = args.env.threads;
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, lines->length));
  return [=] {
    const Lines &L = *lines;
    zeroFill(o, total, threads);
    // Distinct lines have distinct off-axis coordinates, so they write
    // distinct output elements.
    parallelFor(threads, L.count, grain, [&](int64_t l0, int64_t l1) {
      for (int64_t l = l0; l < l1; ++l) {
        int64_t ib, ob;
        L.offsets(l, ib, ob);
        for (int64_t j = 0; j < L.length; ++j) {
          int64_t pos = ib + j * L.idxStep;
          int64_t i = wrapIndex((int64_t)idx[pos], L.dataLen,
                                "scatter_elements_add", pos, L.axis);
          o[ob + i * L.dataStep] += u[pos];
        }
      }
    });
  };
}

KernelFn scatterAddFactory(KernelArgs &args) {
  const int64_t axis = scatterAddAxis(args);
  return dispatchScatter(args, "scatter_add", [&](auto t, auto i) {
    return scatterAddTyped<decltype(t), decltype(i)>(args, axis);
  });
}

KernelFn scatterElementsAddFactory(KernelArgs &args) {
  const int64_t axis = scatterElementsAddAxis(args);
  return dispatchScatter(args, "scatter_elements_add", [&](auto t, auto i) {
    return scatterElementsAddTyped<decltype(t), decltype(i)>(args, axis);
  });
}

//===----------------------------------------------------------------------===//
// make_sparse_grad of a row block
//===----------------------------------------------------------------------===//

/// The block's rows of the whole table's (-1: unused, or another rank's);
/// the values as they are.
KernelFn makeSparseGradFactory(KernelArgs &args) {
  RowBlock block = makeSparseGradBlock(args);
  const int64_t *idx = args.in(0).as<int64_t>();
  int64_t *local = args.out(0).as<int64_t>();
  int64_t n = args.in(0).numElements();
  const void *values = args.in(1).data;
  void *outValues = args.out(1).data;
  int64_t bytes = args.in(1).bytes();
  return [=] {
    for (int64_t p = 0; p < n; ++p) {
      if (idx[p] != -1 && (idx[p] < 0 || idx[p] >= block.tableRows))
        throw KernelError("make_sparse_grad: row " + std::to_string(idx[p]) +
                          " at position " + std::to_string(p) + " is outside the " +
                          std::to_string(block.tableRows) + " rows of the table");
      local[p] = idx[p] == -1 ? -1 : block.local(idx[p]);
    }
    if (outValues != values)
      std::memcpy(outValues, values, bytes);
  };
}

} // namespace

void registerIndexingKernels(KernelRegistry &r) {
  r.add("make_sparse_grad", makeSparseGradFactory);
  r.add("gather", gatherFactory);
  r.add("gather_elements", gatherElementsFactory);
  r.add("scatter_add", scatterAddFactory);
  r.add("scatter_elements_add", scatterElementsAddFactory);
}

} // namespace parallax::rt
