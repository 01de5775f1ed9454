//===- HostDevice.h - __host__ __device__ marker for shared kernel math ---===//
//
// PX_HD marks functions that the CPU kernels and the CUDA kernels share, so
// both backends compute element values with the same code. Outside nvcc it
// expands to nothing.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_HOSTDEVICE_H
#define PARALLAX_RUNTIME_KERNELS_HOSTDEVICE_H

// include/parallax/Runtime/Random.h defines it identically.
#ifndef PX_HD
#if defined(__CUDACC__)
#define PX_HD __host__ __device__
#else
#define PX_HD
#endif
#endif

#endif // PARALLAX_RUNTIME_KERNELS_HOSTDEVICE_H
