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
using ew::BoolT;
using ew::Geometry;
using ew::Storage;

/// Fault codes of this family (CudaDevice.cpp's faultMessage names them).

template <typename F>
KernelFn dispatchAny(const KernelArgs &args, DType t, const std::string &what,
                     F &&f) {
  if (t == DType::Bool)
    return f(BoolT{});
  return dispatchNumeric(args, t, what, std::forward<F>(f));
}

void checkSameShape(const KernelArgs &args, const std::string &what,
                    const TensorView &in, const TensorView &out) {
  if (in.shape != out.shape)
    args.fail(what + ": the result shape " + shapeStr(out.shape) +
              " differs from the input shape " + shapeStr(in.shape));
}

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

enum class Bin { Add, Sub, Mul, Div, Max, Min };

KernelFactory arithFactory(std::string name, Bin kind) {
  return [name, kind](KernelArgs &args) -> KernelFn {
    CudaDevice &dev = cudaDeviceOf(args);
    const TensorView &a = args.in(0), &b = args.in(1), &o = args.out(0);
    if (a.dtype != b.dtype)
      args.fail(name + ": operand element types differ (" + nameOf(a.dtype) + " and " +
                nameOf(b.dtype) + ")");
    args.expectDType(o, a.dtype, (name + " result").c_str());
    Geometry g = ew::broadcastGeometry(args, name, o.shape, {&a.shape, &b.shape}, true);
    const FaultSink sink{dev.fault(), args.index};
    return dispatchNumeric(args, a.dtype, name, [&](auto tag) -> KernelFn {
      using T = decltype(tag);
      switch (kind) {
      case Bin::Add: return makeBinary<T, T, T>(dev, g, a, b, o, ew::Add{});
      case Bin::Sub: return makeBinary<T, T, T>(dev, g, a, b, o, ew::Sub{});
      case Bin::Mul: return makeBinary<T, T, T>(dev, g, a, b, o, ew::Mul{});
      case Bin::Div: return makeBinary<T, T, T>(dev, g, a, b, o, DivOp{sink});
      case Bin::Max: return makeBinary<T, T, T>(dev, g, a, b, o, ew::Max{});
      case Bin::Min: return makeBinary<T, T, T>(dev, g, a, b, o, ew::Min{});
      }
      args.fail(name + ": unknown operation");
    });
  };
}

KernelFn powFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &a = args.in(0), &b = args.in(1), &o = args.out(0);
  args.expectDType(o, a.dtype, "pow result");
  Geometry g = ew::broadcastGeometry(args, "pow", o.shape, {&a.shape, &b.shape}, true);
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
  if (a.dtype != b.dtype)
    args.fail(std::string("mod: operand element types differ (") + nameOf(a.dtype) + " and " +
              nameOf(b.dtype) + ")");
  args.expectDType(o, a.dtype, "mod result");
  Geometry g = ew::broadcastGeometry(args, "mod", o.shape, {&a.shape, &b.shape}, true);
  const bool fmod = args.flag("fmod");
  const FaultSink sink{dev.fault(), args.index};
  return dispatchNumeric(args, a.dtype, "mod", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    if (fmod)
      return makeBinary<T, T, T>(dev, g, a, b, o, ModOp<true>{sink});
    return makeBinary<T, T, T>(dev, g, a, b, o, ModOp<false>{sink});
  });
}

enum class Cmp { Equal, Less, Greater };

