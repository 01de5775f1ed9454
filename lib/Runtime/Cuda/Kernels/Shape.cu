//===- Shape.cu - CUDA kernels of the Shape family -------------------------===//
//
// transpose, concat, expand, slice, slice_grad, pad and pad_grad on the GPU,
// with the CPU kernels' checks and messages (lib/Runtime/Kernels/Shape.cpp).
// Elements move as unsigned integers of their size, so bits move unchanged.
//
// transpose, expand, slice and slice_grad are one strided copy over the
// destination's index space (dimensions merged where both sides are
// contiguous across them, as on the CPU); contiguous inner runs are copied
// in units of up to 16 bytes, and a copy whose innermost destination
// dimension reads the source with a stride (a transpose of the last
// dimension) goes through shared-memory tiles so that both sides coalesce.
// pad_grad gathers each source element's contributions in the order the
// CPU adds them, so its sums are the CPU's bit for bit.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtil.cuh"

#include "../../Kernels/KernelUtil.h"
#include "../../Kernels/ShapeMath.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace parallax::rt {
namespace {

using namespace detail;
using cuda::Scratch;

constexpr int kTile = 32, kTileRows = 8;

/// Copies in units of `unit` bytes instead of `es`-byte elements when the
/// innermost dimension is contiguous on both sides and every offset and
/// pointer allows it; returns the unit chosen (es when none is wider).
int64_t widenCopy(CopyGeometry &g, int64_t es, const void *src, void *dst) {
  const int l = g.nd - 1;
  if (g.tileDim >= 0 || g.src[l] != 1 || g.dst[l] != 1)
    return es;
  for (int64_t unit = 16; unit > es; unit /= 2) {
    const int64_t k = unit / es;
    bool ok = g.dims[l] % k == 0 && g.srcBase % k == 0 && g.dstBase % k == 0 &&
              (uintptr_t)src % unit == 0 && (uintptr_t)dst % unit == 0;
    for (int d = 0; ok && d < l; ++d)
      ok = g.src[d] % k == 0 && g.dst[d] % k == 0;
    if (!ok)
      continue;
    g.dims[l] /= k;
    for (int d = 0; d < l; ++d) {
      g.src[d] /= k;
      g.dst[d] /= k;
    }
    g.srcBase /= k;
    g.dstBase /= k;
    g.numel /= k;
    return unit;
  }
  return es;
}

/// The generic path: one destination index-space element per thread.
template <typename T>
void launchStridedCopy(cudaStream_t stream, const CopyGeometry &g, const T *src, T *dst) {
  cuda::forEach(stream, g.numel, [g, src, dst] __device__(int64_t i) {
    int64_t so = g.srcBase, dof = g.dstBase, rem = i;
    for (int d = g.nd - 1; d >= 0; --d) {
      const int64_t c = rem % g.dims[d];
      rem /= g.dims[d];
      so += c * g.src[d];
      dof += c * g.dst[d];
    }
    dst[dof] = src[so];
  });
}

/// The tiled path: kTile x kTile tiles of dimensions q = g.tileDim (source
/// stride 1) and l = the innermost (destination stride 1), read along q and
/// written along l through shared memory; blocks stride over the tiles.
template <typename T>
__global__ void tiledCopyKernel(CopyGeometry g, const T *src, T *dst,
                                int64_t outer, int64_t qTiles, int64_t lTiles) {
  __shared__ T tile[kTile][kTile + 1];
  const int q = g.tileDim, l = g.nd - 1;
  const int64_t Q = g.dims[q], L = g.dims[l], sl = g.src[l], dq = g.dst[q];
  const int64_t tiles = outer * qTiles * lTiles;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t lt = t % lTiles, rest = t / lTiles;
    const int64_t qt = rest % qTiles;
    int64_t o = rest / qTiles, so = g.srcBase, dof = g.dstBase;
    for (int d = l - 1; d >= 0; --d) {
      if (d == q)
        continue;
      const int64_t c = o % g.dims[d];
      o /= g.dims[d];
      so += c * g.src[d];
      dof += c * g.dst[d];
    }
    const int64_t q0 = qt * kTile, l0 = lt * kTile;
    // tile[j][x] holds element (l0 + j, q0 + x).
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      const int64_t qi = q0 + threadIdx.x, li = l0 + j;
      if (qi < Q && li < L)
        tile[j][threadIdx.x] = src[so + li * sl + qi];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      const int64_t qi = q0 + j, li = l0 + threadIdx.x;
      if (qi < Q && li < L)
        dst[dof + qi * dq + li] = tile[threadIdx.x][j];
    }
    __syncthreads();
  }
}

