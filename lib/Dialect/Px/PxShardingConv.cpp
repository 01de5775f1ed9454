//===- PxShardingConv.cpp - shard models of convolution, norm, pooling ----===//
//
// px.conv, px.batch_norm, the pools and their gradients as loop nests over
// samples and channels, as upstream's linalg models describe convolutions:
// a convolution sums over its input channels (a split of them leaves each
// rank a partial sum, all-reduced by partition, the bias added once after),
// batch norm and pooling are per channel. Every spatial dimension of every
// tensor is a parallel loop of its own that is never split: splitting the
// spatial domain (SPAA'18's domain parallelism) needs a halo exchange, which
// is not modelled, so a sharding that splits one is answered by computing
// the op whole.
//
//===----------------------------------------------------------------------===//

#include "PxShardingModel.h"

#include "llvm/ADT/TypeSwitch.h"

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

/// The nest of `op`, or none where the model does not describe it: a
/// grouped convolution (its channel loops are tied group by group).
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
            if (c.getGroup() != 1)
              return false;
            unsigned b = n.loop(par), co = n.loop(par), ci = n.loop(red);
            n.tensor(c.getX(), {b, ci});
            n.tensor(c.getW(), {co, ci});
            if (c.getB())
              n.tensor(c.getB(), {co});
            n.tensor(c.getY(), {b, co});
            return true;
          })
          .Case([&](ConvGradInputOp c) {
            if (c.getGroup() != 1)
              return false;
            unsigned b = n.loop(par), ci = n.loop(par), co = n.loop(red);
            n.tensor(c.getDy(), {b, co});
            n.tensor(c.getW(), {co, ci});
            n.tensor(c.getDx(), {b, ci});
            return true;
          })
          .Case([&](ConvGradFilterOp c) {
            if (c.getGroup() != 1)
              return false;
            unsigned b = n.loop(red), co = n.loop(par), ci = n.loop(par);
            n.tensor(c.getX(), {b, ci});
            n.tensor(c.getDy(), {b, co});
            n.tensor(c.getDw(), {co, ci});
            return true;
          })
          .Case([&](BatchNormOp bn) {
            // Training-mode statistics are over the samples: a split of them
            // would need px-sync's all-reduce over the splitting axes.
            unsigned b = n.loop(par, !bn.getTraining()), c = n.loop(par);
            SmallVector<unsigned> x = n.tensor(bn.getX(), {b, c});
            for (Value v : {bn.getScale(), bn.getBias(), bn.getInputMean(), bn.getInputVar()})
              n.tensor(v, {c});
            n.same(x);
            n.tensor(bn.getRunningMean(), {c});
            n.tensor(bn.getRunningVar(), {c});
            return true;
          })
          .Case([&](BatchNormGradOp g) {
            unsigned b = n.loop(par, false), c = n.loop(par);
            SmallVector<unsigned> x = n.tensor(g.getDy(), {b, c});
            n.same(x);
            n.tensor(g.getScale(), {c});
            n.same(x);
            n.tensor(g.getDscale(), {c});
            n.tensor(g.getDbias(), {c});
            return true;
          })
          .Case<MaxPoolOp, AveragePoolOp>([&](auto p) {
            unsigned b = n.loop(par), c = n.loop(par);
            n.tensor(p.getX(), {b, c});
            n.tensor(p.getY(), {b, c});
            return true;
          })
          .Case([&](MaxPoolGradOp g) {
            unsigned b = n.loop(par), c = n.loop(par);
            SmallVector<unsigned> x = n.tensor(g.getX(), {b, c});
            n.tensor(g.getDy(), {b, c});
            n.same(x);
            return true;
          })
          .Case([&](AvgPoolGradOp g) {
            unsigned b = n.loop(par), c = n.loop(par);
            n.tensor(g.getDy(), {b, c});
            n.tensor(g.getDx(), {b, c});
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
    if (n && splitsOnlySplittable(*n, operandShardings, resultShardings))
      return shard::detail::defaultGetShardingOption(op, operandShardings, resultShardings);
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
    SmallVector<GridAxis> reduce;
    if (!getIndexingMaps(op).empty() && resultShardings[0])
      reduce = reductionAxes(op, operandShardings, resultShardings);
    if (reduce.empty())
      return partitionAsIs(op, partitionedOperands, operandShardings, resultShardings,
                           partitionMap, symbolTable, builder);
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
