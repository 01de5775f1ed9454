//===- BroadcastGeometry.h - numpy broadcasting as merged strides -*- C++ -*-===//
//
// The element-wise kernels' view of a broadcast (Elementwise.cpp's header
// comment says how it is built), shared by the CPU kernels and the CUDA
// ones (lib/Runtime/Cuda/Kernels/Elementwise.cu) so that both accept the
// same shapes with the same messages. Geometry is a plain struct: the GPU
// takes it by value as a kernel parameter.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_BROADCASTGEOMETRY_H
#define PARALLAX_RUNTIME_KERNELS_BROADCASTGEOMETRY_H

#include "KernelUtil.h"

#include "parallax/Runtime/Kernel.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace parallax::rt::ew {

constexpr int kMaxDims = 16;
constexpr int kMaxOperands = 3;

struct Geometry {
  int nd = 1, nin = 0;
  int64_t numel = 0;
  int64_t dims[kMaxDims] = {1};
  int64_t strides[kMaxOperands][kMaxDims] = {};
};

/// Broadcasts every operand shape to `out` (numpy rules). With `exact`, `out`
/// must be exactly the broadcast of the operands (binary ops, where);
/// otherwise it may be larger (expand).
inline Geometry
broadcastGeometry(const KernelArgs &args, const std::string &what,
                  const std::vector<int64_t> &out,
                  const std::vector<const std::vector<int64_t> *> &ins, bool exact) {
  const size_t rank = out.size();
  const int nin = (int)ins.size();
  std::vector<std::vector<int64_t>> s(nin, std::vector<int64_t>(rank, 0));
  std::vector<int64_t> expected(rank, 1);
  size_t maxRank = 0;
  for (int k = 0; k < nin; ++k) {
    const std::vector<int64_t> &sh = *ins[k];
    maxRank = std::max(maxRank, sh.size());
    if (sh.size() > rank)
      args.fail(what + ": operand " + std::to_string(k) + " of shape " +
                detail::shapeStr(sh) + " has a higher rank than the result " +
                detail::shapeStr(out));
    std::vector<int64_t> cs = stridesOf(sh);
    size_t off = rank - sh.size();
    for (size_t i = 0; i < sh.size(); ++i) {
      int64_t od = out[off + i];
      if (sh[i] == od)
        s[k][off + i] = cs[i];
      else if (sh[i] == 1)
        s[k][off + i] = 0;
      else
        args.fail(what + ": operand " + std::to_string(k) + " of shape " +
                  detail::shapeStr(sh) + " does not broadcast to the result shape " +
                  detail::shapeStr(out));
      if (sh[i] != 1)
        expected[off + i] = sh[i];
    }
  }
  if (exact && (maxRank != rank || expected != out)) {
    std::string shapes;
    for (int k = 0; k < nin; ++k)
      shapes += (k ? ", " : "") + detail::shapeStr(*ins[k]);
    args.fail(what + ": the result shape " + detail::shapeStr(out) +
              " is not the broadcast of the operand shapes " + shapes);
  }

  Geometry g;
  g.nin = nin;
  g.numel = 1;
  for (int64_t d : out)
    g.numel *= d;
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> st(nin);
  for (size_t i = 0; i < rank; ++i) {
    if (out[i] == 1)
      continue;
    bool merge = !dims.empty();
    for (int k = 0; k < nin && merge; ++k)
      merge = st[k].back() == s[k][i] * out[i];
    if (merge) {
      dims.back() *= out[i];
      for (int k = 0; k < nin; ++k)
        st[k].back() = s[k][i];
    } else {
      dims.push_back(out[i]);
      for (int k = 0; k < nin; ++k)
        st[k].push_back(s[k][i]);
    }
  }
  if (dims.size() > (size_t)kMaxDims)
    args.fail(what + ": too many dimensions after merging (" +
              std::to_string(dims.size()) + ", at most " +
              std::to_string(kMaxDims) + ")");
  if (dims.empty()) {
    g.nd = 1;
    g.dims[0] = 1;
    for (int k = 0; k < nin; ++k)
      g.strides[k][0] = 0;
  } else {
    g.nd = (int)dims.size();
    for (int d = 0; d < g.nd; ++d) {
      g.dims[d] = dims[d];
      for (int k = 0; k < nin; ++k)
        g.strides[k][d] = st[k][d];
    }
  }
  return g;
}

} // namespace parallax::rt::ew

#endif // PARALLAX_RUNTIME_KERNELS_BROADCASTGEOMETRY_H
