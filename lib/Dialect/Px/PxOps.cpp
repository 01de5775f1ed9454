//===- PxOps.cpp - px tensor op shape inference, verifiers, folders -------===//
//
// Each inferReturnTypes below is the op's ONNX shape rule. The
// InferTypeOpInterface verifier compares it with the written result types, so
// a wrong shape in hand-written IR and a wrong shape from the importer are
// caught by the same code.
//
//===----------------------------------------------------------------------===//

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShapes.h"
#include "PxOpUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace parallax::px;

// Shared with the other op files through PxOpUtils.h.
namespace parallax::px::detail {

/// Default-valued attributes are not yet populated when the parser calls
/// inferReturnTypes, so shape rules read them through these.
int64_t intOr(IntegerAttr attr, int64_t dflt) {
  return attr ? attr.getInt() : dflt;
}
bool boolOr(BoolAttr attr, bool dflt) { return attr ? attr.getValue() : dflt; }
StringRef strOr(StringAttr attr, StringRef dflt) {
  return attr ? attr.getValue() : dflt;
}

/// The ranked tensor type of `v`, or an error naming `what`.
FailureOr<RankedTensorType> ranked(std::optional<Location> loc, Value v,
                                   StringRef what) {
  auto type = dyn_cast_or_null<RankedTensorType>(v ? v.getType() : Type());
  if (!type || !type.hasStaticShape())
    return emitOptionalError(loc, what, " must be a statically shaped tensor");
  return type;
}

FailureOr<int64_t> axisFor(std::optional<Location> loc, IntegerAttr attr,
                           int64_t dflt, int64_t rank) {
  int64_t value = intOr(attr, dflt);
  auto axis = normalizeAxis(value, rank);
  if (!axis)
    return emitOptionalError(loc, "axis ", value, " is out of range for rank ", rank);
  return *axis;
}

std::string fmt(ArrayRef<int64_t> shape) { return shapeToString(shape); }

/// ONNX gives these operands one type parameter T: `what` must have the
/// element type of `reference`.
LogicalResult sameElementType(std::optional<Location> loc, RankedTensorType t,
                              RankedTensorType reference, StringRef what,
                              StringRef referenceName) {
  if (t.getElementType() != reference.getElementType())
    return emitOptionalError(loc, what, " must have the element type of ",
                             referenceName, " (", reference.getElementType(),
                             "), got ", t.getElementType());
  return success();
}

LogicalResult inferBroadcast(std::optional<Location> loc, Value lhs, Value rhs,
                             Type elementType,
                             SmallVectorImpl<Type> &inferred) {
  auto a = ranked(loc, lhs, "lhs");
  auto b = ranked(loc, rhs, "rhs");
  if (failed(a) || failed(b))
    return failure();
  auto shape = broadcastShapes(a->getShape(), b->getShape());
  if (!shape)
    return emitOptionalError(loc, "operand shapes ", fmt(a->getShape()),
                             " and ", fmt(b->getShape()),
                             " do not broadcast");
  inferred.push_back(RankedTensorType::get(
      *shape, elementType ? elementType : a->getElementType()));
  return success();
}

LogicalResult inferArith(std::optional<Location> loc, Value lhs, Value rhs,
                         SmallVectorImpl<Type> &inferred) {
  if (getElementTypeOrSelf(lhs.getType()) !=
      getElementTypeOrSelf(rhs.getType()))
    return emitOptionalError(loc, "operands must have the same element type, "
                                  "got ",
                             lhs.getType(), " and ", rhs.getType());
  return inferBroadcast(loc, lhs, rhs, Type(), inferred);
}

LogicalResult inferCompare(MLIRContext *ctx, std::optional<Location> loc,
                           Value lhs, Value rhs,
                           SmallVectorImpl<Type> &inferred) {
  if (getElementTypeOrSelf(lhs.getType()) !=
      getElementTypeOrSelf(rhs.getType()))
    return emitOptionalError(loc, "operands must have the same element type, "
                                  "got ",
                             lhs.getType(), " and ", rhs.getType());
  return inferBroadcast(loc, lhs, rhs, IntegerType::get(ctx, 1), inferred);
}

/// Checks that an initial value has the declared type.
LogicalResult verifyInitialValue(Operation *op, Attribute value, Type type) {
  auto typed = cast<TypedAttr>(value);
  if (typed.getType() != type)
    return op->emitOpError("initial value of type ")
           << typed.getType() << " does not match result type " << type;
  return success();
}

/// Spatial window checks shared by conv and pooling.
LogicalResult verifyWindow(std::optional<Location> loc, int64_t spatial,
                           ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                           ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations) {
  if ((int64_t)kernel.size() != spatial)
    return emitOptionalError(loc, "expected ", spatial,
                             " kernel dimensions, got ", kernel.size());
  if ((int64_t)strides.size() != spatial)
    return emitOptionalError(loc, "expected ", spatial, " strides, got ",
                             strides.size());
  if ((int64_t)dilations.size() != spatial)
    return emitOptionalError(loc, "expected ", spatial, " dilations, got ",
                             dilations.size());
  if ((int64_t)pads.size() != 2 * spatial)
    return emitOptionalError(loc, "expected ", 2 * spatial,
                             " pads (begins then ends), got ", pads.size());
  for (int64_t i = 0; i < spatial; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || dilations[i] < 1)
      return emitOptionalError(
          loc, "kernel sizes, strides and dilations must be >= 1");
    if (pads[i] < 0 || pads[spatial + i] < 0)
      return emitOptionalError(loc, "pads must be >= 0");
  }
  // Below 2^31, so that the output size's arithmetic cannot overflow (the
  // runtime's kernels check the same).
  for (ArrayRef<int64_t> list : {kernel, strides, pads, dilations})
    for (int64_t v : list)
      if (v > INT32_MAX)
        return emitOptionalError(
            loc, "kernel sizes, strides, pads and dilations must be below 2^31");
  return success();
}

