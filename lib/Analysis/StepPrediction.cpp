//===- StepPrediction.cpp - what a partitioned step costs, layer by layer -===//

#include "parallax/Analysis/StepPrediction.h"
#include "parallax/Analysis/Layers.h"
#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Runtime/CollectiveVolume.h"
#include "parallax/Runtime/Grid.h"
#include "parallax/Runtime/KernelRates.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>

using namespace mlir;

namespace parallax {

namespace {

int64_t product(ArrayRef<int64_t> dims) { return ShapedType::getNumElements(dims); }

int64_t bytesOf(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  if (!r || !r.hasStaticShape() || !r.getElementType().isIntOrFloat())
    return 0;
  return r.getNumElements() * std::max<int64_t>(1, r.getElementTypeBitWidth() / 8);
}

std::vector<int64_t> shapeOf(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r ? std::vector<int64_t>(r.getShape().begin(), r.getShape().end())
           : std::vector<int64_t>();
}

px::VariableOp weightOf(Value v) { return trainableWeightOf(v); }

/// The weight operand of a layer's forward op (not a gemm's bias: the
/// layer is its weight's).
Value layerWeightOperand(Operation *op) {
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([](px::GemmOp g) { return weightOf(g.getB()) ? g.getB() : g.getA(); })
      .Case([](px::MatMulOp m) { return weightOf(m.getRhs()) ? m.getRhs() : m.getLhs(); })
      .Case([](px::ConvOp c) { return c.getW(); })
      .Case([](px::GatherOp g) { return g.getData(); })
      .Default([](Operation *) { return Value(); });
}

/// Multiply-adds times two of the products (forward and backward).
double flopsOf(Operation *op) {
  auto elems = [](Value v) { return (double)product(cast<RankedTensorType>(v.getType()).getShape()); };
  auto dim = [](Value v, int64_t i) { return cast<RankedTensorType>(v.getType()).getDimSize(i); };
  return llvm::TypeSwitch<Operation *, double>(op)
      .Case([&](px::GemmOp g) {
        return 2.0 * elems(g.getOutput()) * (double)dim(g.getA(), g.getTransA() ? 0 : 1);
      })
      .Case([&](px::MatMulOp m) {
        auto lhs = cast<RankedTensorType>(m.getLhs().getType());
        return 2.0 * elems(m.getOutput()) * (double)lhs.getDimSize(lhs.getRank() - 1);
      })
      .Case([&](px::ConvOp c) {
        auto w = cast<RankedTensorType>(c.getW().getType());
        return rt::convFlops(elems(c.getY()), (double)product(w.getShape().drop_front()));
      })
      .Case([&](px::ConvGradInputOp c) {
        auto w = cast<RankedTensorType>(c.getW().getType());
        return rt::convFlops(elems(c.getDy()), (double)product(w.getShape().drop_front()));
      })
      .Case([&](px::ConvGradFilterOp c) {
        auto w = cast<RankedTensorType>(c.getDw().getType());
        return rt::convFlops(elems(c.getDy()), (double)product(w.getShape().drop_front()));
      })
      // x is [T, B, I].
      .Case<px::LstmOp, px::GruOp, px::RnnOp>([&](auto r) {
        return rt::recurrentFlops(dim(r.getX(), 0), dim(r.getX(), 1),
                                  elems(r.getW()) + elems(r.getR()), false);
      })
      .Case<px::LstmGradOp, px::GruGradOp, px::RnnGradOp>([&](auto r) {
        return rt::recurrentFlops(dim(r.getX(), 0), dim(r.getX(), 1),
                                  elems(r.getW()) + elems(r.getR()), true);
      })
      .Default([](Operation *) { return 0.0; });
}

/// A max pooling's window taps (KernelRates.h).
double windowTapsOf(Operation *op) {
  auto taps = [](Value out, ArrayRef<int64_t> window) {
    return rt::windowTaps((double)product(cast<RankedTensorType>(out.getType()).getShape()),
                          (double)product(window));
  };
  return llvm::TypeSwitch<Operation *, double>(op)
      .Case([&](px::MaxPoolOp m) { return taps(m.getY(), m.getKernelShape()); })
      .Case([&](px::MaxPoolGradOp m) { return taps(m.getDy(), m.getKernelShape()); })
      .Default([](Operation *) { return 0.0; });
}

/// What a split of dimension `dim` of `var` divides, as its forward
/// readers (`forward`) see it: the backward products read it transposed.
std::string roleOf(px::VariableOp var, int64_t dim, const llvm::DenseSet<Operation *> &forward) {
  for (Operation *user : var->getUsers()) {
    if (!forward.contains(user))
      continue;
    std::string role =
        llvm::TypeSwitch<Operation *, std::string>(user)
            .Case([&](px::GemmOp g) -> std::string {
              if (g.getC() == var.getOutput())
                return "output features";
              if (g.getB() != var.getOutput())
                return "";
              return (dim == 0) == g.getTransB() ? "output features" : "input features";
            })
            .Case([&](px::MatMulOp m) -> std::string {
              if (m.getRhs() != var.getOutput() ||
                  cast<RankedTensorType>(m.getRhs().getType()).getRank() != 2)
                return "";
              return dim == 1 ? "output features" : "input features";
            })
            .Case([&](px::ConvOp c) -> std::string {
              if (c.getW() == var.getOutput())
                return dim == 0 ? "output channels" : dim == 1 ? "input channels" : "";
              return c.getB() == var.getOutput() ? "output channels" : "";
            })
            .Case([&](px::GatherOp g) -> std::string {
              return g.getData() == var.getOutput() && dim == 0 ? "rows" : "";
            })
            .Case([&](px::PsPullOp p) -> std::string {
              return p.getTable() == var.getOutput() && dim == 0 ? "rows" : "";
            })
            .Default([](Operation *) { return std::string(); });
    if (!role.empty())
      return role;
  }
  return "dimension " + std::to_string(dim);
}

/// The ranks of a group over a px op's `grid_axes` (empty: all) of the
/// grid.
int64_t groupSizeOf(ArrayRef<int64_t> gridShape, ArrayRef<int16_t> axes) {
  std::vector<int64_t> shape(gridShape.begin(), gridShape.end()), ax(axes.begin(), axes.end());
  return rt::groupSize(shape, ax);
}

/// Bytes a memory-bound op reads and writes (its operands and results; an
/// update writes its variable and state back), 0 for ops no kernel runs.
/// `gridShape` sizes the group a sharded weight update divides its
/// variable over.
int64_t bytesMovedBy(Operation *op, ArrayRef<int64_t> gridShape) {
  if (isa<px::VariableOp, px::InputOp, px::ConstantOp, px::ReshapeOp, px::GradientOp,
          func::ReturnOp>(op))
    return 0;
  // A gather (or a parameter server's pull) reads the rows it returns, not
  // its table.
  if (isa<px::GatherOp, px::PsPullOp>(op) && op->getNumOperands() >= 2)
    return 2 * bytesOf(op->getResult(0).getType()) + bytesOf(op->getOperand(1).getType());
  bool update = isa<px::SgdOp, px::MomentumOp, px::AdamOp, px::AdagradOp>(op);
  if (update && op->getNumOperands() >= 2) {
    // The variable and its state are read and written back; a row-sparse
    // gradient touches only its rows of them (a lazy update).
    auto sparse = dyn_cast<px::SparseGradType>(op->getOperands().back().getType());
    // A sharded update (px-shard-weight-update) updates its rank's block:
    // a share of the variable as large as the group is wide.
    int64_t share = 1;
    if (op->hasAttr("shard_bytes")) {
      auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
      share = std::max<int64_t>(
          1, groupSizeOf(gridShape, axes ? axes.asArrayRef() : ArrayRef<int16_t>()));
    }
    // A parameter server applies the rows of the partitions it serves:
    // of a pushed gradient's slots, the busiest server's share.
    double served = 1;
    if (auto push = op->getOperands().back().getDefiningOp<px::PsPushOp>()) {
      int64_t parts = std::max<int64_t>(1, push.getPartitions()),
              servers = std::max<int64_t>(1, groupSizeOf(gridShape, push.getGridAxes()));
      served = (double)((parts + servers - 1) / servers) / (double)parts;
    }
    int64_t rows = sparse ? (int64_t)std::ceil((double)sparse.getRows() * served) : 0;
    int64_t bytes = 0;
    // A sharded update's state operands are its bucket's whole state
    // block, which the bucket's updates share: each updates as much of it
    // as its variable is.
    bool sharedState = op->hasAttr("shard_state");
    for (Value v : op->getOperands().drop_back()) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      int64_t whole = bytesOf((sharedState ? op->getOperand(0) : v).getType());
      int64_t touched = sparse && t && t.getRank() >= 1 && t.getDimSize(0) > 0
                            ? whole / t.getDimSize(0) * std::min(rows, t.getDimSize(0))
                            : whole;
      bytes += 2 * touched;
    }
    bytes += sparse ? (int64_t)((double)(bytesOf(sparse.getValuesType()) +
                                         bytesOf(sparse.getIndicesType())) *
                                served)
                    : bytesOf(op->getOperands().back().getType());
    return bytes / share;
  }
  int64_t bytes = 0;
  for (Value v : op->getOperands())
    bytes += bytesOf(v.getType());
  for (Value v : op->getResults())
    bytes += bytesOf(v.getType());
  return bytes;
}

/// A product's (gemm, matmul) smallest dimension and the bytes of its
/// largest matrix (operand or result; one of a batch of them), which its
/// flops rate depends on; none for other ops.
std::optional<std::pair<int64_t, double>> productShapeOf(Operation *op) {
  if (!isa<px::GemmOp, px::MatMulOp>(op))
    return std::nullopt;
  int64_t smallest = std::numeric_limits<int64_t>::max();
  double largest = 0;
  for (Value v : {op->getOperand(0), op->getOperand(1), Value(op->getResult(0))}) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() < 2 || !t.hasStaticShape())
      return std::nullopt;
    ArrayRef<int64_t> matrix = t.getShape().take_back(2);
    smallest = std::min({smallest, matrix[0], matrix[1]});
    largest = std::max(largest, (double)(matrix[0] * matrix[1]) *
                                    (double)t.getElementTypeBitWidth() / 8.0);
  }
  return std::pair{smallest, largest};
}