template <typename T>
void launchTiledCopy(cudaStream_t stream, const CopyGeometry &g, const T *src, T *dst) {
  const int q = g.tileDim, l = g.nd - 1;
  int64_t outer = 1;
  for (int d = 0; d < l; ++d)
    if (d != q)
      outer *= g.dims[d];
  const int64_t qTiles = (g.dims[q] + kTile - 1) / kTile;
  const int64_t lTiles = (g.dims[l] + kTile - 1) / kTile;
  const int64_t tiles = outer * qTiles * lTiles;
  const unsigned blocks = (unsigned)std::min<int64_t>(tiles, 65535 * 8);
  tiledCopyKernel<T><<<blocks, dim3(kTile, kTileRows), 0, stream>>>(g, src, dst, outer,
                                                                    qTiles, lTiles);
  PX_CUDA_LAUNCHED();
}

template <typename T>
KernelFn makeCopy(CudaDevice &dev, const CopyGeometry &g, const void *src, void *dst) {
  const T *s = static_cast<const T *>(src);
  T *d = static_cast<T *>(dst);
  CudaDevice *device = &dev;
  return [device, g, s, d] {
    if (g.numel == 0)
      return;
    if (g.tileDim >= 0)
      launchTiledCopy(device->stream(), g, s, d);
    else
      launchStridedCopy(device->stream(), g, s, d);
  };
}

KernelFn makeCopyBySize(CudaDevice &dev, const KernelArgs &args, const std::string &what,
                        size_t elementSize, CopyGeometry g, const void *src, void *dst) {
  if (elementSize != 1 && elementSize != 2 && elementSize != 4 && elementSize != 8)
    args.fail(what + ": unsupported element size");
  switch (widenCopy(g, (int64_t)elementSize, src, dst)) {
  case 1: return makeCopy<uint8_t>(dev, g, src, dst);
  case 2: return makeCopy<uint16_t>(dev, g, src, dst);
  case 4: return makeCopy<uint32_t>(dev, g, src, dst);
  case 8: return makeCopy<uint64_t>(dev, g, src, dst);
  default: return makeCopy<uint4>(dev, g, src, dst);
  }
}

//===----------------------------------------------------------------------===//
// transpose, expand, slice, slice_grad.
//===----------------------------------------------------------------------===//

KernelFn transposeFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0);
  CopyGeometry g = transposeGeometry(args);
  return makeCopyBySize(dev, args, "transpose", sizeOf(x.dtype), g, x.data, y.data);
}

KernelFn expandFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0);
  CopyGeometry g = expandGeometry(args);
  return makeCopyBySize(dev, args, "expand", sizeOf(x.dtype), g, x.data, y.data);
}

KernelFn sliceFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0);
  CopyGeometry g = sliceGeometry(args);
  return makeCopyBySize(dev, args, "slice", sizeOf(x.dtype), g, x.data, y.data);
}

KernelFn sliceGradFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &dy = args.in(0), &dx = args.out(0);
  CopyGeometry g = sliceGradGeometry(args);
  KernelFn scatter =
      makeCopyBySize(dev, args, "slice_grad", sizeOf(dy.dtype), g, dy.data, dx.data);
  // Slice positions are distinct, so a dy as large as dx covers all of it.
  const bool covers = dy.numElements() == dx.numElements();
  void *dst = dx.data;
  const int64_t bytes = dx.bytes();
  CudaDevice *device = &dev;
  return [scatter, covers, dst, bytes, device] {
    if (!covers && bytes > 0)
      PX_CUDA_CHECK(cudaMemsetAsync(dst, 0, (size_t)bytes, device->stream()));
    scatter();
  };
}

//===----------------------------------------------------------------------===//
// concat.
//===----------------------------------------------------------------------===//

/// One input of a concat, in units: its part of each output row.
struct ConcatPart {
  const void *src;
  int64_t len;    // units per outer index
  int64_t offset; // in the output row, units
};