/// Output shape [N, channels, out...] of a conv/pool window over `x`.
FailureOr<Shape> windowShape(std::optional<Location> loc, RankedTensorType x,
                             int64_t channels, ArrayRef<int64_t> kernel,
                             ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                             ArrayRef<int64_t> dilations, bool ceilMode) {
  int64_t spatial = x.getRank() - 2;
  if (failed(verifyWindow(loc, spatial, kernel, strides, pads, dilations)))
    return failure();
  Shape out{x.getDimSize(0), channels};
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t size = windowOutputSize(x.getDimSize(2 + i), kernel[i], strides[i],
                                    pads[i], pads[spatial + i], dilations[i],
                                    ceilMode);
    if (size < 1)
      return emitOptionalError(loc, "window of size ", kernel[i],
                               " does not fit spatial dimension ", i,
                               " of size ", x.getDimSize(2 + i));
    out.push_back(size);
  }
  return out;
}

/// [N, C, D1...] scores/input against [N, D1...] labels for the two losses.
LogicalResult inferLoss(std::optional<Location> loc, Value scoresV,
                        Value labelsV, Value weightsV, StringRef reduction,
                        SmallVectorImpl<Type> &inferred) {
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return emitOptionalError(loc, "reduction must be none, sum or mean, got '",
                             reduction, "'");
  auto scores = ranked(loc, scoresV, "scores");
  auto labels = ranked(loc, labelsV, "labels");
  if (failed(scores) || failed(labels))
    return failure();
  if (scores->getRank() < 2)
    return emitOptionalError(loc, "scores must have rank >= 2 ([N, C, ...])");
  SmallVector<int64_t> expected{scores->getDimSize(0)};
  llvm::append_range(expected, scores->getShape().drop_front(2));
  if (labels->getShape() != ArrayRef<int64_t>(expected))
    return emitOptionalError(loc, "labels must have shape ", fmt(expected),
                             " for scores of shape ", fmt(scores->getShape()),
                             ", got ", fmt(labels->getShape()));
  if (weightsV) {
    auto weights = ranked(loc, weightsV, "weights");
    if (failed(weights) ||
        failed(sameElementType(loc, *weights, *scores, "weights", "scores")))
      return failure();
    if (weights->getShape() != ArrayRef<int64_t>{scores->getDimSize(1)})
      return emitOptionalError(loc, "weights must have shape [",
                               scores->getDimSize(1), "], got ",
                               fmt(weights->getShape()));
  }
  Type f = scores->getElementType();
  inferred.push_back(reduction == "none" ? RankedTensorType::get(expected, f)
                                         : RankedTensorType::get({}, f));
  return success();
}

LogicalResult inferReduce(std::optional<Location> loc, Value inputV,
                          ArrayRef<int64_t> axes, bool keepdims,
                          SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, inputV, "input");
  if (failed(input))
    return failure();
  int64_t rank = input->getRank();
  llvm::SmallSet<int64_t, 4> reduced;
  for (int64_t axis : axes) {
    auto a = normalizeAxis(axis, rank);
    if (!a)
      return emitOptionalError(loc, "reduction axis ", axis,
                               " is out of range for rank ", rank);
    if (!reduced.insert(*a).second)
      return emitOptionalError(loc, "reduction axis ", axis, " repeats");
  }
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced.contains(i))
      out.push_back(input->getDimSize(i));
    else if (keepdims)
      out.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(out, input->getElementType()));
  return success();
}

} // namespace parallax::px::detail

using namespace parallax::px::detail;

//===----------------------------------------------------------------------===//
// Leaves
//===----------------------------------------------------------------------===//

LogicalResult VariableOp::verify() {
  if (getName().empty())
    return emitOpError("variable name must not be empty");
  if (getGrid().has_value() != getSplitAxes().has_value())
    return emitOpError("grid and split_axes go together");
  if (getSplitAxes())
    return success(); // the block's type: verifySymbolUses
  return verifyInitialValue(*this, getInit(), getType());
}

LogicalResult VariableOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (!getSplitAxes())
    return success();
  shard::GridOp grid = shard::getGridOrNull(*this, getGridAttr(), symbols);
  if (!grid)
    return emitOpError("grid ") << getGridAttr() << " is not a shard.grid";
  auto whole = cast<RankedTensorType>(cast<TypedAttr>(getInit()).getType());
  if ((int64_t)getSplitAxes()->size() > whole.getRank())
    return emitOpError("splits more dimensions than the variable has");
  auto sharding = shard::Sharding::get(getGridAttr(), getSplitAxes()->getAxes());
  Type block = shard::shardType(whole, grid, sharding);
  if (block != getType())
    return emitOpError("a block of ") << whole << " split as " << *getSplitAxes()
                                      << " is " << block << ", not " << getType();
  return success();
}

/// Initial values are typed attributes (`dense<...> : T` or
/// `#px.onnx_initializer<"w"> : T`); the attribute's type is the result type.
static ParseResult parseInitialValue(OpAsmParser &parser, Attribute &value,
                                     Type &type) {
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseAttribute(value))
    return failure();
  auto typed = dyn_cast<TypedAttr>(value);
  if (!typed)
    return parser.emitError(loc, "expected a typed initial value, such as "
                                 "dense<...> : T or #px.onnx_initializer<\"w\"> : T");
  type = typed.getType();
  return success();
}

