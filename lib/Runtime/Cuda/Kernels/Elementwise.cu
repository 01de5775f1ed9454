//===- Elementwise.cu - CUDA kernels of the Elementwise family ---------------===//
//
// The GPU twins of lib/Runtime/Kernels/Elementwise.cpp: the same bind-time
// checks and messages, the same broadcast Geometry (BroadcastGeometry.h) and
// the same element values (ElementwiseMath.h). One thread per result element
// in grid-stride loops; a broadcast operand's offset comes from the merged
// dimensions, so the common cases (same shapes, a scalar, a bias row) are a
// single dimension or two.
//
// Where the CPU throws at run time (integer division by zero, integer 0 to a
// negative power) the GPU reports a fault, which synchronize() turns into an
// error naming the kernel.
//
// f32 exp, tanh, sigmoid and erf use CUDA's accurate functions; the CPU's
// vectorized approximations are within 1e-6 relative of them.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtil.cuh"

#include "../../Kernels/BroadcastGeometry.h"
#include "../../Kernels/ElementwiseLayout.h"
#include "../../Kernels/ElementwiseMath.h"
#include "../../Kernels/KernelUtil.h"
#include "parallax/Runtime/Random.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

namespace parallax::rt {
namespace {

using namespace detail;
using ew::Bin;
using ew::Cmp;
using ew::dispatchAny;
using ew::Geometry;
using ew::Storage;

//===----------------------------------------------------------------------===//
// Broadcast offsets.
//===----------------------------------------------------------------------===//

/// Offsets into the first N operands of result element i.
template <int N>
__device__ inline void operandOffsets(const Geometry &g, int64_t i, int64_t (&off)[N]) {
  if (g.nd == 1) {
    for (int k = 0; k < N; ++k)
      off[k] = i * g.strides[k][0];
    return;
  }
  for (int k = 0; k < N; ++k)
    off[k] = 0;
  for (int d = g.nd - 1; d >= 0; --d) {
    const int64_t size = g.dims[d];
    const int64_t c = i % size;
    i /= size;
    for (int k = 0; k < N; ++k)
      off[k] += c * g.strides[k][d];
  }
}

//===----------------------------------------------------------------------===//
// Binary operations.
//===----------------------------------------------------------------------===//

template <typename TA, typename TB, typename TO, typename Op>
__global__ void binaryKernel(Geometry g, const TA *a, const TB *b, TO *o, Op op) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < g.numel;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    operandOffsets<2>(g, i, off);
    o[i] = (TO)op(a[off[0]], b[off[1]]);
  }
}

template <typename TA, typename TB, typename TO, typename Op>
KernelFn makeBinary(CudaDevice &dev, const Geometry &g, const TensorView &a,
                    const TensorView &b, const TensorView &o, Op op) {
  const TA *pa = a.as<const TA>();
  const TB *pb = b.as<const TB>();
  TO *po = o.as<TO>();
  cudaStream_t stream = dev.stream();
  return [g, pa, pb, po, op, stream] {
    if (g.numel == 0)
      return;
    binaryKernel<<<cuda::blocksFor(g.numel), cuda::kThreads, 0, stream>>>(g, pa, pb, po,
                                                                          op);
    PX_CUDA_LAUNCHED();
  };
}

/// Where the fault of a kernel goes.
struct FaultSink {
  DeviceFault *fault;
  int64_t index;
};

struct DivOp {
  FaultSink sink;
  template <typename T> __device__ T operator()(T a, T b) const {
    if (ew::divisionFails(b)) {
      cuda::reportFault(sink.fault, sink.index, kFaultDivisionByZero, 0, 0);
      return T(0);
    }
    return ew::Div{}(a, b);
  }
};
template <bool Fmod> struct ModOp {
  FaultSink sink;
  template <typename T> __device__ T operator()(T a, T b) const {
    if (ew::divisionFails(b)) {
      cuda::reportFault(sink.fault, sink.index, kFaultDivisionByZero, 1, 0);
      return T(0);
    }
    return ew::Mod<Fmod>{}(a, b);
  }
};
/// ONNX Pow; an exponent of 2 is one multiplication, as the CPU's
/// scalar-exponent path (the same value pow gives).
struct PowOp {
  FaultSink sink;
  template <typename T, typename E> __device__ T operator()(T a, E b) const {
    if (ew::powFails(a, b)) {
      cuda::reportFault(sink.fault, sink.index, kFaultZeroToNegative,
                        ew::intExponent(b), 0);
      return T(0);
    }
    if (b == E(2))
      return ew::Square{}(a, b);
    return ew::Pow{}(a, b);
  }
};

