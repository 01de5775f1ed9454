//===- PlanEmitter.cpp - px IR -> executable plan -------------------------===//

#include "parallax/Target/PlanEmitter.h"
#include "parallax/Runtime/Grid.h"
#include "parallax/Runtime/KernelMemory.h"

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShapes.h"
#include "parallax/Runtime/MachineMemory.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"

#include <climits>
#include <set>
#include <cmath>
#include <filesystem>
#include <optional>
#include <thread>

using namespace mlir;
using json = nlohmann::json;

namespace parallax {

namespace {

llvm::Error fail(Operation *op, const llvm::Twine &msg) {
  std::string loc;
  llvm::raw_string_ostream os(loc);
  op->getLoc().print(os);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "cannot emit a plan for '" +
                                     op->getName().getStringRef() + "' at " +
                                     loc + ": " + msg);
}

llvm::Expected<rt::DType> dtypeOf(Operation *op, Type elem) {
  if (elem.isF32()) return rt::DType::F32;
  if (elem.isF64()) return rt::DType::F64;
  if (elem.isF16()) return rt::DType::F16;
  if (elem.isBF16()) return rt::DType::BF16;
  if (elem.isInteger(64)) return rt::DType::I64;
  if (elem.isInteger(32)) return rt::DType::I32;
  if (elem.isInteger(16)) return rt::DType::I16;
  if (elem.isInteger(8)) return rt::DType::I8;
  if (elem.isInteger(1)) return rt::DType::Bool;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << elem;
  return fail(op, "unsupported element type " + s);
}

/// Attribute values the kernels read; shard enums and symbol names as text.
llvm::Expected<json> attrToJson(Operation *op, Attribute a) {
  if (auto v = dyn_cast<BoolAttr>(a)) return json(v.getValue());
  if (auto v = dyn_cast<IntegerAttr>(a)) return json(v.getValue().getSExtValue());
  if (auto v = dyn_cast<FloatAttr>(a)) return rt::planDouble(v.getValueAsDouble());
  if (auto v = dyn_cast<StringAttr>(a)) return json(v.getValue().str());
  if (isa<UnitAttr>(a)) return json(true);
  if (auto v = dyn_cast<DenseI64ArrayAttr>(a)) return json(v.asArrayRef().vec());
  if (auto v = dyn_cast<DenseI16ArrayAttr>(a)) {
    std::vector<int64_t> out(v.asArrayRef().begin(), v.asArrayRef().end());
    return json(out);
  }
  if (auto v = dyn_cast<FlatSymbolRefAttr>(a)) return json(v.getValue().str());
  if (auto v = dyn_cast<shard::ReductionKindAttr>(a))
    return json(shard::stringifyReductionKind(v.getValue()).str());
  if (auto v = dyn_cast<ArrayAttr>(a)) {
    json out = json::array();
    for (Attribute e : v) {
      auto j = attrToJson(op, e);
      if (!j)
        return j.takeError();
      out.push_back(*j);
    }
    return out;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << a;
  return fail(op, "unsupported attribute " + s);
}

class Emitter {
public:
  Emitter(ModuleOp module, const PlanEmitOptions &options)
      : module(module), options(options) {}
  llvm::Expected<rt::Plan> run();

private:
  llvm::Error emitOp(Operation *op);
  llvm::Error emitVariable(px::VariableOp op);
  llvm::Error emitInput(px::InputOp op);
  llvm::Error emitConstant(px::ConstantOp op);
  llvm::Error emitKernel(Operation *op);
  llvm::Error emitReturn(func::ReturnOp op);
  llvm::Expected<rt::InitialValue> initialValue(Operation *op, Attribute value,
                                                 rt::DType dtype);
  llvm::Expected<int32_t> newTensor(Operation *op, Value v, rt::PlanTensor::Kind kind,
                                    int32_t ref, int64_t offset = 0);
  llvm::Expected<int32_t> newTensorOfType(Operation *op, RankedTensorType type,
                                          rt::PlanTensor::Kind kind, int32_t ref,
                                          int64_t offset = 0);
  llvm::Expected<int32_t> tensorFor(Operation *user, Value v);
  /// The tensor whose storage `id` shares (itself unless an alias; -1 stays
  /// -1, an absent operand).
  int32_t baseOf(int32_t id) const {
    while (id >= 0 && plan.tensors[id].kind == rt::PlanTensor::Kind::Alias)
      id = plan.tensors[id].ref;
    return id;
  }
  void planMemory();
  /// MemoryEstimate::collectives of the plan's kernels.
  int64_t collectiveBuffers() const;
  /// Inserts before[j] ahead of kernel j (before[size]: at the end of the
  /// step) and recomputes definedBy and bucketOffsets.
  void insertKernels(std::vector<std::vector<rt::PlanKernel>> before);
  void scheduleWaits();
  llvm::Error layOutBuckets();
  llvm::Error emitVariableBlock(px::AllGatherVariablesOp op);
  llvm::Error emitGrids();
  llvm::Expected<std::vector<int64_t>> gridShape(Operation *op);

  ModuleOp module;
  const PlanEmitOptions &options;
  rt::Plan plan;
  llvm::DenseMap<Value, int32_t> tensors;
  llvm::DenseMap<Value, std::pair<int32_t, int32_t>> sparse; // indices, values
  std::vector<int64_t> definedBy; // per tensor: defining kernel, or -1
  int64_t dropoutStreams = 0;
  /// All-reduce bucket id -> the kernel that carries the bucket.
  std::map<int64_t, size_t> buckets;
  /// Kernels of collectives that run on the communication thread
  /// (runsOnCommThread), by index before scheduleWaits inserts the waits.
  std::set<size_t> asyncKernels;
  /// In-place bucket kernel -> its members' offsets (px-bucket-in-place).
  std::map<size_t, std::vector<int64_t>> bucketOffsets;
  std::vector<int32_t> gradientTensors;
};

llvm::Expected<int32_t> Emitter::newTensor(Operation *op, Value v,
                                           rt::PlanTensor::Kind kind,
                                           int32_t ref, int64_t offset) {
  auto id = newTensorOfType(op, cast<RankedTensorType>(v.getType()), kind, ref,
                            offset);
  if (id)
    tensors[v] = *id;
  return id;
}

llvm::Expected<int32_t> Emitter::newTensorOfType(Operation *op,
                                                 RankedTensorType type,
                                                 rt::PlanTensor::Kind kind,
                                                 int32_t ref, int64_t offset) {
  auto dtype = dtypeOf(op, type.getElementType());
  if (!dtype)
    return dtype.takeError();
  rt::PlanTensor t;
  t.name = op->getName().getStringRef().str();
  if (std::string loc = locationName(op->getLoc()); !loc.empty())
    t.name += " at " + loc;
  t.dtype = *dtype;
  t.shape.assign(type.getShape().begin(), type.getShape().end());
  t.kind = kind;
  t.ref = ref;
  t.offset = offset;
  int32_t id = plan.tensors.size();
  plan.tensors.push_back(std::move(t));
  definedBy.push_back(-1);
  return id;
}

llvm::Expected<int32_t> Emitter::tensorFor(Operation *user, Value v) {
  auto it = tensors.find(v);
  if (it == tensors.end())
    return fail(user, "an operand is not a value the plan knows");
  return it->second;
}

llvm::Expected<rt::InitialValue>
Emitter::initialValue(Operation *op, Attribute value, rt::DType dtype) {
  rt::InitialValue init;
  if (auto ref = dyn_cast<px::OnnxInitializerAttr>(value)) {
    init.kind = rt::InitialValue::Kind::Onnx;
    init.onnxName = ref.getName().str();
    init.paddedFrom.assign(ref.getStored().begin(), ref.getStored().end());
    init.blockOf.assign(ref.getWhole().begin(), ref.getWhole().end());
    init.blockOrigin.assign(ref.getOrigin().begin(), ref.getOrigin().end());
    return init;
  }
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense)
    return fail(op, "initial values must be dense literals or ONNX initializers");
  Type elem = dense.getElementType();
  if (dense.isSplat()) {
    double v = isa<FloatType>(elem)
                   ? dense.getSplatValue<APFloat>().convertToDouble()
               : elem.isInteger(1)
                   ? (double)dense.getSplatValue<bool>()
                   : (double)dense.getSplatValue<APInt>().getSExtValue();
    // The runtime fills half floats only with zeros; others go as blobs, and
    // so do values a JSON number cannot carry exactly: infinities and NaN
    // (JSON has none) and integers beyond 2^53.
    bool half = dtype == rt::DType::F16 || dtype == rt::DType::BF16;
    bool exact = std::isfinite(v) && (isa<FloatType>(elem) || std::fabs(v) <= 0x1p53);
    if ((!half || v == 0.0) && exact) {
      init.kind = rt::InitialValue::Kind::Splat;
      init.splat = v;
      return init;
    }
  }
  std::string bytes;
  auto put = [&](const void *p, size_t n) {
    bytes.append(static_cast<const char *>(p), n);
  };
  if (auto f = dyn_cast<FloatType>(elem)) {
    for (APFloat v : dense.getValues<APFloat>()) {
      if (dtype == rt::DType::F32) {
        float x = v.convertToFloat();
        put(&x, 4);
      } else if (dtype == rt::DType::F64) {
        double x = v.convertToDouble();
        put(&x, 8);
      } else {
        uint16_t x = (uint16_t)v.bitcastToAPInt().getZExtValue();
        put(&x, 2);
      }
    }
  } else if (elem.isInteger(1)) {
    for (bool v : dense.getValues<bool>()) {
      uint8_t x = v;
      put(&x, 1);
    }
  } else {
    unsigned width = elem.getIntOrFloatBitWidth();
    for (APInt v : dense.getValues<APInt>()) {
      int64_t x = v.getSExtValue();
      put(&x, width / 8); // little-endian: the low bytes
    }
  }
  // Keep every blob aligned so kernels may read constants in place.
  while (plan.blobs.size() % rt::kPlanAlignment)
    plan.blobs.push_back('\0');
  init.kind = rt::InitialValue::Kind::Blob;
  init.blobOffset = plan.blobs.size();
  init.blobBytes = bytes.size();
  plan.blobs += bytes;
  return init;
}

llvm::Error Emitter::emitVariable(px::VariableOp op) {
  auto type = op.getOutput().getType();
  auto dtype = dtypeOf(op, type.getElementType());
  if (!dtype)
    return dtype.takeError();
  rt::PlanVariable var;
  var.name = op.getName().str();
  var.dtype = *dtype;
  var.shape.assign(type.getShape().begin(), type.getShape().end());
  if (op.getTrainable()) {
    var.role = rt::PlanVariable::Role::Parameter;
  } else if (auto of = px::getAttr<px::PxDialect::OptimizerStateOfAttrHelper>(op)) {
    var.role = rt::PlanVariable::Role::OptimizerState;
    var.parameter = of.getValue().str();
  } else {
    var.role = rt::PlanVariable::Role::State;
  }
  if (op.getSplitAxes()) {
    // A block: the plan keeps the whole initial value and how it is split;
    // each rank takes its block when it loads it.
    auto whole = cast<RankedTensorType>(cast<TypedAttr>(op.getInit()).getType());
    var.wholeShape.assign(whole.getShape().begin(), whole.getShape().end());
    var.splitGrid = op.getGridAttr().getValue().str();
    for (shard::GridAxesAttr axes : op.getSplitAxes()->getAxes())
      var.splitAxes.emplace_back(axes.asArrayRef().begin(), axes.asArrayRef().end());
    for (size_t d = 0; d < var.shape.size(); ++d)
      if (var.shape[d] == 0 || var.wholeShape[d] % var.shape[d] != 0)
        return fail(op, "'" + op.getName() + "' does not split evenly (dimension " +
                            llvm::Twine(d) + ": " + llvm::Twine(var.wholeShape[d]) +
                            " over blocks of " + llvm::Twine(var.shape[d]) + ")");
  }
  auto init = initialValue(op, op.getInit(), *dtype);
  if (!init)
    return init.takeError();
  var.init = *init;
  int32_t index = plan.variables.size();
  plan.variables.push_back(std::move(var));
  return newTensor(op, op.getOutput(), rt::PlanTensor::Kind::Variable, index)
      .takeError();
}

/// A gather (or parameter-server pull) of rows of a trainable table with
/// ids that are not constants: an embedding lookup. PyTorch's nn.Embedding
/// raises on a negative id, where ONNX's Gather counts it from the end, and
/// such an id in the data is a data bug far more often than a wish to count
/// from the end; constant negative indices (`w[-1]` in the model's code) are
/// ordinary indexing and stay allowed.
static bool readsTrainableTableWithData(Operation *op) {
  Value table, ids;
  if (auto g = dyn_cast<px::GatherOp>(op)) {
    table = g.getData();
    ids = g.getIndices();
  } else if (auto p = dyn_cast<px::PsPullOp>(op)) {
    table = p.getTable();
    ids = p.getIds();
  } else {
    return false;
  }
  auto var = table.getDefiningOp<px::VariableOp>();
  return var && var.getTrainable() && !ids.getDefiningOp<px::ConstantOp>();
}

/// The ranks whose blocks make the whole tensor of an op `block of` a
/// grid's group (its `grid` and `grid_axes`), 1 for an op on whole tensors.
static int64_t blockRanks(Operation *op, StringRef axesAttr = "grid_axes") {
  auto name = op->getAttrOfType<FlatSymbolRefAttr>("grid");
  auto grid = name ? SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, name)
                   : shard::GridOp();
  if (!grid)
    return 1;
  std::vector<int64_t> shape(grid.getShape().begin(), grid.getShape().end()), axes;
  if (auto a = op->getAttrOfType<shard::GridAxesAttr>(axesAttr))
    axes.assign(a.asArrayRef().begin(), a.asArrayRef().end());
  return rt::groupSize(shape, axes);
}