static void printInitialValue(OpAsmPrinter &p, Attribute value, Type) {
  p.printAttribute(value);
}

/// An optimizer's state types: the variable's, or after `state` the one
/// type of a sharded update's blocks (px-shard-optimizer-state).
static ParseResult parseStateTypes(OpAsmParser &parser, Type variable,
                                   ArrayRef<Type *> states) {
  Type type = variable;
  if (succeeded(parser.parseOptionalKeyword("state")) && parser.parseType(type))
    return failure();
  for (Type *s : states)
    *s = type;
  return success();
}
static ParseResult parseStateTypes(OpAsmParser &parser, Type variable, Type &s0) {
  return parseStateTypes(parser, variable, {&s0});
}
static ParseResult parseStateTypes(OpAsmParser &parser, Type variable, Type &s0,
                                   Type &s1) {
  return parseStateTypes(parser, variable, {&s0, &s1});
}
static void printStateTypes(OpAsmPrinter &p, Operation *, Type variable, Type s0,
                            Type = {}) {
  if (s0 != variable)
    p << " state " << s0;
}

// px.variable "name" [trainable] = <value> [: type] [attr-dict]
ParseResult VariableOp::parse(OpAsmParser &parser, OperationState &result) {
  std::string name;
  Attribute init;
  Type type;
  if (parser.parseString(&name))
    return failure();
  result.addAttribute(getNameAttrName(result.name),
                      parser.getBuilder().getStringAttr(name));
  if (succeeded(parser.parseOptionalKeyword("trainable")))
    result.addAttribute(getTrainableAttrName(result.name),
                        parser.getBuilder().getUnitAttr());
  if (parser.parseEqual() || parseInitialValue(parser, init, type))
    return failure();
  // A block of a split variable: its own type.
  if (succeeded(parser.parseOptionalArrow()) && parser.parseType(type))
    return failure();
  if (parser.parseOptionalAttrDict(result.attributes))
    return failure();
  result.addAttribute(getInitAttrName(result.name), init);
  result.addTypes(type);
  return success();
}

void VariableOp::print(OpAsmPrinter &p) {
  p << " ";
  p.printString(getName());
  if (getTrainable())
    p << " trainable";
  p << " = ";
  printInitialValue(p, getInit(), getType());
  if (cast<TypedAttr>(getInit()).getType() != getType())
    p << " -> " << getType();
  p.printOptionalAttrDict((*this)->getAttrs(),
                          {"name", "init", "trainable"});
}

// px.constant <value> [: type] [attr-dict]
ParseResult ConstantOp::parse(OpAsmParser &parser, OperationState &result) {
  Attribute value;
  Type type;
  if (parseInitialValue(parser, value, type) ||
      parser.parseOptionalAttrDict(result.attributes))
    return failure();
  result.addAttribute(getValueAttrName(result.name), value);
  result.addTypes(type);
  return success();
}

void ConstantOp::print(OpAsmPrinter &p) {
  p << " ";
  printInitialValue(p, getValue(), getType());
  p.printOptionalAttrDict((*this)->getAttrs(), {"value"});
}

LogicalResult ConstantOp::verify() {
  return verifyInitialValue(*this, getValue(), getType());
}

OpFoldResult ConstantOp::fold(FoldAdaptor) {
  // A ConstantLike op must always fold to its value: m_Constant and the
  // greedy driver's constant uniquing read the fold result unchecked. An
  // external initializer folds to the reference itself, which no px folder
  // interprets (they match ElementsAttr), so it stays a reference.
  return getValue();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define PX_ARITH_INFER(OP)                                                     \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc,\
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferArith(loc, adaptor.getLhs(), adaptor.getRhs(), inferred);      \
  }
PX_ARITH_INFER(AddOp)
PX_ARITH_INFER(SubOp)
PX_ARITH_INFER(MulOp)
PX_ARITH_INFER(DivOp)
PX_ARITH_INFER(MaxOp)
PX_ARITH_INFER(MinOp)
PX_ARITH_INFER(ModOp)
#undef PX_ARITH_INFER

LogicalResult PowOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  return inferBroadcast(loc, adaptor.getLhs(), adaptor.getRhs(), Type(),
                        inferred);
}

#define PX_COMPARE_INFER(OP)                                                   \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx,                         \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferCompare(ctx, loc, adaptor.getLhs(), adaptor.getRhs(),          \
                        inferred);                                             \
  }
PX_COMPARE_INFER(EqualOp)
PX_COMPARE_INFER(LessOp)
PX_COMPARE_INFER(GreaterOp)
#undef PX_COMPARE_INFER

LogicalResult WhereOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto cond = ranked(loc, adaptor.getCondition(), "condition");
  if (failed(cond))
    return failure();
  SmallVector<Type> xy;
  if (failed(inferArith(loc, adaptor.getX(), adaptor.getY(), xy)))
    return failure();
  auto xyType = cast<RankedTensorType>(xy.front());
  auto shape = broadcastShapes(cond->getShape(), xyType.getShape());
  if (!shape)
    return emitOptionalError(loc, "condition shape ", fmt(cond->getShape()),
                             " does not broadcast with ",
                             fmt(xyType.getShape()));
  inferred.push_back(RankedTensorType::get(*shape, xyType.getElementType()));
  return success();
}

