//===- SplitFusedQkv.cpp - a fused q/k/v projection as three products -----===//
//
// y = x W + b, W [E, 3E], read only as y[..., 0:E], y[..., E:2E] and
// y[..., 2E:3E] becomes y_k = x W_k + b_k with W_k, b_k variables of their
// own, each the block of the ONNX initializer its third is: the same
// products and sums, column by column, so the step computes what it did.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"

#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace parallax {
#define GEN_PASS_DEF_PXSPLITFUSEDQKV
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

/// A trainable variable that is an ONNX initializer whole.
px::VariableOp wholeInitializer(Value v) {
  auto var = v.getDefiningOp<px::VariableOp>();
  if (!var || !var.getTrainable() || var.getGrid())
    return nullptr;
  auto ref = dyn_cast<px::OnnxInitializerAttr>(var.getInit());
  if (!ref || !ref.getStored().empty() || !ref.getOrigin().empty())
    return nullptr;
  return var;
}

/// The slices of `y`'s last dimension in thirds, in order, if they are its
/// only users.
std::optional<std::array<px::SliceOp, 3>> thirds(Value y) {
  auto type = cast<RankedTensorType>(y.getType());
  int64_t rank = type.getRank(), third = type.getShape().back() / 3;
  if (third == 0 || third * 3 != type.getShape().back())
    return std::nullopt;
  std::array<px::SliceOp, 3> found{};
  for (Operation *user : y.getUsers()) {
    auto s = dyn_cast<px::SliceOp>(user);
    if (!s)
      return std::nullopt;
    ArrayRef<int64_t> starts = s.getStarts(), steps = s.getSteps();
    auto out = s.getType().getShape();
    bool lastOnly = llvm::all_of(steps, [](int64_t x) { return x == 1; }) &&
                    out.back() == third && starts.back() % third == 0;
    for (int64_t d = 0; lastOnly && d + 1 < rank; ++d)
      lastOnly = starts[d] == 0 && out[d] == type.getDimSize(d);
    if (!lastOnly || found[starts.back() / third])
      return std::nullopt;
    found[starts.back() / third] = s;
  }
  if (!found[0] || !found[1] || !found[2])
    return std::nullopt;
  return found;
}

/// `var`'s third k along its last dimension, as a variable of its own.
Value thirdOf(OpBuilder &b, px::VariableOp var, int64_t k) {
  auto type = cast<RankedTensorType>(var.getType());
  SmallVector<int64_t> shape(type.getShape()), origin(type.getRank(), 0);
  shape.back() /= 3;
  origin.back() = k * shape.back();
  auto block = RankedTensorType::get(shape, type.getElementType());
  auto ref = cast<px::OnnxInitializerAttr>(var.getInit());
  auto init = px::OnnxInitializerAttr::get(b.getContext(), ref.getName(), block, {}, origin,
                                           type.getShape());
  static const char *suffix[] = {".q", ".k", ".v"};
  return px::VariableOp::create(b, var.getLoc(), block,
                                b.getStringAttr(var.getName() + suffix[k]), init,
                                b.getUnitAttr());
}

/// One product by the fused weight: its bias add, if any, and the slices.
struct Use {
  px::MatMulOp product;
  px::AddOp add;
  std::array<px::SliceOp, 3> parts;
};

/// The product `user` by `w`, if its result (after a bias add by a whole
/// initializer of the same 3N values) is read only as thirds.
std::optional<Use> useOf(Operation *user, Value w) {
  auto product = dyn_cast<px::MatMulOp>(user);
  if (!product || product.getRhs() != w || product.getLhs() == w)
    return std::nullopt;
  int64_t width = cast<RankedTensorType>(w.getType()).getShape().back();
  Use use{product, nullptr, {}};
  Value y = product.getResult();
  if (y.hasOneUse())
    if (auto add = dyn_cast<px::AddOp>(*y.getUsers().begin())) {
      Value bias = add.getLhs() == y ? add.getRhs() : add.getLhs();
      px::VariableOp b = wholeInitializer(bias);
      auto type = b ? cast<RankedTensorType>(b.getType()) : RankedTensorType();
      if (!b || bias == y || type.getRank() != 1 || type.getDimSize(0) != width)
        return std::nullopt;
      use.add = add;
      y = add.getResult();
    }
  auto parts = thirds(y);
  if (!parts)
    return std::nullopt;
  use.parts = *parts;
  return use;
}

