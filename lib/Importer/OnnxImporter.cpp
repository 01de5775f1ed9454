//===- OnnxImporter.cpp - ONNX training graph -> px dialect ---------------===//
//
// Walks the (topologically sorted) ONNX graph once. Values whose contents are
// known at compile time (small constants, Shape of a static tensor, and
// everything computed only from those) are evaluated by ConstantEvaluator and
// materialised as px.constant only where a tensor op consumes them; all other
// nodes become px ops whose result types come from the ops' own shape rules.
//
//===----------------------------------------------------------------------===//

#include "parallax/Importer/OnnxImporter.h"

#include "GraphImporter.h"
#include "OnnxModelLoader.h"
#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShapes.h"
#include "parallax/Runtime/DType.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <functional>
#include <map>
#include <set>

using namespace mlir;
using namespace parallax;
using namespace parallax::detail;
using onnx::TensorProto;

//===----------------------------------------------------------------------===//
// Types and constants
//===----------------------------------------------------------------------===//

llvm::Expected<Type> GraphImporter::elementType(int32_t dtype,
                                                const llvm::Twine &what) {
  switch (dtype) {
  case TensorProto::FLOAT: return b.getF32Type();
  case TensorProto::DOUBLE: return b.getF64Type();
  case TensorProto::FLOAT16: return b.getF16Type();
  case TensorProto::BFLOAT16: return b.getBF16Type();
  case TensorProto::INT64: return b.getI64Type();
  case TensorProto::INT32: return b.getI32Type();
  case TensorProto::INT16: return b.getI16Type();
  case TensorProto::INT8: return b.getI8Type();
  case TensorProto::BOOL: return b.getI1Type();
  default:
    return fileError(what + " has unsupported element type " +
                     TensorProto::DataType_Name((TensorProto::DataType)dtype));
  }
}

std::string GraphImporter::shapeProblem(ArrayRef<int64_t> shape) const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return "has a negative dimension in shape " + px::shapeToString(shape);
    if (d && n > rt::kMaxTensorElements / d)
      return "has shape " + px::shapeToString(shape) +
             ": its dimensions multiply past 2^50, the most elements a "
             "tensor may have";
    n *= d;
  }
  return "";
}

llvm::Expected<RankedTensorType>
GraphImporter::valueInfoType(const onnx::ValueInfoProto &vi) {
  if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape())
    return fileError("value '" + vi.name() + "' has no tensor shape");
  const auto &tt = vi.type().tensor_type();
  auto elem = elementType(tt.elem_type(), "value '" + vi.name() + "'");
  if (!elem)
    return elem.takeError();
  SmallVector<int64_t> shape;
  for (const auto &dim : tt.shape().dim()) {
    if (!dim.has_dim_value() || dim.dim_value() < 0)
      return fileError("dimension of '" + vi.name() +
                       "' is left dynamic after binding");
    shape.push_back(dim.dim_value());
  }
  std::string problem = shapeProblem(shape);
  if (!problem.empty())
    return fileError("input '" + vi.name() + "' " + problem);
  return RankedTensorType::get(shape, *elem);
}

/// A dense attribute of `type` holding `values`, numeric values as
/// ConstTensor keeps them (half floats too), rounded to the element type.
static ElementsAttr denseAttr(RankedTensorType type, ArrayRef<double> values) {
  Type elem = type.getElementType();
  if (auto floatType = dyn_cast<FloatType>(elem)) {
    SmallVector<APFloat> fs;
    for (double v : values) {
      APFloat f(v);
      bool lost;
      f.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                &lost);
      fs.push_back(f);
    }
    return cast<ElementsAttr>(DenseElementsAttr::get(type, fs));
  }
  SmallVector<APInt> is;
  for (double v : values)
    is.push_back(APInt(elem.getIntOrFloatBitWidth(), toInt64(v),
                       /*isSigned=*/true, /*implicitTrunc=*/true));
  return cast<ElementsAttr>(DenseElementsAttr::get(type, is));
}

