//===- Indexing.cu - CUDA kernels of the Indexing family -------------------===//
//
// gather, gather_elements, scatter_add and scatter_elements_add on the GPU,
// with the CPU kernels' checks and messages (lib/Runtime/Kernels/Indexing.cpp).
// An index outside [-size, size) (or a negative id under "nonnegative_ids")
// is reported with reportFault and becomes an error naming the kernel at the
// next synchronize(); the element it would have produced is left zero.
//
// gather moves rows in units of up to 16 bytes. scatter_add adds with
// atomics (the order of repeated indices' sums differs from the CPU's by
// rounding only); scatter_elements_add walks each line serially, in the
// CPU's order, when there are lines enough to fill the GPU, and adds with
// atomics otherwise.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtil.cuh"

#include "../../Kernels/KernelUtil.h"
#include "../../Kernels/ShapeMath.h"

#include <algorithm>
#include <string>
#include <vector>

namespace parallax::rt {
namespace {

using namespace detail;
using cuda::forEach;
using cuda::reportFault;

/// Dimensions the element-wise kernels handle (coordinates passed by value).
constexpr int kMaxIndexDims = 16;
/// Lines (scatter_elements_add) from which one thread per line fills the GPU.
constexpr int64_t kSerialLines = 16384;

void checkIndexType(const KernelArgs &args, const TensorView &indices,
                    const char *op) {
  if (indices.dtype != DType::I64 && indices.dtype != DType::I32)
    args.fail(std::string(op) + ": indices must be i32 or i64, got " +
              nameOf(indices.dtype));
}

/// Where a kernel reports bad indices: the device's fault record and the
/// kernel's plan index.
struct FaultSink {
  DeviceFault *fault;
  int64_t kernel;
};

FaultSink faultSinkOf(CudaDevice &dev, const KernelArgs &args) {
  return {dev.fault(), args.index};
}

//===----------------------------------------------------------------------===//
// gather
//===----------------------------------------------------------------------===//

struct GatherShape {
  int64_t outer, axisLen, nIdx, inner; // inner in units
};

template <typename I, typename U>
void launchGather(cudaStream_t stream, const U *data, const I *idx, U *out,
                  GatherShape s, bool nonnegative, FaultSink sink) {
  forEach(stream, s.outer * s.nIdx * s.inner, [=] __device__(int64_t i) {
    const int64_t r = i / s.inner, j = i % s.inner;
    const int64_t p = r % s.nIdx, o = r / s.nIdx;
    const int64_t v = (int64_t)idx[p];
    const int64_t w = wrappedIndex(v, s.axisLen);
    if (w < 0 || (nonnegative && v < 0)) {
      // One report per bad position, from its first element.
      if (o == 0 && j == 0)
        reportFault(sink.fault, sink.kernel,
                    v < 0 && nonnegative ? kFaultRowOutOfRange : kFaultIndexOutOfRange, v,
                    s.axisLen);
      out[i] = U{};
      return;
    }
    out[i] = data[(o * s.axisLen + w) * s.inner + j];
  });
}

template <typename I>
KernelFn gatherTyped(CudaDevice &dev, KernelArgs &args, int64_t axis) {
  const TensorView &data = args.in(0), &indices = args.in(1), &out = args.out(0);
  const int64_t es = (int64_t)sizeOf(data.dtype);
  const int64_t rowBytes = product(data.shape, axis + 1, data.shape.size()) * es;
  // The widest unit (up to 16 bytes) that the rows and pointers allow.
  int64_t unit = 16;
  while (unit > es && (rowBytes % unit || (uintptr_t)data.data % unit ||
                       (uintptr_t)out.data % unit))
    unit /= 2;
  GatherShape s{product(data.shape, 0, axis), data.dim(axis), indices.numElements(),
                rowBytes / unit};
  const void *d = data.data;
  const I *idx = indices.as<I>();
  void *o = out.data;
  const bool nn = args.flag("nonnegative_ids");
  FaultSink sink = faultSinkOf(dev, args);
  CudaDevice *device = &dev;
  return [=] {
    cudaStream_t st = device->stream();
    switch (unit) {
    case 1:
      launchGather(st, static_cast<const uint8_t *>(d), idx, static_cast<uint8_t *>(o), s, nn, sink);
      break;
    case 2:
      launchGather(st, static_cast<const uint16_t *>(d), idx, static_cast<uint16_t *>(o), s, nn, sink);
      break;
    case 4:
      launchGather(st, static_cast<const uint32_t *>(d), idx, static_cast<uint32_t *>(o), s, nn, sink);
      break;
    case 8:
      launchGather(st, static_cast<const uint64_t *>(d), idx, static_cast<uint64_t *>(o), s, nn, sink);
      break;
    default:
      launchGather(st, static_cast<const uint4 *>(d), idx, static_cast<uint4 *>(o), s, nn, sink);
      break;
    }
  };
}

KernelFn gatherFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &data = args.in(0), &indices = args.in(1), &out = args.out(0);
  checkIndexType(args, indices, "gather");
  if (data.rank() < 1)
    args.fail("gather: data must have rank >= 1");
  int64_t axis = normalizeAxis(args, args.i64Or("axis", 0), data.rank(), "gather");
  if (out.dtype != data.dtype)
    args.fail(std::string("gather: result must have the data's element type ") +
              nameOf(data.dtype) + ", got " + nameOf(out.dtype));
  std::vector<int64_t> expected(data.shape.begin(), data.shape.begin() + axis);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (out.shape != expected)
    args.fail("gather: result shape " + shapeStr(out.shape) + " must be " +
              shapeStr(expected));
  return indices.dtype == DType::I64 ? gatherTyped<int64_t>(dev, args, axis)
                                     : gatherTyped<int32_t>(dev, args, axis);
}

//===----------------------------------------------------------------------===//
// Element-wise indexing (gather_elements, scatter_elements_add): element p
// of the indices reads (or writes) the data element with p's coordinates,
// except along the axis, where the index says which.
//===----------------------------------------------------------------------===//

struct ElementIndexing {
  int rank = 0, axis = 0;
  int64_t dataLen = 0; ///< the data's size along the axis
  int64_t idxDims[kMaxIndexDims] = {};
  int64_t dataStrides[kMaxIndexDims] = {};
  /// Lines along the axis (the serial scatter): their count and length,
  /// and the indices' stride along the axis.
  int64_t lines = 0, length = 0, idxStep = 0;

