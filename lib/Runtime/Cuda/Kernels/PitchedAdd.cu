//===- PitchedAdd.cu - a pitched copy that adds, on a GPU -----------------===//

#include "PitchedAdd.h"

#include "CudaKernelUtil.cuh"

namespace parallax::rt::cuda {

namespace {

template <typename T>
void addPitched(const PitchedCopy &c, char *dst, const char *src, cudaStream_t stream) {
  const int64_t n = c.width / (int64_t)sizeof(T), dp = c.dstPitch, sp = c.srcPitch;
  T *d = reinterpret_cast<T *>(dst + c.dstOffset);
  const T *s = reinterpret_cast<const T *>(src + c.srcOffset);
  forEach(stream, n * c.rows, [=] __device__(int64_t i) {
    int64_t r = i / n, k = i % n;
    T *to = reinterpret_cast<T *>(reinterpret_cast<char *>(d) + r * dp) + k;
    const T *from = reinterpret_cast<const T *>(reinterpret_cast<const char *>(s) + r * sp) + k;
    *to = addRn(*to, *from);
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

} // namespace parallax::rt::cuda