LogicalResult ClipOp::verify() {
  if (getMin() && getMax() &&
      getMin()->convertToDouble() > getMax()->convertToDouble())
    return emitOpError("min ") << getMin()->convertToDouble()
                               << " exceeds max "
                               << getMax()->convertToDouble();
  return success();
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto data = ranked(loc, adaptor.getData(), "data");
  auto indices = ranked(loc, adaptor.getIndices(), "indices");
  if (failed(data) || failed(indices))
    return failure();
  int64_t axisValue = intOr(adaptor.getAxisAttr(), 0);
  auto axis = normalizeAxis(axisValue, data->getRank());
  if (data->getRank() < 1 || !axis)
    return emitOptionalError(loc, "gather axis ", axisValue,
                             " is out of range for data of rank ",
                             data->getRank());
  Shape out(data->getShape().take_front(*axis));
  llvm::append_range(out, indices->getShape());
  llvm::append_range(out, data->getShape().drop_front(*axis + 1));
  inferred.push_back(RankedTensorType::get(out, data->getElementType()));
  return success();
}

/// A row block (`block of` a grid) names its group; the checks px.gather
/// and px.make_sparse_grad share.
template <typename Op>
static LogicalResult verifyRowBlock(Op op) {
  if (op.getGridAxes() && !op.getGrid())
    return op.emitOpError("grid_axes without a grid (`block of`)");
  return success();
}
template <typename Op>
static LogicalResult verifyRowBlockSymbols(Op op, SymbolTableCollection &symbols) {
  if (!op.getGrid())
    return success();
  ArrayRef<int16_t> axes;
  if (auto a = op.getGridAxesAttr())
    axes = a.asArrayRef();
  return verifyGroup(op, op.getGridAttr(), axes, symbols);
}

LogicalResult GatherOp::verify() {
  if (failed(verifyRowBlock(*this)))
    return failure();
  auto axis = normalizeAxis((int64_t)getAxis(), getData().getType().getRank());
  if (getGrid() && axis != 0)
    return emitOpError("a row block (`block of` a grid) is gathered on axis 0 only, not ")
           << getAxis();
  return success();
}

LogicalResult GatherOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyRowBlockSymbols(*this, symbols);
}

LogicalResult MakeSparseGradOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyRowBlockSymbols(*this, symbols);
}

LogicalResult
GatherElementsOp::inferReturnTypes(MLIRContext *ctx,
                                   std::optional<Location> loc, Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto data = ranked(loc, adaptor.getData(), "data");
  auto indices = ranked(loc, adaptor.getIndices(), "indices");
  if (failed(data) || failed(indices))
    return failure();
  if (data->getRank() != indices->getRank() || data->getRank() < 1)
    return emitOptionalError(loc, "data and indices must have the same rank "
                                  ">= 1, got ",
                             data->getRank(), " and ", indices->getRank());
  auto axis = axisFor(loc, adaptor.getAxisAttr(), 0, data->getRank());
  if (failed(axis))
    return failure();
  // Off the gather axis, output[i...] reads data at the same position, so
  // the indices may not be larger than data there (as onnxruntime and
  // torch.gather require).
  for (int64_t d = 0; d < data->getRank(); ++d)
    if (d != *axis && indices->getDimSize(d) > data->getDimSize(d))
      return emitOptionalError(
          loc, "indices dimension ", d, " of size ", indices->getDimSize(d),
          " exceeds the data's size ", data->getDimSize(d));
  inferred.push_back(
      RankedTensorType::get(indices->getShape(), data->getElementType()));
  return success();
}

