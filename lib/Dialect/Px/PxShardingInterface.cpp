//===- PxShardingInterface.cpp - upstream shard models of px ops ----------===//
//
// As upstream's linalg models: an op is a loop nest whose iterators are
// parallel or reductions, each operand and result an affine map of the
// iterators. A sharded reduction iterator leaves each rank a partial sum:
// partition sums it with shard.all_reduce over those grid axes (MLIR 22's
// shardings carry no partial state), and only then adds a gemm's bias.
//
//===----------------------------------------------------------------------===//

#include "parallax/Dialect/Px/PxShardingInterface.h"
#include "parallax/Dialect/Px/PxDialect.h"
#include "PxShardingModel.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::shard;
using namespace parallax::px;
using namespace parallax::px::sharding;

namespace {

using utils::IteratorType;

/// The map of an operand of `type` broadcast (ONNX style: aligned to the
/// trailing dimensions) into an iteration space of `shape`; a dimension of
/// size 1 broadcast to more reads element 0.
AffineMap broadcastMap(RankedTensorType type, ArrayRef<int64_t> shape, MLIRContext *ctx) {
  int64_t lead = (int64_t)shape.size() - type.getRank();
  SmallVector<AffineExpr> exprs;
  for (int64_t i = 0; i < type.getRank(); ++i)
    exprs.push_back(type.getDimSize(i) == shape[lead + i] || shape[lead + i] == 1
                        ? getAffineDimExpr(lead + i, ctx)
                        : getAffineConstantExpr(0, ctx));
  return AffineMap::get(shape.size(), 0, exprs, ctx);
}

/// Whether every operand of `op` reaches the iteration space without a
/// size-1 dimension broadcast (those maps are not projected permutations,
/// which propagation needs).
bool plainBroadcast(RankedTensorType t, RankedTensorType out) {
  if (t.getRank() > out.getRank())
    return false;
  for (int64_t i = 0; i < t.getRank(); ++i)
    if (t.getDimSize(i) != out.getDimSize(out.getRank() - t.getRank() + i))
      return false;
  return true;
}
bool plainBroadcast(Operation *op) {
  auto out = cast<RankedTensorType>(op->getResult(0).getType());
  return llvm::all_of(op->getOperandTypes(), [&](Type t) {
    auto r = dyn_cast<RankedTensorType>(t);
    return r && plainBroadcast(r, out);
  });
}

template <typename Op>
struct ElementwiseSharding
    : public PxShardingModel<ElementwiseSharding<Op>, Op> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    return parallelOver(op->getResult(0));
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    if (!plainBroadcast(op))
      return {};
    auto out = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<AffineMap> maps;
    for (Value v : op->getOperands())
      maps.push_back(broadcastMap(cast<RankedTensorType>(v.getType()), out.getShape(),
                                  op->getContext()));
    maps.push_back(AffineMap::getMultiDimIdentityMap(out.getRank(), op->getContext()));
    return maps;
  }

};

/// Shared by the products: (m..., n, k) with k summed. `lhs` indexes
/// (m..., k) or (k, m) when transposed, `rhs` (k, n) or (n, k).
struct Product {
  int64_t batchDims; ///< the m dimensions: rank(lhs) - 1
  bool transLhs, transRhs;
  /// Leading m dimensions that index rhs too (a batched matmul: attention's
  /// scores), 0 for a weight.
  int64_t shared = 0;

  SmallVector<IteratorType> iterators() const {
    SmallVector<IteratorType> it(batchDims + 1, IteratorType::parallel);
    it.push_back(IteratorType::reduction);
    return it;
  }
  AffineExpr n(MLIRContext *ctx) const { return getAffineDimExpr(batchDims, ctx); }
  AffineExpr k(MLIRContext *ctx) const { return getAffineDimExpr(batchDims + 1, ctx); }
  AffineMap lhs(MLIRContext *ctx) const {
    SmallVector<AffineExpr> e;
    for (int64_t i = 0; i < batchDims; ++i)
      e.push_back(getAffineDimExpr(i, ctx));
    if (transLhs)
      e.insert(e.begin(), k(ctx));
    else
      e.push_back(k(ctx));
    return AffineMap::get(batchDims + 2, 0, e, ctx);
  }
  AffineMap rhs(MLIRContext *ctx) const {
    SmallVector<AffineExpr> e;
    for (int64_t i = 0; i < shared; ++i)
      e.push_back(getAffineDimExpr(i, ctx));
    e.append(transRhs ? SmallVector<AffineExpr>{n(ctx), k(ctx)}
                      : SmallVector<AffineExpr>{k(ctx), n(ctx)});
    return AffineMap::get(batchDims + 2, 0, e, ctx);
  }
  AffineMap result(MLIRContext *ctx) const {
    SmallVector<AffineExpr> e;
    for (int64_t i = 0; i <= batchDims; ++i)
      e.push_back(getAffineDimExpr(i, ctx));
    return AffineMap::get(batchDims + 2, 0, e, ctx);
  }
};

