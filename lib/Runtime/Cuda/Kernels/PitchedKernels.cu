//===- PitchedKernels.cu - pitched copies that add or fill, on a GPU ------===//

#include "PitchedKernels.h"

#include "CudaKernelUtil.cuh"

namespace parallax::rt::cuda {

namespace {

template <typename T>
void addPitched(const PitchedCopy &c, char *dst, const char *src, cudaStream_t stream) {
  const int64_t n = c.width / (int64_t)sizeof(T);
  const int64_t dOff = c.dstOffset, dp = c.dstPitch, sOff = c.srcOffset, sp = c.srcPitch;
  forEach(stream, n * c.rows, [=] __device__(int64_t i) {
    int64_t r = i / n, k = i % n;
    T *to = reinterpret_cast<T *>(dst + dOff + r * dp) + k;
    const T *from = reinterpret_cast<const T *>(src + sOff + r * sp) + k;
    *to = addRn(*to, *from);
  });
}

template <typename T>
void fillPitched(const PitchedCopy &c, char *dst, T value, cudaStream_t stream) {
  const int64_t n = c.width / (int64_t)sizeof(T);
  const int64_t dOff = c.dstOffset, dp = c.dstPitch;
  forEach(stream, n * c.rows, [=] __device__(int64_t i) {
    reinterpret_cast<T *>(dst + dOff + (i / n) * dp)[i % n] = value;
  });
}

} // namespace

void addPitchedAsync(const PitchedCopy &c, void *dst, const void *src, DType dtype,
                     cudaStream_t stream) {
  if (c.width <= 0 || c.rows <= 0)
    return;
  char *d = static_cast<char *>(dst);
  const char *s = static_cast<const char *>(src);
  if (dtype == DType::F64)
    addPitched<double>(c, d, s, stream);
  else
    addPitched<float>(c, d, s, stream);
}

void fillPitchedAsync(const PitchedCopy &c, void *dst, double value, DType dtype,
                      cudaStream_t stream) {
  if (c.width <= 0 || c.rows <= 0)
    return;
  char *d = static_cast<char *>(dst);
  if (dtype == DType::F64)
    fillPitched<double>(c, d, value, stream);
  else
    fillPitched<float>(c, d, (float)value, stream);
}

} // namespace parallax::rt::cuda