LogicalResult SliceOp::verify() {
  auto in = getInput().getType();
  auto out = getOutput().getType();
  int64_t rank = in.getRank();
  if (out.getRank() != rank || in.getElementType() != out.getElementType())
    return emitOpError("result must have the input's rank and element type");
  if ((int64_t)getStarts().size() != rank || (int64_t)getSteps().size() != rank)
    return emitOpError("expected one start and one step per dimension (")
           << rank << "), got " << getStarts().size() << " and "
           << getSteps().size();
  for (int64_t d = 0; d < rank; ++d) {
    int64_t start = getStarts()[d], step = getSteps()[d];
    int64_t count = out.getDimSize(d), size = in.getDimSize(d);
    if (step == 0)
      return emitOpError("step of dimension ") << d << " is zero";
    if (count == 0)
      continue;
    int64_t last = start + (count - 1) * step;
    if (start < 0 || start >= size || last < 0 || last >= size)
      return emitOpError("dimension ")
             << d << ": " << count << " elements from " << start
             << " with step " << step << " leave [0, " << size << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto a = ranked(loc, adaptor.getLhs(), "lhs");
  auto b = ranked(loc, adaptor.getRhs(), "rhs");
  if (failed(a) || failed(b))
    return failure();
  if (a->getElementType() != b->getElementType())
    return emitOptionalError(loc, "operands must have the same element type");
  if (a->getRank() < 1 || b->getRank() < 1)
    return emitOptionalError(loc, "matmul operands must have rank >= 1");
  // numpy.matmul: a vector operand is promoted to a matrix, and the added
  // dimension is removed from the result.
  Shape as(a->getShape()), bs(b->getShape());
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  int64_t k = as.back(), kb = bs[bs.size() - 2];
  if (k != kb)
    return emitOptionalError(loc, "contraction dimensions differ: ", fmt(
                                      a->getShape()),
                             " x ", fmt(b->getShape()));
  auto batch = broadcastShapes(ArrayRef<int64_t>(as).drop_back(2),
                               ArrayRef<int64_t>(bs).drop_back(2));
  if (!batch)
    return emitOptionalError(loc, "batch dimensions of ", fmt(a->getShape()),
                             " and ", fmt(b->getShape()),
                             " do not broadcast");
  Shape out(*batch);
  if (!aVec)
    out.push_back(as[as.size() - 2]);
  if (!bVec)
    out.push_back(bs.back());
  inferred.push_back(RankedTensorType::get(out, a->getElementType()));
  return success();
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *ctx,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto a = ranked(loc, adaptor.getA(), "A");
  auto b = ranked(loc, adaptor.getB(), "B");
  if (failed(a) || failed(b))
    return failure();
  if (a->getRank() != 2 || b->getRank() != 2)
    return emitOptionalError(loc, "gemm operands A and B must be matrices");
  if (failed(sameElementType(loc, *b, *a, "B", "A")))
    return failure();
  int64_t m = a->getDimSize(adaptor.getTransA() ? 1 : 0);
  int64_t k = a->getDimSize(adaptor.getTransA() ? 0 : 1);
  int64_t kb = b->getDimSize(adaptor.getTransB() ? 1 : 0);
  int64_t n = b->getDimSize(adaptor.getTransB() ? 0 : 1);
  if (k != kb)
    return emitOptionalError(loc, "gemm contraction dimensions differ: ", k,
                             " vs ", kb);
  if (Value cv = adaptor.getC()) {
    auto c = ranked(loc, cv, "C");
    if (failed(c) || failed(sameElementType(loc, *c, *a, "C", "A")))
      return failure();
    auto shape = broadcastShapes(c->getShape(), {m, n});
    if (!shape || *shape != Shape{m, n})
      return emitOptionalError(loc, "C of shape ", fmt(c->getShape()),
                               " does not broadcast to ", m, "x", n);
  }
  inferred.push_back(RankedTensorType::get({m, n}, a->getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisation, activations, losses
//===----------------------------------------------------------------------===//

template <typename Op>
static LogicalResult verifyAxisOp(Op op) {
  // I64Attr getters return uint64_t: read the axis as signed.
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (!normalizeAxis(axis, op.getInput().getType().getRank()))
    return op.emitOpError("axis ") << axis << " is out of range for rank "
                                   << op.getInput().getType().getRank();
  return success();
}
LogicalResult SoftmaxOp::verify() { return verifyAxisOp(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifyAxisOp(*this); }

LogicalResult SoftmaxCrossEntropyLossOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  if (failed(inferLoss(loc, adaptor.getScores(), adaptor.getLabels(),
                       adaptor.getWeights(),
                       strOr(adaptor.getReductionAttr(), "mean"), inferred)))
    return failure();
  inferred.push_back(adaptor.getScores().getType());
  return success();
}

LogicalResult NegativeLogLikelihoodLossOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  return inferLoss(loc, adaptor.getInput(), adaptor.getTarget(),
                   adaptor.getWeight(), strOr(adaptor.getReductionAttr(), "mean"),
                   inferred);
}

LogicalResult NegativeLogLikelihoodLossOp::verify() {
  return verifyClassBlock(*this, getGrid().has_value(), getGridAxes().has_value(),
                          getWeight());
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *ctx,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto x = ranked(loc, adaptor.getX(), "x");
  if (failed(x))
    return failure();
  auto axis = axisFor(loc, adaptor.getAxisAttr(), -1, x->getRank());
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> normalized = x->getShape().drop_front(*axis);
  for (auto [name, v] : {std::pair<StringRef, Value>{"scale", adaptor.getScale()},
                         {"bias", adaptor.getBias()}}) {
    if (!v)
      continue;
    auto t = ranked(loc, v, name);
    if (failed(t) || failed(sameElementType(loc, *t, *x, name, "x")))
      return failure();
    auto b = broadcastShapes(t->getShape(), normalized);
    if (!b || ArrayRef<int64_t>(*b) != normalized)
      return emitOptionalError(loc, name, " of shape ", fmt(t->getShape()),
                               " does not broadcast to the normalised shape ",
                               fmt(normalized));
  }
  Shape stats(x->getShape().take_front(*axis));
  stats.append(normalized.size(), 1);
  auto statsType = RankedTensorType::get(stats, x->getElementType());
  inferred.append({*x, statsType, statsType});
  return success();
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *ctx,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto x = ranked(loc, adaptor.getX(), "x");
  if (failed(x))
    return failure();
  if (x->getRank() < 2)
    return emitOptionalError(loc, "x must have rank >= 2 ([N, C, ...])");
  int64_t c = x->getDimSize(1);
  auto channelType = RankedTensorType::get({c}, x->getElementType());
  for (auto [name, v] :
       {std::pair<StringRef, Value>{"scale", adaptor.getScale()},
        {"bias", adaptor.getBias()},
        {"input_mean", adaptor.getInputMean()},
        {"input_var", adaptor.getInputVar()}})
    if (v.getType() != channelType)
      return emitOptionalError(loc, name, " must be ", channelType, ", got ",
                               v.getType());
  inferred.append({*x, channelType, channelType});
  return success();
}

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto x = ranked(loc, adaptor.getInput(), "input");
  if (failed(x))
    return failure();
  inferred.append(
      {*x, RankedTensorType::get(x->getShape(), IntegerType::get(ctx, 1))});
  return success();
}

LogicalResult DropoutOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio >= 0.0 && ratio < 1.0)) // also rejects NaN
    return emitOpError("ratio must be in [0, 1), got ")
           << getRatio().convertToDouble();
  if (getGrid().has_value() != getSplitDim().has_value() ||
      getGrid().has_value() != getGridAxes().has_value())
    return emitOpError("a block of a grid names its grid_axes and split_dim, and only a block does");
  if (std::optional<uint64_t> d = getSplitDim();
      d && *d >= (uint64_t)getInput().getType().getRank())
    return emitOpError("split_dim ") << *d << " is not a dimension of the input";
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and data movement
//===----------------------------------------------------------------------===//

