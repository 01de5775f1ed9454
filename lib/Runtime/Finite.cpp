//===- Finite.cpp - finding NaN and infinity in loaded values -------------===//

#include "parallax/Runtime/Finite.h"

#include <algorithm>
#include <cstring>

namespace parallax::rt {

namespace {

/// A float is NaN or infinite when its exponent bits are all ones; this
/// tests the bits, so it also works for f16 and bf16, which C++ cannot do
/// arithmetic on, and is not optimised away under -ffast-math.
template <typename Bits, Bits Exponent>
int64_t firstWithExponentSet(const void *data, int64_t n) {
  const auto *p = static_cast<const unsigned char *>(data);
  // Blocks without an early exit vectorise; the exact index is only looked
  // for in the block that has a bad value.
  constexpr int64_t kBlock = 4096;
  for (int64_t b = 0; b < n; b += kBlock) {
    int64_t e = std::min(n, b + kBlock);
    bool bad = false;
    for (int64_t i = b; i < e; ++i) {
      Bits v;
      std::memcpy(&v, p + i * sizeof(Bits), sizeof(Bits));
      bad |= (v & Exponent) == Exponent;
    }
    if (!bad)
      continue;
    for (int64_t i = b; i < e; ++i) {
      Bits v;
      std::memcpy(&v, p + i * sizeof(Bits), sizeof(Bits));
      if ((v & Exponent) == Exponent)
        return i;
    }
  }
  return -1;
}

/// "NaN", "inf" or "-inf" for a non-finite element (by its bits: mantissa
/// zero is an infinity, the top bit its sign).
template <typename Bits, Bits Exponent>
const char *kindOf(const void *data, int64_t i) {
  Bits v;
  std::memcpy(&v, static_cast<const unsigned char *>(data) + i * sizeof(Bits),
              sizeof(Bits));
  constexpr Bits sign = Bits(1) << (8 * sizeof(Bits) - 1);
  if ((v & ~(Exponent | sign)) != 0)
    return "NaN";
  return (v & sign) ? "-inf" : "inf";
}

} // namespace

int64_t firstNonFinite(const void *data, DType dtype, int64_t n) {
  switch (dtype) {
  case DType::F32: return firstWithExponentSet<uint32_t, 0x7f800000u>(data, n);
  case DType::F64:
    return firstWithExponentSet<uint64_t, 0x7ff0000000000000ull>(data, n);
  case DType::F16: return firstWithExponentSet<uint16_t, 0x7c00>(data, n);
  case DType::BF16: return firstWithExponentSet<uint16_t, 0x7f80>(data, n);
  default: return -1;
  }
}

std::string describeNonFinite(const void *data, DType dtype,
                              const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  int64_t at = firstNonFinite(data, dtype, n);
  if (at < 0)
    return "";
  const char *kind = "NaN";
  switch (dtype) {
  case DType::F32: kind = kindOf<uint32_t, 0x7f800000u>(data, at); break;
  case DType::F64: kind = kindOf<uint64_t, 0x7ff0000000000000ull>(data, at); break;
  case DType::F16: kind = kindOf<uint16_t, 0x7c00>(data, at); break;
  case DType::BF16: kind = kindOf<uint16_t, 0x7f80>(data, at); break;
  default: break;
  }
  std::vector<int64_t> index(shape.size());
  for (int64_t d = (int64_t)shape.size() - 1, rest = at; d >= 0; --d) {
    index[d] = shape[d] ? rest % shape[d] : 0;
    rest = shape[d] ? rest / shape[d] : 0;
  }
  std::string text = std::string(kind) + " at index [";
  for (size_t d = 0; d < index.size(); ++d)
    text += (d ? ", " : "") + std::to_string(index[d]);
  return text + "] (element " + std::to_string(at) + ")";
}

} // namespace parallax::rt
