//===- PxShardingConv.cpp - shard models of convolution, norm, pooling ----===//
//
// px.conv, px.batch_norm, the pools and their gradients as loop nests over
// samples and channels, as upstream's linalg models describe convolutions:
// a convolution sums over its input channels (a split of them leaves each
// rank a partial sum, all-reduced by partition, the bias added once after),
// batch norm and pooling are per channel. The first spatial dimension
// (rows) may be split too, SPAA'18's domain parallelism: where a block of
// input rows maps onto a block of output rows (domainHalo), the rows of an
// op's tensors are one loop, and its partition exchanges halos with the
// neighbouring blocks (px.halo_exchange before a convolution and its filter
// gradient, px.halo_reduce after its input gradient), sums the filter
// gradient's partial sums over the splitting axes, and synchronizes batch
// norm's statistics over them. Upstream's halo shardings (shard.update_halo)
// are not used: they leave the global edges undefined where a convolution
// needs its zero padding, and have no adjoint. Every other spatial
// dimension is a parallel loop of its own per tensor that is never split; a
// sharding that splits one is answered by computing the op whole.
//
//===----------------------------------------------------------------------===//

#include "PxShardingModel.h"

#include "parallax/Dialect/Px/PxShardingInterface.h"

#include "llvm/ADT/TypeSwitch.h"

#include <limits>
#include <optional>

using namespace mlir;
using namespace mlir::shard;
using namespace parallax::px;
using namespace parallax::px::sharding;

namespace {

/// Loops (samples, channels, spatial dimensions) and, per operand and then
/// per result, the loop each of its dimensions is indexed by.
struct Nest {
  SmallVector<IteratorType> loops;
  /// The rows loop, where the op's tensors share one (domainHalo).
  std::optional<unsigned> rows;
  SmallVector<bool> splittable;
  SmallVector<SmallVector<unsigned>> tensors;

  unsigned loop(IteratorType type, bool mayBeSplit = true) {
    loops.push_back(type);
    splittable.push_back(mayBeSplit);
    return loops.size() - 1;
  }
  /// `v` indexed by `lead` (samples and channels, or a weight's output and
  /// input channels), then by spatial loops of its own.
  SmallVector<unsigned> tensor(Value v, ArrayRef<unsigned> lead) {
    SmallVector<unsigned> dims(lead);
    for (int64_t i = lead.size(); i < cast<RankedTensorType>(v.getType()).getRank(); ++i)
      dims.push_back(loop(IteratorType::parallel, /*mayBeSplit=*/false));
    tensors.push_back(dims);
    return dims;
  }
  /// The rows loop of an op whose blocks of rows map onto each other, or
  /// none (the tensors' rows are loops of their own, never split).
  SmallVector<unsigned> rowsOf(Operation *op, IteratorType type) {
    return rowsIf(domainHalo(op).has_value(), type);
  }
  /// A rows loop shared by the op's tensors where `shared`, else none.
  SmallVector<unsigned> rowsIf(bool shared, IteratorType type) {
    if (!shared)
      return {};
    rows = loop(type);
    return {*rows};
  }
  /// A tensor of the shape of an earlier one, indexed alike (batch norm's y
  /// and its x).
  void same(ArrayRef<unsigned> dims) { tensors.emplace_back(dims.begin(), dims.end()); }

  SmallVector<AffineMap> maps(MLIRContext *ctx) const {
    SmallVector<AffineMap> maps;
    for (const SmallVector<unsigned> &t : tensors) {
      SmallVector<AffineExpr> exprs;
      for (unsigned d : t)
        exprs.push_back(getAffineDimExpr(d, ctx));
      maps.push_back(AffineMap::get(loops.size(), 0, exprs, ctx));
    }
    return maps;
  }
};

bool rankAtLeast(Value v, int64_t rank) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() >= rank;
}

/// Samples (or output channels), channels, then the rows loop if any.
SmallVector<unsigned> concat(unsigned first, unsigned second, ArrayRef<unsigned> rows) {
  SmallVector<unsigned> dims{first, second};
  llvm::append_range(dims, rows);
  return dims;
}

