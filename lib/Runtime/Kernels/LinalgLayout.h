//===- LinalgLayout.h - what a matmul or gemm kernel multiplies -*- C++ -*-===//
//
// The operands of px.matmul and px.gemm read and checked when the kernel is
// bound: element types, vector promotion and batch broadcasting for matmul,
// transposes, scalars and C's broadcast for gemm. The CPU kernels
// (Linalg.cpp) and the CUDA ones (Cuda/Kernels/Linalg.cu) both start from
// these, so that they accept the same operands with the same messages.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_LINALGLAYOUT_H
#define PARALLAX_RUNTIME_KERNELS_LINALGLAYOUT_H

#include "KernelUtil.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace parallax::rt::detail {

/// Checks matmul's element types and ranks: one type of those both runtimes
/// multiply (floats and signed integers), operands of rank >= 1.
inline void checkMatmulOperands(const KernelArgs &args) {
  const TensorView &lhs = args.in(0), &rhs = args.in(1), &out = args.out(0);
  if (lhs.dtype != rhs.dtype || out.dtype != lhs.dtype)
    args.fail(std::string("matmul operands and result must share one element "
                          "type, got ") +
              nameOf(lhs.dtype) + ", " + nameOf(rhs.dtype) + " -> " +
              nameOf(out.dtype));
  if (lhs.rank() < 1 || rhs.rank() < 1)
    args.fail("matmul operands must have rank >= 1");
  switch (lhs.dtype) {
  case DType::F32:
  case DType::F64:
  case DType::I64:
  case DType::I32:
  case DType::I16:
  case DType::I8: return;
  default:
    args.fail(std::string("matmul: element type ") + nameOf(lhs.dtype) +
              " is not supported by the CPU runtime");
  }
}

/// A matmul's shapes after its checks: vectors promoted, batch dimensions
/// broadcast, and each batch element's matrix offsets.
struct MatmulGeometry {
  int64_t m = 0, n = 0, k = 0, batches = 1;
  /// Whether one GEMM of batches * m rows does it (B shared by the batch).
  bool fold = true;
  /// Uniform batch strides of A and B (0: broadcast), when there are
  /// (always when fold).
  bool strided = false;
  int64_t strideA = 0, strideB = 0;
  /// Offsets of A's and B's matrix for each batch element.
  std::vector<int64_t> offA, offB;
};

/// Numpy matmul's shapes of in(0) x in(1) -> out(0), checked. The offsets
/// are left empty for a folded batch unless `foldedOffsets` asks for them.
inline MatmulGeometry matmulGeometry(const KernelArgs &args,
                                     bool foldedOffsets = true) {
  const TensorView &lhs = args.in(0), &rhs = args.in(1), &out = args.out(0);
  std::vector<int64_t> as = lhs.shape, bs = rhs.shape;
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  MatmulGeometry g;
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k)
    args.fail("contraction dimensions differ: " + shapeStr(lhs.shape) + " x " +
              shapeStr(rhs.shape));
  // Broadcast the batch dimensions.
  size_t ra = as.size() - 2, rb = bs.size() - 2, rank = std::max(ra, rb);
  std::vector<int64_t> batch(rank), aBatch(rank, 1), bBatch(rank, 1);
  for (size_t d = 0; d < ra; ++d)
    aBatch[rank - ra + d] = as[d];
  for (size_t d = 0; d < rb; ++d)
    bBatch[rank - rb + d] = bs[d];
  for (size_t d = 0; d < rank; ++d) {
    if (aBatch[d] != bBatch[d] && aBatch[d] != 1 && bBatch[d] != 1)
      args.fail("batch dimensions of " + shapeStr(lhs.shape) + " and " +
                shapeStr(rhs.shape) + " do not broadcast");
    batch[d] = aBatch[d] == 1 ? bBatch[d] : aBatch[d];
  }
  std::vector<int64_t> expected = batch;
  if (!aVec)
    expected.push_back(m);
  if (!bVec)
    expected.push_back(n);
  if (out.shape != expected)
    args.fail("output shape " + shapeStr(out.shape) + " does not match " +
              shapeStr(expected) + " of " + shapeStr(lhs.shape) + " x " +
              shapeStr(rhs.shape));

  g.m = m, g.n = n, g.k = k;
  g.batches = product(batch, 0, rank);
  int64_t aCount = product(aBatch, 0, rank), bCount = product(bBatch, 0, rank);
  g.fold = g.batches <= 1 || (bCount == 1 && aCount == g.batches);
  // A batch that is either complete or a single broadcast matrix has a
  // constant stride per batch element.
  bool aUniform = aCount == g.batches || aCount == 1;
  bool bUniform = bCount == g.batches || bCount == 1;
  g.strided = aUniform && bUniform;
  g.strideA = aCount == 1 ? 0 : m * k;
  g.strideB = bCount == 1 ? 0 : k * n;

  if (g.fold && !foldedOffsets)
    return g;
  // Matrix offsets of each batch element in A and B (broadcast strides).
  std::vector<int64_t> aStr(rank), bStr(rank);
  int64_t sa = m * k, sb = k * n;
  for (size_t d = rank; d-- > 0;) {
    aStr[d] = aBatch[d] == 1 ? 0 : sa;
    bStr[d] = bBatch[d] == 1 ? 0 : sb;
    sa *= aBatch[d];
    sb *= bBatch[d];
  }
  g.offA.resize(g.batches);
  g.offB.resize(g.batches);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < g.batches; ++i) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < rank; ++d) {
      oa += idx[d] * aStr[d];
      ob += idx[d] * bStr[d];
    }
    g.offA[i] = oa;
    g.offB[i] = ob;
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < batch[d])
        break;
      idx[d] = 0;
    }
  }
  return g;
}

