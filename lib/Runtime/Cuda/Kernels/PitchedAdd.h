//===- PitchedAdd.h - a pitched copy that adds, on a GPU ---------*- C++ -*-===//
//
// The collectives' layouts (CollectiveLayout.h) move data in pitched
// copies, which cudaMemcpy2DAsync runs; a halo_reduce adds the halos it
// receives instead, which takes a kernel.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_CUDA_KERNELS_PITCHEDADD_H
#define PARALLAX_RUNTIME_CUDA_KERNELS_PITCHEDADD_H

#include "../../Kernels/CollectiveLayout.h"

#include <cuda_runtime.h>

namespace parallax::rt::cuda {

/// `c`'s destination rows += its source rows, elementwise in `dtype` (f32
/// or f64, each sum rounded once as addOnHost's), on `stream`.
void addPitchedAsync(const PitchedCopy &c, void *dst, const void *src, DType dtype,
                     cudaStream_t stream);

} // namespace parallax::rt::cuda

#endif // PARALLAX_RUNTIME_CUDA_KERNELS_PITCHEDADD_H
