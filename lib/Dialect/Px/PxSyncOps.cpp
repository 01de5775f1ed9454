//===- PxSyncOps.cpp - verification of px synchronization ops -------------===//
//
// Collectives are checked against the grid they name, as upstream shard
// collectives are: the grid must exist, the axes must be distinct and in
// range, and the result shapes must follow from the group size.
//
//===----------------------------------------------------------------------===//

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShapes.h"

#include "PxOpUtils.h"

using namespace mlir;
using namespace parallax::px;
using parallax::px::detail::verifyGroup;

FailureOr<int64_t> parallax::px::detail::verifyGroup(Operation *op, FlatSymbolRefAttr gridRef,
                                                     ArrayRef<int16_t> axes,
                                                     SymbolTableCollection &symbols) {
  shard::GridOp grid = shard::getGridOrNull(op, gridRef, symbols);
  if (!grid)
    return op->emitOpError("grid ") << gridRef << " is not a shard.grid";
  ArrayRef<int64_t> shape = grid.getShape();
  // Every axis, not only the group's: the ranks are numbered over all of
  // them.
  for (int64_t size : shape) {
    if (ShapedType::isDynamic(size))
      return op->emitOpError("grid ") << gridRef << " must have a static shape";
    if (size < 1)
      return op->emitOpError("grid ") << gridRef << " has an empty axis";
  }
  SmallVector<bool> seen(shape.size(), false);
  for (int16_t axis : axes) {
    if (axis < 0 || axis >= (int64_t)shape.size())
      return op->emitOpError("grid axis ")
             << axis << " is out of range for grid " << gridRef << " of rank "
             << shape.size();
    if (seen[axis])
      return op->emitOpError("grid axis ") << axis << " repeats";
    seen[axis] = true;
  }
  // Check each size before multiplying: a dynamic size is a negative
  // sentinel, and multiplying it overflows.
  SmallVector<int64_t> sizes;
  if (axes.empty())
    sizes.assign(shape.begin(), shape.end());
  else
    for (int16_t axis : axes)
      sizes.push_back(shape[axis]);
  int64_t group = 1;
  for (int64_t size : sizes) {
    if (ShapedType::isDynamic(size))
      return op->emitOpError("grid ") << gridRef << " must have a static shape";
    if (size < 1)
      return op->emitOpError("grid ") << gridRef << " has an empty axis";
    group *= size;
  }
  return group;
}

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyGroup(*this, getGridAttr(), getGridAxes(), symbols);
}

LogicalResult AllReduceOp::verify() {
  if (getInPlace() != getOffset().has_value())
    return emitOpError("in_place and offset go together");
  if (getShardUpdate() != getShardBytes().has_value())
    return emitOpError("shard_update and shard_bytes go together");
  if (getShardUpdate() && !getInPlace())
    return emitOpError("a sharded update reduces its bucket in place");
  if (getShardUpdate() && getReduction() != shard::ReductionKind::Sum &&
      getReduction() != shard::ReductionKind::Average)
    return emitOpError("a sharded update needs a sum or average reduction");
  return success();
}

LogicalResult
AllGatherVariablesOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyGroup(*this, getGridAttr(), getGridAxes(), symbols);
}

LogicalResult AllGatherVariablesOp::verify() {
  if (getOffsets().size() != getVariables().size())
    return emitOpError("needs one offset per variable, got ")
           << getOffsets().size() << " for " << getVariables().size();
  for (Value v : getVariables()) {
    auto var = v.getDefiningOp<VariableOp>();
    if (!var || !var.getTrainable())
      return emitOpError("gathers trainable px.variable values only");
  }
  return success();
}

/// Shape of the result of an exchange that multiplies dimension `grow` and
/// divides dimension `shrink` by the group size (either may be absent).
static LogicalResult verifyExchange(Operation *op, RankedTensorType in,
                                    RankedTensorType out, int64_t group,
                                    std::optional<int64_t> grow,
                                    std::optional<int64_t> shrink) {
  if (in.getElementType() != out.getElementType())
    return op->emitOpError("result must keep the element type");
  for (std::optional<int64_t> axis : {grow, shrink})
    if (axis && (*axis < 0 || *axis >= in.getRank()))
      return op->emitOpError("axis ")
             << *axis << " is out of range for rank " << in.getRank();
  Shape expected(in.getShape());
  if (shrink) {
    if (expected[*shrink] % group != 0)
      return op->emitOpError("dimension ")
             << *shrink << " of size " << expected[*shrink]
             << " does not divide among " << group << " ranks";
    expected[*shrink] /= group;
  }
  if (grow)
    expected[*grow] *= group;
  if (out.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("result shape must be ")
           << shapeToString(expected) << " for a group of " << group
           << " ranks, got " << shapeToString(out.getShape());
  return success();
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto group = verifyGroup(*this, getGridAttr(), getGridAxes(), symbols);
  if (failed(group))
    return failure();
  return verifyExchange(*this, getInput().getType(), getOutput().getType(),
                        *group, getGatherAxis(), std::nullopt);
}

LogicalResult
ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto group = verifyGroup(*this, getGridAttr(), getGridAxes(), symbols);
  if (failed(group))
    return failure();
  return verifyExchange(*this, getInput().getType(), getOutput().getType(),
                        *group, std::nullopt, getScatterAxis());
}

LogicalResult AllSliceOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto group = verifyGroup(*this, getGridAttr(), getGridAxes(), symbols);
  if (failed(group))
    return failure();
  return verifyExchange(*this, getInput().getType(), getOutput().getType(), *group,
                        std::nullopt, getSliceAxis());
}

LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto group = verifyGroup(*this, getGridAttr(), getGridAxes(), symbols);
  if (failed(group))
    return failure();
  // With split_axis == concat_axis the shape is unchanged, but the axis must
  // still be in range and divide among the group.
  return verifyExchange(*this, getInput().getType(), getOutput().getType(),
                        *group, getConcatAxis(), getSplitAxis());
}

/// `block` and `extended` differ along `axis` by lo + hi rows, and each
/// halo fits in one block (a neighbour's rows, not its neighbour's).
static LogicalResult verifyHalo(Operation *op, RankedTensorType block,
                                RankedTensorType extended, int64_t axis, int64_t lo,
                                int64_t hi) {
  if (block.getElementType() != extended.getElementType())
    return op->emitOpError("result must keep the element type");
  if (axis >= block.getRank())
    return op->emitOpError("axis ") << axis << " is out of range for rank " << block.getRank();
  Shape expected(block.getShape());
  expected[axis] += lo + hi;
  if (extended.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("the extended block must be ")
           << shapeToString(expected) << " (" << lo << " + " << block.getDimSize(axis)
           << " + " << hi << " rows along axis " << axis << "), got "
           << shapeToString(extended.getShape());
  if (lo > block.getDimSize(axis) || hi > block.getDimSize(axis))
    return op->emitOpError("halos of ")
           << lo << " and " << hi << " rows exceed the block's " << block.getDimSize(axis)
           << " rows along axis " << axis;
  return success();
}

LogicalResult HaloExchangeOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (failed(verifyGroup(*this, getGridAttr(), getGridAxes(), symbols)))
    return failure();
  return verifyHalo(*this, getInput().getType(), getOutput().getType(), getAxis(), getLo(),
                    getHi());
}

LogicalResult HaloReduceOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (failed(verifyGroup(*this, getGridAttr(), getGridAxes(), symbols)))
    return failure();
  return verifyHalo(*this, getOutput().getType(), getInput().getType(), getAxis(), getLo(),
                    getHi());
}

/// A gathered sparse gradient has `group` times the rows of each member's.
static LogicalResult verifyGatheredRows(Operation *op, SparseGradType in,
                                        SparseGradType out, int64_t group) {
  if (in.getDenseType() != out.getDenseType())
    return op->emitOpError("result must have the dense type ")
           << in.getDenseType();
  if (out.getRows() != in.getRows() * group)
    return op->emitOpError("result must have ")
           << in.getRows() * group << " rows (" << in.getRows() << " x "
           << group << " ranks), got " << out.getRows();
  return success();
}

LogicalResult AllGatherVOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto group = verifyGroup(*this, getGridAttr(), getGridAxes(), symbols);
  if (failed(group))
    return failure();
  return verifyGatheredRows(*this, cast<SparseGradType>(getInput().getType()),
                            cast<SparseGradType>(getOutput().getType()),
                            *group);
}

/// Checks `partitions` and `placement` of a table of `rows` rows.
static LogicalResult verifyPartitioning(Operation *op, int64_t partitions,
                                        ArrayRef<int64_t> placement,
                                        int64_t rows, int64_t group) {
  if (partitions > rows)
    return op->emitOpError("cannot split ")
           << rows << " rows into " << partitions << " partitions";
  if ((int64_t)placement.size() != partitions)
    return op->emitOpError("placement must name one rank per partition (")
           << partitions << "), got " << placement.size();
  for (int64_t rank : placement)
    if (rank < 0 || rank >= group)
      return op->emitOpError("placement rank ")
             << rank << " is outside the group of " << group << " ranks";
  return success();
}

LogicalResult PsPullOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto group = verifyGroup(*this, getGridAttr(), getGridAxes(), symbols);
  if (failed(group))
    return failure();
  auto table = getTable().getType();
  if (table.getRank() < 1)
    return emitOpError("table must have rank >= 1");
  if (failed(verifyPartitioning(*this, getPartitions(), getPlacement(),
                                table.getDimSize(0), *group)))
    return failure();
  if (std::optional<ArrayRef<int16_t>> block = getBlockAxes()) {
    if (block->empty())
      return emitOpError("block_axes must name the axes the table's rows are split over");
    if (failed(verifyGroup(*this, getGridAttr(), *block, symbols)))
      return failure();
    // No grid_axes serve over every axis, the block's too.
    for (int16_t a : *block)
      if (getGridAxes().empty() || llvm::is_contained(getGridAxes(), a))
        return emitOpError("grid axis ")
               << a << " both serves the rows and splits them (block_axes)";
  }
  Shape expected(getIds().getType().getShape());
  llvm::append_range(expected, table.getShape().drop_front());
  if (getRows().getType() !=
      RankedTensorType::get(expected, table.getElementType()))
    return emitOpError("pulled rows must be ")
           << RankedTensorType::get(expected, table.getElementType());
  return success();
}

LogicalResult PsPushOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto group = verifyGroup(*this, getGridAttr(), getGridAxes(), symbols);
  if (failed(group))
    return failure();
  auto in = cast<SparseGradType>(getGrad().getType());
  if (failed(verifyPartitioning(*this, getPartitions(), getPlacement(),
                                in.getDenseType().getDimSize(0), *group)))
    return failure();
  return verifyGatheredRows(*this, in,
                            cast<SparseGradType>(getServed().getType()),
                            *group);
}
