//===- PlanEmitter.cpp - px IR -> executable plan -------------------------===//

#include "parallax/Target/PlanEmitter.h"

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Runtime/MachineMemory.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"

#include <climits>
#include <cmath>
#include <filesystem>
#include <optional>

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
  /// Inserts before[j] ahead of kernel j (before[size]: at the end of the
  /// step) and recomputes definedBy.
  void insertKernels(std::vector<std::vector<rt::PlanKernel>> before);
  void scheduleWaits();
  void bucketsInPlace();
  void shardWeightUpdates();
  /// Per tensor, the kernels that read it directly.
  using Readers = std::vector<std::vector<int64_t>>;
  void shardOptimizerState(const std::vector<int64_t> &updates, int64_t shard, int64_t eb,
                           int32_t block, const Readers &readers,
                           const llvm::DenseSet<int32_t> &aliased, std::vector<bool> &dead);
  void removeVariables(const std::vector<bool> &dead);
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
  } else if (auto of = op->getAttrOfType<StringAttr>("px.optimizer_state_of")) {
    var.role = rt::PlanVariable::Role::OptimizerState;
    var.parameter = of.getValue().str();
  } else {
    var.role = rt::PlanVariable::Role::State;
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

/// What an integer input is used for, looking through the ops that move
/// index values around without changing their meaning (PyTorch's
/// targets.reshape(-1), torch.cat of id lists, ...): "ids" in [0, rows) when
/// it reaches a gather's indices (the smallest table if several), "labels"
/// in [0, classes) when it reaches a loss's labels, else "index" in [0, 1).
static void classifyIndexInput(Value input, rt::PlanInput &in) {
  auto dimOf = [](Value v, int64_t axis) {
    auto t = cast<RankedTensorType>(v.getType());
    return t.getDimSize(axis < 0 ? axis + t.getRank() : axis);
  };
  in.synthetic = "index";
  in.range = 1;
  int64_t ids = -1, labels = -1;
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
        int64_t rows = dimOf(g.getData(), (int64_t)g.getAxis());
        ids = ids < 0 ? rows : std::min(ids, rows);
      } else if (auto p = dyn_cast<px::PsPullOp>(user); p && n == 1) {
        int64_t rows = dimOf(p.getTable(), 0);
        ids = ids < 0 ? rows : std::min(ids, rows);
      } else if (auto g = dyn_cast<px::GatherElementsOp>(user); g && n == 1) {
        int64_t rows = dimOf(g.getData(), (int64_t)g.getAxis());
        ids = ids < 0 ? rows : std::min(ids, rows);
      } else if (isa<px::SoftmaxCrossEntropyLossOp,
                     px::NegativeLogLikelihoodLossOp>(user) && n == 1) {
        int64_t classes = dimOf(user->getOperand(0), 1);
        labels = labels < 0 ? classes : std::min(labels, classes);
      } else if (isa<px::ReshapeOp, px::ConcatOp, px::CastOp, px::SliceOp,
                     px::TransposeOp, px::ExpandOp>(user) ||
                 (isa<px::GatherOp>(user) && n == 0)) {
        work.push_back(user->getResult(0));
      }
    }
  }
  if (ids > 0) {
    in.synthetic = "ids";
    in.range = labels > 0 ? std::min(ids, labels) : ids;
  } else if (labels > 0) {
    in.synthetic = "labels";
    in.range = labels;
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
    if (auto names = op->getAttrOfType<ArrayAttr>("px.variables"))
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
  if (auto names = op->getAttrOfType<ArrayAttr>("px.variables")) {
    k.attrs["variables"] = json::array();
    for (Attribute n : names)
      k.attrs["variables"].push_back(cast<StringAttr>(n).getValue().str());
  }
  if (auto push = dyn_cast<px::PsPushOp>(op))
    k.attrs["table_rows"] =
        cast<px::SparseGradType>(push.getGrad().getType()).getDenseType().getDimSize(0);
  for (NamedAttribute a : op->getAttrs()) {
    if (a.getName().getValue().contains('.'))
      continue; // discardable annotations, not kernel parameters
    auto j = attrToJson(op, a.getValue());
    if (!j)
      return j.takeError();
    k.attrs[a.getName().str()] = *j;
  }
  if (isa<px::DropoutOp>(op))
    k.attrs["stream"] = dropoutStreams++;
  if (!options.allowNegativeIds && readsTrainableTableWithData(op))
    k.attrs["nonnegative_ids"] = true;
  if (ar && ar.getBucket())
    buckets[(int64_t)*ar.getBucket()] = plan.kernels.size();
  plan.kernels.push_back(std::move(k));
  return llvm::Error::success();
}