KernelFactory arithFactory(std::string name, Bin kind) {
  return [name, kind](KernelArgs &args) -> KernelFn {
    CudaDevice &dev = cudaDeviceOf(args);
    const TensorView &a = args.in(0), &b = args.in(1), &o = args.out(0);
    Geometry g = ew::binaryGeometry(args, name, a.dtype);
    const FaultSink sink{dev.fault(), args.index};
    return dispatchNumeric(args, a.dtype, name, [&](auto tag) -> KernelFn {
      using T = decltype(tag);
      return ew::withArithOp(args, name, kind, DivOp{sink}, [&](auto op) -> KernelFn {
        return makeBinary<T, T, T>(dev, g, a, b, o, op);
      });
    });
  };
}

KernelFn powFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &a = args.in(0), &b = args.in(1), &o = args.out(0);
  Geometry g = ew::binaryGeometry(args, "pow", a.dtype, /*sameTypes=*/false);
  const FaultSink sink{dev.fault(), args.index};
  const DType edt = b.dtype;
  return dispatchNumeric(args, a.dtype, "pow base", [&](auto base) -> KernelFn {
    using T = decltype(base);
    return dispatchNumeric(args, edt, "pow exponent", [&](auto exp) -> KernelFn {
      using E = decltype(exp);
      return makeBinary<T, E, T>(dev, g, a, b, o, PowOp{sink});
    });
  });
}

KernelFn modFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &a = args.in(0), &b = args.in(1), &o = args.out(0);
  Geometry g = ew::binaryGeometry(args, "mod", a.dtype);
  const bool fmod = args.flag("fmod");
  const FaultSink sink{dev.fault(), args.index};
  return dispatchNumeric(args, a.dtype, "mod", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    if (fmod)
      return makeBinary<T, T, T>(dev, g, a, b, o, ModOp<true>{sink});
    return makeBinary<T, T, T>(dev, g, a, b, o, ModOp<false>{sink});
  });
}

KernelFactory compareFactory(std::string name, Cmp kind) {
  return [name, kind](KernelArgs &args) -> KernelFn {
    CudaDevice &dev = cudaDeviceOf(args);
    const TensorView &a = args.in(0), &b = args.in(1), &o = args.out(0);
    Geometry g = ew::binaryGeometry(args, name, DType::Bool);
    if (a.dtype == DType::Bool) {
      ew::checkBoolCompare(args, name, kind);
      return makeBinary<uint8_t, uint8_t, uint8_t>(dev, g, a, b, o, ew::EqualBool{});
    }
    return dispatchNumeric(args, a.dtype, name, [&](auto tag) -> KernelFn {
      using T = decltype(tag);
      return ew::withCompareOp(args, name, kind, [&](auto op) -> KernelFn {
        return makeBinary<T, T, uint8_t>(dev, g, a, b, o, op);
      });
    });
  };
}

//===----------------------------------------------------------------------===//
// where(condition, x, y): a select of the elements' bits.
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void whereKernel(Geometry g, const uint8_t *c, const T *x, const T *y, T *o) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < g.numel;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[3];
    operandOffsets<3>(g, i, off);
    o[i] = c[off[0]] ? x[off[1]] : y[off[2]];
  }
}

template <typename T>
KernelFn makeWhere(CudaDevice &dev, const Geometry &g, const TensorView &c,
                   const TensorView &x, const TensorView &y, const TensorView &o) {
  const uint8_t *pc = c.as<const uint8_t>();
  const T *px = x.as<const T>(), *py = y.as<const T>();
  T *po = o.as<T>();
  cudaStream_t stream = dev.stream();
  return [g, pc, px, py, po, stream] {
    if (g.numel == 0)
      return;
    whereKernel<<<cuda::blocksFor(g.numel), cuda::kThreads, 0, stream>>>(g, pc, px, py, po);
    PX_CUDA_LAUNCHED();
  };
}