  /// Offset in the data of index position `pos`'s coordinates, the axis's
  /// counted as 0.
  __device__ int64_t dataOffset(int64_t pos) const {
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t c = pos % idxDims[d];
      pos /= idxDims[d];
      if (d != axis)
        off += c * dataStrides[d];
    }
    return off;
  }
  /// Offsets of line `l`'s first element in the indices and in the data.
  __device__ void lineOffsets(int64_t l, int64_t &idxBase, int64_t &dataBase) const {
    idxBase = dataBase = 0;
    int64_t idxStride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (d != axis) {
        const int64_t c = l % idxDims[d];
        l /= idxDims[d];
        idxBase += c * idxStride;
        dataBase += c * dataStrides[d];
      }
      idxStride *= idxDims[d];
    }
  }
};

/// Checks the shapes common to gather_elements and scatter_elements_add.
void checkElementShapes(const KernelArgs &args, const TensorView &indices,
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

ElementIndexing elementIndexing(const KernelArgs &args, const TensorView &indices,
                                const TensorView &data, int64_t axis, const char *op) {
  if (indices.rank() > kMaxIndexDims)
    args.fail(std::string(op) + ": rank " + std::to_string(indices.rank()) +
              " is above the " + std::to_string(kMaxIndexDims) +
              " dimensions the CUDA kernel handles");
  ElementIndexing e;
  e.rank = (int)indices.rank();
  e.axis = (int)axis;
  e.dataLen = data.dim(axis);
  std::vector<int64_t> ds = stridesOf(data.shape), is = stridesOf(indices.shape);
  for (int d = 0; d < e.rank; ++d) {
    e.idxDims[d] = indices.dim(d);
    e.dataStrides[d] = ds[d];
  }
  e.length = indices.dim(axis);
  e.lines = e.length ? indices.numElements() / e.length : 0;
  e.idxStep = is[axis];
  return e;
}

template <typename I, typename E>
void launchGatherElements(cudaStream_t stream, const E *data, const I *idx, E *out,
                          int64_t n, ElementIndexing e, FaultSink sink) {
  forEach(stream, n, [=] __device__(int64_t pos) {
    const int64_t v = (int64_t)idx[pos];
    const int64_t w = wrappedIndex(v, e.dataLen);
    if (w < 0) {
      reportFault(sink.fault, sink.kernel, kFaultIndexOutOfRange, v, e.dataLen);
      out[pos] = E{};
      return;
    }
    out[pos] = data[e.dataOffset(pos) + w * e.dataStrides[e.axis]];
  });
}

template <typename I>
KernelFn gatherElementsTyped(CudaDevice &dev, KernelArgs &args, int64_t axis) {
  const TensorView &data = args.in(0), &indices = args.in(1), &out = args.out(0);
  const size_t es = sizeOf(data.dtype);
  if (es != 1 && es != 2 && es != 4 && es != 8)
    args.fail("gather_elements: unsupported element size");
  ElementIndexing e = elementIndexing(args, indices, data, axis, "gather_elements");
  const void *d = data.data;
  const I *idx = indices.as<I>();
  void *o = out.data;
  const int64_t n = indices.numElements();
  FaultSink sink = faultSinkOf(dev, args);
  CudaDevice *device = &dev;
  return [=] {
    cudaStream_t st = device->stream();
    switch (es) {
    case 1:
      launchGatherElements(st, static_cast<const uint8_t *>(d), idx, static_cast<uint8_t *>(o), n, e, sink);
      break;
    case 2:
      launchGatherElements(st, static_cast<const uint16_t *>(d), idx, static_cast<uint16_t *>(o), n, e, sink);
      break;
    case 4:
      launchGatherElements(st, static_cast<const uint32_t *>(d), idx, static_cast<uint32_t *>(o), n, e, sink);
      break;
    default:
      launchGatherElements(st, static_cast<const uint64_t *>(d), idx, static_cast<uint64_t *>(o), n, e, sink);
      break;
    }
  };
}

KernelFn gatherElementsFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
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
  return indices.dtype == DType::I64 ? gatherElementsTyped<int64_t>(dev, args, axis)
                                     : gatherElementsTyped<int32_t>(dev, args, axis);
}