llvm::Error Emitter::emitReturn(func::ReturnOp op) {
  auto names = module->getAttrOfType<ArrayAttr>("px.outputs");
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
      .Case([&](px::ReshapeOp o) -> llvm::Error {
        // Row-major data does not move: the result aliases the input.
        auto base = tensorFor(o, o.getInput());
        if (!base)
          return base.takeError();
        return newTensor(o, o.getOutput(), rt::PlanTensor::Kind::Alias, *base)
            .takeError();
      })
      .Case([&](px::MakeSparseGradOp o) -> llvm::Error {
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
  auto isAsync = [](const std::string &op) {
    return op == "all_reduce" || op == "all_gatherv" || op == "ps_push" ||
           op == "ps_pull" || op == "all_gather" || op == "reduce_scatter" ||
           op == "all_to_all";
  };
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
    if (!isAsync(kernels[k].op))
      continue;
    llvm::DenseSet<int32_t> outs, lazyIns;
    for (int32_t id : kernels[k].outputs)
      outs.insert(baseOf(id));
    // ps_pull reads its table while it runs (rows are served from it).
    if (kernels[k].op == "ps_pull")
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
  for (size_t j = 0; j <= kernels.size(); ++j) {
    if (j < before.size())
      for (rt::PlanKernel &k : before[j])
        plan.kernels.push_back(std::move(k));
    if (j < kernels.size())
      plan.kernels.push_back(std::move(kernels[j]));
  }
  // Defining kernels moved: recompute them.
  std::fill(definedBy.begin(), definedBy.end(), -1);
  for (size_t k = 0; k < plan.kernels.size(); ++k)
    for (int32_t id : plan.kernels[k].outputs)
      definedBy[id] = k;
}

/// Gradient buckets in place, as PyTorch DDP's gradient_as_bucket_view: the
/// gradients of a fused all_reduce are laid out back to back (each at an
/// aligned offset) in one arena buffer, the collective reduces that buffer
/// where it lies, and its results are the same slices. Without this the
/// kernel copies every gradient into a staging buffer before the
/// collective and every result out of it after: two passes over all dense
/// gradients a step. A gradient qualifies when it is a whole arena tensor
/// (or an alias of all of one) that only the all_reduce reads and no other
/// bucket holds; a bucket goes in place when all its tensors qualify. The
/// kernel gets "in_place", and the runtime checks the layout.
void Emitter::bucketsInPlace() {
  auto aliasOffset = [&](int32_t id) {
    int64_t off = 0;
    for (; plan.tensors[id].kind == rt::PlanTensor::Kind::Alias; id = plan.tensors[id].ref)
      off += plan.tensors[id].offset;
    return off;
  };
  // The kernels reading each base tensor (-2: more than one, or read after
  // the step).
  std::vector<int64_t> reader(plan.tensors.size(), -1);
  auto read = [&](int32_t b, int64_t k) {
    reader[b] = reader[b] == -1 || reader[b] == k ? k : -2;
  };
  for (int64_t k = 0; k < (int64_t)plan.kernels.size(); ++k)
    for (int32_t id : plan.kernels[k].inputs)
      if (id >= 0)
        read(baseOf(id), k);
  for (const rt::PlanOutput &o : plan.outputs)
    reader[baseOf(o.tensor)] = -2;
  for (int64_t k = 0; k < (int64_t)plan.kernels.size(); ++k) {
    rt::PlanKernel &kernel = plan.kernels[k];
    if (kernel.op != "all_reduce" || kernel.inputs.empty() ||
        kernel.inputs.size() != kernel.outputs.size())
      continue;
    const rt::PlanTensor &first = plan.tensors[kernel.inputs[0]];
    bool ok = true;
    llvm::DenseSet<int32_t> seen;
    for (size_t i = 0; i < kernel.inputs.size() && ok; ++i) {
      int32_t in = kernel.inputs[i], out = kernel.outputs[i];
      if (in < 0 || out < 0) {
        ok = false;
        break;
      }
      int32_t b = baseOf(in);
      const rt::PlanTensor &t = plan.tensors[in];
      ok = plan.tensors[b].kind == rt::PlanTensor::Kind::Arena &&
           plan.tensors[b].bytes() == t.bytes() && aliasOffset(in) == 0 &&
           reader[b] == k && seen.insert(b).second &&
           plan.tensors[out].kind == rt::PlanTensor::Kind::Arena &&
           t.dtype == first.dtype && plan.tensors[out].bytes() == t.bytes();
    }
    if (!ok)
      continue;
    std::vector<int64_t> offsets;
    int64_t total = 0;
    for (int32_t in : kernel.inputs) {
      offsets.push_back(total);
      total += rt::alignToPlan(std::max<int64_t>(plan.tensors[in].bytes(), 1));
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
    kernel.attrs["in_place"] = true;
  }
}

/// Weight-update sharding (Xu et al., "Automatic Cross-Replica Sharding of
/// Weight Update in Data-Parallel Training", 2020; the optimizer half of
/// ZeRO): an all-reduce is a reduce-scatter followed by an all-gather, and
/// when every gradient of an in-place bucket is read only by a dense
/// optimizer update, the update can run between the two halves on 1/G of
/// the bucket per rank, and the all-gather can move updated parameters
/// instead of summed gradients. The bytes on the wire are the all-reduce's;
/// each rank's optimizer work and its passes over parameters and gradients
/// shrink G-fold, and replicas stay bitwise identical. For that the
/// bucket's parameters share one variable block, laid out as their
/// gradients are in the bucket, and the bucket is padded to G blocks of
/// S bytes (S aligned): the all_reduce kernel gets "shard_update" (it only
/// reduce-scatters), each optimizer kernel "shard_offset" (it updates the
/// part of its variable in this rank's block), and an all_gather_variables
/// kernel after the bucket's last update hands every rank every block.
void Emitter::shardWeightUpdates() {
  auto stateCount = [](const std::string &op) {
    return op == "sgd" ? 0 : op == "momentum" || op == "adagrad" ? 1 : op == "adam" ? 2 : -1;
  };
  // Per tensor, the kernels that read it directly (waits left out: they
  // only order) and the last kernel reading any view of each variable.
  Readers readers(plan.tensors.size());
  std::vector<int64_t> lastVariableRead(plan.variables.size(), -1);
  for (int64_t k = 0; k < (int64_t)plan.kernels.size(); ++k) {
    if (plan.kernels[k].op == "wait")
      continue;
    for (int32_t id : plan.kernels[k].inputs) {
      if (id < 0)
        continue;
      readers[id].push_back(k);
      const rt::PlanTensor &b = plan.tensors[baseOf(id)];
      if (b.kind == rt::PlanTensor::Kind::Variable)
        lastVariableRead[b.ref] = k;
    }
  }
  llvm::DenseSet<int32_t> aliased; // tensors some alias names
  for (const rt::PlanTensor &t : plan.tensors)
    if (t.kind == rt::PlanTensor::Kind::Alias)
      aliased.insert(t.ref);
  for (const rt::PlanOutput &o : plan.outputs)
    aliased.insert(o.tensor); // read after the step

  std::vector<std::pair<int64_t, rt::PlanKernel>> gathers; // insert before
  std::vector<bool> deadVariables(plan.variables.size(), false);
  for (int64_t k = 0; k < (int64_t)plan.kernels.size(); ++k) {
    rt::PlanKernel &ar = plan.kernels[k];
    if (ar.op != "all_reduce" || !ar.attrs.value("in_place", false))
      continue;
    int64_t g = 1;
    std::vector<int64_t> shape = ar.attrs.value("grid_shape", std::vector<int64_t>{plan.worldSize});
    std::vector<int64_t> axes = ar.attrs.value("grid_axes", std::vector<int64_t>{});
    for (size_t a = 0; a < shape.size(); ++a)
      if (axes.empty() || llvm::is_contained(axes, (int64_t)a))
        g *= shape[a];
    std::string reduction = ar.attrs.value("reduction", std::string("sum"));
    // A group of g ranks spans several machines when a machine has fewer
    // (ranks are placed machine by machine).
    bool acrossMachines = plan.ranksPerMachine < g;
    if (g <= 1 || g < options.shardMinRanks ||
        (acrossMachines && !options.shardAcrossMachines) ||
        (reduction != "sum" && reduction != "average"))
      continue;
    int32_t bucket = plan.tensors[ar.outputs[0]].ref;
    std::vector<int64_t> updates;
    std::vector<int32_t> vars, varTensors;
    bool ok = true;
    for (int32_t out : ar.outputs) {
      const rt::PlanTensor &t = plan.tensors[out];
      ok = t.kind == rt::PlanTensor::Kind::Alias && t.ref == bucket && t.bytes() > 0 &&
           readers[out].size() == 1 && !aliased.contains(out);
      if (!ok)
        break;
      int64_t q = readers[out][0];
      const rt::PlanKernel &u = plan.kernels[q];
      int ns = stateCount(u.op);
      ok = ns >= 0 && u.inputs.size() == (size_t)(2 + ns) && u.inputs[1 + ns] == out &&
           u.inputs[0] >= 0 && q > k;
      if (!ok)
        break;
      const rt::PlanTensor &v = plan.tensors[u.inputs[0]];
      ok = v.kind == rt::PlanTensor::Kind::Variable && v.dtype == t.dtype &&
           plan.variables[v.ref].block < 0 && lastVariableRead[v.ref] == q &&
           !llvm::is_contained(vars, v.ref);
      if (!ok)
        break;
      updates.push_back(q);
      vars.push_back(v.ref);
      varTensors.push_back(u.inputs[0]);
    }
    if (!ok)
      continue;
    int64_t total = plan.tensors[bucket].bytes();
    int64_t eb = (int64_t)rt::sizeOf(plan.tensors[bucket].dtype);
    int64_t shard = rt::alignToPlan((total + g - 1) / g);
    if (shard > INT_MAX) // MPI counts blocks in ints
      continue;
    plan.tensors[bucket].shape = {shard * g / eb};
    int32_t block = plan.variableBlocks.size();
    plan.variableBlocks.push_back(shard * g);
    ar.attrs["shard_update"] = true;
    ar.attrs["shard_bytes"] = shard;
    rt::PlanKernel gather;
    gather.op = "all_gather_variables";
    gather.loc = ar.loc;
    gather.attrs["shard_bytes"] = shard;
    std::vector<int64_t> offsets;
    for (const char *a : {"grid", "grid_shape", "grid_axes", "variables"})
      if (ar.attrs.contains(a))
        gather.attrs[a] = ar.attrs[a];
    for (size_t i = 0; i < ar.outputs.size(); ++i) {
      int64_t offset = plan.tensors[ar.outputs[i]].offset;
      rt::PlanKernel &u = plan.kernels[updates[i]];
      u.attrs["shard_offset"] = offset;
      u.attrs["shard_bytes"] = shard;
      for (const char *a : {"grid", "grid_shape", "grid_axes"}) {
        u.attrs.erase(a);
        if (ar.attrs.contains(a))
          u.attrs[a] = ar.attrs[a];
      }
      plan.variables[vars[i]].block = block;
      plan.variables[vars[i]].blockOffset = offset;
      gather.inputs.push_back(varTensors[i]);
      offsets.push_back(offset);
    }
    gather.attrs["offsets"] = offsets;
    gathers.push_back({*std::max_element(updates.begin(), updates.end()) + 1,
                       std::move(gather)});
    shardOptimizerState(updates, shard, eb, block, readers, aliased, deadVariables);
  }
  removeVariables(deadVariables);
  if (gathers.empty())
    return;
  std::vector<std::vector<rt::PlanKernel>> before(plan.kernels.size() + 1);
  for (auto &[at, kernel] : gathers)
    before[at].push_back(std::move(kernel));
  insertKernels(std::move(before));
}

/// The optimizer-state half of a sharded update (ZeRO stage 1): rank r only
/// ever updates the elements of block r, so each state of the bucket's
/// updates (momentum's velocity, Adam's m and v, Adagrad's sum) needs one
/// block of `shard` bytes, not a full copy per parameter. When every
/// member's state j is a whole variable that only its update reads (and no
/// alias or output names), starting
/// from one splat value, the members' state-j tensors become views of one
/// variable of shard/eb elements (the first member's, renamed); the others'
/// variables die. The updates get "shard_state": they index the state by
/// the element's place in block r.
void Emitter::shardOptimizerState(const std::vector<int64_t> &updates, int64_t shard,
                                  int64_t eb, int32_t block, const Readers &readers,
                                  const llvm::DenseSet<int32_t> &aliased,
                                  std::vector<bool> &dead) {
  const rt::PlanKernel &first = plan.kernels[updates[0]];
  int ns = (int)first.inputs.size() - 2; // variable, states..., gradient
  if (ns <= 0)
    return;
  for (int j = 1; j <= ns; ++j) {
    std::optional<double> splat;
    bool ok = true;
    for (int64_t q : updates) {
      const rt::PlanKernel &u = plan.kernels[q];
      int32_t id = u.op == first.op && (int)u.inputs.size() == ns + 2 ? u.inputs[j] : -1;
      const rt::PlanTensor *t = id >= 0 ? &plan.tensors[id] : nullptr;
      const rt::PlanVariable *v =
          t && t->kind == rt::PlanTensor::Kind::Variable ? &plan.variables[t->ref] : nullptr;
      ok = v && readers[id].size() == 1 && !aliased.contains(id) &&
           v->role == rt::PlanVariable::Role::OptimizerState &&
           v->init.kind == rt::InitialValue::Kind::Splat && (!splat || *splat == v->init.splat);
      if (!ok)
        break;
      splat = v->init.splat;
    }
    if (!ok)
      return; // the kernels take all their states sharded or none
  }
  for (int j = 1; j <= ns; ++j) {
    int32_t keep = plan.tensors[plan.kernels[updates[0]].inputs[j]].ref;
    rt::PlanVariable &v = plan.variables[keep];
    v.name = "optimizer state " + std::to_string(j - 1) + " of variable block " +
             std::to_string(block) + " (" + v.name + "...)";
    v.shape = {shard / eb};
    for (int64_t q : updates) {
      rt::PlanTensor &t = plan.tensors[plan.kernels[q].inputs[j]];
      if (t.ref != keep)
        dead[t.ref] = true;
      t.ref = keep;
      t.shape = {shard / eb};
    }
  }
  for (int64_t q : updates)
    plan.kernels[q].attrs["shard_state"] = true;
}

/// Drops the variables marked dead (no tensor names them any more) and
/// renumbers the tensors' references to the others.
void Emitter::removeVariables(const std::vector<bool> &dead) {
  if (std::find(dead.begin(), dead.end(), true) == dead.end())
    return;
  std::vector<int32_t> index(plan.variables.size(), -1);
  std::vector<rt::PlanVariable> kept;
  for (size_t i = 0; i < plan.variables.size(); ++i)
    if (!dead[i]) {
      index[i] = kept.size();
      kept.push_back(std::move(plan.variables[i]));
    }
  plan.variables = std::move(kept);
  for (rt::PlanTensor &t : plan.tensors)
    if (t.kind == rt::PlanTensor::Kind::Variable)
      t.ref = index[t.ref];
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
  if (auto loss = func->getAttrOfType<IntegerAttr>("px.loss")) {
    plan.mode = rt::Plan::Mode::Train;
    plan.lossOutput = loss.getInt();
  } else {
    plan.mode = rt::Plan::Mode::Inference;
  }
  if (auto source = module->getAttrOfType<StringAttr>("px.source")) {
    std::error_code ec;
    auto path = std::filesystem::absolute(source.getValue().str(), ec);
    plan.sourcePath = ec ? source.getValue().str() : path.string();
    uint64_t size = std::filesystem::file_size(plan.sourcePath, ec);
    plan.sourceBytes = ec ? 0 : size;
    plan.sourceCrc32 = ec ? 0 : rt::crc32OfFile(plan.sourcePath).value_or(0);
  }
  if (auto n = module->getAttrOfType<IntegerAttr>("px.world_size"))
    plan.worldSize = n.getInt();
  if (auto r = module->getAttrOfType<IntegerAttr>("px.ranks_per_machine"))
    plan.ranksPerMachine = r.getInt();
  else
    plan.ranksPerMachine = plan.worldSize;
  if (auto err = emitGrids())
    return std::move(err);
  for (Operation &op : func.getBody().front())
    if (auto err = emitOp(&op))
      return std::move(err);
  scheduleWaits();
  bucketsInPlace();
  if (options.shardMinRanks > 0)
    shardWeightUpdates();
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
  line("peak", m.peak());
  os << "  " << plan.kernels.size() << " kernels\n";
}

} // namespace parallax