Product productOf(Operation *op) {
  if (auto g = dyn_cast<GemmOp>(op))
    return {1, g.getTransA(), g.getTransB()};
  auto m = cast<MatMulOp>(op);
  int64_t lhs = cast<RankedTensorType>(m.getLhs().getType()).getRank();
  int64_t rhs = cast<RankedTensorType>(m.getRhs().getType()).getRank();
  return {lhs - 1, false, false, rhs > 2 ? rhs - 2 : 0};
}

/// Products the model describes: a 2-D weight, or batched operands with
/// the same batch dimensions (no broadcasting between them).
bool describedProduct(Operation *op) {
  auto m = dyn_cast<MatMulOp>(op);
  if (!m)
    return true;
  auto lhs = cast<RankedTensorType>(m.getLhs().getType());
  auto rhs = cast<RankedTensorType>(m.getRhs().getType());
  if (rhs.getRank() == 2)
    return lhs.getRank() >= 2;
  return lhs.getRank() == rhs.getRank() &&
         lhs.getShape().drop_back(2) == rhs.getShape().drop_back(2);
}

template <typename Op>
struct ProductSharding : public PxShardingModel<ProductSharding<Op>, Op> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    return productOf(op).iterators();
  }
  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *) const {
    return {ReductionKind::Sum};
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    Product p = productOf(op);
    if (!describedProduct(op))
      return {};
    SmallVector<AffineMap> maps{p.lhs(ctx), p.rhs(ctx)};
    if (auto g = dyn_cast<GemmOp>(op); g && g.getC()) {
      auto c = cast<RankedTensorType>(g.getC().getType());
      auto out = cast<RankedTensorType>(g.getType());
      if (!plainBroadcast(c, out))
        return {}; // a [1, N] or [M, 1] bias: its map would be constant
      // C broadcasts over (m, n); the iteration space has k as well.
      AffineMap m = broadcastMap(c, out.getShape(), ctx);
      maps.push_back(AffineMap::get(3, 0, m.getResults(), ctx));
    }
    maps.push_back(p.result(ctx));
    return maps;
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable, OpBuilder &builder) const {
    if (getIndexingMaps(op).empty() || !resultShardings[0])
      return partitionAsIs(op, partitionedOperands, operandShardings, resultShardings,
                           partitionMap, symbolTable, builder);
    SmallVector<GridAxis> reduce = reductionAxes(op, operandShardings, resultShardings);
    auto gemm = dyn_cast<GemmOp>(op);
    if (reduce.empty() || !gemm || !gemm.getC()) {
      // The product of the local blocks (then the sum of the partials).
      if (failed(partitionAsIs(op, partitionedOperands, operandShardings, resultShardings,
                               partitionMap, symbolTable, builder)))
        return failure();
      if (!reduce.empty())
        partitionMap.map(op->getResult(0),
                         shard::AllReduceOp::create(builder, op->getLoc(),
                                                    partitionMap.lookup(op->getResult(0)),
                                                    resultShardings[0].getGrid(), reduce,
                                                    ReductionKind::Sum)
                             .getResult());
      return success();
    }
    // The bias is added once, after the partial products are summed.
    auto product = GemmOp::create(builder, op->getLoc(), partitionedOperands[0],
                                  partitionedOperands[1], Value(), gemm.getAlphaAttr(),
                                  gemm.getBetaAttr(), gemm.getTransAAttr(),
                                  gemm.getTransBAttr());
    Value sum = shard::AllReduceOp::create(builder, op->getLoc(), product.getOutput(),
                                           resultShardings[0].getGrid(), reduce,
                                           ReductionKind::Sum)
                    .getResult();
    Value c = partitionedOperands[2];
    if (gemm.getBeta().convertToDouble() != 1.0) {
      auto type = cast<RankedTensorType>(c.getType());
      auto scale = ConstantOp::create(
          builder, op->getLoc(),
          DenseElementsAttr::get(RankedTensorType::get({}, type.getElementType()),
                                 builder.getFloatAttr(type.getElementType(),
                                                      gemm.getBeta().convertToDouble())));
      c = MulOp::create(builder, op->getLoc(), c, scale).getOutput();
    }
    partitionMap.map(op->getResult(0),
                     AddOp::create(builder, op->getLoc(), sum, c).getOutput());
    return success();
  }
};

