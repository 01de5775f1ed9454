//===- Indexing.cu - CUDA kernels of the Indexing family -------------------===//
//
// gather (of a row block too), gather_elements, scatter_add,
// scatter_elements_add and the row-block make_sparse_grad on the GPU, with
// the CPU kernels' checks and messages (lib/Runtime/Kernels/
// IndexingLayout.h).
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

#include "../../Kernels/IndexingLayout.h"
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

/// Where a kernel reports bad indices: the device's fault record and the
/// kernel's plan index.
struct FaultSink {
  DeviceFault *fault;
  int64_t kernel;
};

FaultSink faultSinkOf(CudaDevice &dev, const KernelArgs &args) {
  return {dev.fault(), args.index};
}

/// f(U{}) for the unsigned type U of `bytes` (1, 2, 4 or 8) bytes, or
/// f(Widest{}) for any other size.
template <typename Widest, typename F> void withUnit(int64_t bytes, F &&f) {
  switch (bytes) {
  case 1: return f(uint8_t{});
  case 2: return f(uint16_t{});
  case 4: return f(uint32_t{});
  case 8: return f(uint64_t{});
  default: return f(Widest{});
  }
}

//===----------------------------------------------------------------------===//
// gather
//===----------------------------------------------------------------------===//

/// `block`: the rows the data holds of the table the indices name (all of
/// them but for a row block).
struct GatherShape {
  int64_t outer, nIdx, inner; // inner in units
  RowBlock block;
};

template <typename I, typename U>
void launchGather(cudaStream_t stream, const U *data, const I *idx, U *out,
                  GatherShape s, bool nonnegative, FaultSink sink) {
  forEach(stream, s.outer * s.nIdx * s.inner, [=] __device__(int64_t i) {
    const int64_t r = i / s.inner, j = i % s.inner;
    const int64_t p = r % s.nIdx, o = r / s.nIdx;
    const int64_t v = (int64_t)idx[p];
    const int64_t w = wrappedIndex(v, s.block.tableRows);
    if (w < 0 || (nonnegative && v < 0)) {
      // One report per bad position, from its first element.
      if (o == 0 && j == 0)
        reportFault(sink.fault, sink.kernel,
                    v < 0 && nonnegative ? kFaultRowOutOfRange : kFaultIndexOutOfRange, v,
                    s.block.tableRows);
      out[i] = U{};
      return;
    }
    const int64_t local = s.block.local(w); // -1: another rank's row
    out[i] = local < 0 ? U{} : data[(o * s.block.rows + local) * s.inner + j];
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
  GatherShape s{product(data.shape, 0, axis), indices.numElements(), rowBytes / unit,
                rowBlockOf(args, data.dim(axis), "gather")};
  const void *d = data.data;
  const I *idx = indices.as<I>();
  void *o = out.data;
  const bool nn = args.flag("nonnegative_ids");
  FaultSink sink = faultSinkOf(dev, args);
  CudaDevice *device = &dev;
  return [=] {
    cudaStream_t st = device->stream();
    withUnit<uint4>(unit, [&](auto u) {
      using U = decltype(u);
      launchGather(st, static_cast<const U *>(d), idx, static_cast<U *>(o), s, nn, sink);
    });
  };
}

KernelFn gatherFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const int64_t axis = gatherAxis(args);
  return args.in(1).dtype == DType::I64 ? gatherTyped<int64_t>(dev, args, axis)
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
    withUnit<uint64_t>((int64_t)es, [&](auto u) {
      using U = decltype(u);
      launchGatherElements(st, static_cast<const U *>(d), idx, static_cast<U *>(o), n, e,
                           sink);
    });
  };
}

KernelFn gatherElementsFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const int64_t axis = gatherElementsAxis(args);
  return args.in(1).dtype == DType::I64 ? gatherElementsTyped<int64_t>(dev, args, axis)
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

KernelFn scatterAddFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const int64_t axis = scatterAddAxis(args);
  return dispatchScatter(args, "scatter_add", [&](auto t, auto i) {
    return scatterAddTyped<decltype(t), decltype(i)>(dev, args, axis);
  });
}

KernelFn scatterElementsAddFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const int64_t axis = scatterElementsAddAxis(args);
  return dispatchScatter(args, "scatter_elements_add", [&](auto t, auto i) {
    return scatterElementsAddTyped<decltype(t), decltype(i)>(dev, args, axis);
  });
}

//===----------------------------------------------------------------------===//
// make_sparse_grad of a row block
//===----------------------------------------------------------------------===//

KernelFn makeSparseGradFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const RowBlock block = makeSparseGradBlock(args);
  const int64_t *idx = args.in(0).as<int64_t>();
  int64_t *local = args.out(0).as<int64_t>();
  const int64_t n = args.in(0).numElements(), bytes = args.in(1).bytes();
  const void *values = args.in(1).data;
  void *outValues = args.out(1).data;
  FaultSink sink = faultSinkOf(dev, args);
  CudaDevice *device = &dev;
  return [=] {
    cudaStream_t st = device->stream();
    forEach(st, n, [=] __device__(int64_t p) {
      const int64_t r = idx[p];
      if (r != -1 && (r < 0 || r >= block.tableRows)) {
        reportFault(sink.fault, sink.kernel, kFaultRowOutOfRange, r, block.tableRows);
        local[p] = -1;
        return;
      }
      local[p] = r == -1 ? -1 : block.local(r);
    });
    if (outValues != values && bytes > 0)
      PX_CUDA_CHECK(cudaMemcpyAsync(outValues, values, (size_t)bytes,
                                    cudaMemcpyDeviceToDevice, st));
  };
}

} // namespace

void registerCudaIndexingKernels(KernelRegistry &r) {
  r.add("make_sparse_grad", makeSparseGradFactory);
  r.add("gather", gatherFactory);
  r.add("gather_elements", gatherElementsFactory);
  r.add("scatter_add", scatterAddFactory);
  r.add("scatter_elements_add", scatterElementsAddFactory);
}

} // namespace parallax::rt