KernelFn whereFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &c = args.in(0), &x = args.in(1), &y = args.in(2), &o = args.out(0);
  Geometry g = ew::whereGeometry(args);
  return ew::withWhereUnit(args, [&](auto unit) -> KernelFn {
    return makeWhere<decltype(unit)>(dev, g, c, x, y, o);
  });
}

//===----------------------------------------------------------------------===//
// Unary operations (same shape in and out).
//===----------------------------------------------------------------------===//

template <typename TI, typename TO, typename Op>
__global__ void unaryKernel(const TI *x, TO *y, int64_t n, Op op) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = (TO)op(x[i]);
}

template <typename TI, typename TO, typename Op>
KernelFn makeUnary(CudaDevice &dev, const TensorView &in, const TensorView &out, Op op) {
  const TI *px = in.as<const TI>();
  TO *py = out.as<TO>();
  const int64_t n = in.numElements();
  cudaStream_t stream = dev.stream();
  return [px, py, n, op, stream] {
    if (n == 0)
      return;
    unaryKernel<<<cuda::blocksFor(n), cuda::kThreads, 0, stream>>>(px, py, n, op);
    PX_CUDA_LAUNCHED();
  };
}

template <typename Op, bool FloatOnly> KernelFactory unaryFactory(std::string name) {
  return [name](KernelArgs &args) -> KernelFn {
    CudaDevice &dev = cudaDeviceOf(args);
    const TensorView &x = args.in(0), &y = args.out(0);
    ew::checkUnary(args, name);
    auto make = [&](auto tag) -> KernelFn {
      using T = decltype(tag);
      return makeUnary<T, T>(dev, x, y, Op{});
    };
    if constexpr (FloatOnly)
      return dispatchFloat(args, x.dtype, name, make);
    else
      return dispatchNumeric(args, x.dtype, name, make);
  };
}

KernelFn leakyReluFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0);
  const double alpha = ew::leakyReluAlpha(args);
  return dispatchFloat(args, x.dtype, "leaky_relu", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    return makeUnary<T, T>(dev, x, y, ew::LeakyRelu<T>{(T)alpha});
  });
}

KernelFn clipFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0);
  const ew::ClipBounds bounds = ew::clipBounds(args);
  return dispatchNumeric(args, x.dtype, "clip", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    return makeUnary<T, T>(dev, x, y, bounds.clipOf<T>());
  });
}

KernelFn notFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0);
  ew::checkNot(args);
  return makeUnary<uint8_t, uint8_t>(dev, x, y, ew::Not{});
}

//===----------------------------------------------------------------------===//
// cast.
//===----------------------------------------------------------------------===//

KernelFn castFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0);
  if (ew::castCopies(args)) {
    void *dst = y.data;
    const void *src = x.data;
    const int64_t bytes = x.bytes();
    cudaStream_t stream = dev.stream();
    return [dst, src, bytes, stream] {
      if (bytes == 0 || dst == src)
        return;
      PX_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToDevice,
                                    stream));
    };
  }
  return dispatchAny(args, x.dtype, "cast input", [&](auto from) -> KernelFn {
    using From = decltype(from);
    return dispatchAny(args, y.dtype, "cast result", [&](auto to) -> KernelFn {
      using To = decltype(to);
      return makeUnary<Storage<From>, Storage<To>>(dev, x, y, ew::Cast<To, From>{});
    });
  });
}

//===----------------------------------------------------------------------===//
// dropout and dropout_grad (the mask formula is Elementwise.cpp's).
//===----------------------------------------------------------------------===//

/// What a dropout kernel knows at bind time; the key is drawn from the step
/// and seed the device reads when it runs.
struct DropoutParams {
  int64_t n, run;
  uint64_t base, runStride;
  int64_t blockRun, wholeRun, blockOffset;
  uint64_t seedAttr, stream;
  float threshold;
};