template <typename U>
void launchConcat(cudaStream_t stream, const ConcatPart *parts, int64_t nParts,
                  U *dst, int64_t outer, int64_t row) {
  cuda::forEach(stream, outer * row, [=] __device__(int64_t i) {
    const int64_t o = i / row, r = i % row;
    // The last part starting at or before r: empty parts share their
    // offset with the next one and are skipped.
    int64_t lo = 0, hi = nParts - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (parts[mid].offset <= r)
        lo = mid;
      else
        hi = mid - 1;
    }
    const ConcatPart p = parts[lo];
    dst[i] = static_cast<const U *>(p.src)[o * p.len + r - p.offset];
  });
}

KernelFn concatFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &y = args.out(0);
  ConcatLayout layout = concatLayout(args);
  const int64_t es = (int64_t)sizeOf(y.dtype), outer = layout.outer,
                total = layout.rowBytes;
  std::vector<ConcatPart> parts; // in bytes until the unit is known
  for (const ConcatPiece &p : layout.pieces)
    if (p.bytes)
      parts.push_back({p.src, p.bytes, p.offset});
  if (total == 0 || outer == 0)
    return [] {};
  // The widest unit (up to 16 bytes) that every part's row and pointer allow.
  int64_t unit = 16;
  auto fits = [&](int64_t u) {
    if ((uintptr_t)y.data % u || total % u)
      return false;
    for (const ConcatPart &p : parts)
      if ((uintptr_t)p.src % u || p.len % u)
        return false;
    return true;
  };
  while (unit > es && !fits(unit))
    unit /= 2;
  for (ConcatPart &p : parts) {
    p.len /= unit;
    p.offset /= unit;
  }
  Scratch table = cuda::deviceArray(dev, parts);
  const int64_t nParts = (int64_t)parts.size(), row = total / unit;
  void *dst = y.data;
  CudaDevice *device = &dev;
  return [table, nParts, dst, outer, row, unit, device] {
    const auto *p = static_cast<const ConcatPart *>(table->data());
    cudaStream_t s = device->stream();
    switch (unit) {
    case 1: launchConcat(s, p, nParts, static_cast<uint8_t *>(dst), outer, row); break;
    case 2: launchConcat(s, p, nParts, static_cast<uint16_t *>(dst), outer, row); break;
    case 4: launchConcat(s, p, nParts, static_cast<uint32_t *>(dst), outer, row); break;
    case 8: launchConcat(s, p, nParts, static_cast<uint64_t *>(dst), outer, row); break;
    default: launchConcat(s, p, nParts, static_cast<uint4 *>(dst), outer, row); break;
    }
  };
}

//===----------------------------------------------------------------------===//
// pad and pad_grad.
//===----------------------------------------------------------------------===//

/// For pad: per dimension of the output, its size, the input's stride and
/// where its source map starts in `maps` (padSources's, flattened).
struct PadTables {
  std::vector<int64_t> dims, inStrides, mapStart, maps;
};

template <typename T>
KernelFn makePad(CudaDevice &dev, const TensorView &x, const TensorView &y,
                 const std::vector<std::vector<int64_t>> &src, T fill) {
  const int rank = (int)src.size();
  std::vector<int64_t> inStrides = stridesOf(x.shape), table;
  // [dims | inStrides | mapStart | maps]
  table.insert(table.end(), y.shape.begin(), y.shape.end());
  table.insert(table.end(), inStrides.begin(), inStrides.end());
  int64_t at = 3 * rank;
  for (int d = 0; d < rank; ++d) {
    table.push_back(at);
    at += (int64_t)src[d].size();
  }
  for (int d = 0; d < rank; ++d)
    table.insert(table.end(), src[d].begin(), src[d].end());
  Scratch tables = cuda::deviceArray(dev, table);
  const T *in = x.as<const T>();
  T *out = y.as<T>();
  const int64_t n = y.numElements();
  CudaDevice *device = &dev;
  return [tables, rank, in, out, n, fill, device] {
    const int64_t *t = static_cast<const int64_t *>(tables->data());
    cuda::forEach(device->stream(), n, [=] __device__(int64_t i) {
      int64_t rem = i, base = 0;
      bool filled = false;
      for (int d = rank - 1; d >= 0; --d) {
        const int64_t o = rem % t[d];
        rem /= t[d];
        const int64_t s = t[t[2 * rank + d] + o];
        if (s < 0)
          filled = true;
        else
          base += s * t[rank + d];
      }
      out[i] = filled ? fill : in[base];
    });
  };
}

