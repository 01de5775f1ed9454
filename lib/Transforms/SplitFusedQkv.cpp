//===- SplitFusedQkv.cpp - a fused q/k/v projection as three products -----===//
//
// y = x W + b, W [E, nE], read only as its n equal parts y[..., kE:(k+1)E]
// (n = 3: queries, keys and values; n = 2: a cross-attention's keys and
// values), becomes y_k = x W_k + b_k with W_k, b_k variables of their own,
// each the block of the ONNX initializer its part is: the same products
// and sums, column by column, so the step computes what it did.
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

/// The slices of `y`'s last dimension in 2 or 3 equal parts (keys and
/// values, or queries, keys and values), in order, if they are its only
/// users.
std::optional<SmallVector<px::SliceOp>> equalParts(Value y) {
  auto type = cast<RankedTensorType>(y.getType());
  int64_t rank = type.getRank(), width = type.getShape().back();
  SmallVector<px::SliceOp> found;
  for (Operation *user : y.getUsers()) {
    auto s = dyn_cast<px::SliceOp>(user);
    if (!s)
      return std::nullopt;
    found.push_back(s);
  }
  int64_t n = found.size();
  if ((n != 2 && n != 3) || width % n != 0 || width / n == 0)
    return std::nullopt;
  int64_t part = width / n;
  SmallVector<px::SliceOp> ordered(n);
  for (px::SliceOp s : found) {
    ArrayRef<int64_t> starts = s.getStarts(), steps = s.getSteps();
    auto out = s.getType().getShape();
    bool lastOnly = llvm::all_of(steps, [](int64_t x) { return x == 1; }) &&
                    out.back() == part && starts.back() % part == 0;
    for (int64_t d = 0; lastOnly && d + 1 < rank; ++d)
      lastOnly = starts[d] == 0 && out[d] == type.getDimSize(d);
    if (!lastOnly || ordered[starts.back() / part])
      return std::nullopt;
    ordered[starts.back() / part] = s;
  }
  return ordered;
}

/// `var`'s part k of n along its last dimension, as a variable of its own
/// (`.q`, `.k`, `.v` of three; `.0`, `.1` of two).
Value partOf(OpBuilder &b, px::VariableOp var, int64_t k, int64_t n) {
  auto type = cast<RankedTensorType>(var.getType());
  SmallVector<int64_t> shape(type.getShape()), origin(type.getRank(), 0);
  shape.back() /= n;
  origin.back() = k * shape.back();
  auto block = RankedTensorType::get(shape, type.getElementType());
  auto ref = cast<px::OnnxInitializerAttr>(var.getInit());
  auto init = px::OnnxInitializerAttr::get(b.getContext(), ref.getName(), block, {}, origin,
                                           type.getShape());
  static const char *qkv[] = {".q", ".k", ".v"};
  std::string suffix = n == 3 ? qkv[k] : "." + std::to_string(k);
  return px::VariableOp::create(b, var.getLoc(), block,
                                b.getStringAttr(var.getName() + suffix), init,
                                b.getUnitAttr());
}

/// One product by the fused weight: its bias add and bias, if any, and the
/// slices.
struct Use {
  px::MatMulOp product;
  px::AddOp add;
  Value bias;
  SmallVector<px::SliceOp> parts;
};

/// The product `user` by `w`, if its result (after a bias add by a whole
/// initializer of as many values) is read only in equal parts.
std::optional<Use> useOf(Operation *user, Value w) {
  auto product = dyn_cast<px::MatMulOp>(user);
  if (!product || product.getRhs() != w || product.getLhs() == w)
    return std::nullopt;
  int64_t width = cast<RankedTensorType>(w.getType()).getShape().back();
  Use use{product, nullptr, nullptr, {}};
  Value y = product.getResult();
  if (y.hasOneUse())
    if (auto add = dyn_cast<px::AddOp>(*y.getUsers().begin())) {
      Value bias = add.getLhs() == y ? add.getRhs() : add.getLhs();
      px::VariableOp b = wholeInitializer(bias);
      auto type = b ? cast<RankedTensorType>(b.getType()) : RankedTensorType();
      if (!b || bias == y || type.getRank() != 1 || type.getDimSize(0) != width)
        return std::nullopt;
      use.add = add;
      use.bias = bias;
      y = add.getResult();
    }
  auto parts = equalParts(y);
  if (!parts)
    return std::nullopt;
  use.parts = *parts;
  return use;
}

/// The products by `w`, if every reader of it is one this pass rewrites,
/// all with a bias or none.
std::optional<SmallVector<Use>> usesOf(px::VariableOp w) {
  auto type = cast<RankedTensorType>(w.getType());
  if (type.getRank() != 2 || w.getOutput().use_empty())
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
  if (llvm::any_of(uses, [&](const Use &u) { return u.parts.size() != uses[0].parts.size(); }))
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
    // Each bias in as many parts by every weight that reads it.
    llvm::DenseMap<Operation *, size_t> partsOfBias;
    for (auto &[w, uses] : chosen)
      for (Use &u : uses)
        if (u.add)
          partsOfBias.try_emplace(u.bias.getDefiningOp(), u.parts.size());
    SmallVector<Operation *> dropped;
    for (auto &[w, uses] : chosen)
      for (Use &u : uses)
        if (u.add && (llvm::any_of(u.bias.getUsers(),
                                   [&](Operation *reader) { return !adds.contains(reader); }) ||
                      partsOfBias[u.bias.getDefiningOp()] != u.parts.size()))
          dropped.push_back(w);
    for (Operation *w : dropped)
      changed |= chosen.erase(w);
  }
  return chosen;
}

/// Splits `w` and its products' biases (each bias once, in `biasParts`).
void split(px::VariableOp w, MutableArrayRef<Use> uses,
           llvm::DenseMap<Operation *, SmallVector<Value>> &biasParts) {
  OpBuilder b(w);
  int64_t n = uses.front().parts.size();
  SmallVector<Value> weights;
  for (int64_t k = 0; k < n; ++k)
    weights.push_back(partOf(b, w, k, n));
  for (Use &u : uses) {
    if (!u.add)
      continue;
    Operation *bias = u.bias.getDefiningOp();
    if (biasParts.count(bias))
      continue;
    b.setInsertionPoint(bias);
    for (int64_t k = 0; k < n; ++k)
      biasParts[bias].push_back(partOf(b, cast<px::VariableOp>(bias), k, n));
  }
  for (Use &u : uses) {
    for (int64_t k = 0; k < n; ++k) {
      px::SliceOp slice = u.parts[k];
      b.setInsertionPoint(slice);
      Value part =
          px::MatMulOp::create(b, u.product.getLoc(), u.product.getLhs(), weights[k]);
      if (u.add) {
        Value third = biasParts[u.bias.getDefiningOp()][k];
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
    llvm::DenseMap<Operation *, SmallVector<Value>> biasParts;
    for (auto &[w, uses] : chosen)
      split(cast<px::VariableOp>(w), uses, biasParts);
    for (auto &[bias, parts] : biasParts)
      if (bias->use_empty())
        bias->erase();
  }
};

} // namespace