/// Whether `op` evaluates a transcendental function or draws a random
/// number per element as its kernel runs it: a pow by a constant 2 is one
/// multiplication there (the runtime's powFactory squares).
bool isCostlyPerElement(Operation *op) {
  if (!op->hasTrait<px::OpTrait::CostlyPerElement>())
    return false;
  auto pow = dyn_cast<px::PowOp>(op);
  DenseElementsAttr exponent;
  if (!pow || !matchPattern(pow.getRhs(), m_Constant(&exponent)) ||
      exponent.getNumElements() != 1)
    return true;
  if (isa<FloatType>(exponent.getElementType()))
    return (*exponent.getValues<APFloat>().begin()).convertToDouble() != 2.0;
  return (*exponent.getValues<APInt>().begin()).getSExtValue() != 2;
}

/// What an op that is not a collective computes for, on one rank: its
/// work at its kernel's calibrated rate where the profile has one
/// (KernelRates.h; the rate is of whole calls, their fixed cost included),
/// else its products' flops (`flops`) at the products' or the
/// convolutions' rate, or the bytes it moves at the streaming rate, and a
/// kernel call's cost. 0 for an op that runs no kernel.
double computeSecondsOf(Operation *op, double flops, ArrayRef<int64_t> gridShape,
                        const grid::Machine &m) {
  if (isa_and_nonnull<px::PxDialect>(op->getDialect())) {
    std::string kind = op->getName().stripDialect().str();
    // A costly op at its class's rate where the profile has it (older
    // profiles do not); the other element-wise ops at theirs.
    if (isCostlyPerElement(op) && m.opRates.count("costly_per_element"))
      kind = "costly_per_element";
    else if (op->hasTrait<px::OpTrait::Elementwise>())
      kind = "elementwise";
    auto rated = m.opRates.find(kind);
    std::optional<rt::KernelWork> unit = rt::ratedWorkOf(kind);
    if (rated != m.opRates.end() && unit && !rated->second.points.empty()) {
      double work = *unit == rt::KernelWork::Flops        ? flops
                    : *unit == rt::KernelWork::WindowTaps ? windowTapsOf(op)
                                                          : (double)bytesMovedBy(op, gridShape);
      if (double rate = rated->second.at(work); work > 0 && rate > 0)
        return work / rate;
    }
  }
  double seconds = 0;
  if (flops) {
    bool conv = isa<px::ConvOp, px::ConvGradInputOp, px::ConvGradFilterOp>(op);
    auto shape = productShapeOf(op);
    seconds = flops / (conv    ? m.convFlopsPerSecond
                       : shape ? m.productFlopsPerSecond(shape->first, shape->second)
                               : m.flopsPerSecond);
    // A product of a few rows by a large weight streams the weight: the
    // longer of its flops and its bytes (a roofline), where calibrated;
    // the rate is of whole calls, their fixed cost included.
    if (isa<px::GemmOp, px::MatMulOp>(op))
      if (double moved = (double)bytesMovedBy(op, gridShape),
          rate = m.productBytesPerSecond(shape ? shape->first : rt::kProductBytesRows, moved);
          moved > 0 && rate > 0 && moved / rate > seconds + m.kernelSeconds)
        return moved / rate;
  } else if (int64_t moved = bytesMovedBy(op, gridShape)) {
    seconds = (double)moved / m.streamBytesPerSecond;
  }
  return seconds ? seconds + m.kernelSeconds : 0;
}

