//===- ConvTiling.cpp - how the CPU convolutions cut their GEMMs ----------===//

#include "parallax/Runtime/ConvTiling.h"

#include <algorithm>

namespace parallax::rt::conv {

Geo windowGeo(const std::vector<int64_t> &xShape, const std::vector<int64_t> &kernel,
              const std::vector<int64_t> &strides, const std::vector<int64_t> &pads,
              const std::vector<int64_t> &dilations, bool ceilMode) {
  Geo g;
  int nd = (int)xShape.size() - 2;
  g.nd = nd;
  for (int i = 0; i < nd; ++i) {
    g.in[i] = xShape[2 + i];
    g.k[i] = kernel[i];
    g.s[i] = strides[i];
    g.d[i] = dilations[i];
    g.pb[i] = pads[i];
    g.pe[i] = pads[nd + i];
    g.out[i] = windowOutputSize(g.in[i], g.k[i], g.s[i], g.pb[i], g.pe[i], g.d[i], ceilMode);
  }
  for (int i = nd - 1; i >= 0; --i) {
    g.inStride[i] = g.inSize;
    g.kStride[i] = g.kSize;
    g.outStride[i] = g.outSize;
    g.inSize *= g.in[i];
    g.kSize *= g.k[i];
    g.outSize *= g.out[i];
    if (i < nd - 1)
      g.outOuter *= g.out[i];
  }
  g.pointwise = true;
  for (int i = 0; i < nd; ++i)
    if (g.k[i] != 1 || g.s[i] != 1 || g.pb[i] != 0 || g.pe[i] != 0)
      g.pointwise = false;
  return g;
}

ConvShapes convShapes(const std::vector<int64_t> &x, const std::vector<int64_t> &w,
                      int64_t group, const std::vector<int64_t> &strides,
                      const std::vector<int64_t> &pads,
                      const std::vector<int64_t> &dilations) {
  ConvShapes cs;
  cs.group = group;
  cs.n = x[0];
  cs.c = x[1];
  cs.m = w[0];
  cs.cg = cs.c / group;
  cs.mg = cs.m / group;
  cs.g = windowGeo(x, std::vector<int64_t>(w.begin() + 2, w.end()), strides, pads,
                   dilations, /*ceilMode=*/false);
  cs.kc = cs.cg * cs.g.kSize;
  return cs;
}

ConvDims tileConv(const ConvShapes &shapes, ConvKind kind, int64_t elemBytes,
                  int threads) {
  ConvDims cd;
  static_cast<ConvShapes &>(cd) = shapes;
  const Geo &g = cd.g;
  cd.pointwise = g.pointwise;
  cd.depthwise = !cd.pointwise && cd.cg == 1 && cd.group > 1;
  int64_t outL = g.out[g.nd - 1];
  // ~512 KiB of columns, 256 to 4096 of them.
  int64_t target = std::clamp<int64_t>(
      (int64_t(1) << 19) / (elemBytes * std::max<int64_t>(cd.kc, 1)), 256, 4096);
  if (g.outSize >= target || cd.n <= 1) {
    cd.chunk = 1;
    cd.rowsPerTile = std::clamp<int64_t>(target / std::max<int64_t>(outL, 1), 1,
                                         std::max<int64_t>(g.outOuter, 1));
  } else {
    cd.rowsPerTile = g.outOuter;
    cd.chunk = std::clamp<int64_t>(target / std::max<int64_t>(g.outSize, 1), 1, cd.n);
    // Leave an image chunk for every thread.
    if (threads > 1)
      cd.chunk = std::min(cd.chunk, std::max<int64_t>(1, cd.n / threads));
  }
  cd.shift = g.nd == 2 && cd.group == 1 && !cd.pointwise && g.k[0] > 1;
  if (cd.shift) {
    // Z (see the row-shift lowering) of a unit of about 128 KiB: it and
    // BLAS's packed panels stay in L2 (measured best between 64 and 512 KiB).
    const int64_t budget = int64_t(1) << 17, kh1 = shiftRowHalo(g);
    const int64_t zRow =
        std::max<int64_t>(1, elemBytes * shiftParities(g) * cd.c * g.k[1] * outL);
    const int64_t imageZ = (g.out[0] + kh1) * zRow;
    if (imageZ <= budget && cd.n > 1) {
      cd.rowsPerTile = g.out[0];
      cd.chunk = std::clamp<int64_t>(budget / imageZ, 1, cd.n);
      if (threads > 1)
        cd.chunk = std::min(cd.chunk, std::max<int64_t>(1, cd.n / threads));
    } else {
      cd.chunk = 1;
      cd.rowsPerTile = std::clamp<int64_t>(budget / zRow - kh1, 1, g.out[0]);
    }
    // GEMM columns: the unit's Z rows but the last image's KH-1 halo rows.
    cd.maxCols = (cd.chunk * (cd.rowsPerTile + kh1) - kh1) * outL;
  } else {
    cd.maxCols = cd.chunk * cd.rowsPerTile * outL;
  }
  cd.threads = std::max(1, threads);
  cd.imageChunks = (cd.n + cd.chunk - 1) / cd.chunk;
  cd.units = cd.imageChunks * ((g.outOuter + cd.rowsPerTile - 1) / cd.rowsPerTile);
  if (kind == ConvKind::GradFilter && cd.perThread() &&
      cd.threads * cd.m * cd.kc * elemBytes > (int64_t(64) << 20))
    cd.splitImages = false;
  return cd;
}

std::vector<int64_t> convScratch(const ConvDims &cd, ConvKind kind) {
  if (cd.pointwise || cd.depthwise)
    return {};
  const Geo &g = cd.g;
  const int64_t workers = cd.workers();
  // The output channels a GEMM of the kernel covers: all of them in the
  // row-shift lowering (one group), a group's with im2col.
  const int64_t bufRows = cd.shift ? cd.m : cd.mg;
  const int64_t buf = workers * (cd.chunk > 1 ? bufRows * cd.maxCols : 0);
  const int64_t cols =
      cd.shift ? workers * shiftParities(g) * cd.c * g.k[1] *
                     (cd.maxCols + shiftRowHalo(g) * g.out[1])
               : workers * cd.kc * cd.maxCols;
  if (kind == ConvKind::GradFilter)
    return {cols, buf, workers * cd.m * cd.kc};
  if (cd.shift)
    return {cols, buf, cd.m * cd.kc};
  return {cols, buf};
}

int64_t scratchBytes(const std::vector<int64_t> &sizes, int64_t elemBytes) {
  int64_t used = 0;
  for (int64_t n : sizes)
    used = scratchOffset(used) + n * elemBytes;
  return used;
}

} // namespace parallax::rt::conv