llvm::Expected<ElementsAttr>
GraphImporter::tensorAttr(const TensorProto &tensor, const llvm::Twine &what) {
  auto elem = elementType(tensor.data_type(), what);
  if (!elem)
    return elem.takeError();
  SmallVector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
  std::string problem = shapeProblem(dims);
  if (!problem.empty())
    return fileError(what + " " + problem);
  auto type = RankedTensorType::get(dims, *elem);
  // Raw little-endian data maps straight onto a dense attribute.
  if (tensor.has_raw_data() && tensor.data_type() != TensorProto::BOOL) {
    const std::string &raw = tensor.raw_data();
    if ((int64_t)raw.size() * 8 !=
        type.getNumElements() * (int64_t)elem->getIntOrFloatBitWidth())
      return fileError(what + " has " + llvm::Twine(raw.size()) +
                       " bytes of data for shape " +
                       px::shapeToString(type.getShape()));
    return cast<ElementsAttr>(DenseElementsAttr::getFromRawBuffer(
        type, ArrayRef<char>(raw.data(), raw.size())));
  }
  auto values = readTensor(tensor);
  if (!values)
    return fileError(what + " is too large or of an unsupported type to read");
  return denseAttr(type, values->values);
}

/// Turns a compile-time constant into a px.constant at first tensor use.
/// The attribute is built from the numeric values directly: a detour through
/// a TensorProto would store half floats' values where ONNX expects their
/// bit patterns, and would be refused beyond readTensor's size limit.
llvm::Expected<Value> GraphImporter::materialize(const std::string &name) {
  const ConstTensor &t = consts.at(name);
  auto elem = elementType(t.dtype, "constant '" + name + "'");
  if (!elem)
    return elem.takeError();
  auto attr = denseAttr(RankedTensorType::get(t.shape, *elem), t.values);
  Location loc = NameLoc::get(b.getStringAttr(name));
  Value v = px::ConstantOp::create(b, loc, attr).getResult();
  values[name] = v;
  return v;
}

Value GraphImporter::constantTensor(RankedTensorType type,
                                    ArrayRef<double> values, Location loc) {
  return px::ConstantOp::create(b, loc, denseAttr(type, values)).getResult();
}

llvm::Expected<Value> GraphImporter::value(const onnx::NodeProto &node,
                                           int index) {
  if (index >= node.input_size() || node.input(index).empty())
    return Value();
  const std::string &name = node.input(index);
  if (auto pending = dynamicSlices.find(name); pending != dynamicSlices.end())
    return nodeError(node, "input '" + name + "' is a slice whose bounds depend "
                           "on runtime data (node '" + pending->second.origin +
                           "'); such a slice can only be gathered from and "
                           "then reduced along the sliced axis, as "
                           "nn.EmbeddingBag's export does");
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  if (consts.count(name))
    return materialize(name);
  return nodeError(node, "input '" + name + "' is not defined before use");
}

static bool isFloat(int32_t dtype) {
  return dtype == TensorProto::FLOAT || dtype == TensorProto::DOUBLE ||
         dtype == TensorProto::FLOAT16 || dtype == TensorProto::BFLOAT16;
}

/// An input whose value must be known at compile time (a shape, axes, ...).
llvm::Expected<std::optional<ConstTensor>>
GraphImporter::constInput(const onnx::NodeProto &node, int index,
                          const char *role, bool required) {
  if (index >= node.input_size() || node.input(index).empty()) {
    if (required)
      return nodeError(node, llvm::Twine("missing input '") + role + "'");
    return std::optional<ConstTensor>();
  }
  const std::string &name = node.input(index);
  auto it = consts.find(name);
  if (it != consts.end())
    return std::optional<ConstTensor>(it->second);
  auto init = initializers.find(name);
  if (init != initializers.end()) {
    if (isFloat(init->second->data_type()) && !options.freeze.count(name))
      return nodeError(node, llvm::Twine("input '") + role + "' ('" + name +
                                 "') must be computable at compile time, but "
                                 "it is a float initializer and so a "
                                 "trainable variable (keep it constant with "
                                 "--freeze " + name + ")");
    return nodeError(node, llvm::Twine("input '") + role + "' ('" + name +
                               "') is an initializer too large to evaluate "
                               "at compile time");
  }
  return nodeError(node, llvm::Twine("input '") + role + "' ('" + name +
                             "') must be computable at compile time; it "
                             "depends on runtime data");
}