#define PX_REDUCE_INFER(OP)                                                    \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,          \
      SmallVectorImpl<Type> &inferred) {                                       \
    if (failed(verifyAttributes(ctx, loc, adaptor)))                           \
      return failure();                                                        \
    return inferReduce(loc, adaptor.getInput(), adaptor.getAxes(),             \
                       boolOr(adaptor.getKeepdimsAttr(), true), inferred);     \
  }
PX_REDUCE_INFER(ReduceSumOp)
PX_REDUCE_INFER(ReduceMeanOp)
PX_REDUCE_INFER(ReduceMaxOp)
PX_REDUCE_INFER(ReduceMinOp)
PX_REDUCE_INFER(ReduceProdOp)
#undef PX_REDUCE_INFER

/// ArgMax/ArgMin: the input's shape with `axis` removed (or kept as 1), i64.
template <typename AdaptorT>
static LogicalResult inferArgReduce(MLIRContext *ctx,
                                    std::optional<Location> loc,
                                    AdaptorT adaptor,
                                    SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto input = ranked(loc, adaptor.getInput(), "input");
  if (failed(input))
    return failure();
  auto axis = axisFor(loc, adaptor.getAxisAttr(), 0, input->getRank());
  if (failed(axis))
    return failure();
  if (input->getDimSize(*axis) == 0)
    return emitOptionalError(loc, "axis ", *axis, " is empty");
  Shape out(input->getShape());
  if (boolOr(adaptor.getKeepdimsAttr(), true))
    out[*axis] = 1;
  else
    out.erase(out.begin() + *axis);
  inferred.push_back(RankedTensorType::get(out, IntegerType::get(ctx, 64)));
  return success();
}

LogicalResult ArgMaxOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  return inferArgReduce(ctx, loc, adaptor, inferred);
}
LogicalResult ArgMinOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  return inferArgReduce(ctx, loc, adaptor, inferred);
}

LogicalResult TopKOp::inferReturnTypes(MLIRContext *ctx,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto input = ranked(loc, adaptor.getInput(), "input");
  if (failed(input))
    return failure();
  auto axis = axisFor(loc, adaptor.getAxisAttr(), -1, input->getRank());
  if (failed(axis))
    return failure();
  int64_t k = adaptor.getK();
  if (k < 0 || k > input->getDimSize(*axis))
    return emitOptionalError(loc, "k = ", k, " is outside [0, ",
                             input->getDimSize(*axis), "]");
  Shape out(input->getShape());
  out[*axis] = k;
  inferred.push_back(RankedTensorType::get(out, input->getElementType()));
  inferred.push_back(RankedTensorType::get(out, IntegerType::get(ctx, 64)));
  return success();
}

LogicalResult CumSumOp::verify() {
  if (!normalizeAxis(getAxis(), getInput().getType().getRank()))
    return emitOpError("axis ") << getAxis() << " is out of range for rank "
                                << getInput().getType().getRank();
  return success();
}

LogicalResult SegmentReduceOp::inferReturnTypes(MLIRContext *ctx,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto data = ranked(loc, adaptor.getData(), "data");
  auto starts = ranked(loc, adaptor.getStarts(), "starts");
  auto ends = ranked(loc, adaptor.getEnds(), "ends");
  if (failed(data) || failed(starts) || failed(ends))
    return failure();
  StringRef mode = adaptor.getMode();
  if (mode != "sum" && mode != "mean" && mode != "max")
    return emitOptionalError(loc, "mode must be sum, mean or max, got '", mode,
                             "'");
  if (data->getRank() < 1 || starts->getRank() != 1 ||
      starts->getShape() != ends->getShape())
    return emitOptionalError(loc, "needs data of rank >= 1 and starts and ends "
                                  "of one shape [M], got ",
                             fmt(data->getShape()), ", ",
                             fmt(starts->getShape()), ", ",
                             fmt(ends->getShape()));
  Shape out{starts->getDimSize(0)};
  llvm::append_range(out, data->getShape().drop_front());
  inferred.push_back(RankedTensorType::get(out, data->getElementType()));
  return success();
}

namespace parallax::px::detail {
FailureOr<Shape> padShape(std::optional<Location> loc, RankedTensorType input,
                          ArrayRef<int64_t> pads, StringRef mode) {
  int64_t rank = input.getRank();
  if ((int64_t)pads.size() != 2 * rank)
    return emitOptionalError(loc, "expected ", 2 * rank,
                             " pads (begins then ends), got ", pads.size());
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return emitOptionalError(loc, "mode must be constant, reflect or edge, got '",
                             mode, "'");
  Shape out;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t in = input.getDimSize(d), begin = pads[d], end = pads[rank + d];
    // 32-bit pads, so that the sum cannot overflow (as for convolutions).
    if (begin < INT32_MIN || begin > INT32_MAX || end < INT32_MIN || end > INT32_MAX)
      return emitOptionalError(loc, "pads must fit in 32 bits, got ", begin,
                               " and ", end, " for dimension ", d);
    int64_t n = in + begin + end;
    if (n < 0)
      return emitOptionalError(loc, "pads ", begin, " and ", end,
                               " remove more than the ", in,
                               " elements of dimension ", d);
    if (mode == "reflect" && (begin > 0 || end > 0) &&
        (begin >= in || end >= in))
      return emitOptionalError(loc, "reflect pads ", begin, " and ", end,
                               " of dimension ", d,
                               " must be smaller than its size ", in);
    if (mode == "edge" && (begin > 0 || end > 0) && in == 0)
      return emitOptionalError(loc, "edge mode cannot pad the empty dimension ",
                               d);
    out.push_back(n);
  }
  return out;
}
} // namespace parallax::px::detail