/// The rows of a table px-pad-vocabulary padded that `table` is (or is a
/// block of): its initializer's, which are all the ids may name.
static std::optional<int64_t> realRows(Value table) {
  if (auto var = table.getDefiningOp<px::VariableOp>())
    if (auto ref = dyn_cast<px::OnnxInitializerAttr>(var.getInit());
        ref && !ref.getStored().empty())
      return ref.getStored()[0];
  return std::nullopt;
}

/// The rows a gather's ids index: a padded table's real ones, the data's
/// along its axis, or the whole table's when the data is a row block.
static int64_t rowsIndexed(px::GatherOp g) {
  if (std::optional<int64_t> rows = realRows(g.getData()))
    return *rows;
  auto data = g.getData().getType();
  int64_t rows = data.getDimSize(px::normalizeAxis((int64_t)g.getAxis(), data.getRank())
                                     .value_or(0));
  return rows * blockRanks(g);
}

/// What an integer input is used for, looking through the ops that move
/// index values around without changing their meaning (PyTorch's
/// targets.reshape(-1), torch.cat of id lists, a model rank's block of the
/// labels of a domain-split image, ...): "ids" in [0, rows) when
/// it reaches a gather's indices (the smallest table if several), "labels"
/// in [0, classes) when it reaches a loss's labels, else "index" in [0, 1).
static void classifyIndexInput(Value input, rt::PlanInput &in) {
  auto dimOf = [](Value v, int64_t axis) {
    auto t = cast<RankedTensorType>(v.getType());
    return t.getDimSize(axis < 0 ? axis + t.getRank() : axis);
  };
  in.synthetic = "index";
  in.range = 1;
  int64_t ids = -1, labels = -1, bound = -1;
  SmallVector<Value> work{input};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      unsigned n = use.getOperandNumber();
      if (auto g = dyn_cast<px::GatherOp>(user); g && n == 1) {
        // A lookup in a constant (a mean loss's class weights, counted per
        // label) bounds the indices but names no table's rows: labels that
        // reach one stay labels.
        int64_t rows = rowsIndexed(g);
        int64_t &into = g.getData().getDefiningOp<px::ConstantOp>() ? bound : ids;
        into = into < 0 ? rows : std::min(into, rows);
      } else if (auto p = dyn_cast<px::PsPullOp>(user); p && n == 1) {
        // A pull of a row block (`block of`) reads ids of the whole table.
        int64_t rows = realRows(p.getTable()).value_or(
            dimOf(p.getTable(), 0) * (p.getBlockAxes() ? blockRanks(p, "block_axes") : 1));
        ids = ids < 0 ? rows : std::min(ids, rows);
      } else if (auto g = dyn_cast<px::GatherElementsOp>(user); g && n == 1) {
        int64_t rows = dimOf(g.getData(), (int64_t)g.getAxis());
        ids = ids < 0 ? rows : std::min(ids, rows);
      } else if (isa<px::SoftmaxCrossEntropyLossOp,
                     px::NegativeLogLikelihoodLossOp>(user) && n == 1) {
        // A vocabulary-parallel loss's nll_loss holds a block of the classes.
        // Of padded scores, the classes before the padding.
        auto real = px::getAttr<px::PxDialect::ClassesAttrHelper>(user);
        int64_t classes =
            real ? real.getInt() : dimOf(user->getOperand(0), 1) * blockRanks(user);
        labels = labels < 0 ? classes : std::min(labels, classes);
      } else if (isa<px::ReshapeOp, px::ConcatOp, px::CastOp, px::SliceOp,
                     px::TransposeOp, px::ExpandOp, px::AllSliceOp, px::AllGatherOp>(user) ||
                 (isa<px::GatherOp>(user) && n == 0)) {
        work.push_back(user->getResult(0));
      }
    }
  }
  auto within = [&](int64_t range, int64_t limit) {
    return limit > 0 ? std::min(range, limit) : range;
  };
  if (ids > 0) {
    in.synthetic = "ids";
    in.range = within(within(ids, labels), bound);
  } else if (labels > 0) {
    in.synthetic = "labels";
    in.range = within(labels, bound);
  } else if (bound > 0) {
    in.synthetic = "ids";
    in.range = bound;
  }
}

