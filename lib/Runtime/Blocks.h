//===- Blocks.h - blocks of row-major tensors ------------------*- C++ -*-===//
//
// Copying a block out of a row-major tensor and back into place: a split
// variable's block of its whole value, a padded initializer, a block of an
// initializer (loading in Session.cpp, --save in OnnxWeights.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_BLOCKS_H
#define PARALLAX_RUNTIME_BLOCKS_H

#include <cstdint>
#include <cstring>
#include <vector>

namespace parallax::rt {

/// Visits the rows of the block of `blockShape` at element offsets
/// `origin` of a row-major tensor of `wholeShape`: row(block byte offset,
/// whole byte offset, bytes).
template <typename Row>
void forEachBlockRow(const std::vector<int64_t> &wholeShape,
                     const std::vector<int64_t> &blockShape,
                     const std::vector<int64_t> &origin, size_t elementBytes, Row row) {
  size_t r = blockShape.size();
  if (r == 0)
    return row(0, 0, (int64_t)elementBytes);
  int64_t rowBytes = blockShape[r - 1] * (int64_t)elementBytes;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < r; ++d)
    rows *= blockShape[d];
  std::vector<int64_t> index(r, 0);
  for (int64_t i = 0; i < rows; ++i) {
    int64_t offset = 0;
    for (size_t d = 0; d < r; ++d)
      offset = offset * wholeShape[d] + origin[d] + index[d];
    row(i * rowBytes, offset * (int64_t)elementBytes, rowBytes);
    for (size_t d = r - 1; d-- > 0;) {
      if (++index[d] < blockShape[d])
        break;
      index[d] = 0;
    }
  }
}

/// The block at `origin` of `whole`, into `block`.
inline void copyBlock(const char *whole, const std::vector<int64_t> &wholeShape, char *block,
               const std::vector<int64_t> &blockShape, const std::vector<int64_t> &origin,
               size_t elementBytes) {
  forEachBlockRow(wholeShape, blockShape, origin, elementBytes,
                  [&](int64_t b, int64_t w, int64_t n) { std::memcpy(block + b, whole + w, n); });
}

/// `block` into its place at `origin` of `whole`.
inline void placeBlock(const char *block, const std::vector<int64_t> &blockShape, char *whole,
                const std::vector<int64_t> &wholeShape, const std::vector<int64_t> &origin,
                size_t elementBytes) {
  forEachBlockRow(wholeShape, blockShape, origin, elementBytes,
                  [&](int64_t b, int64_t w, int64_t n) { std::memcpy(whole + w, block + b, n); });
}

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_BLOCKS_H
