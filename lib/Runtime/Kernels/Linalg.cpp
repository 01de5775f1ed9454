//===- Linalg.cpp - matmul and gemm kernels -------------------------------===//
//
// px.matmul (numpy matmul: vector promotion, broadcast batch dimensions) and
// px.gemm (ONNX Gemm). Floats go through OpenBLAS; integers through a plain
// loop with wrap-around arithmetic.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Kernel.h"

#include "KernelUtil.h"

#include "Blas.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>

namespace parallax::rt {
namespace {

using namespace detail;

/// Y[M,N] = A[M,K] * B[K,N], all contiguous row-major, through BLAS.
template <typename T>
void matmulBlas(int threads, const T *a, const T *b, T *y, int64_t m,
                int64_t n, int64_t k) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    std::fill(y, y + m * n, T(0));
    return;
  }
  if (n == 1) // matrix x vector
    blas::gemv(threads, false, m, k, T(1), a, k, b, T(0), y);
  else if (m == 1) // vector x matrix: y = B^T a
    blas::gemv(threads, true, k, n, T(1), b, n, a, T(0), y);
  else
    blas::gemm(threads, false, false, m, n, k, T(1), a, k, b, n, T(0), y, n);
}

/// The same with integers: wrap-around (two's complement) arithmetic.
template <typename T>
void matmulLoop(const T *a, const T *b, T *y, int64_t rowBegin, int64_t rowEnd,
                int64_t n, int64_t k) {
  using W = uint64_t;
  for (int64_t i = rowBegin; i < rowEnd; ++i) {
    T *yr = y + i * n;
    std::fill(yr, yr + n, T(0));
    for (int64_t p = 0; p < k; ++p) {
      W av = (W)(int64_t)a[i * k + p];
      const T *br = b + p * n;
      for (int64_t j = 0; j < n; ++j)
        yr[j] = (T)(int64_t)((W)(int64_t)yr[j] + av * (W)(int64_t)br[j]);
    }
  }
}

template <typename T> KernelFn matmulTyped(KernelArgs &args) {
  const TensorView &lhs = args.in(0), &rhs = args.in(1), &out = args.out(0);
  std::vector<int64_t> as = lhs.shape, bs = rhs.shape;
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
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

  int64_t batches = product(batch, 0, rank);
  int64_t aCount = product(aBatch, 0, rank), bCount = product(bBatch, 0, rank);
  const T *a = lhs.as<T>(), *b = rhs.as<T>();
  T *y = out.as<T>();
  int threads = args.env.threads;

  // Matrix offsets of each batch element in A and B (broadcast strides).
  auto offsets = std::make_shared<std::vector<std::pair<int64_t, int64_t>>>();
  bool fold = batches <= 1 || (bCount == 1 && aCount == batches);
  if (!fold) {
    std::vector<int64_t> aStr(rank), bStr(rank);
    int64_t sa = m * k, sb = k * n;
    for (size_t d = rank; d-- > 0;) {
      aStr[d] = aBatch[d] == 1 ? 0 : sa;
      bStr[d] = bBatch[d] == 1 ? 0 : sb;
      sa *= aBatch[d];
      sb *= bBatch[d];
    }
    offsets->resize(batches);
    std::vector<int64_t> idx(rank, 0);
    for (int64_t i = 0; i < batches; ++i) {
      int64_t oa = 0, ob = 0;
      for (size_t d = 0; d < rank; ++d) {
        oa += idx[d] * aStr[d];
        ob += idx[d] * bStr[d];
      }
      (*offsets)[i] = {oa, ob};
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < batch[d])
          break;
        idx[d] = 0;
      }
    }
  }

  if constexpr (std::is_floating_point_v<T>) {
    if (fold) // one GEMM; a batch of A over a shared B folds into M
      return [=] { matmulBlas(threads, a, b, y, batches * m, n, k); };
    // Small products would each run on one thread: spread the batch over
    // the threads instead. Large ones are split inside blas::gemm. The
    // limits are OpenBLAS 0.3's thresholds for going multi-threaded (gemm:
    // m*n*k < 65536 * 4; gemv: m*n < 2304 * 4), which blas:: also uses.
    bool vector = m == 1 || n == 1;
    bool small = vector ? (n == 1 ? m * k : k * n) < 2304 * 4
                        : m * n * k < 65536 * 4;
    return [=] {
      auto body = [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          matmulBlas(small ? 1 : threads, a + (*offsets)[i].first,
                     b + (*offsets)[i].second, y + i * m * n, m, n, k);
      };
      if (small)
        parallelFor(threads, batches, 2, body);
      else
        body(0, batches);
    };
  } else {
    int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, n * k));
    if (fold)
      return [=] {
        int64_t rows = batches * m;
        parallelFor(threads, rows, grain, [&](int64_t r0, int64_t r1) {
          matmulLoop(a, b, y, r0, r1, n, k);
        });
      };
    return [=] {
      parallelFor(threads, batches * m, grain, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1;) {
          int64_t i = r / m, row = r % m;
          int64_t rowEnd = std::min(m, row + (r1 - r));
          matmulLoop(a + (*offsets)[i].first, b + (*offsets)[i].second,
                     y + i * m * n, row, rowEnd, n, k);
          r += rowEnd - row;
        }
      });
    };
  }
}