llvm::Error Emitter::emitInput(px::InputOp op) {
  auto type = op.getOutput().getType();
  auto dtype = dtypeOf(op, type.getElementType());
  if (!dtype)
    return dtype.takeError();
  rt::PlanInput in;
  in.name = op.getName().str();
  in.dtype = *dtype;
  in.shape.assign(type.getShape().begin(), type.getShape().end());
  in.batchAxis = op.getBatched() ? 0 : -1;
  // What --synthetic should generate, from how the input is used.
  if (isa<FloatType>(type.getElementType())) {
    in.synthetic = "normal";
  } else if (type.getElementType().isInteger(1)) {
    in.synthetic = "binary";
  } else {
    classifyIndexInput(op.getOutput(), in);
  }
  int32_t index = plan.inputs.size();
  plan.inputs.push_back(std::move(in));
  return newTensor(op, op.getOutput(), rt::PlanTensor::Kind::Input, index)
      .takeError();
}

llvm::Error Emitter::emitConstant(px::ConstantOp op) {
  auto type = op.getOutput().getType();
  auto dtype = dtypeOf(op, type.getElementType());
  if (!dtype)
    return dtype.takeError();
  rt::PlanConstant c;
  c.dtype = *dtype;
  c.shape.assign(type.getShape().begin(), type.getShape().end());
  auto value = initialValue(op, op.getValue(), *dtype);
  if (!value)
    return value.takeError();
  c.value = *value;
  int32_t index = plan.constants.size();
  plan.constants.push_back(std::move(c));
  return newTensor(op, op.getOutput(), rt::PlanTensor::Kind::Constant, index)
      .takeError();
}

