//===- Random.h - counter-based random numbers -----------------*- C++ -*-===//
//
// Every random number Parallax draws (dropout masks, synthetic data) is a
// pure function of (seed, stream, counter): no generator state to carry,
// identical on every rank and thread, and simple enough to re-implement in
// NumPy, which is how examples/make_models.py reproduces our dropout masks in
// its PyTorch reference runs. The mixer is SplitMix64's finaliser.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_RANDOM_H
#define PARALLAX_RUNTIME_RANDOM_H

#include <cstdint>

// Callable from CUDA device code too (the GPU's dropout draws the CPU's
// masks); the same definition as lib/Runtime/Kernels/HostDevice.h's.
#ifndef PX_HD
#if defined(__CUDACC__)
#define PX_HD __host__ __device__
#else
#define PX_HD
#endif
#endif

namespace parallax::rt {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

/// SplitMix64: x + golden, then the finaliser.
PX_HD inline uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + kGolden;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The key of one stream of a run: e.g. one dropout op at one step.
PX_HD inline uint64_t streamKey(uint64_t seed, uint64_t stream, uint64_t step) {
  return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ step);
}

/// Uniform in [0, 1) with 24 random bits (exact in float).
PX_HD inline float uniformAt(uint64_t key, uint64_t counter) {
  return (float)(splitmix64(key + counter) >> 40) * (1.0f / 16777216.0f);
}

/// Uniform in [0, 1) with 53 random bits.
PX_HD inline double uniform53At(uint64_t key, uint64_t counter) {
  return (double)(splitmix64(key + counter) >> 11) * (1.0 / 9007199254740992.0);
}

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_RANDOM_H