/// The link of a group over `axes` (empty: all) of the grid: the
/// inter-machine one when some group spans machines.
const grid::Link &linkOf(ArrayRef<int64_t> gridShape, ArrayRef<int64_t> axes,
                         int64_t ranksPerMachine, const grid::Machine &m) {
  std::vector<int64_t> shape(gridShape.begin(), gridShape.end()), ax(axes.begin(), axes.end());
  return rt::groupsSpanMachines(shape, ax, (int)std::min<int64_t>(ranksPerMachine, 1 << 30))
             ? m.inter
             : m.intra;
}

/// The reduction an all-reduce does besides its transfer: in its
/// reduce-scatter half, (g-1)/g of the tensor read twice and written once,
/// 1.5 times the bytes it sends, at the streaming rate.
double reductionSeconds(int64_t sentBytes, const grid::Machine &m) {
  return 1.5 * (double)sentBytes / m.streamBytesPerSecond;
}

/// The all-reduces a synchronized batch norm runs inside its kernel (the
/// mean and the variance; the gradient those again and its two sums: what
/// px-sync counts the bytes of), over the group its grid axes name.
double syncBatchNormSeconds(Operation *op, ArrayRef<int64_t> gridShape, int64_t ranksPerMachine,
                            const grid::Machine &m) {
  auto sums = [&](auto bn, std::initializer_list<int64_t> doubles) {
    if (!bn.getGrid())
      return 0.0;
    int64_t g = groupSizeOf(gridShape, bn.getGridAxes());
    if (g <= 1)
      return 0.0;
    std::vector<int64_t> axes(bn.getGridAxes().begin(), bn.getGridAxes().end());
    const grid::Link &link = linkOf(gridShape, axes, ranksPerMachine, m);
    int64_t channels = cast<RankedTensorType>(bn.getScale().getType()).getDimSize(0);
    double seconds = 0;
    for (int64_t perChannel : doubles)
      seconds += grid::allReduceSeconds(g, 8.0 * (double)(perChannel * channels), link);
    return seconds;
  };
  return llvm::TypeSwitch<Operation *, double>(op)
      .Case([&](px::BatchNormOp bn) { return bn.getTraining() ? sums(bn, {1, 1}) : 0.0; })
      .Case([&](px::BatchNormGradOp bn) { return sums(bn, {1, 1, 2}); })
      .Default([](Operation *) { return 0.0; });
}