KernelFn padFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0);
  auto src = padMaps(args);
  return withPadFill(args, [&](auto fill) {
    return makePad<decltype(fill)>(dev, x, y, src, fill);
  });
}

/// pad_grad as a gather: for each dx element, the dy positions whose source
/// it is, per dimension an ascending list (CSR: `starts` of each source
/// index into `positions`), enumerated in dy's row-major order, which is
/// the order the CPU adds them in.
template <typename T>
KernelFn makePadGrad(CudaDevice &dev, const TensorView &dy, const TensorView &dx,
                     const std::vector<std::vector<int64_t>> &src) {
  const int rank = (int)src.size();
  std::vector<int64_t> dyStrides = stridesOf(dy.shape), starts, positions;
  // [dxDims | dyStrides | startsBase | starts | positions]
  std::vector<int64_t> startsBase(rank);
  for (int d = 0; d < rank; ++d) {
    const int64_t n = dx.shape[d];
    std::vector<int64_t> count(n + 1, 0);
    for (int64_t i : src[d])
      if (i >= 0)
        ++count[i + 1];
    for (int64_t i = 0; i < n; ++i)
      count[i + 1] += count[i];
    startsBase[d] = (int64_t)starts.size();
    std::vector<int64_t> fill(count.begin(), count.end() - 1);
    const int64_t base = (int64_t)positions.size();
    positions.resize(base + count[n]);
    for (int64_t o = 0; o < (int64_t)src[d].size(); ++o)
      if (src[d][o] >= 0)
        positions[base + fill[src[d][o]]++] = o;
    for (int64_t c : count)
      starts.push_back(base + c);
  }
  std::vector<int64_t> table(dx.shape.begin(), dx.shape.end());
  table.insert(table.end(), dyStrides.begin(), dyStrides.end());
  const int64_t headerSize = 3 * rank;
  for (int d = 0; d < rank; ++d)
    table.push_back(headerSize + startsBase[d]);
  const int64_t positionsAt = headerSize + (int64_t)starts.size();
  table.insert(table.end(), starts.begin(), starts.end());
  table.insert(table.end(), positions.begin(), positions.end());
  // starts hold offsets into positions; make them offsets into the table.
  for (int64_t k = headerSize; k < positionsAt; ++k)
    table[k] += positionsAt;
  Scratch tables = cuda::deviceArray(dev, table);
  const T *g = dy.as<const T>();
  T *out = dx.as<T>();
  const int64_t n = dx.numElements();
  CudaDevice *device = &dev;
  return [tables, rank, g, out, n, device] {
    const int64_t *t = static_cast<const int64_t *>(tables->data());
    cuda::forEach(device->stream(), n, [=] __device__(int64_t i) {
      // t[d]: dx dims; t[rank + d]: dy strides; t[2 * rank + d]: where
      // dimension d's starts are; a start is a table offset of positions.
      int64_t count = 1, rem = i;
      for (int d = rank - 1; d >= 0 && count; --d) {
        const int64_t c = rem % t[d];
        rem /= t[d];
        const int64_t *s = t + t[2 * rank + d] + c;
        count *= s[1] - s[0];
      }
      T acc = T(0);
      for (int64_t m = 0; m < count; ++m) {
        int64_t mm = m, off = 0;
        rem = i;
        for (int d = rank - 1; d >= 0; --d) {
          const int64_t c = rem % t[d];
          rem /= t[d];
          const int64_t *s = t + t[2 * rank + d] + c;
          const int64_t len = s[1] - s[0];
          off += t[s[0] + mm % len] * t[rank + d];
          mm /= len;
        }
        acc += g[off];
      }
      out[i] = acc;
    });
  };
}

KernelFn padGradFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &dy = args.in(0), &dx = args.out(0);
  auto src = padGradMaps(args);
  return withPadGradType(args, [&](auto zero) {
    return makePadGrad<decltype(zero)>(dev, dy, dx, src);
  });
}

} // namespace

void registerCudaShapeKernels(KernelRegistry &r) {
  PX_ADD_SHAPE_KERNELS(r);
}

} // namespace parallax::rt
