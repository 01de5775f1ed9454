//===- OptimizerRules.cpp - the optimizers' bind-time checks --------------===//

#include "OptimizerRules.h"
#include "KernelUtil.h"

#include "parallax/Runtime/Comm.h"

#include <algorithm>
#include <string>

namespace parallax::rt::opt {

using detail::shapeStr;

const char *kindName(Kind k) {
  switch (k) {
  case Kind::Sgd: return "sgd";
  case Kind::Momentum: return "momentum";
  case Kind::Adam: return "adam";
  case Kind::Adagrad: return "adagrad";
  }
  return "?";
}

int stateCount(Kind k) {
  switch (k) {
  case Kind::Sgd: return 0;
  case Kind::Momentum: return 1;
  case Kind::Adam: return 2;
  case Kind::Adagrad: return 1;
  }
  return 0;
}

namespace {

double finiteAttr(const KernelArgs &args, const char *name, double v) {
  if (!std::isfinite(v))
    args.fail(std::string(name) + " must be finite, got " + std::to_string(v));
  return v;
}

double rateAttr(const KernelArgs &args, const char *name) {
  double v = finiteAttr(args, name, args.f64(name));
  if (!(v >= 0.0 && v < 1.0))
    args.fail(std::string(name) + " must be in [0, 1), got " +
              std::to_string(v));
  return v;
}

} // namespace

OptimizerCheck checkOptimizer(const KernelArgs &args, Kind K) {
  const char *op = kindName(K);
  int ns = stateCount(K);
  size_t dense = 2 + ns, sparseCount = 3 + ns;
  size_t nin = args.ins.size();
  if (nin != dense && nin != sparseCount)
    args.fail(std::string(op) + " expects " + std::to_string(dense) +
              " inputs (dense gradient) or " + std::to_string(sparseCount) +
              " (sparse gradient: indices, rows), got " + std::to_string(nin));
  bool sparse = nin == sparseCount;
  for (size_t i = 0; i < nin; ++i)
    args.in(i); // every input must be present
  if (!args.outs.empty())
    args.fail(std::string(op) + " has no outputs, got " +
              std::to_string(args.outs.size()));
  const TensorView &var = args.in(0);
  if (var.dtype == DType::F16 || var.dtype == DType::BF16)
    args.fail(std::string("variable: ") + nameOf(var.dtype) +
              " is not supported by the CPU runtime");
  if (var.dtype != DType::F32 && var.dtype != DType::F64)
    args.fail(std::string("variable must be f32 or f64, got ") +
              nameOf(var.dtype));
  static const char *stateNames[][2] = {
      {"", ""}, {"velocity", ""}, {"m", "v"}, {"sum", ""}};
  int kindIdx = (int)K;
  // A sharded update's state (shard_state) is one block of the bucket:
  // shard_bytes of elements, shared by the bucket's updates.
  std::vector<int64_t> stateShape = var.shape;
  if (args.flag("shard_state") && (sparse || !args.has("shard_offset")))
    args.fail("shard_state needs a dense gradient and shard_offset");
  if (args.flag("shard_state"))
    stateShape = {args.i64("shard_bytes") / (int64_t)sizeOf(var.dtype)};
  for (int s = 0; s < ns; ++s) {
    const TensorView &st = args.in(1 + s);
    const char *name = stateNames[kindIdx][s];
    args.expectDType(st, var.dtype, name);
    if (st.shape != stateShape)
      args.fail(std::string(name) +
                (args.flag("shard_state") ? " must have one block's shape "
                                          : " must have the variable's shape ") +
                shapeStr(stateShape) + ", got " + shapeStr(st.shape));
  }
  size_t gi = 1 + ns;
  if (!sparse) {
    const TensorView &g = args.in(gi);
    args.expectDType(g, var.dtype, "grad");
    if (g.shape != var.shape)
      args.fail("grad must have the variable's shape " + shapeStr(var.shape) +
                ", got " + shapeStr(g.shape));
  } else {
    const TensorView &idx = args.in(gi), &rows = args.in(gi + 1);
    args.expectDType(idx, DType::I64, "sparse gradient indices");
    if (idx.rank() != 1)
      args.fail("sparse gradient indices must have rank 1, got " +
                shapeStr(idx.shape));
    if (var.rank() < 1)
      args.fail("a sparse gradient needs a variable of rank >= 1");
    args.expectDType(rows, var.dtype, "sparse gradient rows");
    std::vector<int64_t> expected{idx.dim(0)};
    expected.insert(expected.end(), var.shape.begin() + 1, var.shape.end());
    if (rows.shape != expected)
      args.fail("sparse gradient rows must have shape " + shapeStr(expected) +
                ", got " + shapeStr(rows.shape));
  }
  OptimizerCheck check{sparse, {}};
  Hyper &h = check.h;
  h.lr = finiteAttr(args, "lr", args.f64("lr"));
  if (h.lr < 0)
    args.fail("lr must be >= 0, got " + std::to_string(h.lr));
  h.wd = finiteAttr(args, "weight_decay", args.f64Or("weight_decay", 0.0));
  if (K == Kind::Momentum) {
    h.momentum = rateAttr(args, "momentum");
    h.nesterov = args.flag("nesterov");
  }
  if (K == Kind::Adam) {
    h.beta1 = rateAttr(args, "beta1");
    h.beta2 = rateAttr(args, "beta2");
  }
  if (K == Kind::Adam || K == Kind::Adagrad) {
    h.eps = finiteAttr(args, "epsilon", args.f64("epsilon"));
    if (!(h.eps > 0))
      args.fail("epsilon must be > 0, got " + std::to_string(h.eps));
  }
  return check;
}

std::optional<UpdateShard> updateShard(KernelArgs &args, bool sparse) {
  if (sparse || !args.has("shard_offset"))
    return std::nullopt;
  const TensorView &var = args.in(0);
  int64_t elem = (int64_t)sizeOf(var.dtype);
  int64_t offset = args.i64("shard_offset"), shard = args.i64("shard_bytes");
  int64_t bytes = var.bytes(), r = collectiveGroup(args).rank();
  if (offset < 0 || shard <= 0 || offset % elem != 0 || shard % elem != 0)
    args.fail("shard_offset and shard_bytes must be whole elements, got " +
              std::to_string(offset) + " and " + std::to_string(shard));
  UpdateShard s;
  s.lo = std::clamp(r * shard - offset, int64_t(0), bytes) / elem;
  s.hi = std::clamp((r + 1) * shard - offset, int64_t(0), bytes) / elem;
  int64_t inBlock = offset / elem + s.lo - r * shard / elem;
  s.state = args.flag("shard_state") ? inBlock : s.lo;
  s.grad = inBlock - offset / elem;
  return s;
}

void checkAssign(const KernelArgs &args) {
  if (args.ins.size() != 2)
    args.fail("assign expects 2 inputs (variable, value), got " +
              std::to_string(args.ins.size()));
  const TensorView &var = args.in(0), &value = args.in(1);
  if (!args.outs.empty())
    args.fail("assign has no outputs, got " + std::to_string(args.outs.size()));
  args.expectDType(value, var.dtype, "value");
  if (value.shape != var.shape)
    args.fail("value must have the variable's shape " + shapeStr(var.shape) +
              ", got " + shapeStr(value.shape));
}

} // namespace parallax::rt::opt