struct Collective {
  const char *kind;
  int64_t bytes; // sent by each rank
  double seconds;
  std::vector<std::pair<int64_t, int64_t>> byMember = {};
  std::vector<int64_t> axes = {}; // the group's, resolved (rt::groupAxes)
  bool calibrated = false;         // at the profile's rate for its kind
};

/// A halo exchange (or its adjoint) over a group of g: what each member
/// sends and receives, and the time of the busiest.
Collective haloOf(Operation *op, int64_t g, const grid::Link &link) {
  bool exchange = isa<px::HaloExchangeOp>(op);
  auto block = cast<RankedTensorType>((exchange ? op->getOperand(0) : op->getResult(0)).getType());
  int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
  int64_t rowBytes = bytesOf(block) / std::max<int64_t>(1, block.getDimSize(axis));
  int64_t lo = op->getAttrOfType<IntegerAttr>("lo").getInt() * rowBytes,
          hi = op->getAttrOfType<IntegerAttr>("hi").getInt() * rowBytes;
  Collective c{exchange ? "halo_exchange" : "halo_reduce", 0, 0.0};
  for (int64_t m = 0; m < g; ++m) {
    std::pair<int64_t, int64_t> b = rt::haloBytes(exchange, lo, hi, m, g);
    c.byMember.push_back(b);
    c.bytes = std::max(c.bytes, b.first);
  }
  c.seconds = g <= 1 ? 0.0 : (g > 2 ? 2 : 1) * link.alpha + (double)c.bytes * link.beta;
  return c;
}

/// `c` timed at its calibrated rate where the profile has one for its kind
/// and group.
Collective &atCalibratedRate(Collective &c, const grid::Machine &m, int64_t g, bool oneMachine) {
  if (double rate = grid::calibratedCollectiveRate(m, c.kind, g, oneMachine, (double)c.bytes);
      rate > 0) {
    c.seconds = (double)c.bytes / rate;
    c.calibrated = true;
  }
  return c;
}

/// The group size and the volume of a px collective, as the runtime counts
/// it (CollectiveVolume.h); nullopt for other ops.
std::optional<Collective> collectiveOf(Operation *op, ArrayRef<int64_t> gridShape,
                                       int64_t ranksPerMachine, const grid::Machine &m,
                                       int64_t &groupSize) {
  auto axesAttr = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
  if (!op->getAttrOfType<FlatSymbolRefAttr>("grid") || op->getNumOperands() < 1 ||
      !isa<px::AllReduceOp, px::AllGatherOp, px::ReduceScatterOp, px::AllToAllOp,
           px::AllSliceOp, px::HaloExchangeOp, px::HaloReduceOp>(op))
    return std::nullopt;
  ArrayRef<int16_t> axes16 = axesAttr ? axesAttr.asArrayRef() : ArrayRef<int16_t>();
  std::vector<int64_t> shape(gridShape.begin(), gridShape.end()),
      axes(axes16.begin(), axes16.end());
  groupSize = groupSizeOf(gridShape, axes16);
  const grid::Link &link = linkOf(gridShape, axes, ranksPerMachine, m);
  int64_t in = bytesOf(op->getOperand(0).getType()), g = groupSize;
  if (isa<px::HaloExchangeOp, px::HaloReduceOp>(op)) {
    Collective c = haloOf(op, g, link);
    c.axes = rt::groupAxes(shape, axes);
    return c;
  }
  // The times are the grid model's alpha-beta forms (GridCost.h), or the
  // calibrated rates of the collective on groups of its size; a
  // reduce-scatter costs what an all-gather of its input does.
  bool oneMachine = &link == &m.intra;
  if (isa<px::AllReduceOp>(op)) {
    Collective c{"all_reduce", rt::ringBytes(in, g), grid::allReduceSeconds(g, in, link)};
    return atCalibratedRate(c, m, g, oneMachine);
  }
  if (isa<px::AllGatherOp>(op)) {
    Collective c{"all_gather", rt::allGatherBytes(in, g),
                 grid::allGatherSeconds(g, (double)in * g, link)};
    return atCalibratedRate(c, m, g, oneMachine);
  }
  if (isa<px::ReduceScatterOp>(op)) {
    Collective c{"reduce_scatter", rt::reduceScatterBytes(in, g),
                 grid::allGatherSeconds(g, in, link)};
    return atCalibratedRate(c, m, g, oneMachine);
  }
  if (isa<px::AllToAllOp>(op)) {
    int64_t bytes = rt::allToAllBytes(in, g);
    return Collective{"all_to_all", bytes,
                      g <= 1 ? 0.0 : (double)(g - 1) * link.alpha + bytes * link.beta};
  }
  return Collective{"all_slice", 0, 0.0};
}