Value biasOf(Use use) {
  Value y = use.product.getResult();
  return use.add.getLhs() == y ? use.add.getRhs() : use.add.getLhs();
}

/// The products by `w`, if every reader of it is one this pass rewrites,
/// all with a bias or none.
std::optional<SmallVector<Use>> usesOf(px::VariableOp w) {
  auto type = cast<RankedTensorType>(w.getType());
  if (type.getRank() != 2 || type.getShape().back() < 3 || type.getShape().back() % 3 != 0 ||
      w.getOutput().use_empty())
    return std::nullopt;
  SmallVector<Use> uses;
  for (Operation *user : w.getOutput().getUsers()) {
    std::optional<Use> use = useOf(user, w.getOutput());
    if (!use)
      return std::nullopt;
    uses.push_back(*use);
  }
  if (llvm::any_of(uses, [](const Use &u) { return !u.add; }) &&
      llvm::any_of(uses, [](const Use &u) { return (bool)u.add; }))
    return std::nullopt;
  return uses;
}

/// The fused weights to split, with their products: those whose biases are
/// read only by the adds of products that are split too (torch.onnx.export
/// merges initializers of equal values, so one zero bias may serve several
/// layers; a bias split for some of its readers and not others would
/// become two parameters).
llvm::MapVector<Operation *, SmallVector<Use>> splittable(func::FuncOp func) {
  llvm::MapVector<Operation *, SmallVector<Use>> chosen;
  for (px::VariableOp w : func.getOps<px::VariableOp>())
    if (wholeInitializer(w.getOutput()))
      if (std::optional<SmallVector<Use>> uses = usesOf(w))
        chosen[w] = std::move(*uses);
  for (bool changed = true; changed;) {
    changed = false;
    llvm::DenseSet<Operation *> adds;
    for (auto &[w, uses] : chosen)
      for (Use &u : uses)
        if (u.add)
          adds.insert(u.add);
    SmallVector<Operation *> dropped;
    for (auto &[w, uses] : chosen)
      for (Use &u : uses)
        if (u.add && llvm::any_of(biasOf(u).getUsers(),
                                  [&](Operation *reader) { return !adds.contains(reader); }))
          dropped.push_back(w);
    for (Operation *w : dropped)
      changed |= chosen.erase(w);
  }
  return chosen;
}

/// Splits `w` and its products' biases (each bias once, in `biasThirds`).
void split(px::VariableOp w, MutableArrayRef<Use> uses,
           llvm::DenseMap<Operation *, std::array<Value, 3>> &biasThirds) {
  OpBuilder b(w);
  std::array<Value, 3> weights;
  for (int64_t k = 0; k < 3; ++k)
    weights[k] = thirdOf(b, w, k);
  for (Use &u : uses) {
    if (!u.add)
      continue;
    Operation *bias = biasOf(u).getDefiningOp();
    if (biasThirds.count(bias))
      continue;
    b.setInsertionPoint(bias);
    for (int64_t k = 0; k < 3; ++k)
      biasThirds[bias][k] = thirdOf(b, cast<px::VariableOp>(bias), k);
  }
  for (Use &u : uses) {
    for (int64_t k = 0; k < 3; ++k) {
      px::SliceOp slice = u.parts[k];
      b.setInsertionPoint(slice);
      Value part =
          px::MatMulOp::create(b, u.product.getLoc(), u.product.getLhs(), weights[k]);
      if (u.add) {
        Value third = biasThirds[biasOf(u).getDefiningOp()][k];
        part = u.add.getLhs() == u.product.getResult()
                   ? px::AddOp::create(b, u.add.getLoc(), part, third).getResult()
                   : px::AddOp::create(b, u.add.getLoc(), third, part).getResult();
      }
      slice.getResult().replaceAllUsesWith(part);
      slice.erase();
    }
    if (u.add)
      u.add.erase();
    u.product.erase();
  }
  w.erase();
}

struct SplitFusedQkvPass : parallax::impl::PxSplitFusedQkvBase<SplitFusedQkvPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func || func.getBody().empty())
      return;
    llvm::MapVector<Operation *, SmallVector<Use>> chosen = splittable(func);
    llvm::DenseMap<Operation *, std::array<Value, 3>> biasThirds;
    for (auto &[w, uses] : chosen)
      split(cast<px::VariableOp>(w), uses, biasThirds);
    for (auto &[bias, parts] : biasThirds)
      if (bias->use_empty())
        bias->erase();
  }
};

} // namespace