/// A transpose is parallel over its result; input dimension perm[i] is
/// result dimension i.
struct TransposeSharding : public PxShardingModel<TransposeSharding, TransposeOp> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    return parallelOver(op->getResult(0));
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    ArrayRef<int64_t> perm = cast<TransposeOp>(op).getPerm();
    MLIRContext *ctx = op->getContext();
    SmallVector<AffineExpr> in(perm.size());
    for (auto [i, p] : llvm::enumerate(perm))
      in[p] = getAffineDimExpr(i, ctx);
    return {AffineMap::get(perm.size(), 0, in, ctx),
            AffineMap::getMultiDimIdentityMap(perm.size(), ctx)};
  }
};

/// A variable is parallel over its dimensions; partitioned, it becomes
/// this rank's block of the whole value, which its init still describes.
struct VariableSharding : public PxShardingModel<VariableSharding, VariableOp> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    return parallelOver(op->getResult(0));
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    auto t = cast<RankedTensorType>(op->getResult(0).getType());
    return {AffineMap::getMultiDimIdentityMap(t.getRank(), op->getContext())};
  }
  LogicalResult finishPartition(Operation *op, ArrayRef<Sharding> operandShardings,
                                ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                                OpBuilder &builder) const {
    const Sharding &s = resultShardings[0];
    if (!replicated(s)) {
      auto block = cast<VariableOp>(partitionMap.lookup(op->getResult(0)).getDefiningOp());
      block.setGridAttr(s.getGridAttr());
      block.setSplitAxesAttr(GridAxesArrayAttr::get(op->getContext(), s.getSplitAxes()));
    }
    return success();
  }
};

/// Ops without results that take tensors of one shape (a variable, its
/// optimizer state, its gradient): they follow the variable's sharding.
template <typename Op>
struct SameShapeOperandsSharding
    : public PxShardingModel<SameShapeOperandsSharding<Op>, Op> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    return parallelOver(op->getOperand(0));
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    auto t = cast<RankedTensorType>(op->getOperand(0).getType());
    for (Value v : op->getOperands())
      if (v.getType() != t)
        return {}; // a sparse gradient, or sharded state: not these maps
    return SmallVector<AffineMap>(op->getNumOperands(),
                                  AffineMap::getMultiDimIdentityMap(t.getRank(),
                                                                    op->getContext()));
  }
};

/// A sum or mean over `axes` that drops them (keepdims = false: a kept
/// size-1 dimension would have to be indexed by a constant). A split
/// reduced dimension leaves partial results: sums are all-reduced; a mean
/// is the all-reduced sum of partial means divided by the ranks it spans.
template <typename Op>
struct ReductionSharding : public PxShardingModel<ReductionSharding<Op>, Op> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    auto r = cast<Op>(op);
    auto t = cast<RankedTensorType>(r.getInput().getType());
    SmallVector<IteratorType> it(t.getRank(), IteratorType::parallel);
    for (int64_t a : r.getAxes())
      it[a < 0 ? a + t.getRank() : a] = IteratorType::reduction;
    return it;
  }
  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *op) const {
    return SmallVector<ReductionKind>(cast<Op>(op).getAxes().size(), ReductionKind::Sum);
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    auto r = cast<Op>(op);
    if (r.getKeepdims())
      return {};
    MLIRContext *ctx = op->getContext();
    auto t = cast<RankedTensorType>(r.getInput().getType());
    SmallVector<IteratorType> it = getLoopIteratorTypes(op);
    SmallVector<AffineExpr> kept;
    for (int64_t i = 0; i < t.getRank(); ++i)
      if (it[i] == IteratorType::parallel)
        kept.push_back(getAffineDimExpr(i, ctx));
    return {AffineMap::getMultiDimIdentityMap(t.getRank(), ctx),
            AffineMap::get(t.getRank(), 0, kept, ctx)};
  }
  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable, OpBuilder &builder) const {
    if (getIndexingMaps(op).empty() || !resultShardings[0])
      return partitionAsIs(op, partitionedOperands, operandShardings, resultShardings,
                           partitionMap, symbolTable, builder);
    SmallVector<GridAxis> reduce = reductionAxes(op, operandShardings, resultShardings);
    if (failed(partitionAsIs(op, partitionedOperands, operandShardings, resultShardings,
                             partitionMap, symbolTable, builder)))
      return failure();
    if (reduce.empty())
      return success();
    Value local = partitionMap.lookup(op->getResult(0));
    Value sum = shard::AllReduceOp::create(builder, op->getLoc(), local,
                                           resultShardings[0].getGrid(), reduce,
                                           ReductionKind::Sum)
                    .getResult();
    if (isa<ReduceMeanOp>(op)) {
      auto grid = getGrid(op, resultShardings[0].getGridAttr(), symbolTable);
      int64_t ranks = collectiveProcessGroupSize(reduce, grid);
      auto type = cast<RankedTensorType>(local.getType());
      auto scale = ConstantOp::create(
          builder, op->getLoc(),
          DenseElementsAttr::get(RankedTensorType::get({}, type.getElementType()),
                                 builder.getFloatAttr(type.getElementType(), 1.0 / ranks)));
      sum = MulOp::create(builder, op->getLoc(), sum, scale).getOutput();
    }
    partitionMap.map(op->getResult(0), sum);
    return success();
  }
};