/// The layer a collective with no location of a layer serves: the first
/// weight met walking up its input's producers.
Value producingWeight(Value v) {
  for (int depth = 0; depth < 16 && v; ++depth) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return {};
    if (Value w = layerWeightOperand(def); w && weightOf(w))
      return w;
    v = def->getNumOperands() ? def->getOperand(0) : Value();
  }
  return {};
}

std::string bytesText(double b) {
  char buf[32];
  if (b < 1024)
    snprintf(buf, sizeof buf, "%.0f B", b);
  else if (b < 1024 * 1024)
    snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else
    snprintf(buf, sizeof buf, "%.2f MiB", b / (1024 * 1024));
  return buf;
}

std::string shapeText(const std::vector<int64_t> &s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i)
    t += (i ? "x" : "") + std::to_string(s[i]);
  return t.empty() ? "scalar" : t;
}

} // namespace

int64_t PredictedLayer::collectiveBytes() const {
  int64_t b = 0;
  for (const auto &c : collectives)
    b += c.bytes;
  return b;
}
double PredictedLayer::collectiveSeconds() const {
  double s = 0;
  for (const auto &c : collectives)
    s += c.seconds;
  return s;
}

std::pair<int64_t, int64_t> StepPrediction::bytesOfRank(int rank) const {
  int64_t sent = other.syncBytes, received = other.syncBytes;
  int world = (int)product(gridShape);
  auto add = [&](const PredictedLayer &l) {
    for (const PredictedCollective &c : l.collectives) {
      if (c.byMember.empty()) {
        sent += c.bytes;
        received += c.bytes;
        continue;
      }
      int member = rt::placeInGroup(world, rank, gridShape, c.axes).rank;
      sent += c.byMember[member].first;
      received += c.byMember[member].second;
    }
  };
  add(other);
  for (const auto &l : layers) {
    add(l);
    sent += l.syncBytes;
    received += l.syncBytes;
  }
  return {sent, received};
}

bool StepPrediction::ranksDiffer() const {
  auto differ = [](const PredictedLayer &l) {
    return llvm::any_of(l.collectives,
                        [](const PredictedCollective &c) { return !c.byMember.empty(); });
  };
  return differ(other) || llvm::any_of(layers, differ);
}

int64_t StepPrediction::bytes() const {
  int64_t b = other.collectiveBytes() + other.syncBytes;
  for (const auto &l : layers)
    b += l.collectiveBytes() + l.syncBytes;
  return b;
}
double StepPrediction::commSeconds() const {
  double s = other.collectiveSeconds() + other.syncSeconds;
  for (const auto &l : layers)
    s += l.collectiveSeconds() + l.syncSeconds;
  return s;
}
double StepPrediction::computeSeconds() const {
  double s = other.computeSeconds;
  for (const auto &l : layers)
    s += l.computeSeconds;
  return s;
}

