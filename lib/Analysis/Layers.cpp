//===- Layers.cpp - the layers of a px step, as the grid model sees them --===//

#include "parallax/Analysis/Layers.h"
#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"

#include <numeric>

using namespace mlir;

namespace parallax {

llvm::DenseSet<Operation *> forwardOps(func::FuncOp func) {
  llvm::DenseSet<Operation *> forward;
  auto index = px::getAttr<px::PxDialect::LossAttrHelper>(func);
  auto ret = dyn_cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (!index || !ret || index.getInt() < 0 || index.getInt() >= ret.getNumOperands())
    return forward;
  Value loss = ret.getOperand(index.getInt());
  // The loss's own all-reduce (px-sync's) is the step's, not the forward
  // pass's.
  if (auto ar = loss.getDefiningOp<px::AllReduceOp>())
    loss = ar.getInput();
  SmallVector<Operation *> work;
  if (Operation *def = loss.getDefiningOp())
    work.push_back(def);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!forward.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        work.push_back(def);
  }
  return forward;
}

px::VariableOp trainableWeightOf(Value v) {
  for (;;) {
    if (auto r = v.getDefiningOp<px::ReshapeOp>())
      v = r.getInput();
    else if (auto t = v.getDefiningOp<px::TransposeOp>())
      v = t.getInput();
    else
      break;
  }
  auto var = v.getDefiningOp<px::VariableOp>();
  return var && var.getTrainable() ? var : px::VariableOp();
}

px::VariableOp layerWeightOf(Operation *op) {
  if (auto g = dyn_cast<px::GemmOp>(op))
    return trainableWeightOf(g.getB());
  if (auto m = dyn_cast<px::MatMulOp>(op))
    return trainableWeightOf(m.getRhs());
  if (auto c = dyn_cast<px::ConvOp>(op))
    return trainableWeightOf(c.getW());
  return {};
}

SplittableWeight splittableWeightOf(Operation *op) {
  auto trainable = [](Value v) {
    while (auto t = v.getDefiningOp<px::TransposeOp>())
      v = t.getInput();
    auto var = v.getDefiningOp<px::VariableOp>();
    return var && var.getTrainable();
  };
  if (auto g = dyn_cast<px::GemmOp>(op))
    if (trainable(g.getB()) && !g.getTransA())
      return {g.getB(), g.getTransB() ? 0 : 1, g.getTransB() ? 1 : 0};
  if (auto m = dyn_cast<px::MatMulOp>(op))
    if (trainable(m.getRhs()) && cast<RankedTensorType>(m.getRhs().getType()).getRank() == 2)
      return {m.getRhs(), 1, 0};
  if (auto c = dyn_cast<px::ConvOp>(op))
    if (trainable(c.getW()) && c.getGroup() == 1)
      return {c.getW(), 0, 1};
  return {};
}

bool isActivationProduct(Operation *op) {
  auto m = dyn_cast<px::MatMulOp>(op);
  return m && !trainableWeightOf(m.getLhs()) && !trainableWeightOf(m.getRhs()) &&
         cast<RankedTensorType>(m.getRhs().getType()).getRank() > 2;
}

bool isRowGatherOf(Operation *user, Value table) {
  auto g = dyn_cast<px::GatherOp>(user);
  return g && g.getData() == table && g.getIndices() != table &&
         px::normalizeAxis((int64_t)g.getAxis(), g.getData().getType().getRank()) ==
             std::optional<int64_t>(0);
}

bool followsChannelSplit(Operation *op) {
  if (isa<px::BatchNormOp, px::MaxPoolOp, px::AveragePoolOp, px::ReshapeOp, px::TransposeOp,
          px::DropoutOp>(op) ||
      px::isGroupedConv(op))
    return true;
  // A softmax needs its axis whole: over a layer's features (the last
  // dimension of [B, F] or [B, T, F]) it gathers them; over attention's
  // keys ([B, heads, T, T]) it runs on the heads a rank holds.
  if (isa<px::SoftmaxOp, px::LogSoftmaxOp>(op)) {
    int64_t rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
    std::optional<int64_t> axis =
        px::normalizeAxis(cast<IntegerAttr>(op->getAttr("axis")).getInt(), rank);
    return rank >= 4 && axis && *axis != 1;
  }
  // A product of two activations runs on the heads its operands hold.
  if (isa<px::MatMulOp>(op))
    return isActivationProduct(op);
  return op->hasTrait<px::OpTrait::Elementwise>() && op->getNumResults() == 1 &&
         op->getNumOperands() > 0;
}