/// Every other px op: computed whole. With a model of its own (rather than
/// none) upstream's passes annotate and partition it like the rest,
/// gathering what it reads.
template <typename Op>
struct WholeSharding : public PxShardingModel<WholeSharding<Op>, Op> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    int64_t rank = 0;
    for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
      if (auto r = dyn_cast<RankedTensorType>(t))
        rank = std::max(rank, r.getRank());
    return SmallVector<IteratorType>(rank, IteratorType::parallel);
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *) const { return {}; }
};

template <typename Op>
void attachIfElementwise(MLIRContext *ctx) {
  // One result: px.dropout (two, and a random stream numbered over the
  // whole tensor) has a model of its own (PxShardingHeads.cpp).
  if constexpr (hasHeadModel<Op> || hasLossModel<Op> || hasNormModel<Op>)
    return;
  else if constexpr (Op::template hasTrait<parallax::px::OpTrait::Elementwise>() &&
                     Op::template hasTrait<::mlir::OpTrait::OneResult>())
    Op::template attachInterface<ElementwiseSharding<Op>>(*ctx);
  else if constexpr (!llvm::is_one_of<Op, GemmOp, MatMulOp, VariableOp, TransposeOp,
                                      GradientOp, SgdOp, MomentumOp, AdamOp, AdagradOp,
                                      ReduceSumOp, ReduceMeanOp, parallax::px::GatherOp,
                                      MakeSparseGradOp>::value &&
                     !hasConvolutionModel<Op>)
    Op::template attachInterface<WholeSharding<Op>>(*ctx);
}

template <typename... Ops>
void attachElementwise(MLIRContext *ctx) {
  (attachIfElementwise<Ops>(ctx), ...);
}

} // namespace

void parallax::px::registerShardingInterfaceModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, PxDialect *) {
    GemmOp::attachInterface<ProductSharding<GemmOp>>(*ctx);
    MatMulOp::attachInterface<ProductSharding<MatMulOp>>(*ctx);
    VariableOp::attachInterface<VariableSharding>(*ctx);
    TransposeOp::attachInterface<TransposeSharding>(*ctx);
    attachRowBlockModels(ctx); // px.gather, px.make_sparse_grad, px.gradient
    SgdOp::attachInterface<SameShapeOperandsSharding<SgdOp>>(*ctx);
    MomentumOp::attachInterface<SameShapeOperandsSharding<MomentumOp>>(*ctx);
    AdamOp::attachInterface<SameShapeOperandsSharding<AdamOp>>(*ctx);
    AdagradOp::attachInterface<SameShapeOperandsSharding<AdagradOp>>(*ctx);
    ReduceSumOp::attachInterface<ReductionSharding<ReduceSumOp>>(*ctx);
    ReduceMeanOp::attachInterface<ReductionSharding<ReduceMeanOp>>(*ctx);
    attachConvolutionModels(ctx);
    attachHeadModels(ctx);
    attachLossModels(ctx);
    attachNormModels(ctx);
    attachElementwise<
#define GET_OP_LIST
#include "parallax/Dialect/Px/PxOps.cpp.inc"
        >(ctx);
  });
}