llvm::Error Emitter::emitKernel(Operation *op) {
  rt::PlanKernel k;
  k.op = op->getName().stripDialect().str();
  k.loc = locationName(op->getLoc());
  int64_t index = plan.kernels.size();
  // The members of one all-reduce bucket become one fused collective, at
  // the first member's place: the synchronization pass issues a bucket only
  // once all of its gradients exist.
  auto ar = dyn_cast<px::AllReduceOp>(op);
  auto bucket = ar && ar.getBucket() ? buckets.find((int64_t)*ar.getBucket())
                                     : buckets.end();
  if (bucket != buckets.end()) {
    rt::PlanKernel &fused = plan.kernels[bucket->second];
    auto in = tensorFor(op, ar.getInput());
    if (!in)
      return in.takeError();
    if (definedBy[*in] >= (int64_t)bucket->second)
      return fail(op, "a member of all-reduce bucket " +
                          llvm::Twine(bucket->first) +
                          " is computed after the bucket is issued");
    auto out = newTensor(op, ar.getOutput(), rt::PlanTensor::Kind::Arena, -1);
    if (!out)
      return out.takeError();
    fused.inputs.push_back(*in);
    fused.outputs.push_back(*out);
    if (ar.getInPlace() != fused.attrs.value("in_place", false))
      return fail(op, "all-reduce bucket " + llvm::Twine(bucket->first) +
                          " is in place for some members only");
    if (ar.getInPlace())
      bucketOffsets[bucket->second].push_back(*ar.getOffset());
    if (auto names = px::getAttr<px::PxDialect::VariablesAttrHelper>(op))
      for (Attribute n : names)
        fused.attrs["variables"].push_back(cast<StringAttr>(n).getValue().str());
    return llvm::Error::success();
  }
  for (Value v : op->getOperands()) {
    if (isa<px::SparseGradType>(v.getType())) {
      auto it = sparse.find(v);
      if (it == sparse.end())
        return fail(op, "a sparse gradient operand has no components");
      k.inputs.push_back(it->second.first);
      k.inputs.push_back(it->second.second);
      continue;
    }
    auto id = tensorFor(op, v);
    if (!id)
      return id.takeError();
    k.inputs.push_back(*id);
  }
  if (isa<px::SgdOp, px::MomentumOp, px::AdamOp, px::AdagradOp>(op)) {
    Value grad = op->getOperand(op->getNumOperands() - 1);
    if (auto it = sparse.find(grad); it != sparse.end()) {
      gradientTensors.push_back(it->second.first);
      gradientTensors.push_back(it->second.second);
    } else if (auto t = tensors.find(grad); t != tensors.end()) {
      gradientTensors.push_back(t->second);
    }
  }
  for (Value r : op->getResults()) {
    if (auto sg = dyn_cast<px::SparseGradType>(r.getType())) {
      // A sparse result is two arena tensors: indices then rows.
      auto idx = newTensorOfType(op, sg.getIndicesType(), rt::PlanTensor::Kind::Arena, -1);
      if (!idx)
        return idx.takeError();
      auto vals = newTensorOfType(op, sg.getValuesType(), rt::PlanTensor::Kind::Arena, -1);
      if (!vals)
        return vals.takeError();
      sparse[r] = {*idx, *vals};
      definedBy[*idx] = definedBy[*vals] = index;
      k.outputs.push_back(*idx);
      k.outputs.push_back(*vals);
      continue;
    }
    auto id = newTensor(op, r, rt::PlanTensor::Kind::Arena, -1);
    if (!id)
      return id.takeError();
    definedBy[*id] = index;
    k.outputs.push_back(*id);
  }
  if (op->hasAttr("grid")) {
    auto shape = gridShape(op);
    if (!shape)
      return shape.takeError();
    k.attrs["grid_shape"] = *shape;
  }
  if (auto names = px::getAttr<px::PxDialect::VariablesAttrHelper>(op)) {
    k.attrs["variables"] = json::array();
    for (Attribute n : names)
      k.attrs["variables"].push_back(cast<StringAttr>(n).getValue().str());
  }
  if (auto push = dyn_cast<px::PsPushOp>(op))
    k.attrs["table_rows"] =
        cast<px::SparseGradType>(push.getGrad().getType()).getDenseType().getDimSize(0);
  if (auto block = dyn_cast<px::MakeSparseGradOp>(op))
    k.attrs["block_rows"] = block.getOutput().getType().getDenseType().getDimSize(0);
  for (NamedAttribute a : op->getAttrs()) {
    if (a.getName().getValue().contains('.'))
      continue; // discardable annotations, not kernel parameters
    if (ar && a.getName() == ar.getOffsetAttrName())
      continue; // the bucket's layout, lowered by layOutBuckets
    auto j = attrToJson(op, a.getValue());
    if (!j)
      return j.takeError();
    k.attrs[a.getName().str()] = *j;
  }
  if (isa<px::DropoutOp>(op))
    k.attrs["stream"] = dropoutStreams++;
  // A padded vocabulary: ids and labels name its real rows and classes.
  if (auto g = dyn_cast<px::GatherOp>(op))
    if (std::optional<int64_t> rows = realRows(g.getData()))
      k.attrs["rows"] = *rows;
  if (auto pull = dyn_cast<px::PsPullOp>(op))
    if (std::optional<int64_t> rows = realRows(pull.getTable()))
      k.attrs["rows"] = *rows;
  if (auto classes = px::getAttr<px::PxDialect::ClassesAttrHelper>(op))
    k.attrs["classes"] = classes.getInt();
  if (!options.allowNegativeIds && readsTrainableTableWithData(op))
    k.attrs["nonnegative_ids"] = true;
  if (runsOnCommThread(op))
    asyncKernels.insert(plan.kernels.size());
  if (ar && ar.getBucket())
    buckets[(int64_t)*ar.getBucket()] = plan.kernels.size();
  if (ar && ar.getInPlace())
    bucketOffsets[plan.kernels.size()].push_back(*ar.getOffset());
  plan.kernels.push_back(std::move(k));
  return llvm::Error::success();
}