//===----------------------------------------------------------------------===//
// scatter_add, scatter_elements_add
//===----------------------------------------------------------------------===//

template <typename T, typename I>
KernelFn scatterAddTyped(CudaDevice &dev, KernelArgs &args, int64_t axis) {
  const TensorView &indices = args.in(0), &updates = args.in(1), &out = args.out(0);
  const int64_t outer = product(out.shape, 0, axis), axisLen = out.dim(axis);
  const int64_t inner = product(out.shape, axis + 1, out.shape.size());
  const int64_t nIdx = indices.numElements(), bytes = out.bytes();
  const I *idx = indices.as<I>();
  const T *u = updates.as<T>();
  T *o = out.as<T>();
  FaultSink sink = faultSinkOf(dev, args);
  CudaDevice *device = &dev;
  return [=] {
    cudaStream_t st = device->stream();
    if (bytes > 0)
      PX_CUDA_CHECK(cudaMemsetAsync(o, 0, (size_t)bytes, st));
    forEach(st, outer * nIdx * inner, [=] __device__(int64_t i) {
      const int64_t r = i / inner, j = i % inner;
      const int64_t p = r % nIdx, b = r / nIdx;
      const int64_t v = (int64_t)idx[p];
      const int64_t w = wrappedIndex(v, axisLen);
      if (w < 0) {
        if (b == 0 && j == 0)
          reportFault(sink.fault, sink.kernel, kFaultIndexOutOfRange, v, axisLen);
        return;
      }
      atomicAdd(o + (b * axisLen + w) * inner + j, u[i]);
    });
  };
}

template <typename T, typename I>
KernelFn scatterElementsAddTyped(CudaDevice &dev, KernelArgs &args, int64_t axis) {
  const TensorView &indices = args.in(0), &updates = args.in(1), &out = args.out(0);
  ElementIndexing e = elementIndexing(args, indices, out, axis, "scatter_elements_add");
  const I *idx = indices.as<I>();
  const T *u = updates.as<T>();
  T *o = out.as<T>();
  const int64_t n = indices.numElements(), bytes = out.bytes();
  // Distinct lines write distinct output elements: one thread per line adds
  // in the CPU's order without atomics.
  const bool serial = e.lines >= kSerialLines || e.length <= 8;
  FaultSink sink = faultSinkOf(dev, args);
  CudaDevice *device = &dev;
  return [=] {
    cudaStream_t st = device->stream();
    if (bytes > 0)
      PX_CUDA_CHECK(cudaMemsetAsync(o, 0, (size_t)bytes, st));
    const int64_t step = e.dataStrides[e.axis];
    if (serial) {
      forEach(st, e.lines, [=] __device__(int64_t l) {
        int64_t ib, ob;
        e.lineOffsets(l, ib, ob);
        for (int64_t j = 0; j < e.length; ++j) {
          const int64_t pos = ib + j * e.idxStep, v = (int64_t)idx[pos];
          const int64_t w = wrappedIndex(v, e.dataLen);
          if (w < 0)
            reportFault(sink.fault, sink.kernel, kFaultIndexOutOfRange, v, e.dataLen);
          else
            o[ob + w * step] += u[pos];
        }
      });
      return;
    }
    forEach(st, n, [=] __device__(int64_t pos) {
      const int64_t v = (int64_t)idx[pos];
      const int64_t w = wrappedIndex(v, e.dataLen);
      if (w < 0) {
        reportFault(sink.fault, sink.kernel, kFaultIndexOutOfRange, v, e.dataLen);
        return;
      }
      atomicAdd(o + e.dataOffset(pos) + w * step, u[pos]);
    });
  };
}