StepPrediction predictStep(ModuleOp module, const grid::Machine &machine) {
  StepPrediction p;
  p.other.name = "(other)";
  p.other.split = "";
  func::FuncOp func = getEntryFunction(module);
  if (!func || func.getBody().empty())
    return p;
  std::vector<int64_t> gridShape{1};
  if (auto g = module.lookupSymbol<shard::GridOp>("world"))
    gridShape.assign(g.getShape().begin(), g.getShape().end());
  p.gridShape = gridShape;
  int64_t world = product(gridShape);
  int64_t pr = 1;
  if (auto m = px::getAttr<px::PxDialect::ModelRanksAttrHelper>(module))
    pr = m.getInt();
  p.grid = {pr, std::max<int64_t>(1, world / pr)};
  int64_t perMachine = machine.ranksPerMachine;

  // The gradients' synchronization runs over the batch axes.
  std::vector<int64_t> batchAxes;
  for (int64_t a = 0; pr > 1 && a + 1 < (int64_t)gridShape.size(); ++a)
    batchAxes.push_back(a);
  const grid::Link &batchLink = linkOf(gridShape, batchAxes, perMachine, machine);
  // Synchronized batch norms' statistics and gradient sums (px-sync's
  // count; their time is syncBatchNormSeconds', per op).
  if (auto bn = px::getAttr<px::PxDialect::BatchnormBytesPerStepAttrHelper>(module))
    p.other.syncBytes += bn.getInt();

  // The all-reduce buckets that synchronize gradients, by the variables
  // they hold: each bucket's volume sets its calibrated rate.
  struct Bucket {
    int64_t sent = 0, group = 1;
    bool oneMachine = true, sharded = false;
  };
  std::map<int64_t, Bucket> buckets;
  llvm::StringMap<int64_t> bucketOf;
  for (auto ar : func.getOps<px::AllReduceOp>()) {
    auto names = px::getAttr<px::PxDialect::VariablesAttrHelper>(ar);
    if (!ar.getBucket() || !names)
      continue;
    ArrayRef<int16_t> axes16 = ar.getGridAxes();
    std::vector<int64_t> axes(axes16.begin(), axes16.end());
    Bucket &b = buckets[*ar.getBucket()];
    // One bucket is one group's (px-sync numbers them over both).
    assert((b.sent == 0 || b.group == groupSizeOf(gridShape, axes16)) &&
           "a bucket's all-reduces span one group");
    b.group = groupSizeOf(gridShape, axes16);
    b.oneMachine = &linkOf(gridShape, axes, perMachine, machine) == &machine.intra;
    b.sharded = ar.getShardUpdate();
    b.sent += rt::ringBytes(bytesOf(ar.getInput().getType()), b.group);
    for (Attribute n : names)
      if (auto name = dyn_cast<StringAttr>(n))
        bucketOf[name.getValue()] = *ar.getBucket();
  }
  /// A variable's all-reduce at its bucket's calibrated rates (a sharded
  /// update's: a reduce-scatter, then the all-gather of the parameters),
  /// or nullopt where the profile has none.
  auto calibratedSync = [&](StringRef var, int64_t sent) -> std::optional<double> {
    auto it = bucketOf.find(var);
    if (it == bucketOf.end())
      return std::nullopt;
    auto found = buckets.find(it->second);
    if (found == buckets.end())
      return std::nullopt;
    const Bucket &b = found->second;
    if (!b.sharded) {
      double rate =
          grid::calibratedCollectiveRate(machine, "all_reduce", b.group, b.oneMachine, b.sent);
      return rate > 0 ? std::optional<double>((double)sent / rate) : std::nullopt;
    }
    double half = (double)b.sent / 2,
           scatter =
               grid::calibratedCollectiveRate(machine, "reduce_scatter", b.group, b.oneMachine, half),
           gather = grid::calibratedCollectiveRate(machine, "all_gather", b.group, b.oneMachine, half);
    if (scatter <= 0 || gather <= 0)
      return std::nullopt;
    return (double)sent / 2 / scatter + (double)sent / 2 / gather;
  };

  // A table on the parameter servers: its pulls (gathers may share one)
  // and its push, at their calibrated rates where the profile has them.
  llvm::StringMap<int64_t> pullsOf;
  for (auto pull : func.getOps<px::PsPullOp>())
    if (auto names = px::getAttr<px::PxDialect::VariablesAttrHelper>(pull))
      for (Attribute n : names)
        if (auto name = dyn_cast<StringAttr>(n))
          ++pullsOf[name.getValue()];
  int64_t servers = std::max<int64_t>(1, world / pr);
  bool serversOnOneMachine = &batchLink == &machine.intra;
  /// A served table's exchanges, each member sending `sent` bytes a step
  /// (pulled and pushed alike): its pulls' share and its push.
  auto calibratedServers = [&](StringRef var, int64_t sent) -> std::optional<double> {
    int64_t pulls = std::max<int64_t>(1, pullsOf.lookup(var));
    double half = (double)sent / 2;
    auto pull = grid::calibratedServerSeconds(machine, "ps_pull", servers, serversOnOneMachine,
                                        half / (double)pulls);
    auto push = grid::calibratedServerSeconds(machine, "ps_push", servers, serversOnOneMachine, half);
    if (!pull || !push)
      return std::nullopt;
    p.byKernel["ps_pull"].seconds += (double)pulls * *pull;
    p.byKernel["ps_push"].seconds += *push;
    ++p.byKernel["ps_push"].calls;
    return (double)pulls * *pull + *push;
  };
  llvm::StringSet<> servedAtRates; // the tables calibratedServers priced

  llvm::DenseSet<Operation *> forward = forwardOps(func);
  // One layer per trainable variable, in step order.
  llvm::DenseMap<Operation *, size_t> layerOfVar;
  llvm::StringMap<size_t> layerOfName;
  for (auto var : func.getOps<px::VariableOp>()) {
    if (!var.getTrainable())
      continue;
    PredictedLayer l;
    l.name = var.getName().str();
    l.whole = shapeOf(cast<TypedAttr>(var.getInit()).getType());
    l.block = shapeOf(var.getType());
    if (auto axes = var.getSplitAxes()) {
      std::vector<std::string> roles;
      for (auto [dim, a] : llvm::enumerate(axes->getAxes()))
        if (!a.empty())
          roles.push_back(roleOf(var, (int64_t)dim, forward));
      if (!roles.empty())
        l.split = llvm::join(roles, ", ");
    }
    // A convolution split by rows keeps its weight whole: px-shard-model
    // records the split (a 1x1 of stride 2 exchanges no halo); a layer
    // propagation split by rows on its own shows by its halo exchanges
    // (below).
    auto chosen = px::getAttr<px::PxDialect::LayerSplitAttrHelper>(var);
    if (l.split == "whole" && chosen && chosen.getValue() == "rows")
      l.split = "input rows";
    if (auto b = px::getAttr<px::PxDialect::BytesPerStepAttrHelper>(var))
      l.syncBytes = b.getInt();
    l.syncSeconds = (double)l.syncBytes * batchLink.beta;
    auto scheme = px::getAttr<px::PxDialect::SyncAttrHelper>(var);
    if (scheme && scheme.getValue() == "allreduce") {
      if (std::optional<double> seconds = calibratedSync(l.name, l.syncBytes))
        l.syncSeconds = *seconds;
      else
        l.syncSeconds += reductionSeconds(l.syncBytes, machine);
      // In the runtime's all_reduce kernels (the buckets).
      p.byKernel["all_reduce"].seconds += l.syncSeconds;
    } else if (scheme && scheme.getValue() == "ps") {
      // In the runtime's ps_pull and ps_push kernels, which the profile's
      // rates time whole (packing and serving included).
      if (std::optional<double> seconds = calibratedServers(l.name, l.syncBytes)) {
        l.syncSeconds = *seconds;
        servedAtRates.insert(l.name);
      }
    } else if (scheme && scheme.getValue() == "allgatherv") {
      // One all-gather of equal blocks (px-sync's row capacity: the bytes
      // each member sends are (G - 1) blocks) at the calibrated all-gather
      // rate, or alpha-beta; the kernel packs its block and unpacks the
      // group's on the host.
      int64_t group = std::max<int64_t>(1, world / pr);
      double block = group > 1 ? (double)l.syncBytes / (double)(group - 1) : 0;
      l.syncSeconds = grid::allGatherSeconds(group, block * (double)group, batchLink, machine) +
                      2 * block * (double)(1 + group) / machine.streamBytesPerSecond;
      ++p.byKernel["all_gatherv"].calls;
      p.byKernel["all_gatherv"].seconds += l.syncSeconds;
    }
    int64_t memory = 2 * bytesOf(var.getType());
    for (Operation *user : var->getUsers())
      if (isa<px::SgdOp, px::MomentumOp, px::AdamOp, px::AdagradOp>(user))
        for (Value state : user->getOperands().drop_front().drop_back())
          memory += bytesOf(state.getType());
    l.memoryBytes = memory;
    layerOfVar[var] = p.layers.size();
    layerOfName[l.name] = p.layers.size();
    p.layers.push_back(std::move(l));
  }

  // The forward op of each layer names its location; autodiff's backward
  // ops and partition's collectives carry the same one.
  llvm::DenseMap<Location, size_t> layerAt;
  for (Operation &op : func.getBody().front())
    if (forward.contains(&op))
      if (Value w = layerWeightOperand(&op))
        if (auto var = weightOf(w))
          layerAt.try_emplace(op.getLoc(), layerOfVar[var]);
  auto layerFor = [&](Operation *op) -> PredictedLayer & {
    auto it = layerAt.find(op->getLoc());
    if (it != layerAt.end())
      return p.layers[it->second];
    if (op->getNumOperands())
      if (Value w = producingWeight(op->getOperand(0)))
        return p.layers[layerOfVar[weightOf(w)]];
    return p.other;
  };

  // The --profile line an op's kernel is timed on.
  auto kernelTime = [&](Operation &op) -> StepPrediction::KernelTime & {
    return p.byKernel[op.getName().stripDialect().str()];
  };
  for (Operation &op : func.getBody().front()) {
    int64_t g = 1;
    auto c = collectiveOf(&op, gridShape, perMachine, machine, g);
    if (!c) {
      // A calibrated pull is its table's synchronization, timed whole.
      auto pulled = px::getAttr<px::PxDialect::VariablesAttrHelper>(&op);
      if (isa<px::PsPullOp>(op) && pulled && llvm::all_of(pulled, [&](Attribute n) {
            auto name = dyn_cast<StringAttr>(n);
            return name && servedAtRates.contains(name.getValue());
          })) {
        ++kernelTime(op).calls;
        continue;
      }
      double f = flopsOf(&op);
      if (double seconds = computeSecondsOf(&op, f, gridShape, machine)) {
        PredictedLayer &l = layerFor(&op);
        l.flops += f;
        l.computeSeconds += seconds;
        ++kernelTime(op).calls;
        kernelTime(op).seconds += seconds;
      }
      // Inside the batch norm kernels, as the runtime times them.
      if (double seconds = syncBatchNormSeconds(&op, gridShape, perMachine, machine)) {
        p.other.syncSeconds += seconds;
        kernelTime(op).seconds += seconds;
      }
      continue;
    }
    // A gradient's synchronization is its variable's (px-sync counted it);
    // what it names without being a variable (the loss) is the step's.
    auto names = px::getAttr<px::PxDialect::VariablesAttrHelper>(&op);
    if (names && llvm::all_of(names, [&](Attribute n) {
          auto s = dyn_cast<StringAttr>(n);
          return s && layerOfName.count(s.getValue());
        })) {
      ++kernelTime(op).calls;
      continue;
    }
    // A collective kernel of the step copies its input into a send buffer
    // and what it receives into its result (a gradient bucket is reduced
    // in place): compute, at the streaming rate.
    if (!names) {
      double copies =
          2.0 * (double)(bytesOf(op.getOperand(0).getType()) + bytesOf(op.getResult(0).getType())) /
              machine.streamBytesPerSecond +
          (isa<px::AllReduceOp>(op) && !c->calibrated ? reductionSeconds(c->bytes, machine)
                                                       : 0.0) +
          machine.kernelSeconds;
      layerFor(&op).computeSeconds += copies;
      ++kernelTime(op).calls;
      kernelTime(op).seconds += copies + c->seconds;
    }
    PredictedCollective pc;
    pc.kind = c->kind;
    if (names)
      for (Attribute n : names)
        if (auto name = dyn_cast<StringAttr>(n))
          pc.kind += " " + name.str();
    pc.backward = !forward.contains(&op);
    pc.groupSize = g;
    pc.shape = shapeOf(op.getOperand(0).getType());
    pc.bytes = c->bytes;
    pc.seconds = c->seconds;
    pc.byMember = c->byMember;
    pc.axes = c->axes;
    // A layer whose convolution exchanges halos splits its input's rows.
    if (isa<px::HaloExchangeOp>(op) && !names) {
      PredictedLayer &l = layerFor(&op);
      if (&l != &p.other && l.split == "whole")
        l.split = "input rows";
    }
    if (pc.bytes == 0 && pc.seconds == 0)
      continue; // a local slice
    (names ? p.other : layerFor(&op)).collectives.push_back(std::move(pc));
  }
  return p;
}