llvm::Error Emitter::emitReturn(func::ReturnOp op) {
  auto names = px::getAttr<px::PxDialect::OutputsAttrHelper>(module);
  for (auto [i, v] : llvm::enumerate(op.getOperands())) {
    auto id = tensorFor(op, v);
    if (!id)
      return id.takeError();
    std::string name = "output" + std::to_string(i);
    if (names && i < names.size())
      if (auto s = dyn_cast<StringAttr>(names[i]))
        name = s.getValue().str();
    plan.outputs.push_back({name, *id});
  }
  return llvm::Error::success();
}

llvm::Error Emitter::emitOp(Operation *op) {
  return TypeSwitch<Operation *, llvm::Error>(op)
      .Case([&](px::VariableOp o) { return emitVariable(o); })
      .Case([&](px::InputOp o) { return emitInput(o); })
      .Case([&](px::ConstantOp o) { return emitConstant(o); })
      .Case([&](px::AllGatherVariablesOp o) { return emitVariableBlock(o); })
      .Case([&](px::ReshapeOp o) -> llvm::Error {
        // Row-major data does not move: the result aliases the input.
        auto base = tensorFor(o, o.getInput());
        if (!base)
          return base.takeError();
        return newTensor(o, o.getOutput(), rt::PlanTensor::Kind::Alias, *base)
            .takeError();
      })
      .Case([&](px::MakeSparseGradOp o) -> llvm::Error {
        // A row block's gradient: the kernel moves the ids into the block.
        if (o.getGrid())
          return emitKernel(o);
        auto idx = tensorFor(o, o.getIndices());
        auto vals = tensorFor(o, o.getValues());
        if (!idx || !vals)
          return !idx ? idx.takeError() : vals.takeError();
        sparse[o.getOutput()] = {*idx, *vals};
        return llvm::Error::success();
      })
      .Case([&](px::SparseGradIndicesOp o) -> llvm::Error {
        tensors[o.getIndices()] = sparse.lookup(o.getGrad()).first;
        return llvm::Error::success();
      })
      .Case([&](px::SparseGradValuesOp o) -> llvm::Error {
        tensors[o.getValues()] = sparse.lookup(o.getGrad()).second;
        return llvm::Error::success();
      })
      .Case([&](px::GradientOp o) {
        return fail(o, "gradients must be consumed by an optimizer: run "
                       "--px-optimizer (parallax-opt --emit=plan does)");
      })
      .Case([&](func::ReturnOp o) { return emitReturn(o); })
      .Case([&](shard::GridOp) { return llvm::Error::success(); })
      .Default([&](Operation *o) -> llvm::Error {
        if (o->getDialect() &&
            o->getDialect()->getNamespace() == px::PxDialect::getDialectNamespace())
          return emitKernel(o);
        return fail(o, "only px ops can be executed");
      });
}

llvm::Expected<std::vector<int64_t>> Emitter::gridShape(Operation *op) {
  auto ref = op->getAttrOfType<FlatSymbolRefAttr>("grid");
  auto grid = ref ? SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, ref)
                  : shard::GridOp();
  if (!grid)
    return fail(op, "its grid is not a shard.grid of the module");
  return grid.getShape().vec();
}

llvm::Error Emitter::emitGrids() {
  for (auto grid : module.getOps<shard::GridOp>()) {
    rt::PlanGrid g{grid.getSymName().str(), grid.getShape().vec()};
    int64_t n = 1;
    for (int64_t d : g.shape) {
      if (d < 1)
        return fail(grid, "the grid must have a static shape");
      n *= d;
    }
    if (n != plan.worldSize)
      return fail(grid, "the grid has " + llvm::Twine(n) +
                            " ranks, the plan is for " +
                            llvm::Twine(plan.worldSize));
    plan.grids.push_back(std::move(g));
  }
  return llvm::Error::success();
}