/// Whether a convolution (or a gradient of one) with `group` groups, input
/// (or input gradient) `data` and weight `w` is grouped: its channels (and
/// its filters) are `group` contiguous blocks, each group's output channels
/// summing its own input channels only. A block of whole groups therefore
/// needs nothing from the other ranks, so its channels are one parallel
/// loop that data, weight and result share; a split is taken only where it
/// falls between groups (groupsDivide). A depthwise convolution
/// (MobileNet's: a group per channel) is the case of one channel per group.
bool grouped(int64_t group, Value data, Value w) {
  auto x = cast<RankedTensorType>(data.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  return group > 1 && x.getRank() >= 3 && wt.getRank() >= 3 &&
         x.getDimSize(1) == group * wt.getDimSize(1) && wt.getDimSize(0) % group == 0;
}

/// The nest of `op`, or none where the model does not describe it (a
/// convolution whose channels and groups do not agree).
std::optional<Nest> nestOf(Operation *op) {
  using IT = IteratorType;
  constexpr IT par = IT::parallel, red = IT::reduction;
  if (!llvm::all_of(op->getOperands(), [](Value v) { return rankAtLeast(v, 1); }) ||
      !rankAtLeast(op->getOperand(0), 2))
    return std::nullopt;
  Nest n;
  bool described =
      llvm::TypeSwitch<Operation *, bool>(op)
          .Case([&](ConvOp c) {
            if (c.getGroup() != 1) {
              if (!grouped(c.getGroup(), c.getX(), c.getW()))
                return false;
              unsigned b = n.loop(par), ch = n.loop(par);
              n.tensor(c.getX(), {b, ch});
              n.tensor(c.getW(), {ch});
              if (c.getB())
                n.tensor(c.getB(), {ch});
              n.tensor(c.getY(), {b, ch});
              return true;
            }
            unsigned b = n.loop(par), co = n.loop(par), ci = n.loop(red);
            SmallVector<unsigned> h = n.rowsOf(op, par);
            n.tensor(c.getX(), concat(b, ci, h));
            n.tensor(c.getW(), {co, ci});
            if (c.getB())
              n.tensor(c.getB(), {co});
            n.tensor(c.getY(), concat(b, co, h));
            return true;
          })
          .Case([&](ConvGradInputOp c) {
            if (c.getGroup() != 1) {
              if (!grouped(c.getGroup(), c.getDx(), c.getW()))
                return false;
              unsigned b = n.loop(par), ch = n.loop(par);
              n.tensor(c.getDy(), {b, ch});
              n.tensor(c.getW(), {ch});
              n.tensor(c.getDx(), {b, ch});
              return true;
            }
            unsigned b = n.loop(par), ci = n.loop(par), co = n.loop(red);
            SmallVector<unsigned> h = n.rowsOf(op, par);
            n.tensor(c.getDy(), concat(b, co, h));
            n.tensor(c.getW(), {co, ci});
            n.tensor(c.getDx(), concat(b, ci, h));
            return true;
          })
          .Case([&](ConvGradFilterOp c) {
            if (c.getGroup() != 1) {
              if (!grouped(c.getGroup(), c.getX(), c.getDw()))
                return false;
              unsigned b = n.loop(red), ch = n.loop(par);
              n.tensor(c.getX(), {b, ch});
              n.tensor(c.getDy(), {b, ch});
              n.tensor(c.getDw(), {ch});
              return true;
            }
            unsigned b = n.loop(red), co = n.loop(par), ci = n.loop(par);
            SmallVector<unsigned> h = n.rowsOf(op, red);
            n.tensor(c.getX(), concat(b, ci, h));
            n.tensor(c.getDy(), concat(b, co, h));
            n.tensor(c.getDw(), {co, ci});
            return true;
          })
          .Case([&](BatchNormOp bn) {
            // Training-mode statistics are over the samples: a split of them
            // would need px-sync's all-reduce over the splitting axes. A split
            // of the rows has the partition synchronize them over its axes.
            unsigned b = n.loop(par, !bn.getTraining()), c = n.loop(par);
            SmallVector<unsigned> h = n.rowsIf(rankAtLeast(bn.getX(), 3), par);
            SmallVector<unsigned> x = n.tensor(bn.getX(), concat(b, c, h));
            for (Value v : {bn.getScale(), bn.getBias(), bn.getInputMean(), bn.getInputVar()})
              n.tensor(v, {c});
            n.same(x);
            n.tensor(bn.getRunningMean(), {c});
            n.tensor(bn.getRunningVar(), {c});
            return true;
          })
          .Case([&](BatchNormGradOp g) {
            unsigned b = n.loop(par, false), c = n.loop(par);
            SmallVector<unsigned> h = n.rowsIf(rankAtLeast(g.getX(), 3), par);
            SmallVector<unsigned> x = n.tensor(g.getDy(), concat(b, c, h));
            n.same(x);
            n.tensor(g.getScale(), {c});
            n.same(x);
            n.tensor(g.getDscale(), {c});
            n.tensor(g.getDbias(), {c});
            return true;
          })
          .Case<MaxPoolOp, AveragePoolOp>([&](auto p) {
            unsigned b = n.loop(par), c = n.loop(par);
            SmallVector<unsigned> h = n.rowsOf(op, par);
            n.tensor(p.getX(), concat(b, c, h));
            n.tensor(p.getY(), concat(b, c, h));
            return true;
          })
          .Case([&](MaxPoolGradOp g) {
            unsigned b = n.loop(par), c = n.loop(par);
            SmallVector<unsigned> h = n.rowsOf(op, par);
            SmallVector<unsigned> x = n.tensor(g.getX(), concat(b, c, h));
            n.tensor(g.getDy(), concat(b, c, h));
            n.same(x);
            return true;
          })
          .Case([&](AvgPoolGradOp g) {
            unsigned b = n.loop(par), c = n.loop(par);
            SmallVector<unsigned> h = n.rowsOf(op, par);
            n.tensor(g.getDy(), concat(b, c, h));
            n.tensor(g.getDx(), concat(b, c, h));
            return true;
          })
          .Default([](Operation *) { return false; });
  if (!described)
    return std::nullopt;
  return n;
}

/// Whether every split in these shardings falls on a loop that may be split
/// (samples or channels, not the spatial domain).
bool splitsOnlySplittable(const Nest &n, ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings) {
  auto check = [&](const Sharding &s, ArrayRef<unsigned> dims) {
    if (!s)
      return true;
    for (auto [axes, d] : llvm::zip(s.getSplitAxes(), dims))
      if (!axes.empty() && !n.splittable[d])
        return false;
    return true;
  };
  for (auto [s, dims] : llvm::zip(operandShardings, n.tensors))
    if (!check(s, dims))
      return false;
  for (auto [s, dims] :
       llvm::zip(resultShardings, ArrayRef(n.tensors).drop_front(operandShardings.size())))
    if (!check(s, dims))
      return false;
  return true;
}

/// Whether the op's rows split into `ranks` blocks (rowsSplitInto: its
/// tensors' rows are the input's and the output's): a pool over all the
/// rows (a global max pool, MaxPool2d(H)) has one output row, which no
/// block of ranks divides, so its rows are not split (its input is
/// gathered).
bool rowsDivide(Operation *op, const Nest &n, int64_t ranks) {
  if (!n.rows)
    return false;
  int64_t in = 0, out = std::numeric_limits<int64_t>::max();
  for (auto [i, dims] : llvm::enumerate(n.tensors)) {
    Value v = i < op->getNumOperands() ? op->getOperand(i)
                                       : op->getResult(i - op->getNumOperands());
    for (auto [d, loop] : llvm::enumerate(dims))
      if (loop == *n.rows) {
        int64_t rows = cast<RankedTensorType>(v.getType()).getDimSize(d);
        in = std::max(in, rows);
        out = std::min(out, rows);
      }
  }
  // Batch norm's rows have no halo.
  return in > 0 && rowsSplitInto(in, out, domainHalo(op).value_or(Halo()), ranks);
}

/// `resultShardings`, where a result has none (an unused one: batch norm's
/// running statistics before px-optimizer writes them back, a gradient's
/// dbias nobody reads) with the split the op's loops give it, so that its
/// type agrees with the op's other results.
std::vector<Sharding> resultsAsModelled(Operation *op, ArrayRef<Sharding> operandShardings,
                                        ArrayRef<Sharding> resultShardings) {
  std::vector<Sharding> results(resultShardings.begin(), resultShardings.end());
  std::optional<Nest> n = nestOf(op);
  FlatSymbolRefAttr grid;
  for (ArrayRef<Sharding> list : {operandShardings, resultShardings})
    for (const Sharding &s : list)
      if (s && !grid)
        grid = s.getGridAttr();
  if (!n || !grid || llvm::all_of(results, [](const Sharding &s) { return bool(s); }))
    return results;
  ShardingArray loops = getGridAxisAssignmentForLoopIterators(
      operandShardings, resultShardings, n->loops, n->maps(op->getContext()));
  for (auto [i, s] : llvm::enumerate(results)) {
    if (s)
      continue;
    SmallVector<GridAxesAttr> axes;
    for (unsigned d : n->tensors[op->getNumOperands() + i])
      axes.push_back(GridAxesAttr::get(op->getContext(), loops[d]));
    s = Sharding::get(grid, axes);
  }
  return results;
}

/// The grid axes that split the op's rows loop, if it has one.
SmallVector<GridAxis> rowAxes(Operation *op, ArrayRef<Sharding> operandShardings,
                              ArrayRef<Sharding> resultShardings) {
  std::optional<Nest> n = nestOf(op);
  if (!n || !n->rows || !resultShardings[0])
    return {};
  ShardingArray loops = getGridAxisAssignmentForLoopIterators(
      operandShardings, resultShardings, n->loops, n->maps(op->getContext()));
  return SmallVector<GridAxis>(loops[*n->rows]);
}

/// `op` on blocks of rows split over `axes` (domain parallelism): a
/// convolution on its block extended by its neighbours' halo rows, without
/// the padding of the rows (the halos of the edge blocks are zeros); its
/// input gradient on the extended block, the halo rows' gradient summed into
/// the neighbours' blocks; its filter gradient summed over the blocks; batch
/// norm's statistics, and its scale and bias gradients, over the blocks;
/// pools like convolutions (windows that tile the rows need no halo).
LogicalResult partitionRows(Operation *op, ArrayRef<Value> operands,
                            ArrayRef<Sharding> operandShardings,
                            ArrayRef<Sharding> resultShardings, ArrayRef<GridAxis> axes,
                            IRMapping &map, SymbolTableCollection &symbols, OpBuilder &b) {
  if (!reductionAxes(op, operandShardings, resultShardings).empty() &&
      !isa<ConvGradFilterOp>(op))
    return op->emitOpError("cannot split both its rows and its summed channels");
  Location loc = op->getLoc();
  FlatSymbolRefAttr gridRef = resultShardings[0].getGridAttr();
  GridOp grid = getGrid(op, gridRef, symbols);
  auto axesAttr = b.getDenseI16ArrayAttr(axes);
  Halo halo = domainHalo(op).value_or(Halo());
  bool exchanges = halo.lo + halo.hi > 0;
  auto withoutRowPads = [&](ArrayRef<int64_t> pads) {
    SmallVector<int64_t> p(pads);
    if (p.size() >= 2)
      p[0] = p[p.size() / 2] = 0;
    return b.getDenseI64ArrayAttr(p);
  };
  auto extended = [&](Type t) {
    auto r = cast<RankedTensorType>(t);
    SmallVector<int64_t> shape(r.getShape());
    shape[2] += halo.lo + halo.hi;
    return r.clone(shape);
  };
  // `edge`: what the op pads its rows with (a convolution 0, a max pool -inf).
  auto exchange = [&](Value x, double edge = 0.0) -> Value {
    if (!exchanges)
      return x;
    return HaloExchangeOp::create(b, loc, extended(x.getType()), gridRef, axesAttr, x,
                                  b.getI64IntegerAttr(2), b.getI64IntegerAttr(halo.lo),
                                  b.getI64IntegerAttr(halo.hi), b.getF64FloatAttr(edge))
        .getOutput();
  };
  // A gradient over the extended block, its halo rows summed into the
  // neighbours' blocks.
  auto reduceHalo = [&](Value dx, Type block) -> Value {
    if (!exchanges)
      return dx;
    return HaloReduceOp::create(b, loc, block, gridRef, axesAttr, dx, b.getI64IntegerAttr(2),
                                b.getI64IntegerAttr(halo.lo), b.getI64IntegerAttr(halo.hi))
        .getOutput();
  };
  auto sum = [&](Value v) -> Value {
    return shard::AllReduceOp::create(b, loc, v, gridRef.getValue(), axes, ReductionKind::Sum)
        .getResult();
  };
  auto local = [&](Value v, const Sharding &s) { return shardType(v.getType(), grid, s); };
  if (auto c = dyn_cast<ConvOp>(op)) {
    Value y = ConvOp::create(b, loc, exchange(operands[0]), operands[1],
                             c.getB() ? operands[2] : Value(), c.getStridesAttr(),
                             withoutRowPads(c.getPads()), c.getDilationsAttr(), c.getGroupAttr())
                  .getY();
    map.map(c.getY(), y);
    return success();
  }
  if (auto g = dyn_cast<ConvGradInputOp>(op)) {
    Type block = local(g.getDx(), resultShardings[0]);
    Value dx = ConvGradInputOp::create(b, loc, exchanges ? extended(block) : block, operands[0],
                                       operands[1], g.getStridesAttr(),
                                       withoutRowPads(g.getPads()), g.getDilationsAttr(),
                                       g.getGroupAttr())
                   .getDx();
    map.map(g.getDx(), reduceHalo(dx, block));
    return success();
  }
  if (auto g = dyn_cast<ConvGradFilterOp>(op)) {
    Value dw = ConvGradFilterOp::create(b, loc, local(g.getDw(), resultShardings[0]),
                                        exchange(operands[0]), operands[1], g.getStridesAttr(),
                                        withoutRowPads(g.getPads()), g.getDilationsAttr(),
                                        g.getGroupAttr())
                   .getDw();
    map.map(g.getDw(), sum(dw));
    return success();
  }
  if (exchanges && isa<MaxPoolOp, AveragePoolOp, MaxPoolGradOp, AvgPoolGradOp>(op)) {
    // A pool on its extended block without row padding: a max pool's
    // edge rows are -inf (padding never wins), an average pool's zeros
    // (its divisor counts the padding); the gradients' halo rows go back.
    bool max = isa<MaxPoolOp, MaxPoolGradOp>(op);
    Value extendedX;
    if (!isa<AvgPoolGradOp>(op))
      extendedX = exchange(operands[0], max ? -std::numeric_limits<double>::infinity() : 0.0);
    auto pads = withoutRowPads(op->getAttrOfType<DenseI64ArrayAttr>("pads").asArrayRef());
    Operation *pooled = nullptr;
    if (auto p = dyn_cast<MaxPoolOp>(op))
      pooled = MaxPoolOp::create(b, loc, extendedX, p.getKernelShapeAttr(), p.getStridesAttr(),
                                pads, p.getDilationsAttr(), p.getCeilModeAttr());
    else if (auto p = dyn_cast<AveragePoolOp>(op))
      pooled = AveragePoolOp::create(b, loc, extendedX, p.getKernelShapeAttr(),
                                    p.getStridesAttr(), pads, p.getCeilModeAttr(),
                                    p.getCountIncludePadAttr());
    else if (auto g = dyn_cast<MaxPoolGradOp>(op))
      pooled = MaxPoolGradOp::create(b, loc, extendedX.getType(), extendedX, operands[1],
                                    g.getKernelShapeAttr(), g.getStridesAttr(), pads,
                                    g.getDilationsAttr(), g.getCeilModeAttr());
    else if (auto g = dyn_cast<AvgPoolGradOp>(op))
      pooled = AvgPoolGradOp::create(b, loc, extended(local(g.getDx(), resultShardings[0])),
                                    operands[0], g.getKernelShapeAttr(), g.getStridesAttr(),
                                    pads, g.getCeilModeAttr(), g.getCountIncludePadAttr());
    Value y = pooled->getResult(0);
    if (isa<MaxPoolGradOp, AvgPoolGradOp>(op))
      y = reduceHalo(y, local(op->getResult(0), resultShardings[0]));
    map.map(op->getResult(0), y);
    return success();
  }
  if (failed(partitionAsIs(op, operands, operandShardings, resultShardings, map, symbols, b)))
    return failure();
  Operation *clone = map.lookup(op->getResult(0)).getDefiningOp();
  if (auto bn = dyn_cast<BatchNormOp>(clone)) {
    bn.setGridAttr(gridRef);
    bn.setGridAxesAttr(axesAttr);
  } else if (auto g = dyn_cast<BatchNormGradOp>(clone)) {
    g.setGridAttr(gridRef);
    g.setGridAxesAttr(axesAttr);
    map.map(op->getResult(1), sum(g.getDscale()));
    map.map(op->getResult(2), sum(g.getDbias()));
  }
  return success();
}

/// A grouped convolution on a block of channels has the groups of the
/// block: its input channels over each group's (the weight's second
/// dimension, which no split changes).
void withLocalGroups(Operation *local) {
  auto regroup = [&](auto c, Value data, Value w) {
    if (c.getGroup() != 1)
      c.setGroup(cast<RankedTensorType>(data.getType()).getDimSize(1) /
                 std::max<int64_t>(1, cast<RankedTensorType>(w.getType()).getDimSize(1)));
  };
  if (auto c = dyn_cast_or_null<ConvOp>(local))
    regroup(c, c.getX(), c.getW());
  else if (auto c = dyn_cast_or_null<ConvGradInputOp>(local))
    regroup(c, c.getDx(), c.getW());
  else if (auto c = dyn_cast_or_null<ConvGradFilterOp>(local))
    regroup(c, c.getX(), c.getDw());
}

/// The groups of a grouped convolution (or gradient), 1 for any other op.
int64_t groupsOf(Operation *op) {
  if (auto c = dyn_cast<ConvOp>(op))
    return c.getGroup();
  if (auto c = dyn_cast<ConvGradInputOp>(op))
    return c.getGroup();
  if (auto c = dyn_cast<ConvGradFilterOp>(op))
    return c.getGroup();
  return 1;
}

/// Whether `option` splits a grouped convolution's channels (loop 1 of its
/// nest) into blocks of whole groups: the ranks of the axes that split them
/// divide the groups.
bool groupsDivide(Operation *op, const ShardingOption &option) {
  int64_t groups = groupsOf(op);
  if (groups <= 1 || option.shardingArray.size() < 2 || option.shardingArray[1].empty())
    return true;
  auto grid = SymbolTable::lookupNearestSymbolFrom<GridOp>(op, option.grid);
  if (!grid)
    return false;
  int64_t ranks = 1;
  for (GridAxis a : option.shardingArray[1])
    ranks *= grid.getShape()[a];
  return ranks > 0 && groups % ranks == 0;
}

template <typename Op>
struct ChannelSharding : public PxShardingModel<ChannelSharding<Op>, Op> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    if (std::optional<Nest> n = nestOf(op))
      return n->loops;
    int64_t rank = 0;
    for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
      if (auto r = dyn_cast<RankedTensorType>(t))
        rank = std::max(rank, r.getRank());
    return SmallVector<IteratorType>(rank, IteratorType::parallel);
  }
  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *op) const {
    return SmallVector<ReductionKind>(
        llvm::count(getLoopIteratorTypes(op), IteratorType::reduction), ReductionKind::Sum);
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    if (std::optional<Nest> n = nestOf(op))
      return n->maps(op->getContext());
    return {};
  }

  /// A split of the spatial domain is answered by the whole op (its
  /// operands gathered), as an instance the model cannot describe.
  FailureOr<ShardingOption> getShardingOption(Operation *op,
                                              ArrayRef<Sharding> operandShardings,
                                              ArrayRef<Sharding> resultShardings) const {
    std::optional<Nest> n = nestOf(op);
    if (n && splitsOnlySplittable(*n, operandShardings, resultShardings)) {
      FailureOr<ShardingOption> option =
          shard::detail::defaultGetShardingOption(op, operandShardings, resultShardings);
      // Rows that do not divide stay whole.
      if (succeeded(option) && n->rows && !option->shardingArray[*n->rows].empty() &&
          !rowsDivide(op, *n, ranksOn(op, option->grid, option->shardingArray[*n->rows])))
        option->shardingArray[*n->rows].clear();
      // A split through a group ties the ranks' channels: computed whole.
      if (failed(option) || groupsDivide(op, *option))
        return option;
    }
    for (ArrayRef<Sharding> list : {operandShardings, resultShardings})
      for (const Sharding &sh : list)
        if (sh)
          return ShardingOption(ShardingArray(getLoopIteratorTypes(op).size()),
                                sh.getGridAttr());
    return ShardingOption::makeEmpty();
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable, OpBuilder &builder) const {
    std::vector<Sharding> results = resultsAsModelled(op, operandShardings, resultShardings);
    resultShardings = results;
    if (SmallVector<GridAxis> rows = rowAxes(op, operandShardings, resultShardings);
        !rows.empty())
      return partitionRows(op, partitionedOperands, operandShardings, resultShardings, rows,
                           partitionMap, symbolTable, builder);
    SmallVector<GridAxis> reduce;
    if (!getIndexingMaps(op).empty() && resultShardings[0])
      reduce = reductionAxes(op, operandShardings, resultShardings);
    if (reduce.empty()) {
      if (failed(partitionAsIs(op, partitionedOperands, operandShardings, resultShardings,
                               partitionMap, symbolTable, builder)))
        return failure();
      if (nestOf(op)) // a grouped convolution on a block of groups
        withLocalGroups(partitionMap.lookup(op->getResult(0)).getDefiningOp());
      return success();
    }
    // A split reduction (a convolution's input channels, its input
    // gradient's output channels, its filter gradient's samples): each rank
    // holds a partial sum of the one result.
    auto conv = dyn_cast<ConvOp>(op);
    Location loc = op->getLoc();
    Value partial;
    if (conv && conv.getB()) {
      // Without the bias, which is added once, after the sum.
      partial = ConvOp::create(builder, loc, partitionedOperands[0], partitionedOperands[1],
                               Value(), conv.getStridesAttr(), conv.getPadsAttr(),
                               conv.getDilationsAttr(), conv.getGroupAttr())
                    .getY();
    } else {
      if (failed(partitionAsIs(op, partitionedOperands, operandShardings, resultShardings,
                               partitionMap, symbolTable, builder)))
        return failure();
      partial = partitionMap.lookup(op->getResult(0));
    }
    if (nestOf(op))
      withLocalGroups(partial.getDefiningOp());
    Value sum = shard::AllReduceOp::create(builder, loc, partial,
                                           resultShardings[0].getGrid(), reduce,
                                           ReductionKind::Sum)
                    .getResult();
    if (conv && conv.getB()) {
      // [C] broadcast over [N, C, spatial...]: C, then ones.
      auto sumType = cast<RankedTensorType>(sum.getType());
      auto biasType = cast<RankedTensorType>(partitionedOperands[2].getType());
      SmallVector<int64_t> shape(sumType.getRank() - 1, 1);
      shape[0] = biasType.getDimSize(0);
      Value bias = ReshapeOp::create(builder, loc, biasType.clone(shape),
                                     partitionedOperands[2]);
      sum = AddOp::create(builder, loc, sum, bias).getOutput();
    }
    partitionMap.map(op->getResult(0), sum);
    return success();
  }
};

