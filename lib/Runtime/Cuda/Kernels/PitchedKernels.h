//===- PitchedKernels.h - pitched copies that add or fill, on a GPU -*- C++ -*-===//
//
// The collectives' layouts (CollectiveLayout.h) move data in pitched
// copies, which cudaMemcpy2DAsync runs; a halo_reduce adds the halos it
// receives instead, and a halo_exchange fills the halos past the group's
// ends with a value (-inf for a max pool), which take kernels.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_CUDA_KERNELS_PITCHEDKERNELS_H
#define PARALLAX_RUNTIME_CUDA_KERNELS_PITCHEDKERNELS_H

#include "../../Kernels/CollectiveLayout.h"

#include <cuda_runtime.h>

namespace parallax::rt::cuda {

/// `c`'s destination rows += its source rows, elementwise in `dtype` (f32
/// or f64, each sum rounded once as addOnHost's), on `stream`.
void addPitchedAsync(const PitchedCopy &c, void *dst, const void *src, DType dtype,
                     cudaStream_t stream);
/// `c`'s destination rows filled with `value` in `dtype` (f32 or f64), on
/// `stream`.
void fillPitchedAsync(const PitchedCopy &c, void *dst, double value, DType dtype,
                      cudaStream_t stream);

} // namespace parallax::rt::cuda

#endif // PARALLAX_RUNTIME_CUDA_KERNELS_PITCHEDKERNELS_H