LogicalResult PadOp::inferReturnTypes(MLIRContext *ctx,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto input = ranked(loc, adaptor.getInput(), "input");
  if (failed(input))
    return failure();
  auto out = padShape(loc, *input, adaptor.getPads(),
                      strOr(adaptor.getModeAttr(), "constant"));
  if (failed(out))
    return failure();
  inferred.push_back(RankedTensorType::get(*out, input->getElementType()));
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getOutput().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("reshape must keep the element type");
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << in.getNumElements() << " elements (" << fmt(in.getShape())
           << ") into " << out.getNumElements() << " (" << fmt(out.getShape())
           << ")";
  return success();
}

namespace {
/// matmul(x, transpose(w, [1, 0])) with a 2-D float w is how PyTorch exports
/// nn.Linear on inputs of rank > 2 (and `x @ w.T`): rewrite it as
/// reshape(gemm(reshape(x, [rows, K]), w, trans_b)), one GEMM that reads w
/// transposed in place. The transpose then has no reader and goes away, and
/// so does, after px-autodiff, the transpose of its gradient: for the
/// transformer examples half of the training step's copies.
struct MatMulOfTransposedMatrixToGemm : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp op,
                                PatternRewriter &rewriter) const override {
    auto transpose = op.getRhs().getDefiningOp<TransposeOp>();
    if (!transpose || transpose.getPerm() != ArrayRef<int64_t>{1, 0})
      return failure();
    Value w = transpose.getInput();
    auto wType = dyn_cast<RankedTensorType>(w.getType());
    auto xType = dyn_cast<RankedTensorType>(op.getLhs().getType());
    auto outType = dyn_cast<RankedTensorType>(op.getType());
    if (!wType || !xType || !outType || xType.getRank() < 2 ||
        !isa<FloatType>(wType.getElementType()) ||
        xType.getElementType() != wType.getElementType() ||
        !xType.hasStaticShape() || !wType.hasStaticShape())
      return failure();
    int64_t n = wType.getDimSize(0), k = wType.getDimSize(1);
    int64_t rows = xType.getNumElements() / std::max<int64_t>(k, 1);
    Type elem = wType.getElementType();
    Location loc = op.getLoc();
    Value x = op.getLhs();
    if (xType.getRank() != 2)
      x = ReshapeOp::create(rewriter, loc, RankedTensorType::get({rows, k}, elem), x);
    Value product =
        GemmOp::create(rewriter, loc, RankedTensorType::get({rows, n}, elem), x, w,
                       /*c=*/Value(), rewriter.getF32FloatAttr(1.0f),
                       rewriter.getF32FloatAttr(1.0f), /*trans_a=*/nullptr,
                       rewriter.getUnitAttr());
    if (outType.getRank() != 2)
      product = ReshapeOp::create(rewriter, loc, outType, product);
    rewriter.replaceOp(op, product);
    return success();
  }
};
} // namespace

void MatMulOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *context) {
  patterns.add<MatMulOfTransposedMatrixToGemm>(context);
}

namespace {
/// An average pool whose window is the whole unpadded image: the mean over
/// the spatial dimensions (keepdims), GlobalAveragePool's import.
struct WholeImageAveragePoolToReduceMean : OpRewritePattern<AveragePoolOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AveragePoolOp op, PatternRewriter &rewriter) const override {
    auto x = dyn_cast<RankedTensorType>(op.getX().getType());
    if (!x || !x.hasStaticShape() || x.getRank() < 3 ||
        op.getKernelShape().size() != (size_t)x.getRank() - 2 ||
        llvm::any_of(op.getPads(), [](int64_t p) { return p != 0; }) ||
        op.getKernelShape() != x.getShape().drop_front(2))
      return failure();
    SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(2, x.getRank()));
    SmallVector<NamedAttribute> attrs{rewriter.getNamedAttr("axes", rewriter.getDenseI64ArrayAttr(axes)),
                                      rewriter.getNamedAttr("keepdims", rewriter.getBoolAttr(true))};
    rewriter.replaceOpWithNewOp<ReduceMeanOp>(op, op.getType(), ValueRange{op.getX()}, attrs);
    return success();
  }
};
} // namespace

void AveragePoolOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                                MLIRContext *context) {
  patterns.add<WholeImageAveragePoolToReduceMean>(context);
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getOutput().getType())
    return getInput();
  return {};
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *ctx,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto in = ranked(loc, adaptor.getInput(), "input");
  if (failed(in))
    return failure();
  ArrayRef<int64_t> perm = adaptor.getPerm();
  int64_t rank = in->getRank();
  SmallVector<bool> seen(rank, false);
  if ((int64_t)perm.size() != rank)
    return emitOptionalError(loc, "perm has ", perm.size(),
                             " entries for rank ", rank);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return emitOptionalError(loc, "perm is not a permutation of [0, ", rank,
                               ")");
    seen[p] = true;
    out.push_back(in->getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(out, in->getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "concat needs at least one input");
  auto first = ranked(loc, adaptor.getInputs().front(), "input");
  if (failed(first))
    return failure();
  int64_t axisValue = static_cast<int64_t>(adaptor.getAxis());
  auto axis = normalizeAxis(axisValue, first->getRank());
  if (!axis)
    return emitOptionalError(loc, "axis ", axisValue,
                             " is out of range for rank ", first->getRank());
  Shape out(first->getShape());
  out[*axis] = 0;
  for (Value v : adaptor.getInputs()) {
    auto t = ranked(loc, v, "input");
    if (failed(t))
      return failure();
    if (t->getRank() != first->getRank() ||
        t->getElementType() != first->getElementType())
      return emitOptionalError(loc, "concat inputs must share rank and "
                                    "element type");
    for (int64_t d = 0; d < t->getRank(); ++d)
      if (d != *axis && t->getDimSize(d) != first->getDimSize(d))
        return emitOptionalError(loc, "concat inputs differ in dimension ", d,
                                 ": ", fmt(first->getShape()), " vs ",
                                 fmt(t->getShape()));
    out[*axis] += t->getDimSize(*axis);
  }
  inferred.push_back(RankedTensorType::get(out, first->getElementType()));
  return success();
}