Value splitCarrierOf(Operation *op) {
  auto out = op->getNumResults() ? dyn_cast<RankedTensorType>(op->getResult(0).getType())
                                 : RankedTensorType();
  for (Value v : op->getOperands())
    if (auto t = dyn_cast<RankedTensorType>(v.getType());
        t && out && t.getShape() == out.getShape())
      return v;
  return op->getOperand(0);
}

std::optional<int64_t> outputFeatureDim(Operation *layer) {
  if (isa<px::GemmOp, px::MatMulOp>(layer))
    return cast<RankedTensorType>(layer->getResult(0).getType()).getRank() - 1;
  if (isa<px::ConvOp>(layer))
    return 1;
  return std::nullopt;
}

std::optional<int64_t> inputFeatureDim(Operation *layer) {
  if (auto g = dyn_cast<px::GemmOp>(layer))
    return g.getTransA() ? 0 : 1;
  if (auto m = dyn_cast<px::MatMulOp>(layer))
    return cast<RankedTensorType>(m.getLhs().getType()).getRank() - 1;
  if (isa<px::ConvOp>(layer))
    return 1;
  return std::nullopt;
}

std::optional<int64_t> carriedSplitDim(Operation *op, Value from, int64_t dim) {
  auto rankOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getRank(); };
  if (auto r = dyn_cast<px::ReshapeOp>(op)) {
    std::optional<px::Regrouping> g =
        px::Regrouping::of(r.getInput().getType().getShape(), r.getType().getShape());
    return g ? g->outputDimOf(dim) : std::nullopt;
  }
  if (auto t = dyn_cast<px::TransposeOp>(op)) {
    ArrayRef<int64_t> perm = t.getPerm();
    auto it = llvm::find(perm, dim);
    return it == perm.end() ? std::nullopt : std::optional<int64_t>(it - perm.begin());
  }
  if (isa<px::SoftmaxOp, px::LogSoftmaxOp>(op)) {
    std::optional<int64_t> axis = px::normalizeAxis(
        cast<IntegerAttr>(op->getAttr("axis")).getInt(), rankOf(op->getResult(0)));
    return axis == dim ? std::nullopt : std::optional<int64_t>(dim);
  }
  if (isa<px::BatchNormOp, px::MaxPoolOp, px::AveragePoolOp>(op) || px::isGroupedConv(op))
    return dim == 1 ? std::optional<int64_t>(1) : std::nullopt;
  if (auto m = dyn_cast<px::MatMulOp>(op)) {
    // lhs [..., M, K] x rhs [..., K, N]: K is summed.
    int64_t last = rankOf(m.getResult()) - 1;
    bool lhs = from == m.getLhs();
    if (dim == last - (lhs ? 0 : 1))
      return std::nullopt;
    return dim;
  }
  if (!followsChannelSplit(op))
    return std::nullopt;
  // Element-wise: operands align with the result's trailing dimensions.
  return dim + rankOf(op->getResult(0)) - rankOf(from);
}

std::optional<CarriedSplit> featuresAlong(Operation *layer, ArrayRef<Operation *> chain) {
  auto sizeOf = [](Operation *op, int64_t dim) {
    return cast<RankedTensorType>(op->getResult(0).getType()).getDimSize(dim);
  };
  std::optional<int64_t> dim = outputFeatureDim(layer);
  if (!dim)
    return std::nullopt;
  int64_t sizes = sizeOf(layer, *dim);
  for (Operation *op : chain) {
    dim = carriedSplitDim(op, splitCarrierOf(op), *dim);
    if (!dim)
      return std::nullopt;
    sizes = std::gcd(sizes, sizeOf(op, *dim));
    // A grouped convolution keeps a split that falls between its groups.
    if (px::isGroupedConv(op))
      sizes = std::gcd(sizes, cast<px::ConvOp>(op).getGroup());
  }
  return CarriedSplit{*dim, sizes};
}