/// Collectives run on the runtime's communication thread: each one is
/// started where the IR has it (with a "token") and joined by a "wait"
/// kernel placed just before the first kernel that reads one of its results
/// or updates a variable the collective reads while it runs. Everything in
/// between overlaps the communication.
void Emitter::scheduleWaits() {

  auto isUpdate = [](const std::string &op) {
    return op == "sgd" || op == "momentum" || op == "adam" ||
           op == "adagrad" || op == "assign";
  };
  std::vector<rt::PlanKernel> &kernels = plan.kernels;
  // waitBefore[j]: the waits to insert before kernel j (kernels.size(): at
  // the end of the step).
  std::vector<std::vector<rt::PlanKernel>> waitBefore(kernels.size() + 1);
  int64_t token = 0;
  for (size_t k = 0; k < kernels.size(); ++k) {
    if (!asyncKernels.count(k))
      continue;
    llvm::DenseSet<int32_t> outs, lazyIns;
    for (int32_t id : kernels[k].outputs)
      outs.insert(baseOf(id));
    // ps_pull reads its table while it runs (rows are served from it);
    // all_gather and reduce_scatter send their input from where it lies.
    if (kernels[k].op == "ps_pull" || kernels[k].op == "all_gather" ||
        kernels[k].op == "reduce_scatter")
      lazyIns.insert(baseOf(kernels[k].inputs[0]));
    size_t j = k + 1;
    for (; j < kernels.size(); ++j) {
      bool reads = llvm::any_of(kernels[j].inputs, [&](int32_t id) {
        return id >= 0 && outs.contains(baseOf(id));
      });
      bool writes = isUpdate(kernels[j].op) && !kernels[j].inputs.empty() &&
                    lazyIns.contains(baseOf(kernels[j].inputs[0]));
      if (reads || writes)
        break;
    }
    kernels[k].attrs["token"] = token;
    rt::PlanKernel w;
    w.op = "wait";
    w.loc = kernels[k].loc;
    w.attrs["token"] = token;
    w.inputs.assign(outs.begin(), outs.end());
    std::sort(w.inputs.begin(), w.inputs.end());
    for (int32_t id : lazyIns)
      w.inputs.push_back(id);
    waitBefore[j].push_back(std::move(w));
    ++token;
  }
  insertKernels(std::move(waitBefore));
}

void Emitter::insertKernels(std::vector<std::vector<rt::PlanKernel>> before) {
  std::vector<rt::PlanKernel> kernels = std::move(plan.kernels);
  plan.kernels.clear();
  std::map<size_t, std::vector<int64_t>> offsets;
  for (size_t j = 0; j <= kernels.size(); ++j) {
    if (j < before.size())
      for (rt::PlanKernel &k : before[j])
        plan.kernels.push_back(std::move(k));
    if (j < kernels.size()) {
      if (auto it = bucketOffsets.find(j); it != bucketOffsets.end())
        offsets[plan.kernels.size()] = std::move(it->second);
      plan.kernels.push_back(std::move(kernels[j]));
    }
  }
  bucketOffsets = std::move(offsets);
  // Defining kernels moved: recompute them.
  std::fill(definedBy.begin(), definedBy.end(), -1);
  for (size_t k = 0; k < plan.kernels.size(); ++k)
    for (int32_t id : plan.kernels[k].outputs)
      definedBy[id] = k;
}

/// Lowers px-bucket-in-place's layout: the bucket is one arena buffer (of
/// G blocks of shard_bytes when px-shard-weight-update shards it), each
/// member's input and result an alias at the member's offset. The pass
/// checked the IR; this checks what the plan made of it.
llvm::Error Emitter::layOutBuckets() {
  // The kernels reading each base tensor (-2: more than one, or read after
  // the step).
  std::vector<int64_t> reader(plan.tensors.size(), -1);
  for (int64_t k = 0; k < (int64_t)plan.kernels.size(); ++k)
    for (int32_t id : plan.kernels[k].inputs)
      if (id >= 0) {
        int64_t &r = reader[baseOf(id)];
        r = r == -1 || r == k ? k : -2;
      }
  for (const rt::PlanOutput &o : plan.outputs)
    reader[baseOf(o.tensor)] = -2;
  for (auto &[k, offsets] : bucketOffsets) {
    rt::PlanKernel &kernel = plan.kernels[k];
    const rt::PlanTensor &first = plan.tensors[kernel.inputs[0]];
    int64_t total = 0;
    for (size_t i = 0; i < kernel.inputs.size(); ++i) {
      int32_t in = kernel.inputs[i], out = kernel.outputs[i];
      const rt::PlanTensor &t = plan.tensors[in];
      int32_t b = baseOf(in);
      if (plan.tensors[b].kind != rt::PlanTensor::Kind::Arena ||
          plan.tensors[b].bytes() != t.bytes() || reader[b] != (int64_t)k ||
          plan.tensors[out].kind != rt::PlanTensor::Kind::Arena ||
          t.dtype != first.dtype || offsets[i] != total)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "cannot lay out all-reduce bucket " + kernel.loc + " in place: tensor " +
                std::to_string(in) + " is not a buffer of its own at offset " +
                std::to_string(offsets[i]));
      total += rt::alignToPlan(std::max<int64_t>(t.bytes(), 1));
    }
    if (kernel.attrs.value("shard_update", false)) {
      int64_t g = rt::kernelGridOf(kernel.attrs, plan.worldSize).groupSize();
      total = std::max(total, kernel.attrs.value("shard_bytes", int64_t(0)) * g);
    }
    rt::PlanTensor bucket;
    bucket.name = "gradient bucket of " + kernel.loc;
    bucket.dtype = first.dtype;
    bucket.shape = {total / (int64_t)rt::sizeOf(first.dtype)};
    bucket.kind = rt::PlanTensor::Kind::Arena;
    int32_t id = plan.tensors.size();
    for (size_t i = 0; i < kernel.inputs.size(); ++i)
      for (int32_t t : {baseOf(kernel.inputs[i]), kernel.outputs[i]}) {
        plan.tensors[t].kind = rt::PlanTensor::Kind::Alias;
        plan.tensors[t].ref = id;
        plan.tensors[t].offset = offsets[i];
      }
    plan.tensors.push_back(std::move(bucket));
    definedBy.push_back(-1);
  }
  return llvm::Error::success();
}

