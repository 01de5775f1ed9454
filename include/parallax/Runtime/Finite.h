//===- Finite.h - finding NaN and infinity in loaded values ----*- C++ -*-===//
//
// Bad numbers are cheapest to explain where they enter: a NaN in a data file
// or an initializer otherwise surfaces steps later as a diverged loss, or not
// at all (a ReLU maps NaN to 0 in the forward pass while its gradient still
// spreads NaN into the weights). Data files and initial values are checked
// once, as they are loaded, and trained values before they are written.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_FINITE_H
#define PARALLAX_RUNTIME_FINITE_H

#include "parallax/Runtime/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace parallax::rt {

/// Index of the first NaN or infinity among `n` elements of `dtype` at
/// `data`, or -1 when every one is finite (always -1 for integer types).
int64_t firstNonFinite(const void *data, DType dtype, int64_t n);

/// Empty when every element of the row-major array is finite; otherwise its
/// first bad element, e.g. "NaN at index [12, 3] (element 387)".
std::string describeNonFinite(const void *data, DType dtype,
                              const std::vector<int64_t> &shape);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_FINITE_H