llvm::Expected<std::vector<int64_t>>
GraphImporter::reductionAxes(const onnx::NodeProto &node) {
  if (node.op_type() != "ReduceSum") {
    if (auto err = checkAttributes(node, {"keepdims", "axes"}))
      return std::move(err);
    return attrInts(node, "axes");
  }
  if (auto err = checkAttributes(node, {"keepdims", "noop_with_empty_axes"}))
    return std::move(err);
  auto a = constInput(node, 1, "axes", /*required=*/false);
  if (!a)
    return a.takeError();
  return *a ? (*a)->asInts() : std::vector<int64_t>{};
}

//===----------------------------------------------------------------------===//
// Graph leaves
//===----------------------------------------------------------------------===//

llvm::Error GraphImporter::importInputs() {
  for (const auto &input : graph.input()) {
    if (initializers.count(input.name()))
      continue;
    auto type = valueInfoType(input);
    if (!type)
      return type.takeError();
    Location loc = NameLoc::get(b.getStringAttr(input.name()));
    const auto &dims = input.type().tensor_type().shape().dim();
    bool batched = !dims.empty() && dims[0].denotation() == kBatchDenotation;
    values[input.name()] = px::InputOp::create(
        b, loc, *type, b.getStringAttr(input.name()),
        batched ? b.getUnitAttr() : UnitAttr());
  }
  return llvm::Error::success();
}

/// Whether a parameter is of equal values and read by several nodes: most
/// likely several of the model's parameters that torch.onnx.export's eval
/// mode (its default) merged because their initial values are equal (zero
/// biases, unit layer-norm weights). Trained, they stay one.
static bool mergedByExport(const onnx::TensorProto &tensor,
                           const std::vector<std::pair<const onnx::NodeProto *, int>> &readers) {
  std::set<const onnx::NodeProto *> nodes;
  for (const auto &use : readers)
    nodes.insert(use.first);
  if (nodes.size() < 2)
    return false;
  std::optional<ConstTensor> t = readTensor(tensor);
  return t && t->size() >= 2 &&
         llvm::all_of(t->values, [&](double v) { return v == t->values.front(); });
}

llvm::Error GraphImporter::importInitializers() {
  std::vector<std::string> merged;
  for (const std::string &name : options.freeze)
    if (!initializers.count(name))
      return fileError("--freeze names '" + name +
                       "', which is not an initializer of the model");
  for (const auto &tensor : graph.initializer()) {
    const std::string &name = tensor.name();
    if (!uses.count(name))
      continue; // unused initializers are dropped
    std::string problem = shapeProblem(
        SmallVector<int64_t>(tensor.dims().begin(), tensor.dims().end()));
    if (!problem.empty())
      return fileError("initializer '" + name + "' " + problem);
    bool frozen = options.freeze.count(name) > 0;
    if (!isFloat(tensor.data_type()) || frozen) {
      // Constants: small ones join compile-time evaluation; big ones stay in
      // the ONNX file.
      if (auto t = readTensor(tensor)) {
        consts[name] = *t;
        continue;
      }
      auto elem = elementType(tensor.data_type(), "initializer '" + name + "'");
      if (!elem)
        return elem.takeError();
      auto type = RankedTensorType::get(
          SmallVector<int64_t>(tensor.dims().begin(), tensor.dims().end()),
          *elem);
      values[name] = px::ConstantOp::create(
          b, NameLoc::get(b.getStringAttr(name)), type,
          px::OnnxInitializerAttr::get(&ctx, name, type));
      continue;
    }
    // BatchNormalization's running statistics (inputs 3 and 4) are state the
    // step updates, not parameters the optimizer trains.
    bool state = llvm::all_of(uses[name], [](const auto &use) {
      return use.first->op_type() == "BatchNormalization" && use.second >= 3;
    });
    auto elem = elementType(tensor.data_type(), "initializer '" + name + "'");
    if (!elem)
      return elem.takeError();
    auto type = RankedTensorType::get(
        SmallVector<int64_t>(tensor.dims().begin(), tensor.dims().end()),
        *elem);
    auto var = px::VariableOp::create(
        b, NameLoc::get(b.getStringAttr(name)), type, b.getStringAttr(name),
        px::OnnxInitializerAttr::get(&ctx, name, type),
        state ? UnitAttr() : b.getUnitAttr());
    values[name] = var;
    if (!state && mergedByExport(tensor, uses[name]))
      merged.push_back(name + " (" + std::to_string(uses[name].size()) + " readers)");
  }
  if (!merged.empty()) {
    std::string list;
    for (size_t i = 0; i < merged.size() && i < 4; ++i)
      list += (i ? ", '" : "'") + merged[i].substr(0, merged[i].find(" (")) + "'" +
              merged[i].substr(merged[i].find(" ("));
    if (merged.size() > 4)
      list += " and " + std::to_string(merged.size() - 4) + " more";
    emitWarning(module.getLoc())
        << merged.size() << " trainable initializer(s) of equal values are each read by several "
        << "nodes, so each trains as one parameter: " << list
        << ". torch.onnx.export in eval mode, its default, merges initializers of equal values "
           "(zero biases, unit norm weights); export with "
           "training=torch.onnx.TrainingMode.TRAINING to keep them apart";
  }
  return llvm::Error::success();
}