/// Checks gemm's element types: A's, B's and the result's are one, f32 or
/// f64.
inline void checkGemmOperands(const KernelArgs &args) {
  const TensorView &A = args.in(0), &B = args.in(1), &out = args.out(0);
  if (B.dtype != A.dtype || out.dtype != A.dtype)
    args.fail("gemm operands and result must share one element type");
  if (A.dtype != DType::F32 && A.dtype != DType::F64)
    args.fail(std::string("gemm: element type ") + nameOf(A.dtype) +
              " is not supported by the CPU runtime");
}

/// A gemm's attributes and shapes after its checks: Y[m, n] = alpha *
/// op(A)[m, k] op(B)[k, n] + beta * C, C (when given) broadcast by strides.
struct GemmLayout {
  bool transA = false, transB = false;
  double alpha = 1, beta = 1;
  int64_t m = 0, n = 0, k = 0;
  /// Leading dimensions of A and B as stored (row-major, at least 1).
  int64_t lda = 1, ldb = 1;
  bool hasC = false;
  /// C's element (i, j) is at i * cRowStride + j * cColStride.
  int64_t cRowStride = 0, cColStride = 0;
};

inline GemmLayout gemmLayout(const KernelArgs &args) {
  const TensorView &A = args.in(0), &B = args.in(1), &out = args.out(0);
  GemmLayout l;
  l.transA = args.flag("trans_a"), l.transB = args.flag("trans_b");
  l.alpha = args.f64Or("alpha", 1.0), l.beta = args.f64Or("beta", 1.0);
  const bool ta = l.transA, tb = l.transB;
  if (A.rank() != 2 || B.rank() != 2)
    args.fail("gemm operands A and B must be matrices, got " +
              shapeStr(A.shape) + " and " + shapeStr(B.shape));
  int64_t m = A.dim(ta ? 1 : 0), k = A.dim(ta ? 0 : 1);
  int64_t kb = B.dim(tb ? 1 : 0), n = B.dim(tb ? 0 : 1);
  if (k != kb)
    args.fail("gemm contraction dimensions differ: " + std::to_string(k) +
              " vs " + std::to_string(kb));
  if (out.shape != std::vector<int64_t>{m, n})
    args.fail("gemm output shape " + shapeStr(out.shape) + " must be " +
              shapeStr({m, n}));
  l.m = m, l.n = n, l.k = k;
  l.hasC = args.hasIn(2);
  if (l.hasC) {
    const TensorView &C = args.in(2);
    if (C.dtype != A.dtype)
      args.fail("gemm C must have A's element type");
    if (C.rank() > 2)
      args.fail("gemm C of shape " + shapeStr(C.shape) +
                " does not broadcast to " + shapeStr({m, n}));
    int64_t cr = C.rank() == 2 ? C.dim(0) : 1;
    int64_t cc = C.rank() >= 1 ? C.shape.back() : 1;
    if ((cr != 1 && cr != m) || (cc != 1 && cc != n))
      args.fail("gemm C of shape " + shapeStr(C.shape) +
                " does not broadcast to " + shapeStr({m, n}));
    l.cRowStride = cr == 1 ? 0 : cc;
    l.cColStride = cc == 1 ? 0 : 1;
  }
  l.lda = std::max<int64_t>(1, A.dim(1));
  l.ldb = std::max<int64_t>(1, B.dim(1));
  return l;
}

} // namespace parallax::rt::detail

#endif // PARALLAX_RUNTIME_KERNELS_LINALGLAYOUT_H