template <template <typename, typename> class Impl>
KernelFn dispatchScatter(CudaDevice &dev, KernelArgs &args, int64_t axis, const char *op) {
  const TensorView &indices = args.in(0), &updates = args.in(1);
  bool i64 = indices.dtype == DType::I64;
  switch (updates.dtype) {
  case DType::F32:
    return i64 ? Impl<float, int64_t>::make(dev, args, axis)
               : Impl<float, int32_t>::make(dev, args, axis);
  case DType::F64:
    return i64 ? Impl<double, int64_t>::make(dev, args, axis)
               : Impl<double, int32_t>::make(dev, args, axis);
  default:
    args.fail(std::string(op) + ": element type " + nameOf(updates.dtype) +
              " is not supported by the CPU runtime");
  }
}

template <typename T, typename I> struct ScatterAdd {
  static KernelFn make(CudaDevice &dev, KernelArgs &a, int64_t axis) {
    return scatterAddTyped<T, I>(dev, a, axis);
  }
};
template <typename T, typename I> struct ScatterElementsAdd {
  static KernelFn make(CudaDevice &dev, KernelArgs &a, int64_t axis) {
    return scatterElementsAddTyped<T, I>(dev, a, axis);
  }
};

void checkScatterTypes(const KernelArgs &args, const char *op) {
  const TensorView &indices = args.in(0), &updates = args.in(1), &out = args.out(0);
  checkIndexType(args, indices, op);
  if (out.dtype != updates.dtype)
    args.fail(std::string(op) + ": result must have the updates' element type " +
              nameOf(updates.dtype) + ", got " + nameOf(out.dtype));
  if (out.rank() < 1)
    args.fail(std::string(op) + ": the result must have rank >= 1");
}

KernelFn scatterAddFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  checkScatterTypes(args, "scatter_add");
  const TensorView &indices = args.in(0), &updates = args.in(1), &out = args.out(0);
  int64_t axis = normalizeAxis(args, args.i64Or("axis", 0), out.rank(), "scatter_add");
  std::vector<int64_t> expected(out.shape.begin(), out.shape.begin() + axis);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), out.shape.begin() + axis + 1, out.shape.end());
  if (updates.shape != expected)
    args.fail("scatter_add: updates must have shape " + shapeStr(expected) +
              ", got " + shapeStr(updates.shape));
  return dispatchScatter<ScatterAdd>(dev, args, axis, "scatter_add");
}

KernelFn scatterElementsAddFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  checkScatterTypes(args, "scatter_elements_add");
  const TensorView &indices = args.in(0), &updates = args.in(1), &out = args.out(0);
  int64_t axis = normalizeAxis(args, args.i64Or("axis", 0), out.rank(),
                               "scatter_elements_add");
  if (updates.shape != indices.shape)
    args.fail("scatter_elements_add: updates " + shapeStr(updates.shape) +
              " and indices " + shapeStr(indices.shape) +
              " must have the same shape");
  checkElementShapes(args, indices, out, axis, "scatter_elements_add", "output");
  return dispatchScatter<ScatterElementsAdd>(dev, args, axis, "scatter_elements_add");
}

} // namespace

void registerCudaIndexingKernels(KernelRegistry &r) {
  r.add("gather", gatherFactory);
  r.add("gather_elements", gatherElementsFactory);
  r.add("scatter_add", scatterAddFactory);
  r.add("scatter_elements_add", scatterElementsAddFactory);
}

} // namespace parallax::rt
