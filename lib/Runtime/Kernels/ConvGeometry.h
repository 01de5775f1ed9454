//===- ConvGeometry.h - window geometry of convolution and pooling -*- C++ -*-===//
//
// What the CPU and CUDA convolution and pooling kernels read from their
// attributes and shapes, with the same checks and messages: the window
// geometry (strides, pads, dilations, output sizes, row-major strides) and
// the channel split of a grouped convolution (ConvTiling.h's plain data,
// passed to CUDA kernels by value).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_CONVGEOMETRY_H
#define PARALLAX_RUNTIME_KERNELS_CONVGEOMETRY_H

#include "parallax/Runtime/ConvTiling.h"
#include "parallax/Runtime/Kernel.h"

#include <cstdint>
#include <vector>

namespace parallax::rt::conv {

/// Reads and checks strides/pads/dilations (dilations all 1 when
/// `hasDilations` is false) for a window of `kernel` over the spatial dims of
/// `xShape`, and checks that `yShape` is [N, channels, out...].
Geo makeGeo(const KernelArgs &args, const std::vector<int64_t> &xShape,
            const std::vector<int64_t> &kernel, bool hasDilations, bool ceilMode,
            const std::vector<int64_t> &yShape, int64_t channels, const char *yWhat);

ConvShapes makeConvShapes(const KernelArgs &args, const std::vector<int64_t> &x,
                          const std::vector<int64_t> &w, const std::vector<int64_t> &y,
                          const char *yWhat);

/// Checks the element types of a convolution kernel's tensors (all those of
/// its first operand, f32 or f64) and conv's bias, and reads its shapes.
ConvShapes readConvShapes(const KernelArgs &args, ConvKind kind);

/// The shapes of a pooling kernel: x [N, C, in...] as N*C planes.
struct PoolDims {
  Geo g;
  int64_t planes = 0;
  bool countIncludePad = false;
};
PoolDims makePoolDims(const KernelArgs &args, const std::vector<int64_t> &x,
                      const std::vector<int64_t> &y, bool isMax, const char *yWhat);

/// The four pooling kernels: max_pool and avg_pool (x -> y), max_pool_grad
/// (x, dy -> dx) and avg_pool_grad (dy -> dx).
enum class PoolKind { Max, MaxGrad, Avg, AvgGrad };

/// Checks the element types of a pooling kernel's tensors (all those of its
/// first operand, f32 or f64) and max_pool_grad's dx shape, and reads its
/// geometry.
PoolDims readPoolDims(const KernelArgs &args, PoolKind kind);

} // namespace parallax::rt::conv

/// Registers a backend's convolution and pooling kernels into REGISTRY from
/// the factories convFactory, convGradInputFactory, convGradFilterFactory,
/// maxPoolFactory, maxPoolGradFactory, avgPoolFactory and
/// avgPoolGradFactory of the file that expands it.
#define PX_ADD_CONV_KERNELS(REGISTRY)                                          \
  do {                                                                         \
    (REGISTRY).add("conv", convFactory);                                       \
    (REGISTRY).add("conv_grad_input", convGradInputFactory);                   \
    (REGISTRY).add("conv_grad_filter", convGradFilterFactory);                 \
    (REGISTRY).add("max_pool", maxPoolFactory);                                \
    (REGISTRY).add("max_pool_grad", maxPoolGradFactory);                       \
    (REGISTRY).add("avg_pool", avgPoolFactory);                                \
    (REGISTRY).add("avg_pool_grad", avgPoolGradFactory);                       \
  } while (false)

#endif // PARALLAX_RUNTIME_KERNELS_CONVGEOMETRY_H