template <typename T>
__global__ void dropoutKernel(DropoutParams p, const StepInfo *info, const T *x, T *y,
                              uint8_t *mask, T denom) {
  const uint64_t key =
      streamKey(info->seed ^ p.seedAttr, p.stream, (uint64_t)info->step);
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < p.n;
       e += (int64_t)gridDim.x * blockDim.x) {
    const bool kept =
        ew::dropoutKeep(key,
                        ew::dropoutCounter(ew::dropoutWholeIndex(e, p.blockRun, p.wholeRun,
                                                                 p.blockOffset),
                                           p.run, p.base, p.runStride),
                        p.threshold);
    mask[e] = kept;
    y[e] = ew::dropoutScale(x[e], kept, denom);
  }
}

KernelFn dropoutFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0), &m = args.out(1);
  const ew::DropoutLayout l = ew::dropoutLayout(args);
  const double ratio = l.ratio;
  // The sample offset and global batch are fixed for a session: bound here
  // (a captured step could not see later changes anyway).
  DropoutParams p{l.n,
                  l.run,
                  (uint64_t)args.env.sampleOffset * (uint64_t)l.perSample,
                  (uint64_t)args.env.globalBatch * (uint64_t)l.perSample,
                  l.blockRun,
                  l.wholeRun,
                  l.blockOffset,
                  l.seedAttr,
                  l.stream,
                  (float)ratio};
  const StepInfo *info = dev.stepInfo();
  cudaStream_t cs = dev.stream();
  return dispatchFloat(args, x.dtype, "dropout", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    const T *px = x.as<const T>();
    T *py = y.as<T>();
    uint8_t *pm = m.as<uint8_t>();
    const T denom = (T)(1.0 - ratio);
    return [p, info, px, py, pm, denom, cs] {
      if (p.n == 0)
        return;
      dropoutKernel<<<cuda::blocksFor(p.n), cuda::kThreads, 0, cs>>>(p, info, px, py, pm,
                                                                    denom);
      PX_CUDA_LAUNCHED();
    };
  });
}

template <typename T>
__global__ void dropoutGradKernel(const T *dy, const uint8_t *mask, T *dx, int64_t n,
                                  T denom) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x)
    dx[e] = ew::dropoutScale(dy[e], mask[e] != 0, denom);
}

KernelFn dropoutGradFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &dy = args.in(0), &m = args.in(1), &dx = args.out(0);
  const double ratio = ew::dropoutGradRatio(args);
  cudaStream_t cs = dev.stream();
  const int64_t n = dy.numElements();
  return dispatchFloat(args, dy.dtype, "dropout_grad", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    const T *pdy = dy.as<const T>();
    const uint8_t *pm = m.as<const uint8_t>();
    T *pdx = dx.as<T>();
    const T denom = (T)(1.0 - ratio);
    return [pdy, pm, pdx, n, denom, cs] {
      if (n == 0)
        return;
      dropoutGradKernel<<<cuda::blocksFor(n), cuda::kThreads, 0, cs>>>(pdy, pm, pdx, n,
                                                                       denom);
      PX_CUDA_LAUNCHED();
    };
  });
}

} // namespace

void registerCudaElementwiseKernels(KernelRegistry &r) {
  for (const auto &[name, kind] : ew::kArithOps)
    r.add(name, arithFactory(name, kind));
  r.add("pow", powFactory);
  for (const auto &[name, kind] : ew::kCompareOps)
    r.add(name, compareFactory(name, kind));
  r.add("where", whereFactory);

  ew::forEachUnaryOp([&r](auto op, const char *name, bool) {
    using Op = typename decltype(op)::type;
    r.add(name, unaryFactory<Op, decltype(op)::floatOnly>(name));
  });
  r.add("mod", modFactory);
  r.add("leaky_relu", leakyReluFactory);
  r.add("clip", clipFactory);
  r.add("not", notFactory);
  r.add("cast", castFactory);
  r.add("dropout", dropoutFactory);
  r.add("dropout_grad", dropoutGradFactory);
}

} // namespace parallax::rt
