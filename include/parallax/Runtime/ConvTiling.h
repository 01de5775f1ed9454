//===- ConvTiling.h - how the CPU convolutions cut their GEMMs -*- C++ -*-===//
//
// The window geometry of a convolution or pooling, how the CPU convolution
// kernels cut it into GEMMs, and the scratch each kernel takes from the
// session's workspace for that. The kernels (lib/Runtime/Kernels/Conv.cpp)
// and the compiler's memory estimate (PlanEmitter) both call these, so the
// plan predicts the workspace the runtime allocates. Plain data, without
// checks: the kernels check attributes and shapes before they get here.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_CONVTILING_H
#define PARALLAX_RUNTIME_CONVTILING_H

#include <climits>
#include <cstdint>
#include <vector>

namespace parallax::rt::conv {

/// Output length of one spatial dimension of a convolution or pooling
/// window, as ONNX and PyTorch size it (the px shape rule and the kernels
/// both use it); a value < 1 when the window does not fit. With ceil_mode
/// the last window must start inside the input or the leading padding: one
/// that would start in the trailing padding is dropped.
inline int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin,
                                int64_t padEnd, int64_t dilation, bool ceilMode) {
  int64_t effectiveKernel = dilation * (kernel - 1) + 1;
  int64_t span = in + padBegin + padEnd - effectiveKernel;
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceilMode && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

constexpr int kMaxSpatial = 8;

/// The window geometry of one kernel, in elements.
struct Geo {
  int nd = 0;
  int64_t in[kMaxSpatial] = {}, out[kMaxSpatial] = {}, k[kMaxSpatial] = {},
          s[kMaxSpatial] = {}, d[kMaxSpatial] = {}, pb[kMaxSpatial] = {},
          pe[kMaxSpatial] = {};
  int64_t inStride[kMaxSpatial] = {}, kStride[kMaxSpatial] = {},
          outStride[kMaxSpatial] = {};
  int64_t inSize = 1, outSize = 1, kSize = 1;
  /// Product of all output dims but the last (output "rows").
  int64_t outOuter = 1;
  /// 1x1 kernel, stride 1, no padding: im2col is the identity.
  bool pointwise = false;
};

/// The geometry of a window `kernel` over the spatial dims of x [N, C,
/// spatial...]; pads are begins then ends. Arguments already checked.
Geo windowGeo(const std::vector<int64_t> &xShape, const std::vector<int64_t> &kernel,
              const std::vector<int64_t> &strides, const std::vector<int64_t> &pads,
              const std::vector<int64_t> &dilations, bool ceilMode);

/// The shapes of conv and its gradients: x [N, C, in...], w [M, C/group,
/// k...], y [N, M, out...].
struct ConvShapes {
  Geo g;
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0, mg = 0, kc = 0;
};
ConvShapes convShapes(const std::vector<int64_t> &x, const std::vector<int64_t> &w,
                      int64_t group, const std::vector<int64_t> &strides,
                      const std::vector<int64_t> &pads,
                      const std::vector<int64_t> &dilations);

/// The three convolution kernels: conv (x, w[, b] -> y), conv_grad_input
/// (dy, w -> dx) and conv_grad_filter (x, dy -> dw).
enum class ConvKind { Forward, GradInput, GradFilter };

/// The row-shift lowering: P, the phases of the tap rows (min(sh, (KH - 1)
/// * dh + 1); a phase no tap uses, when dh shares a factor with sh, is built
/// but not read).
inline int64_t shiftParities(const Geo &g) {
  int64_t span = (g.k[0] - 1) * g.d[0] + 1;
  return g.s[0] < span ? g.s[0] : span;
}
/// A: the largest row shift.
inline int64_t shiftRowHalo(const Geo &g) { return (g.k[0] - 1) * g.d[0] / g.s[0]; }

/// Shapes shared by conv and its gradients, and how the GEMMs are cut.
struct ConvDims : ConvShapes {
  /// A GEMM covers `chunk` whole images (small feature maps), or, when
  /// chunk is 1, `rowsPerTile` output rows of one image, so that its columns
  /// buffer stays about L2-sized.
  int64_t chunk = 1, rowsPerTile = 1, maxCols = 0;
  /// GEMM units (image chunks x row tiles) and image chunks.
  int64_t units = 0, imageChunks = 0;
  int threads = 1;
  /// 1x1, stride 1, unpadded: a plain GEMM on the image.
  bool pointwise = false;
  /// One input channel per group (depthwise): direct loops, no GEMM.
  bool depthwise = false;
  /// 2-D, one group, KH > 1: the row-shift lowering (Conv.cpp) instead of
  /// im2col. chunk and rowsPerTile then cut the images for it.
  bool shift = false;

  /// Whether threads may split the images (see Conv.cpp's forWorkers).
  bool splitImages = true;

  bool perThread() const {
    return splitImages && threads > 1 && imageChunks >= threads;
  }
  /// Scratch slots: one per worker.
  int64_t workers() const { return perThread() ? threads : 1; }
};

/// How `kind` cuts the GEMMs of `shapes` for `threads` threads and elements
/// of `elemBytes` bytes (the filter gradient's own choice included: its
/// threads split the images unless their partial sums would take more than
/// 64 MiB).
ConvDims tileConv(const ConvShapes &shapes, ConvKind kind, int64_t elemBytes,
                  int threads);

/// A convolution kernel's scratch, in elements, in the order the kernel
/// takes it: the columns (im2col's, or the row-shift lowering's Z), the
/// rearranged output or output gradient of a chunk of images, and the
/// permuted weights (row shift, forward and input gradient) or the
/// per-worker filter-gradient partial sums (filter gradient). Empty for
/// the pointwise and depthwise kernels.
std::vector<int64_t> convScratch(const ConvDims &cd, ConvKind kind);

/// max_pool_grad's scratch, in elements of the data type and of the index
/// type: each worker's running maxima and their positions.
inline int64_t maxPoolGradScratch(const Geo &g, int threads) {
  return (int64_t)(threads > 1 ? threads : 1) * g.outSize;
}
/// The bytes of max_pool_grad's positions: 4 (4 lanes per SSE register)
/// unless a plane is too large for 32 bits.
inline int64_t maxPoolGradIndexBytes(const Geo &g) {
  return g.inSize <= INT32_MAX ? 4 : 8;
}

/// Bytes of the workspace pieces `sizes` of `elemBytes` each, placed as
/// KernelArgs::scratch places them (each on its own cache lines).
int64_t scratchBytes(const std::vector<int64_t> &sizes, int64_t elemBytes);
/// The offset of the next piece after `used` bytes.
inline int64_t scratchOffset(int64_t used) { return (used + 63) / 64 * 64; }

} // namespace parallax::rt::conv

#endif // PARALLAX_RUNTIME_CONVTILING_H