KernelFn matmulFactory(KernelArgs &args) {
  const TensorView &lhs = args.in(0), &rhs = args.in(1), &out = args.out(0);
  if (lhs.dtype != rhs.dtype || out.dtype != lhs.dtype)
    args.fail(std::string("matmul operands and result must share one element "
                          "type, got ") +
              nameOf(lhs.dtype) + ", " + nameOf(rhs.dtype) + " -> " +
              nameOf(out.dtype));
  if (lhs.rank() < 1 || rhs.rank() < 1)
    args.fail("matmul operands must have rank >= 1");
  switch (lhs.dtype) {
  case DType::F32: return matmulTyped<float>(args);
  case DType::F64: return matmulTyped<double>(args);
  case DType::I64: return matmulTyped<int64_t>(args);
  case DType::I32: return matmulTyped<int32_t>(args);
  case DType::I16: return matmulTyped<int16_t>(args);
  case DType::I8: return matmulTyped<int8_t>(args);
  default:
    args.fail(std::string("matmul: element type ") + nameOf(lhs.dtype) +
              " is not supported by the CPU runtime");
  }
}

template <typename T> KernelFn gemmTyped(KernelArgs &args) {
  const TensorView &A = args.in(0), &B = args.in(1), &out = args.out(0);
  bool ta = args.flag("trans_a"), tb = args.flag("trans_b");
  T alpha = (T)args.f64Or("alpha", 1.0), beta = (T)args.f64Or("beta", 1.0);
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
  bool hasC = args.hasIn(2);
  int64_t cRowStride = 0, cColStride = 0;
  const T *c = nullptr;
  if (hasC) {
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
    cRowStride = cr == 1 ? 0 : cc;
    cColStride = cc == 1 ? 0 : 1;
    c = C.as<T>();
  }
  const T *a = A.as<T>(), *b = B.as<T>();
  T *y = out.as<T>();
  bool useC = hasC && beta != T(0);
  int64_t lda = std::max<int64_t>(1, A.dim(1)), ldb = std::max<int64_t>(1, B.dim(1));
  int threads = args.env.threads;
  return [=] {
    if (m == 0 || n == 0)
      return;
    if (useC) {
      parallelFor(threads, m, std::max<int64_t>(1, 16384 / n),
                  [&](int64_t r0, int64_t r1) {
                    for (int64_t i = r0; i < r1; ++i) {
                      const T *cr = c + i * cRowStride;
                      T *yr = y + i * n;
                      if (cColStride)
                        for (int64_t j = 0; j < n; ++j)
                          yr[j] = beta * cr[j];
                      else
                        std::fill(yr, yr + n, beta * cr[0]);
                    }
                  });
    }
    // With k == 0 this leaves beta * C (or zeros): blas::gemm handles it.
    blas::gemm(threads, ta, tb, m, n, k, alpha, a, lda, b, ldb,
               useC ? T(1) : T(0), y, n);
  };
}

KernelFn gemmFactory(KernelArgs &args) {
  const TensorView &A = args.in(0), &B = args.in(1), &out = args.out(0);
  if (B.dtype != A.dtype || out.dtype != A.dtype)
    args.fail("gemm operands and result must share one element type");
  switch (A.dtype) {
  case DType::F32: return gemmTyped<float>(args);
  case DType::F64: return gemmTyped<double>(args);
  default:
    args.fail(std::string("gemm: element type ") + nameOf(A.dtype) +
              " is not supported by the CPU runtime");
  }
}

} // namespace

void registerLinalgKernels(KernelRegistry &r) {
  r.add("matmul", matmulFactory);
  r.add("gemm", gemmFactory);
}

} // namespace parallax::rt