KernelFactory compareFactory(std::string name, Cmp kind) {
  return [name, kind](KernelArgs &args) -> KernelFn {
    CudaDevice &dev = cudaDeviceOf(args);
    const TensorView &a = args.in(0), &b = args.in(1), &o = args.out(0);
    if (a.dtype != b.dtype)
      args.fail(name + ": operand element types differ (" + nameOf(a.dtype) + " and " +
                nameOf(b.dtype) + ")");
    args.expectDType(o, DType::Bool, (name + " result").c_str());
    Geometry g = ew::broadcastGeometry(args, name, o.shape, {&a.shape, &b.shape}, true);
    if (a.dtype == DType::Bool) {
      if (kind != Cmp::Equal)
        args.fail(name + ": i1 operands are not ordered (expects a numeric type)");
      return makeBinary<uint8_t, uint8_t, uint8_t>(dev, g, a, b, o, ew::EqualBool{});
    }
    return dispatchNumeric(args, a.dtype, name, [&](auto tag) -> KernelFn {
      using T = decltype(tag);
      switch (kind) {
      case Cmp::Equal: return makeBinary<T, T, uint8_t>(dev, g, a, b, o, ew::Equal{});
      case Cmp::Less: return makeBinary<T, T, uint8_t>(dev, g, a, b, o, ew::Less{});
      case Cmp::Greater: return makeBinary<T, T, uint8_t>(dev, g, a, b, o, ew::Greater{});
      }
      args.fail(name + ": unknown comparison");
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
  args.expectDType(c, DType::Bool, "where condition");
  if (x.dtype != y.dtype)
    args.fail(std::string("where: x and y element types differ (") + nameOf(x.dtype) +
              " and " + nameOf(y.dtype) + ")");
  args.expectDType(o, x.dtype, "where result");
  if (x.dtype == DType::F16 || x.dtype == DType::BF16)
    failType(args, "where", x.dtype, "");
  Geometry g =
      ew::broadcastGeometry(args, "where", o.shape, {&c.shape, &x.shape, &y.shape}, true);
  switch (sizeOf(x.dtype)) {
  case 1: return makeWhere<uint8_t>(dev, g, c, x, y, o);
  case 2: return makeWhere<uint16_t>(dev, g, c, x, y, o);
  case 4: return makeWhere<uint32_t>(dev, g, c, x, y, o);
  case 8: return makeWhere<uint64_t>(dev, g, c, x, y, o);
  default: args.fail("where: unsupported element size");
  }
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
    args.expectDType(y, x.dtype, (name + " result").c_str());
    checkSameShape(args, name, x, y);
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
  args.expectDType(y, x.dtype, "leaky_relu result");
  checkSameShape(args, "leaky_relu", x, y);
  // The ODS default is the f32 value 0.01.
  double alpha = args.f64Or("alpha", (double)0.01f);
  return dispatchFloat(args, x.dtype, "leaky_relu", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    return makeUnary<T, T>(dev, x, y, ew::LeakyRelu<T>{(T)alpha});
  });
}

KernelFn clipFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0);
  args.expectDType(y, x.dtype, "clip result");
  checkSameShape(args, "clip", x, y);
  const bool hasMin = args.has("min"), hasMax = args.has("max");
  const double mn = hasMin ? args.f64("min") : 0.0, mx = hasMax ? args.f64("max") : 0.0;
  if ((hasMin && std::isnan(mn)) || (hasMax && std::isnan(mx)))
    args.fail("clip: a NaN bound");
  return dispatchNumeric(args, x.dtype, "clip", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if constexpr (std::is_floating_point_v<T>) {
      lo = -std::numeric_limits<T>::infinity();
      hi = std::numeric_limits<T>::infinity();
      if (hasMin)
        lo = (T)mn;
      if (hasMax)
        hi = (T)mx;
    } else {
      // An integer x satisfies x >= min iff x >= ceil(min).
      if (hasMin)
        lo = ew::saturatingCast<T>(std::ceil(mn));
      if (hasMax)
        hi = ew::saturatingCast<T>(std::floor(mx));
    }
    return makeUnary<T, T>(dev, x, y, ew::Clip<T>{lo, hi});
  });
}

KernelFn notFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0);
  args.expectDType(x, DType::Bool, "not input");
  args.expectDType(y, DType::Bool, "not result");
  checkSameShape(args, "not", x, y);
  return makeUnary<uint8_t, uint8_t>(dev, x, y, ew::Not{});
}

//===----------------------------------------------------------------------===//
// cast.
//===----------------------------------------------------------------------===//

KernelFn castFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0);
  checkSameShape(args, "cast", x, y);
  if (x.dtype == y.dtype && x.dtype != DType::F16 && x.dtype != DType::BF16) {
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

double checkedRatio(const KernelArgs &args, const char *what) {
  double ratio = args.f64("ratio");
  if (!(ratio >= 0.0 && ratio <= 1.0))
    args.fail(std::string(what) + ": ratio must be in [0, 1], got " + std::to_string(ratio));
  return ratio;
}

/// What a dropout kernel knows at bind time; the key is drawn from the step
/// and seed the device reads when it runs.
struct DropoutParams {
  int64_t n, run;
  uint64_t base, runStride;
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
        ew::dropoutKeep(key, ew::dropoutCounter(e, p.run, p.base, p.runStride), p.threshold);
    mask[e] = kept;
    y[e] = ew::dropoutScale(x[e], kept, denom);
  }
}