llvm::Error GraphImporter::importOutputs() {
  SmallVector<Value> results;
  int64_t lossIndex = -1;
  std::string scalars;
  for (int i = 0; i < graph.output_size(); ++i) {
    const std::string &name = graph.output(i).name();
    Value v;
    auto it = values.find(name);
    if (it != values.end())
      v = it->second;
    else if (consts.count(name)) {
      auto m = materialize(name);
      if (!m)
        return m.takeError();
      v = *m;
    } else if (auto d = dynamicSlices.find(name); d != dynamicSlices.end()) {
      return fileError("graph output '" + name + "' is a slice whose bounds "
                       "depend on runtime data (node '" + d->second.origin +
                       "'), which has no static shape");
    } else
      return fileError("graph output '" + name + "' is never computed");
    results.push_back(v);
    auto type = cast<RankedTensorType>(v.getType());
    bool scalar = type.getNumElements() == 1 && isa<FloatType>(type.getElementType());
    if (!options.loss.empty()) {
      if (name == options.loss) {
        if (!scalar) {
          // Shape and element type, as the variable report writes them:
          // an integer scalar is a scalar too, just not a float.
          std::string elem;
          llvm::raw_string_ostream(elem) << type.getElementType();
          return fileError("--loss '" + name + "' is not a scalar float: it is " +
                           px::shapeToString(type.getShape()) + " " + elem);
        }
        lossIndex = i;
      }
    } else if (scalar && options.requireLoss) {
      // Inference without --loss has no loss: any number of scalar outputs
      // are plain results.
      if (lossIndex >= 0)
        return fileError("several scalar outputs ('" +
                         graph.output(lossIndex).name() + "', '" + name +
                         "'): choose one with --loss NAME");
      lossIndex = i;
    }
    scalars += (scalars.empty() ? "" : ", ") + name + " [" +
               px::shapeToString(type.getShape()) + "]";
  }
  if (lossIndex < 0 && !options.requireLoss && options.loss.empty()) {
    // Inference: no loss; every output is a result.
  } else if (lossIndex < 0) {
    if (!options.loss.empty())
      return fileError("--loss '" + options.loss +
                       "' is not an output of the graph (outputs: " + scalars +
                       ")");
    return fileError("no scalar loss: the graph outputs " +
                     (scalars.empty() ? std::string("nothing") : scalars) +
                     ", and a training graph must output one scalar float");
  }
  func::ReturnOp::create(b, func.getLoc(), results);
  func.setFunctionType(
      b.getFunctionType({}, ValueRange(results).getTypes()));
  if (lossIndex >= 0)
    px::setAttr<px::PxDialect::LossAttrHelper>(func, b.getI64IntegerAttr(lossIndex));
  SmallVector<Attribute> names;
  for (const auto &output : graph.output())
    names.push_back(b.getStringAttr(output.name()));
  px::setAttr<px::PxDialect::OutputsAttrHelper>(module, b.getArrayAttr(names));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

llvm::Error
GraphImporter::checkAttributes(const onnx::NodeProto &node,
                               std::initializer_list<const char *> known) {
  for (const auto &a : node.attribute()) {
    bool ok = llvm::any_of(known, [&](const char *k) { return a.name() == k; });
    if (!ok)
      return nodeError(node, "unsupported attribute '" + a.name() + "'");
  }
  return llvm::Error::success();
}

llvm::Error GraphImporter::importNode(const onnx::NodeProto &node) {
  const std::string &op = node.op_type();
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return unsupported(node, "unsupported operator domain '" + node.domain() + "'");
  if (llvm::any_of(node.input(), [&](const std::string &in) {
        return dynamicSlices.count(in) > 0;
      }))
    return convertDynamicUse(node);
  if (op == "Loop")
    return importLoop(node);
  if (op == "If")
    return importIf(node);

  // Compile-time values: Constant, Shape of a static tensor, and any
  // foldable op whose inputs are all compile-time constants.
  if (op == "Constant") {
    if (auto err = checkAttributes(node, {"value", "value_float", "value_floats",
                                          "value_int", "value_ints"}))
      return err;
    TensorProto tensor;
    if (const auto *a = attr(node, "value"))
      tensor = a->t();
    else if (const auto *a = attr(node, "value_float")) {
      tensor.set_data_type(TensorProto::FLOAT);
      tensor.add_float_data(a->f());
    } else if (const auto *a = attr(node, "value_floats")) {
      tensor.set_data_type(TensorProto::FLOAT);
      tensor.add_dims(a->floats_size());
      for (float f : a->floats())
        tensor.add_float_data(f);
    } else if (const auto *a = attr(node, "value_int")) {
      tensor.set_data_type(TensorProto::INT64);
      tensor.add_int64_data(a->i());
    } else if (const auto *a = attr(node, "value_ints")) {
      tensor.set_data_type(TensorProto::INT64);
      tensor.add_dims(a->ints_size());
      for (int64_t i : a->ints())
        tensor.add_int64_data(i);
    } else {
      return nodeError(node, "Constant without a value");
    }
    if (auto t = readTensor(tensor)) {
      consts[node.output(0)] = *t;
      return llvm::Error::success();
    }
    auto a = tensorAttr(tensor, "node '" + nodeName(node) + "'");
    if (!a)
      return a.takeError();
    define(node, 0,
           px::ConstantOp::create(b, NameLoc::get(b.getStringAttr(nodeName(node))),
                                  *a));
    return llvm::Error::success();
  }
  if (op == "Shape") {
    if (auto err = checkAttributes(node, {"start", "end"}))
      return err;
    // The shape of a compile-time constant is known without materialising
    // it (which would leave a px.constant nothing uses).
    SmallVector<int64_t> shape;
    if (node.input_size() < 1 || node.input(0).empty())
      return nodeError(node, "input 0 is missing");
    auto known = consts.find(node.input(0));
    if (known != consts.end()) {
      shape.assign(known->second.shape.begin(), known->second.shape.end());
    } else {
      auto x = value(node, 0);
      if (!x)
        return x.takeError();
      llvm::append_range(shape, cast<RankedTensorType>(x->getType()).getShape());
    }
    int64_t rank = shape.size();
    int64_t start = attrInt(node, "start", 0), end = attrInt(node, "end", rank);
    start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
    end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
    ConstTensor t{TensorProto::INT64, {std::max<int64_t>(0, end - start)}, {}};
    for (int64_t d = start; d < end; ++d)
      t.values.push_back(shape[d]);
    consts[node.output(0)] = t;
    return llvm::Error::success();
  }
  auto folded = foldFromShapes(node);
  if (!folded)
    return folded.takeError();
  if (*folded)
    return llvm::Error::success();
  if (isFoldable(op)) {
    bool allConst = true;
    std::vector<std::optional<ConstTensor>> ins;
    for (const std::string &in : node.input()) {
      if (in.empty()) {
        ins.push_back(std::nullopt);
        continue;
      }
      auto it = consts.find(in);
      if (it == consts.end()) {
        allConst = false;
        break;
      }
      ins.push_back(it->second);
    }
    if (allConst && node.input_size() > 0) {
      auto outs = evaluateNode(node, ins);
      if (!outs)
        return nodeError(node, llvm::toString(outs.takeError()));
      for (size_t i = 0; i < outs->size(); ++i)
        consts[node.output(i)] = (*outs)[i];
      return llvm::Error::success();
    }
  }
  return convert(node);
}

llvm::Expected<Value> GraphImporter::reshape(const onnx::NodeProto &node,
                                             Value input,
                                             ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(input.getType());
  if (type.getShape() == shape)
    return input;
  auto resultType = RankedTensorType::get(shape, type.getElementType());
  if (resultType.getNumElements() != type.getNumElements())
    return nodeError(node, "cannot reshape " +
                               px::shapeToString(type.getShape()) + " into " +
                               px::shapeToString(shape));
  auto op = make<px::ReshapeOp>(node, input, {}, resultType);
  if (!op)
    return op.takeError();
  return (*op)->getResult(0);
}

llvm::Error GraphImporter::convertWindow(const onnx::NodeProto &node, Value x,
                                         ArrayRef<int64_t> kernel,
                                         SmallVectorImpl<int64_t> &strides,
                                         SmallVectorImpl<int64_t> &pads,
                                         SmallVectorImpl<int64_t> &dilations) {
  auto shape = cast<RankedTensorType>(x.getType()).getShape();
  int64_t spatial = shape.size() - 2;
  if (spatial < 1)
    return nodeError(node, "input must be [N, C, spatial...]");
  if ((int64_t)kernel.size() != spatial)
    return nodeError(node, "kernel has " + llvm::Twine(kernel.size()) +
                               " dimensions for " + llvm::Twine(spatial) +
                               " spatial dimensions");
  auto get = [&](const char *name, int64_t n, int64_t def) {
    auto v = attrInts(node, name);
    if (v.empty())
      v.assign(n, def);
    return SmallVector<int64_t>(v.begin(), v.end());
  };
  strides = get("strides", spatial, 1);
  dilations = get("dilations", spatial, 1);
  pads = get("pads", 2 * spatial, 0);
  if ((int64_t)strides.size() != spatial ||
      (int64_t)dilations.size() != spatial || (int64_t)pads.size() != 2 * spatial)
    return nodeError(node, "strides, dilations or pads have the wrong length");
  // The px verifier's bounds, before auto_pad's arithmetic below uses them.
  for (ArrayRef<int64_t> list : {kernel, ArrayRef<int64_t>(strides),
                                 ArrayRef<int64_t>(dilations), ArrayRef<int64_t>(pads)})
    for (int64_t v : list)
      if (v < (list.data() == pads.data() ? 0 : 1) || v > INT32_MAX)
        return nodeError(node, "kernel sizes, strides and dilations must be in "
                               "[1, 2^31), pads in [0, 2^31)");
  std::string autoPad = attrString(node, "auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t in = shape[2 + i], out = (in + strides[i] - 1) / strides[i];
      int64_t total = std::max<int64_t>(
          0, (out - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1 - in);
      int64_t small = total / 2, large = total - small;
      pads[i] = autoPad == "SAME_UPPER" ? small : large;
      pads[spatial + i] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else if (autoPad != "NOTSET") {
    return nodeError(node, "unsupported auto_pad value '" + autoPad + "'");
  }
  return llvm::Error::success();
}

llvm::Error GraphImporter::unsupported(const onnx::NodeProto &node,
                                       const llvm::Twine &what) {
  std::string op = node.domain().empty() || node.domain() == "ai.onnx"
                       ? node.op_type()
                       : node.domain() + "." + node.op_type();
  lastUnsupported = {op, nodeName(node)};
  return nodeError(node, what);
}

//===----------------------------------------------------------------------===//
// Composer
//===----------------------------------------------------------------------===//

Value Composer::in(int i) {
  Value v = optionalIn(i);
  if (!v && !error)
    fail("missing input " + llvm::Twine(i));
  return v;
}

Value Composer::optionalIn(int i) {
  if (error)
    return Value();
  auto v = gi.value(node, i);
  if (!v) {
    error = v.takeError();
    return Value();
  }
  return *v;
}

Value Composer::scalar(double v, Type elem) { return constant({}, elem, {v}); }

Value Composer::constant(ArrayRef<int64_t> shape, Type elem,
                         ArrayRef<double> values) {
  if (error)
    return Value();
  return gi.constantTensor(RankedTensorType::get(shape, elem), values,
                           NameLoc::get(gi.b.getStringAttr(gi.nodeName(node))));
}

Value Composer::cast(Value x, Type elem) {
  if (!x || typeOf(x).getElementType() == elem)
    return x;
  return make<px::CastOp>({x}, {},
                          RankedTensorType::get(typeOf(x).getShape(), elem));
}

Value Composer::reshape(Value x, ArrayRef<int64_t> shape) {
  if (!x || typeOf(x).getShape() == shape)
    return x;
  return make<px::ReshapeOp>(
      {x}, {}, RankedTensorType::get(shape, typeOf(x).getElementType()));
}

Value Composer::expand(Value x, ArrayRef<int64_t> shape) {
  if (!x || typeOf(x).getShape() == shape)
    return x;
  return make<px::ExpandOp>(
      {x}, {}, RankedTensorType::get(shape, typeOf(x).getElementType()));
}

Value Composer::transpose(Value x, ArrayRef<int64_t> perm) {
  return make<px::TransposeOp>({x},
                               {gi.named("perm", gi.b.getDenseI64ArrayAttr(perm))});
}

Value Composer::concat(ValueRange xs, int64_t axis) {
  if (xs.size() == 1)
    return xs.front();
  return make<px::ConcatOp>(xs, {gi.named("axis", gi.b.getI64IntegerAttr(axis))});
}

Value Composer::slice(Value x, ArrayRef<int64_t> starts, ArrayRef<int64_t> steps,
                      ArrayRef<int64_t> shape) {
  if (!x)
    return x;
  return make<px::SliceOp>(
      {x},
      {gi.named("starts", gi.b.getDenseI64ArrayAttr(starts)),
       gi.named("steps", gi.b.getDenseI64ArrayAttr(steps))},
      RankedTensorType::get(shape, typeOf(x).getElementType()));
}

Value Composer::gather(Value data, Value indices, int64_t axis) {
  return make<px::GatherOp>({data, indices},
                            {gi.named("axis", gi.b.getI64IntegerAttr(axis))});
}

//===----------------------------------------------------------------------===//
// run
//===----------------------------------------------------------------------===//

llvm::Expected<OwningOpRef<ModuleOp>> GraphImporter::run() {
  // Errors become the import's llvm::Error; warnings go on to the caller's
  // handler.
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) -> LogicalResult {
    if (diag.getSeverity() == DiagnosticSeverity::Warning)
      return failure();
    if (diag.getSeverity() == DiagnosticSeverity::Error) {
      lastDiagnostic = diag.str();
      for (const Diagnostic &note : diag.getNotes())
        lastDiagnostic += "; " + note.str();
    }
    return success();
  });

  for (const auto &init : graph.initializer())
    initializers[init.name()] = &init;
  // Uses in subgraphs (Loop bodies, If branches) count too: nn.EmbeddingBag
  // reads its table only inside a Loop.
  std::function<void(const onnx::GraphProto &)> collectUses =
      [&](const onnx::GraphProto &g) {
        for (const auto &node : g.node()) {
          for (int i = 0; i < node.input_size(); ++i)
            if (!node.input(i).empty())
              uses[node.input(i)].push_back({&node, i});
          for (const auto &a : node.attribute()) {
            if (a.has_g())
              collectUses(a.g());
            for (const auto &sub : a.graphs())
              collectUses(sub);
          }
        }
        for (const auto &out : g.output())
          uses[out.name()];
      };
  collectUses(graph);
  for (const auto &vi : graph.value_info())
    inferredTypes[vi.name()] = &vi;
  for (const auto &vi : graph.output())
    inferredTypes[vi.name()] = &vi;

  Location fileLoc = FileLineColLoc::get(&ctx, path, 0, 0);
  OwningOpRef<ModuleOp> owned = ModuleOp::create(fileLoc);
  module = *owned;
  px::setAttr<px::PxDialect::SourceAttrHelper>(module, b.getStringAttr(path));
  px::setAttr<px::PxDialect::OpsetAttrHelper>(module, b.getI64IntegerAttr(opset));
  if (!graph.name().empty())
    px::setAttr<px::PxDialect::GraphAttrHelper>(module, b.getStringAttr(graph.name()));
  b.setInsertionPointToEnd(module.getBody());
  func = func::FuncOp::create(b, fileLoc, "main", b.getFunctionType({}, {}));
  b.setInsertionPointToStart(func.addEntryBlock());

  if (auto err = importInputs())
    return std::move(err);
  if (auto err = importInitializers())
    return std::move(err);
  // An unsupported operator does not end the import: its outputs become
  // placeholders of the types ONNX inferred, so that the message can list
  // every unsupported node of the model at once.
  std::vector<std::pair<std::string, std::vector<std::string>>> missing;
  std::set<std::string> poisoned;
  llvm::Error firstUnsupported = llvm::Error::success();
  for (const auto &node : graph.node()) {
    bool skip = llvm::any_of(node.input(), [&](const std::string &in) {
      return poisoned.count(in) > 0;
    });
    llvm::Error err = skip ? llvm::Error::success() : importNode(node);
    if (err && lastUnsupported) {
      auto [op, name] = *lastUnsupported;
      lastUnsupported.reset();
      auto it = llvm::find_if(missing, [&](auto &m) { return m.first == op; });
      if (it == missing.end())
        missing.push_back({op, {name}});
      else
        it->second.push_back(name);
      if (firstUnsupported)
        llvm::consumeError(std::move(err));
      else
        firstUnsupported = std::move(err);
      skip = true;
    } else if (err) {
      // After an unsupported node, a later error may come from its
      // placeholder: the unsupported operators are the news.
      if (!missing.empty()) {
        llvm::consumeError(std::move(err));
        break;
      }
      llvm::consumeError(std::move(firstUnsupported));
      return std::move(err);
    }
    if (skip)
      for (const std::string &out : node.output()) {
        auto type = inferredTypes.find(out);
        auto t = type == inferredTypes.end()
                     ? llvm::Expected<RankedTensorType>(fileError(""))
                     : valueInfoType(*type->second);
        if (out.empty())
          continue;
        if (!t) {
          llvm::consumeError(t.takeError());
          poisoned.insert(out);
          continue;
        }
        values[out] = px::ConstantOp::create(
            b, NameLoc::get(b.getStringAttr(out)),
            cast<ElementsAttr>(DenseElementsAttr::get(
                *t, isa<FloatType>(t->getElementType())
                        ? Attribute(b.getFloatAttr(t->getElementType(), 0.0))
                        : Attribute(b.getIntegerAttr(t->getElementType(), 0)))));
      }
    ++nodeIndex;
  }
  if (missing.size() == 1 && missing.front().second.size() == 1)
    return std::move(firstUnsupported);
  llvm::consumeError(std::move(firstUnsupported));
  if (!missing.empty()) {
    std::string list;
    for (const auto &[op, names] : missing) {
      list += (list.empty() ? "'" : ", '") + op + "' (node" +
              (names.size() > 1 ? "s " : " ");
      for (size_t i = 0; i < names.size() && i < 5; ++i)
        list += (i ? ", " : "") + names[i];
      if (names.size() > 5)
        list += " and " + std::to_string(names.size() - 5) + " more";
      list += ")";
    }
    return fileError("unsupported operators: " + list);
  }
  if (auto err = importOutputs())
    return std::move(err);

  lastDiagnostic.clear();
  if (failed(verify(module)))
    return fileError("the imported IR does not verify: " + lastDiagnostic);
  return std::move(owned);
}


llvm::Expected<OwningOpRef<ModuleOp>>
parallax::importOnnxModel(MLIRContext &context, const std::string &path,
                          const ImportOptions &options) {
  context.loadDialect<px::PxDialect, func::FuncDialect>();
  onnx::ModelProto model;
  auto opset = loadOnnxModel(path, options, model);
  if (!opset)
    return opset.takeError();
  GraphImporter importer(context, path, options, model, *opset);
  return importer.run();
}

llvm::Expected<OwningOpRef<ModuleOp>>
parallax::importOnnxBuffer(MLIRContext &context, llvm::StringRef bytes,
                           const std::string &name,
                           const ImportOptions &options) {
  context.loadDialect<px::PxDialect, func::FuncDialect>();
  onnx::ModelProto model;
  auto opset = loadOnnxModelFromBuffer(bytes, name, options, model);
  if (!opset)
    return opset.takeError();
  GraphImporter importer(context, name, options, model, *opset);
  return importer.run();
}
