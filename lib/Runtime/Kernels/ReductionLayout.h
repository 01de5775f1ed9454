//===- ReductionLayout.h - what a reduce_* kernel reduces -------*- C++ -*-===//
//
// The axes and keepdims of a reduce_* kernel read and checked against its
// shapes, and the input's dimensions with size-1 ones dropped and runs of
// reduced or kept ones merged: the layout the CPU and CUDA reductions both
// start from, with the same messages. Also densify's checks, for the same
// two backends.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_REDUCTIONLAYOUT_H
#define PARALLAX_RUNTIME_KERNELS_REDUCTIONLAYOUT_H

#include "KernelUtil.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace parallax::rt::detail {

/// Merged dimensions a reduction handles (kept and reduced runs alternate).
constexpr int kMaxReducedDims = 16;

struct ReductionLayout {
  /// Merged dimensions, their input strides, and which are reduced.
  std::vector<int64_t> dims, strides;
  std::vector<bool> reduced;
  /// Elements reduced into each output.
  int64_t count = 1;
  /// Nothing (or only size-1 dimensions) reduced: the kernel is a copy.
  bool identity = false;
};

/// `name` names the op in messages.
inline ReductionLayout reductionLayout(const KernelArgs &args, const std::string &name) {
  const TensorView &x = args.in(0), &y = args.out(0);
  args.expectDType(y, x.dtype, (name + " result").c_str());
  const int64_t rank = x.rank();
  std::vector<int64_t> axes = args.i64s("axes");
  bool keepdims = true;
  if (args.has("keepdims")) {
    const nlohmann::json &j = args.kernel.attrs.at("keepdims");
    if (j.is_boolean())
      keepdims = j.get<bool>();
    else if (j.is_number_integer())
      keepdims = j.get<int64_t>() != 0;
    else
      args.fail(name + ": attribute 'keepdims' has the wrong type");
  }
  std::vector<bool> isReduced(rank, false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      args.fail(name + ": axis " + std::to_string(a) +
                " is out of range for an input of rank " + std::to_string(rank));
    int64_t n = a < 0 ? a + rank : a;
    if (isReduced[n])
      args.fail(name + ": axis " + std::to_string(a) + " is listed twice in " +
                shapeStr(axes));
    isReduced[n] = true;
  }
  std::vector<int64_t> expected;
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (isReduced[d]) {
      count *= x.shape[d];
      if (keepdims)
        expected.push_back(1);
    } else {
      expected.push_back(x.shape[d]);
    }
  }
  if (y.shape != expected)
    args.fail(name + ": the result shape " + shapeStr(y.shape) + " should be " +
              shapeStr(expected) + " (input " + shapeStr(x.shape) + ", axes " +
              shapeStr(axes) + ", keepdims " + (keepdims ? "true" : "false") + ")");

  // Drop size-1 dimensions, merge runs of reduced or kept dimensions.
  std::vector<int64_t> inStrides = stridesOf(x.shape), dims, strides;
  std::vector<bool> reduced;
  for (int64_t d = 0; d < rank; ++d) {
    if (x.shape[d] == 1)
      continue;
    if (!dims.empty() && reduced.back() == isReduced[d]) {
      dims.back() *= x.shape[d];
      strides.back() = inStrides[d];
    } else {
      dims.push_back(x.shape[d]);
      strides.push_back(inStrides[d]);
      reduced.push_back(isReduced[d]);
    }
  }
  if (dims.size() > (size_t)kMaxReducedDims)
    args.fail(name + ": too many dimensions after merging");
  ReductionLayout l{dims, strides, reduced, count, false};
  l.identity = std::find(reduced.begin(), reduced.end(), true) == reduced.end();
  return l;
}

/// Whether a reduction of `l` over elements of type `t` is a plain copy of
/// the input (nothing reduced, a type the copy serves).
inline bool reductionCopies(const ReductionLayout &l, DType t) {
  return l.identity && t != DType::F16 && t != DType::BF16 && t != DType::Bool;
}

/// Checks densify(indices [N] i64, values [N, ...]) -> [rows, ...].
inline void checkDensify(const KernelArgs &args) {
  const TensorView &idx = args.in(0), &vals = args.in(1), &out = args.out(0);
  args.expectDType(idx, DType::I64, "densify indices");
  args.expectDType(out, vals.dtype, "densify result");
  if (idx.rank() != 1)
    args.fail("densify: indices must be a vector, got shape " + shapeStr(idx.shape));
  if (vals.rank() < 1 || vals.shape[0] != idx.shape[0])
    args.fail("densify: values of shape " + shapeStr(vals.shape) + " need one row per index (" +
              std::to_string(idx.shape[0]) + ")");
  if (out.rank() != vals.rank() ||
      !std::equal(vals.shape.begin() + 1, vals.shape.end(), out.shape.begin() + 1))
    args.fail("densify: values of shape " + shapeStr(vals.shape) +
              " do not match the rows of the result " + shapeStr(out.shape));
}

} // namespace parallax::rt::detail

#endif // PARALLAX_RUNTIME_KERNELS_REDUCTIONLAYOUT_H