LogicalResult ExpandOp::verify() {
  auto in = getInput().getType(), out = getOutput().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("expand must keep the element type");
  auto shape = broadcastShapes(in.getShape(), out.getShape());
  if (!shape || ArrayRef<int64_t>(*shape) != out.getShape())
    return emitOpError("input shape ")
           << fmt(in.getShape()) << " does not broadcast to "
           << fmt(out.getShape());
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

LogicalResult ConvOp::inferReturnTypes(MLIRContext *ctx,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto x = ranked(loc, adaptor.getX(), "x");
  auto w = ranked(loc, adaptor.getW(), "w");
  if (failed(x) || failed(w))
    return failure();
  if (x->getRank() < 3 || w->getRank() != x->getRank())
    return emitOptionalError(loc, "conv needs x [N, C, spatial...] and w of "
                                  "the same rank, got ",
                             fmt(x->getShape()), " and ", fmt(w->getShape()));
  if (failed(sameElementType(loc, *w, *x, "w", "x")))
    return failure();
  int64_t group = intOr(adaptor.getGroupAttr(), 1), c = x->getDimSize(1),
          m = w->getDimSize(0);
  if (group < 1 || c % group != 0 || m % group != 0 ||
      w->getDimSize(1) * group != c)
    return emitOptionalError(loc, "channels do not match: x has ", c,
                             ", w is ", fmt(w->getShape()), ", group ", group);
  if (Value bv = adaptor.getB()) {
    auto b = ranked(loc, bv, "b");
    if (failed(b) || failed(sameElementType(loc, *b, *x, "b", "x")))
      return failure();
    if (b->getShape() != ArrayRef<int64_t>{m})
      return emitOptionalError(loc, "bias must have shape [", m, "]");
  }
  auto out = windowShape(loc, *x, m, w->getShape().drop_front(2),
                         adaptor.getStrides(), adaptor.getPads(),
                         adaptor.getDilations(), /*ceilMode=*/false);
  if (failed(out))
    return failure();
  inferred.push_back(RankedTensorType::get(*out, x->getElementType()));
  return success();
}

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto x = ranked(loc, adaptor.getX(), "x");
  if (failed(x))
    return failure();
  if (x->getRank() < 3)
    return emitOptionalError(loc, "pooling needs x [N, C, spatial...]");
  auto out = windowShape(loc, *x, x->getDimSize(1), adaptor.getKernelShape(),
                         adaptor.getStrides(), adaptor.getPads(),
                         adaptor.getDilations(), adaptor.getCeilMode());
  if (failed(out))
    return failure();
  inferred.push_back(RankedTensorType::get(*out, x->getElementType()));
  return success();
}

LogicalResult AveragePoolOp::inferReturnTypes(MLIRContext *ctx,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto x = ranked(loc, adaptor.getX(), "x");
  if (failed(x))
    return failure();
  if (x->getRank() < 3)
    return emitOptionalError(loc, "pooling needs x [N, C, spatial...]");
  SmallVector<int64_t> ones(adaptor.getKernelShape().size(), 1);
  auto out = windowShape(loc, *x, x->getDimSize(1), adaptor.getKernelShape(),
                         adaptor.getStrides(), adaptor.getPads(), ones,
                         adaptor.getCeilMode());
  if (failed(out))
    return failure();
  inferred.push_back(RankedTensorType::get(*out, x->getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Sparse gradients
//===----------------------------------------------------------------------===//

LogicalResult MakeSparseGradOp::verify() {
  if (failed(verifyRowBlock(*this)))
    return failure();
  auto type = cast<SparseGradType>(getOutput().getType());
  if (getIndices().getType() != type.getIndicesType())
    return emitOpError("indices must be ") << type.getIndicesType();
  if (getValues().getType() != type.getValuesType())
    return emitOpError("values must be ") << type.getValuesType();
  return success();
}

static FailureOr<SparseGradType> sparseGrad(std::optional<Location> loc,
                                            Value v) {
  auto t = dyn_cast_or_null<SparseGradType>(v ? v.getType() : Type());
  if (!t)
    return emitOptionalError(loc, "operand must be a !px.sparse_grad");
  return t;
}

LogicalResult SparseGradIndicesOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto t = sparseGrad(loc, adaptor.getGrad());
  if (failed(t))
    return failure();
  inferred.push_back(t->getIndicesType());
  return success();
}

LogicalResult SparseGradValuesOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto t = sparseGrad(loc, adaptor.getGrad());
  if (failed(t))
    return failure();
  inferred.push_back(t->getValuesType());
  return success();
}

LogicalResult DensifyOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto t = sparseGrad(loc, adaptor.getGrad());
  if (failed(t))
    return failure();
  inferred.push_back(t->getDenseType());
  return success();
}

#define GET_OP_CLASSES
#include "parallax/Dialect/Px/PxOps.cpp.inc"