/// The variables a px.all_gather_variables hands round share one block of
/// G * shard_bytes, each at its offset (blocks numbered in step order).
llvm::Error Emitter::emitVariableBlock(px::AllGatherVariablesOp op) {
  if (auto err = emitKernel(op))
    return err;
  const rt::PlanKernel &k = plan.kernels.back();
  int64_t g = rt::kernelGridOf(k.attrs, plan.worldSize).groupSize();
  int32_t block = plan.variableBlocks.size();
  plan.variableBlocks.push_back(op.getShardBytes() * g);
  for (auto [id, offset] : llvm::zip(k.inputs, op.getOffsets())) {
    const rt::PlanTensor &t = plan.tensors[id];
    if (t.kind != rt::PlanTensor::Kind::Variable || plan.variables[t.ref].block >= 0)
      return fail(op, "gathers a variable that is not one or already in a block");
    plan.variables[t.ref].block = block;
    plan.variables[t.ref].blockOffset = offset;
  }
  return llvm::Error::success();
}

void Emitter::planMemory() {
  int64_t end = plan.kernels.size();
  // A buffer lives from the first kernel that writes any view of it to the
  // last that reads one (an in-place bucket has no kernel of its own).
  std::vector<int64_t> firstDef(plan.tensors.size(), -1);
  for (size_t id = 0; id < plan.tensors.size(); ++id)
    if (definedBy[id] >= 0) {
      int64_t &f = firstDef[baseOf(id)];
      f = f < 0 ? definedBy[id] : std::min(f, definedBy[id]);
    }
  std::vector<int64_t> last(plan.tensors.size(), -1);
  for (int64_t k = 0; k < end; ++k)
    for (int32_t id : plan.kernels[k].inputs)
      if (id >= 0)
        last[baseOf(id)] = std::max(last[baseOf(id)], k);
  for (const rt::PlanOutput &o : plan.outputs)
    last[baseOf(o.tensor)] = end; // read after the step

  std::vector<BufferLifetime> buffers;
  std::vector<int32_t> ids;
  for (size_t id = 0; id < plan.tensors.size(); ++id) {
    if (plan.tensors[id].kind != rt::PlanTensor::Kind::Arena)
      continue;
    BufferLifetime b;
    b.bytes = plan.tensors[id].bytes();
    b.first = firstDef[id];
    b.last = std::max(last[id], b.first);
    buffers.push_back(b);
    ids.push_back(id);
  }
  plan.arenaBytes = planArena(buffers);
  for (size_t i = 0; i < buffers.size(); ++i)
    plan.tensors[ids[i]].offset = buffers[i].offset;

  // Peak bytes of gradients alive at once.
  std::vector<int64_t> live(end + 1, 0);
  llvm::DenseSet<int32_t> counted; // a bucket holds several gradients
  for (int32_t g : gradientTensors) {
    int32_t id = baseOf(g);
    if (plan.tensors[id].kind != rt::PlanTensor::Kind::Arena || !counted.insert(id).second ||
        firstDef[id] < 0)
      continue;
    for (int64_t k = firstDef[id]; k <= std::max(last[id], firstDef[id]); ++k)
      live[k] += plan.tensors[id].bytes();
  }
  rt::MemoryEstimate &m = plan.memory;
  m.gradients = live.empty() ? 0 : *std::max_element(live.begin(), live.end());
  m.arena = plan.arenaBytes;
  auto bytes = [](rt::DType t, const std::vector<int64_t> &shape) {
    int64_t n = (int64_t)rt::sizeOf(t);
    for (int64_t d : shape)
      n *= d;
    return n;
  };
  for (const auto &v : plan.variables) {
    int64_t n = bytes(v.dtype, v.shape);
    switch (v.role) {
    case rt::PlanVariable::Role::Parameter: m.parameters += n; break;
    case rt::PlanVariable::Role::State: m.state += n; break;
    case rt::PlanVariable::Role::OptimizerState: m.optimizerState += n; break;
    }
  }
  for (const auto &in : plan.inputs)
    m.inputs += bytes(in.dtype, in.shape);
  for (const auto &c : plan.constants)
    m.constants += bytes(c.dtype, c.shape);
  m.collectives = collectiveBuffers();
  // parallax-run's default threads per rank: the cores over the machine's
  // ranks (on a machine like this one).
  int threads = std::max(1, (int)std::thread::hardware_concurrency() /
                               std::max(1, plan.ranksPerMachine));
  if (plan.target == "cpu")
    m.workspace = rt::workspaceBytes(plan, threads);
  m.libraries = rt::libraryBytes(plan, threads);
}