KernelFn dropoutFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0), &m = args.out(1);
  const double ratio = checkedRatio(args, "dropout");
  const uint64_t seedAttr = (uint64_t)args.i64Or("seed", 0);
  const uint64_t stream = (uint64_t)args.i64Or("stream", 0);
  args.expectDType(y, x.dtype, "dropout output");
  args.expectDType(m, DType::Bool, "dropout mask");
  checkSameShape(args, "dropout", x, y);
  checkSameShape(args, "dropout mask", x, m);
  const int64_t n = x.numElements();
  const int64_t dim0 = x.rank() ? x.shape[0] : 1;
  const int64_t perSample =
      args.has("sample_stride") ? args.i64Or("sample_stride", 0) : dim0 > 0 ? n / dim0 : 0;
  if (perSample < 0)
    args.fail("dropout: sample_stride must be >= 0");
  const int64_t localBatch = args.env.globalBatch / std::max(args.env.worldSize, 1);
  const int64_t run = args.has("sample_stride") && perSample > 0 && localBatch > 0 &&
                              n % (perSample * localBatch) == 0
                          ? perSample * localBatch
                          : n;
  // The sample offset and global batch are fixed for a session: bound here
  // (a captured step could not see later changes anyway).
  DropoutParams p{n,
                  run,
                  (uint64_t)args.env.sampleOffset * (uint64_t)perSample,
                  (uint64_t)args.env.globalBatch * (uint64_t)perSample,
                  seedAttr,
                  stream,
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
  const double ratio = checkedRatio(args, "dropout_grad");
  args.expectDType(m, DType::Bool, "dropout_grad mask");
  args.expectDType(dx, dy.dtype, "dropout_grad result");
  checkSameShape(args, "dropout_grad mask", dy, m);
  checkSameShape(args, "dropout_grad", dy, dx);
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
  r.add("add", arithFactory("add", Bin::Add));
  r.add("sub", arithFactory("sub", Bin::Sub));
  r.add("mul", arithFactory("mul", Bin::Mul));
  r.add("div", arithFactory("div", Bin::Div));
  r.add("max", arithFactory("max", Bin::Max));
  r.add("min", arithFactory("min", Bin::Min));
  r.add("pow", powFactory);
  r.add("equal", compareFactory("equal", Cmp::Equal));
  r.add("less", compareFactory("less", Cmp::Less));
  r.add("greater", compareFactory("greater", Cmp::Greater));
  r.add("where", whereFactory);

  r.add("neg", unaryFactory<ew::Neg, false>("neg"));
  r.add("abs", unaryFactory<ew::Abs, false>("abs"));
  r.add("relu", unaryFactory<ew::Relu, false>("relu"));
  r.add("sqrt", unaryFactory<ew::Sqrt, true>("sqrt"));
  r.add("reciprocal", unaryFactory<ew::Reciprocal, true>("reciprocal"));
  r.add("exp", unaryFactory<ew::Exp, true>("exp"));
  r.add("log", unaryFactory<ew::Log, true>("log"));
  r.add("tanh", unaryFactory<ew::Tanh, true>("tanh"));
  r.add("sigmoid", unaryFactory<ew::Sigmoid, true>("sigmoid"));
  r.add("erf", unaryFactory<ew::Erf, true>("erf"));
  r.add("sin", unaryFactory<ew::Sin, true>("sin"));
  r.add("cos", unaryFactory<ew::Cos, true>("cos"));
  r.add("tan", unaryFactory<ew::Tan, true>("tan"));
  r.add("asin", unaryFactory<ew::Asin, true>("asin"));
  r.add("acos", unaryFactory<ew::Acos, true>("acos"));
  r.add("atan", unaryFactory<ew::Atan, true>("atan"));
  r.add("sinh", unaryFactory<ew::Sinh, true>("sinh"));
  r.add("cosh", unaryFactory<ew::Cosh, true>("cosh"));
  r.add("asinh", unaryFactory<ew::Asinh, true>("asinh"));
  r.add("acosh", unaryFactory<ew::Acosh, true>("acosh"));
  r.add("atanh", unaryFactory<ew::Atanh, true>("atanh"));
  r.add("floor", unaryFactory<ew::Floor, true>("floor"));
  r.add("ceil", unaryFactory<ew::Ceil, true>("ceil"));
  r.add("round", unaryFactory<ew::Round, true>("round"));
  r.add("sign", unaryFactory<ew::Sign, false>("sign"));
  r.add("mod", modFactory);
  r.add("leaky_relu", leakyReluFactory);
  r.add("clip", clipFactory);
  r.add("not", notFactory);
  r.add("cast", castFactory);
  r.add("dropout", dropoutFactory);
  r.add("dropout_grad", dropoutGradFactory);
}

} // namespace parallax::rt