std::optional<int64_t> carriedFeatures(Operation *layer, ArrayRef<Operation *> chain,
                                       Operation *consumer) {
  std::optional<CarriedSplit> c = featuresAlong(layer, chain);
  if (!c || c->dim != inputFeatureDim(consumer))
    return std::nullopt;
  return c->sizes;
}

std::optional<int64_t> operandDimOf(Operation *op, Value operand, int64_t dim) {
  auto type = [](Value v) { return cast<RankedTensorType>(v.getType()); };
  RankedTensorType out = type(op->getResult(0)), in = type(operand);
  if (auto m = dyn_cast<px::MatMulOp>(op)) {
    // lhs [..., M, K] x rhs [..., K, N]: M from lhs, N from rhs, the batch
    // dimensions from both.
    int64_t last = out.getRank() - 1;
    if (dim < last - 1)
      return in.getRank() == out.getRank() ? std::optional<int64_t>(dim) : std::nullopt;
    bool lhs = operand == m.getLhs();
    if ((dim == last - 1) != lhs)
      return std::nullopt;
    return lhs ? in.getRank() - 2 : in.getRank() - 1;
  }
  int64_t d = dim - (out.getRank() - in.getRank());
  if (d < 0 || in.getDimSize(d) != out.getDimSize(dim))
    return std::nullopt;
  return d;
}

namespace {

px::VariableOp weightOf(Value v) { return trainableWeightOf(v); }

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

} // namespace

std::vector<grid::Layer> layersOf(ModuleOp module) {
  std::vector<grid::Layer> layers;
  func::FuncOp func = getEntryFunction(module);
  if (!func || func.getBody().empty())
    return layers;
  // Values computed from a trainable variable: a layer whose input is one
  // needs dX.
  llvm::DenseSet<Value> active;
  for (Operation &op : func.getBody().front()) {
    auto var = dyn_cast<px::VariableOp>(op);
    bool on = var ? var.getTrainable()
                  : llvm::any_of(op.getOperands(), [&](Value v) { return active.contains(v); });
    if (on)
      for (Value r : op.getResults())
        active.insert(r);
  }
  auto add = [&](grid::Layer l, Value input, Type elem) {
    l.inputGradient = active.contains(input);
    l.elementBytes = std::max<int64_t>(1, elem.getIntOrFloatBitWidth() / 8);
    layers.push_back(std::move(l));
  };
  for (Operation &op : func.getBody().front()) {
    llvm::TypeSwitch<Operation *>(&op)
        .Case([&](px::GemmOp g) {
          px::VariableOp w = weightOf(g.getB());
          auto a = typeOf(g.getA()), b = typeOf(g.getB());
          if (!w || a.getRank() != 2 || b.getRank() != 2)
            return;
          grid::Layer l;
          l.name = w.getName().str();
          l.batch = a.getDimSize(g.getTransA() ? 1 : 0);
          l.in = b.getDimSize(g.getTransB() ? 1 : 0);
          l.out = b.getDimSize(g.getTransB() ? 0 : 1);
          add(l, g.getA(), a.getElementType());
        })
        .Case([&](px::MatMulOp m) {
          px::VariableOp w = weightOf(m.getRhs());
          auto a = typeOf(m.getLhs()), b = typeOf(m.getRhs());
          if (!w || b.getRank() != 2 || a.getRank() < 2)
            return;
          grid::Layer l;
          l.name = w.getName().str();
          l.batch = product(a.getShape().drop_back());
          l.in = b.getDimSize(0);
          l.out = b.getDimSize(1);
          add(l, m.getLhs(), a.getElementType());
        })
        .Case([&](px::ConvOp c) {
          px::VariableOp w = weightOf(c.getW());
          auto x = typeOf(c.getX()), wt = typeOf(c.getW()), y = typeOf(c.getY());
          if (!w || x.getRank() < 3 || x.getRank() > 4)
            return;
          bool twoD = x.getRank() == 4;
          grid::Layer l;
          l.kind = grid::Layer::Kind::Conv;
          l.name = w.getName().str();
          l.batch = x.getDimSize(0);
          l.in = x.getDimSize(1);
          l.out = y.getDimSize(1);
          l.inHeight = x.getDimSize(2);
          l.inWidth = twoD ? x.getDimSize(3) : 1;
          l.outHeight = y.getDimSize(2);
          l.outWidth = twoD ? y.getDimSize(3) : 1;
          l.kernelHeight = wt.getDimSize(2);
          l.kernelWidth = twoD ? wt.getDimSize(3) : 1;
          l.dilationHeight = c.getDilations().empty() ? 1 : c.getDilations()[0];
          l.weightElements = wt.getNumElements();
          add(l, c.getX(), x.getElementType());
        });
  }
  return layers;
}