template <typename... Ops>
void attach(MLIRContext *ctx) {
  (Ops::template attachInterface<ChannelSharding<Ops>>(*ctx), ...);
}

} // namespace

void parallax::px::sharding::attachConvolutionModels(MLIRContext *ctx) {
  attach<ConvOp, ConvGradInputOp, ConvGradFilterOp, BatchNormOp, BatchNormGradOp, MaxPoolOp,
         AveragePoolOp, MaxPoolGradOp, AvgPoolGradOp>(ctx);
}

namespace {

/// Along the first spatial dimension: element 0 of a per-dimension
/// attribute, or `absent` when the attribute is empty.
int64_t first(ArrayRef<int64_t> values, int64_t absent) {
  return values.empty() ? absent : values[0];
}

int64_t rowsOfTensor(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getRank() >= 3 ? t.getDimSize(2) : -1;
}

} // namespace

bool parallax::px::rowsSplitInto(int64_t inRows, int64_t outRows, Halo halo, int64_t ranks) {
  return ranks > 0 && inRows % ranks == 0 && outRows % ranks == 0 && halo.lo <= inRows / ranks &&
         halo.hi <= inRows / ranks;
}

bool parallax::px::isGroupedConv(Operation *op) {
  auto c = dyn_cast<ConvOp>(op);
  return c && grouped(c.getGroup(), c.getX(), c.getW());
}