int64_t Emitter::collectiveBuffers() const {
  int64_t held = 0, largestRing = 0;
  for (const rt::PlanKernel &k : plan.kernels) {
    auto in = [&](size_t i) {
      return i < k.inputs.size() && k.inputs[i] >= 0 ? plan.tensors[k.inputs[i]].bytes() : 0;
    };
    int64_t ins = 0;
    for (size_t i = 0; i < k.inputs.size(); ++i)
      ins += in(i);
    // The buffers each kernel of lib/Runtime/Kernels/Collective.cpp makes
    // when the session builds it, and keeps.
    // Dimensions before `axis` of the input, where an all-gather's or a
    // reduce-scatter's blocks are not contiguous and go through a buffer.
    auto outer = [&](const char *axis) {
      int64_t n = 1, a = k.attrs.value(axis, int64_t(0));
      const std::vector<int64_t> &shape = plan.tensors[k.inputs[0]].shape;
      for (int64_t d = 0; d < a && d < (int64_t)shape.size(); ++d)
        n *= shape[d];
      return n;
    };
    if (k.op == "all_gatherv") {
      int64_t g = rt::kernelGridOf(k.attrs, plan.worldSize).groupSize();
      held += ins * (1 + g);
    } else if (k.op == "all_gather") {
      int64_t g = rt::kernelGridOf(k.attrs, plan.worldSize).groupSize();
      held += outer("gather_axis") > 1 ? ins * g : 0;
    } else if (k.op == "reduce_scatter") {
      held += outer("scatter_axis") > 1 ? ins : 0;
    } else if (k.op == "all_to_all") {
      held += 2 * ins;
    } else if ((k.op == "halo_exchange" || k.op == "halo_reduce") && in(0) > 0) {
      // Send and receive buffers of both halos (a member with two
      // neighbours: the group's ends hold less). A row along the axis is
      // the input's bytes over its rows.
      const std::vector<int64_t> &shape = plan.tensors[k.inputs[0]].shape;
      int64_t axis = k.attrs.value("axis", int64_t(0));
      int64_t rows = axis >= 0 && axis < (int64_t)shape.size() ? shape[axis] : 0;
      int64_t halo = k.attrs.value("lo", int64_t(0)) + k.attrs.value("hi", int64_t(0));
      if (rows > 0)
        held += 2 * halo * (in(0) / rows);
    } else if (k.op == "all_reduce") {
      int64_t g = rt::kernelGridOf(k.attrs, plan.worldSize).groupSize();
      if (!k.attrs.value("in_place", false))
        held += ins;
      // Open MPI's ring all-reduce (large messages) receives into one
      // temporary block of 1/g of the message, two above 2 ranks. A
      // sharded update's bucket is reduce-scattered in place instead,
      // which copies the whole message and, over a power-of-two group
      // (recursive halving), half of it again; its in-place all-gather
      // takes none.
      if (g > 1 && !k.attrs.contains("shard_bytes"))
        largestRing = std::max(largestRing, (g > 2 ? 2 : 1) * ((ins + g - 1) / g));
      else if (g > 1)
        largestRing = std::max(largestRing, (g & (g - 1)) == 0 ? ins + ins / 2 : ins);
    }
  }
  return held + largestRing;
}

llvm::Expected<rt::Plan> Emitter::run() {
  func::FuncOp func = getEntryFunction(module);
  if (!func || func.getBody().empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot emit a plan: the module has no "
                                   "step function");
  if (!func.getBody().hasOneBlock())
    return fail(func, "the step function must have one block");
  plan.worldSize = options.worldSize;
  plan.target = options.target;
  plan.options = options.description;
  if (auto loss = px::getAttr<px::PxDialect::LossAttrHelper>(func)) {
    plan.mode = rt::Plan::Mode::Train;
    plan.lossOutput = loss.getInt();
  } else {
    plan.mode = rt::Plan::Mode::Inference;
  }
  if (auto source = px::getAttr<px::PxDialect::SourceAttrHelper>(module)) {
    std::error_code ec;
    auto path = std::filesystem::absolute(source.getValue().str(), ec);
    plan.sourcePath = ec ? source.getValue().str() : path.string();
    uint64_t size = std::filesystem::file_size(plan.sourcePath, ec);
    plan.sourceBytes = ec ? 0 : size;
    plan.sourceCrc32 = ec ? 0 : rt::crc32OfFile(plan.sourcePath).value_or(0);
  }
  if (auto n = px::getAttr<px::PxDialect::WorldSizeAttrHelper>(module))
    plan.worldSize = n.getInt();
  if (auto m = px::getAttr<px::PxDialect::ModelRanksAttrHelper>(module))
    plan.modelRanks = m.getInt();
  if (auto r = px::getAttr<px::PxDialect::RanksPerMachineAttrHelper>(module))
    plan.ranksPerMachine = r.getInt();
  else
    plan.ranksPerMachine = plan.worldSize;
  if (auto err = emitGrids())
    return std::move(err);
  for (Operation &op : func.getBody().front())
    if (auto err = emitOp(&op))
      return std::move(err);
  scheduleWaits();
  if (auto err = layOutBuckets())
    return std::move(err);
  planMemory();
  return std::move(plan);
}

} // namespace

llvm::Expected<rt::Plan> emitPlan(ModuleOp module,
                                  const PlanEmitOptions &options) {
  Emitter emitter(module, options);
  return emitter.run();
}

void printMemoryReport(const rt::Plan &plan, llvm::raw_ostream &os) {
  auto human = [](int64_t bytes) { return rt::bytesText(bytes); };
  const rt::MemoryEstimate &m = plan.memory;
  os << "memory per rank (predicted):\n";
  auto line = [&](const char *what, int64_t bytes, const char *note = "") {
    os << llvm::format("  %-18s %12s", what, human(bytes).c_str()) << note
       << "\n";
  };
  line("parameters", m.parameters);
  line("optimizer state", m.optimizerState);
  line("state", m.state, "  (BatchNorm statistics)");
  line("gradients", m.gradients, "  (peak live, inside the arena)");
  line("arena", m.arena, "  (activations, gradients, temporaries; reused by liveness)");
  line("inputs", m.inputs, "  (one step's data)");
  line("constants", m.constants);
  line("collectives", m.collectives, "  (staging buffers, MPI's largest temporary)");
  if (m.workspace > 0)
    line("workspace", m.workspace, "  (the kernels' scratch: the largest kernel's)");
  if (m.libraries > 0)
    line("libraries", m.libraries, "  (oneDNN's generated kernels and buffers)");
  line("peak", m.peak());
  os << "  " << plan.kernels.size() << " kernels\n";
}

} // namespace parallax