namespace {

std::string mib(double bytes) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.2f", bytes / (1 << 20));
  return buf;
}

} // namespace

void printGridReport(const std::vector<grid::Layer> &layers, int64_t ranks,
                     const grid::Machine &machine, llvm::raw_ostream &os) {
  std::vector<grid::GridCost> costs;
  for (const grid::Grid &g : grid::gridsOf(ranks))
    costs.push_back(grid::costOf(layers, g, machine));
  if (costs.empty() || layers.empty()) {
    os << "grid costs: no layer with a trainable weight\n";
    return;
  }
  size_t best = 0;
  for (size_t i = 1; i < costs.size(); ++i)
    if (costs[i].total.seconds() < costs[best].total.seconds())
      best = i;
  os << "grid costs of " << ranks << " ranks (Pr x Pc: Pr splits the model, Pc the batch; "
     << layers.size() << (layers.size() == 1 ? " layer" : " layers")
     << "; per rank and step, SPAA'18 model):\n";
  os << llvm::format("  %-9s %12s %12s %12s %10s %10s %10s %12s\n", "grid", "fwd MiB",
                     "bwd MiB", "grad MiB", "comm ms", "comp ms", "total ms", "memory MiB");
  for (size_t i = 0; i < costs.size(); ++i) {
    const grid::Cost &t = costs[i].total;
    os << llvm::format("  %-9s %12s %12s %12s %10.3f %10.3f %10.3f %12s", costs[i].grid.str().c_str(),
                       mib(t.forwardBytes).c_str(), mib(t.backwardBytes).c_str(),
                       mib(t.gradientBytes).c_str(), t.commSeconds() * 1e3,
                       t.computeSeconds * 1e3, t.seconds() * 1e3,
                       mib((double)t.memoryBytes()).c_str());
    os << (i == best ? "  <- cheapest" : "") << "\n";
  }
  double data = costs.front().total.seconds(), chosen = costs[best].total.seconds();
  os << llvm::format("cheapest: %s, %.2fx the speed of pure data parallelism (1x%lld)\n",
                     costs[best].grid.str().c_str(), chosen > 0 ? data / chosen : 1.0,
                     (long long)ranks);
  os << "layers on " << costs[best].grid.str() << ":\n";
  os << llvm::format("  %-28s %-6s %8s %8s %8s %12s %10s\n", "layer", "split", "batch", "in",
                     "out", "comm MiB", "comm ms");
  for (size_t i = 0; i < layers.size(); ++i) {
    const grid::Cost &c = costs[best].layers[i];
    os << llvm::format("  %-28s %-6s %8lld %8lld %8lld %12s %10.3f\n", layers[i].name.c_str(),
                       grid::nameOf(c.split), (long long)layers[i].batch,
                       (long long)layers[i].inElements(), (long long)layers[i].outElements(),
                       mib(c.bytes()).c_str(), c.commSeconds() * 1e3);
  }
}

} // namespace parallax