std::optional<Halo> parallax::px::domainHalo(Operation *op) {
  struct Rows {
    int64_t in = -1, out = -1, kernel = 0, stride = 1, dilation = 1, before = 0, after = 0;
  };
  auto geometry = [](int64_t in, int64_t out, int64_t kernel, ArrayRef<int64_t> strides,
                     ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations) {
    Rows r{in, out, kernel, first(strides, 1), first(dilations, 1), first(pads, 0), 0};
    r.after = pads.size() >= 2 ? pads[pads.size() / 2] : 0;
    return r;
  };
  auto kernelRows = [](Value w) { return cast<RankedTensorType>(w.getType()).getDimSize(2); };
  std::optional<Rows> r =
      llvm::TypeSwitch<Operation *, std::optional<Rows>>(op)
          .Case([&](ConvOp c) -> std::optional<Rows> {
            if (c.getGroup() != 1 || !rankAtLeast(c.getW(), 3))
              return std::nullopt;
            return geometry(rowsOfTensor(c.getX()), rowsOfTensor(c.getY()), kernelRows(c.getW()),
                            c.getStrides(), c.getPads(), c.getDilations());
          })
          .Case([&](ConvGradInputOp c) -> std::optional<Rows> {
            if (c.getGroup() != 1 || !rankAtLeast(c.getW(), 3))
              return std::nullopt;
            return geometry(rowsOfTensor(c.getDx()), rowsOfTensor(c.getDy()),
                            kernelRows(c.getW()), c.getStrides(), c.getPads(),
                            c.getDilations());
          })
          .Case([&](ConvGradFilterOp c) -> std::optional<Rows> {
            if (c.getGroup() != 1 || !rankAtLeast(c.getDw(), 3))
              return std::nullopt;
            return geometry(rowsOfTensor(c.getX()), rowsOfTensor(c.getDy()),
                            kernelRows(c.getDw()), c.getStrides(), c.getPads(),
                            c.getDilations());
          })
          .Case<MaxPoolOp, AveragePoolOp, MaxPoolGradOp, AvgPoolGradOp>([&](auto) {
            // The pool's input rows: x, or the average's dx; its output's:
            // y, or dy.
            auto ints = [&](StringRef name) {
              auto a = op->getAttrOfType<DenseI64ArrayAttr>(name);
              return a ? a.asArrayRef() : ArrayRef<int64_t>();
            };
            Value in = isa<AvgPoolGradOp>(op) ? op->getResult(0) : op->getOperand(0);
            Value out = isa<MaxPoolOp, AveragePoolOp>(op) ? op->getResult(0)
                        : isa<MaxPoolGradOp>(op)          ? op->getOperand(1)
                                                          : op->getOperand(0);
            return geometry(rowsOfTensor(in), rowsOfTensor(out), first(ints("kernel_shape"), 0),
                            ints("strides"), ints("pads"), ints("dilations"));
          })
          .Default([](Operation *) { return std::nullopt; });
  if (!r || r->in <= 0 || r->out <= 0 || r->kernel <= 0 || r->in != r->stride * r->out)
    return std::nullopt;
  // Output row j reads input rows [j*s - before, j*s - before + d*(k-1)]:
  // a block of input rows [i*s*o, (i+1)*s*o) for output rows [i*o, (i+1)*o)
  // needs `before` rows above it and d*(k-1) + 1 - s - before below. Up to
  // s - 1 rows fewer below (a 1x1 convolution of stride 2) means the
  // block's last rows are read by no output row, which a convolution over
  // the block leaves so.
  int64_t below = r->dilation * (r->kernel - 1) + 1 - r->stride - r->before;
  if (r->before < 0 || below < 1 - r->stride)
    return std::nullopt;
  Halo halo{r->before, std::max<int64_t>(below, 0)};
  // An average pool that divides by the window's real rows would count an
  // edge block's halo rows as real.
  if (isa<AveragePoolOp, AvgPoolGradOp>(op) && !op->hasAttr("count_include_pad") &&
      (halo.lo || halo.hi || r->after))
    return std::nullopt;
  return halo;
}