void printStepPrediction(const StepPrediction &p, llvm::raw_ostream &os) {
  os << "grid " << p.grid.str() << ": Pr = " << p.grid.pr << " ranks split each layer, Pc = "
     << p.grid.pc << " the batch; per rank and step (predicted):\n";
  os << llvm::format("  %-22s %-16s %-12s %-12s %10s %10s %9s %9s %10s\n", "layer", "split",
                     "whole", "block", "model B", "batch B", "comm ms", "comp ms", "memory");
  auto row = [&](const PredictedLayer &l) {
    os << llvm::format("  %-22s %-16s %-12s %-12s %10lld %10lld %9.3f %9.3f %10s\n",
                       l.name.c_str(), l.split.c_str(),
                       &l == &p.other ? "" : shapeText(l.whole).c_str(),
                       &l == &p.other ? "" : shapeText(l.block).c_str(), (long long)l.collectiveBytes(),
                       (long long)l.syncBytes, (l.collectiveSeconds() + l.syncSeconds) * 1e3,
                       l.computeSeconds * 1e3, bytesText((double)l.memoryBytes).c_str());
    for (const PredictedCollective &c : l.collectives)
      os << "      " << (c.backward ? "backward " : "forward  ") << c.kind << " of "
         << shapeText(c.shape) << " over " << c.groupSize << " ranks: " << c.bytes << " B, "
         << llvm::format("%.3f", c.seconds * 1e3) << " ms\n";
  };
  for (const PredictedLayer &l : p.layers)
    row(l);
  if (!p.other.collectives.empty() || p.other.computeSeconds > 0 || p.other.syncBytes > 0)
    row(p.other);
  int64_t model = 0, batch = p.other.syncBytes;
  for (const PredictedLayer &l : p.layers) {
    model += l.collectiveBytes();
    batch += l.syncBytes;
  }
  model += p.other.collectiveBytes();
  os << "step: " << p.bytes() << " B sent per rank (as many received; " << model
     << " B in the layers' collectives, " << batch << " B synchronizing gradients), "
     << llvm::format("comm %.3f ms + compute %.3f ms = %.3f ms", p.commSeconds() * 1e3,
                     p.computeSeconds() * 1e3, p.seconds() * 1e3)
     << "\n";
  // Beside parallax-run --profile's table of the same name.
  std::vector<std::pair<std::string, StepPrediction::KernelTime>> kernels(p.byKernel.begin(),
                                                                          p.byKernel.end());
  llvm::stable_sort(kernels, [](const auto &a, const auto &b) {
    return a.second.seconds > b.second.seconds;
  });
  os << "predicted kernel time by op (per rank and step; parallax-run --profile measures it):\n"
     << llvm::format("  %-32s %10s %12s\n", "op", "calls/step", "ms/step");
  for (const auto &[name, k] : kernels)
    os << llvm::format("  %-32s %10lld %12.3f\n", name.c_str(), (long long)k.calls,
                       k.seconds * 1e3);
}

} // namespace parallax
