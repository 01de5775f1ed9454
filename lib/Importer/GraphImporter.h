//===- GraphImporter.h - ONNX graph -> px, internal interface --*- C++ -*-===//
//
// Shared by OnnxImporter.cpp (graph leaves, compile-time values, driver) and
// OnnxNodeConverters.cpp (one branch per ONNX operator family).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_LIB_IMPORTER_GRAPHIMPORTER_H
#define PARALLAX_LIB_IMPORTER_GRAPHIMPORTER_H

#include "ConstantEvaluator.h"
#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Importer/OnnxImporter.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <set>

namespace parallax::detail {

/// Whether OpTy has an adaptor-based shape rule (InferTypeOpAdaptor).
template <typename OpTy, typename = void>
struct HasShapeRule : std::false_type {};
template <typename OpTy>
struct HasShapeRule<
    OpTy, std::void_t<decltype(OpTy::inferReturnTypes(
              std::declval<mlir::MLIRContext *>(),
              std::declval<std::optional<mlir::Location>>(),
              std::declval<typename OpTy::Adaptor>(),
              std::declval<llvm::SmallVectorImpl<mlir::Type> &>()))>>
    : std::true_type {};

using mlir::ArrayRef;
using mlir::Attribute;
using mlir::Location;
using mlir::MLIRContext;
using mlir::ModuleOp;
using mlir::NamedAttribute;
using mlir::Operation;
using mlir::OwningOpRef;
using mlir::StringRef;
using mlir::Type;
using mlir::TypeRange;
using mlir::Value;
using mlir::ValueRange;
using llvm::SmallVector;
using llvm::SmallVectorImpl;

class Composer;

/// ": <reason>" for an operator that cannot be supported (data-dependent
/// output shapes, sequences, strings, quantization), else "".
std::string whyUnsupported(llvm::StringRef op);

/// A Slice whose bounds are runtime values (nn.EmbeddingBag's per-bag slice
/// of the ids, inside an unrolled Loop): not a tensor of static shape, so it
/// is kept pending until a Gather and a reduction along the sliced axis
/// turn it into a px.segment_reduce.
struct DynamicSlice {
  Value base;         // the tensor being sliced (or gathered from it)
  int64_t axis;       // the sliced axis of `base`
  Value start, end;   // i64 [1] tensors
  std::string origin; // the Slice node's name, for messages
};

class GraphImporter {
  friend class Composer;

public:
  GraphImporter(MLIRContext &ctx, const std::string &path,
                const ImportOptions &options, const onnx::ModelProto &model,
                int64_t opset)
      : ctx(ctx), b(&ctx), path(path), options(options), model(model),
        graph(model.graph()), opset(opset) {}

  llvm::Expected<OwningOpRef<ModuleOp>> run();

private:
  //--- Errors ---------------------------------------------------------------
  llvm::Error fileError(const llvm::Twine &what) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + what);
  }
  std::string nodeName(const onnx::NodeProto &node) const {
    return node.name().empty() ? node.op_type() + "#" + std::to_string(nodeIndex)
                               : node.name();
  }
  llvm::Error nodeError(const onnx::NodeProto &node, const llvm::Twine &what) {
    return fileError("node '" + nodeName(node) + "' (" + node.op_type() +
                     ", opset " + llvm::Twine(opset) + "): " + what);
  }
  /// The message of the diagnostic the last failed op construction emitted.
  llvm::Error diagError(const onnx::NodeProto &node) {
    return nodeError(node, lastDiagnostic.empty() ? "invalid operands"
                                                  : lastDiagnostic);
  }

  //--- Types and constants --------------------------------------------------
  /// Why a tensor of `shape` cannot be imported ("" when it can): a
  /// negative dimension, or more than rt::kMaxTensorElements elements
  /// (every size computed later must fit in an int64_t).
  std::string shapeProblem(ArrayRef<int64_t> shape) const;
  llvm::Expected<Type> elementType(int32_t dtype, const llvm::Twine &what);
  llvm::Expected<mlir::RankedTensorType> valueInfoType(const onnx::ValueInfoProto &vi);
  llvm::Expected<mlir::ElementsAttr> tensorAttr(const onnx::TensorProto &tensor,
                                          const llvm::Twine &what);
  llvm::Expected<Value> materialize(const std::string &name);
  llvm::Expected<Value> value(const onnx::NodeProto &node, int index);
  llvm::Expected<std::optional<ConstTensor>>
  constInput(const onnx::NodeProto &node, int index, const char *role,
             bool required);
  /// A ReduceSum/ReduceMean/ReduceMax node's attributes checked and its
  /// axes read: an input for ReduceSum (opset 13), the attribute for the
  /// others (until opset 18). Empty when none are given.
  llvm::Expected<std::vector<int64_t>> reductionAxes(const onnx::NodeProto &node);

  //--- Graph leaves ---------------------------------------------------------
  llvm::Error importInputs();
  llvm::Error importInitializers();
  llvm::Error importOutputs();

  //--- Nodes ----------------------------------------------------------------
  llvm::Error importNode(const onnx::NodeProto &node);
  llvm::Error checkAttributes(const onnx::NodeProto &node,
                              std::initializer_list<const char *> known);
  llvm::Error convert(const onnx::NodeProto &node);
  /// Operator families in their own files; each returns whether it knew
  /// the node's operator.
  llvm::Expected<bool> convertMath(const onnx::NodeProto &node);
  llvm::Expected<bool> convertTensor(const onnx::NodeProto &node);
  llvm::Expected<Value> convertResize(const onnx::NodeProto &node, Value x);
  llvm::Expected<Value> convertDft(const onnx::NodeProto &node, Value x,
                                   int64_t axis, bool inverse, bool onesided,
                                   std::optional<int64_t> length);
  llvm::Expected<Value> convertGridSample(const onnx::NodeProto &node, Value x,
                                          Value grid);
  llvm::Expected<Value> convertEinsum(const onnx::NodeProto &node,
                                      std::string equation,
                                      ArrayRef<Value> operands);
  llvm::Expected<bool> foldWindow(const onnx::NodeProto &node);
  /// Compile-time values beyond the evaluator: Size, EyeLike (from shapes),
  /// the window functions (from their size).
  llvm::Expected<bool> foldFromShapes(const onnx::NodeProto &node);

  //--- Control flow (OnnxControlFlow.cpp) -----------------------------------
  /// Loop with a compile-time trip count and condition: unrolled.
  llvm::Error importLoop(const onnx::NodeProto &node);
  /// If with a compile-time condition: the taken branch, inlined.
  llvm::Error importIf(const onnx::NodeProto &node);
  /// Imports `g`'s nodes with its inputs bound to `inputs` (names already
  /// defined); `outputs` receives the names its outputs are defined under.
  llvm::Error inlineGraph(const onnx::GraphProto &g,
                          ArrayRef<std::string> inputs,
                          SmallVectorImpl<std::string> &outputs);
  /// The name `name` has in the current (inlined) scope.
  std::string resolve(const std::string &name) const;
  /// A name no value has yet, derived from `base`.
  std::string freshName(const std::string &base);
  /// Drops an inlined subgraph's name that nothing will read any more.
  void forget(const std::string &name);
  /// Defines `to` as another name for the value or constant `from`.
  void alias(const std::string &to, const std::string &from);
  /// A Slice whose starts/ends are runtime values: kept pending (true) when
  /// it has the form nn.EmbeddingBag needs.
  llvm::Expected<bool> tryDynamicSlice(const onnx::NodeProto &node);
  /// A node that consumes a pending dynamic slice.
  llvm::Error convertDynamicUse(const onnx::NodeProto &node);
  /// One px.segment_reduce per scan output when every iteration reduced a
  /// segment of the same rows.
  llvm::Expected<Value> stackSegments(const onnx::NodeProto &node,
                                      ArrayRef<Value> pieces);
  /// Erases `op` if nothing uses it and no name refers to it, then its
  /// producers likewise (the leftovers of unrolled iterations).
  void eraseUnused(Operation *op);

  //--- Unsupported operators ------------------------------------------------
  /// The error for an operator the importer does not know; run() collects
  /// these so that one message lists every unsupported node.
  llvm::Error unsupported(const onnx::NodeProto &node, const llvm::Twine &what);
  void define(const onnx::NodeProto &node, int output, Value v) {
    if (output < node.output_size() && !node.output(output).empty())
      values[node.output(output)] = v;
  }

  /// Creates an op of type OpTy. Ops with InferTypeOpInterface get their
  /// result types from their own shape rule (a failure becomes an error for
  /// `node`); the others take `resultTypes`.
  template <typename OpTy>
  llvm::Expected<Operation *> make(const onnx::NodeProto &node,
                                   ValueRange operands,
                                   ArrayRef<NamedAttribute> attrs,
                                   TypeRange resultTypes = {}) {
    Location loc = mlir::NameLoc::get(b.getStringAttr(nodeName(node)));
    SmallVector<Type> types(resultTypes);
    if constexpr (HasShapeRule<OpTy>::value) {
      auto probe = OpTy::create(b, loc, TypeRange{}, operands, attrs);
      lastDiagnostic.clear();
      mlir::LogicalResult inferred = OpTy::inferReturnTypes(
          &ctx, loc, typename OpTy::Adaptor(probe), types);
      probe->erase();
      if (failed(inferred))
        return diagError(node);
    }
    for (Type t : types)
      if (auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(t)) {
        std::string problem = shapeProblem(tensor.getShape());
        if (!problem.empty())
          return nodeError(node, "its result " + problem);
      }
    return OpTy::create(b, loc, types, operands, attrs).getOperation();
  }

  //--- Attribute access -----------------------------------------------------
  const onnx::AttributeProto *attr(const onnx::NodeProto &node,
                                   const char *name) const {
    for (const auto &a : node.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t attrInt(const onnx::NodeProto &n, const char *name, int64_t d) const {
    const auto *a = attr(n, name);
    return a ? a->i() : d;
  }
  float attrFloat(const onnx::NodeProto &n, const char *name, float d) const {
    const auto *a = attr(n, name);
    return a ? a->f() : d;
  }
  std::string attrString(const onnx::NodeProto &n, const char *name,
                         const std::string &d) const {
    const auto *a = attr(n, name);
    return a ? a->s() : d;
  }
  std::vector<int64_t> attrInts(const onnx::NodeProto &n, const char *name,
                                std::vector<int64_t> d = {}) const {
    const auto *a = attr(n, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : d;
  }
  NamedAttribute named(StringRef name, Attribute a) {
    return b.getNamedAttr(name, a);
  }

  //--- Converters shared by several ONNX ops --------------------------------
  llvm::Error convertWindow(const onnx::NodeProto &node, Value x,
                            ArrayRef<int64_t> kernel,
                            SmallVectorImpl<int64_t> &strides,
                            SmallVectorImpl<int64_t> &pads,
                            SmallVectorImpl<int64_t> &dilations);
  llvm::Expected<Value> reshape(const onnx::NodeProto &node, Value input,
                                ArrayRef<int64_t> shape);
  /// LSTM, GRU and RNN (RecurrentConverters.cpp).
  llvm::Error convertRecurrent(const onnx::NodeProto &node);
  /// A px.constant of `type` holding `values` (rounded to the element type).
  Value constantTensor(mlir::RankedTensorType type, ArrayRef<double> values,
                       Location loc);

  MLIRContext &ctx;
  mlir::OpBuilder b;
  const std::string &path;
  const ImportOptions &options;
  const onnx::ModelProto &model;
  const onnx::GraphProto &graph;
  int64_t opset;
  int nodeIndex = 0;
  std::string lastDiagnostic;

  llvm::StringMap<Value> values;
  std::map<std::string, ConstTensor> consts;
  std::map<std::string, const onnx::TensorProto *> initializers;
  /// How each value name is consumed: (node, input index).
  std::map<std::string, std::vector<std::pair<const onnx::NodeProto *, int>>>
      uses;
  ModuleOp module;
  mlir::func::FuncOp func;

  /// Inlined subgraphs (Loop bodies, If branches), innermost last: each
  /// maps the subgraph's names to the unique names they are imported as.
  std::vector<std::map<std::string, std::string>> scopes;
  int64_t freshCounter = 0;
  /// Names freshName made that are still defined.
  std::set<std::string> inlinedNames;
  /// Pending dynamic slices, by value name.
  std::map<std::string, DynamicSlice> dynamicSlices;
  /// Gathers of a dynamic slice's whole base, made once per (data, base).
  std::map<std::tuple<const void *, const void *, int64_t>, Value> hoistedGathers;
  /// Set by unsupported(): the operator and node of the error just made.
  std::optional<std::pair<std::string, std::string>> lastUnsupported;
  /// Value types ONNX shape inference gave (for placeholders after an
  /// unsupported node).
  std::map<std::string, const onnx::ValueInfoProto *> inferredTypes;
};

/// Builds the px ops one ONNX node becomes when it is a composition of px
/// ops (an activation written with exp and where, a reduction with a
/// transform around it...). Errors are sticky: after the first failure
/// every call returns a null Value, and takeError() reports it, so a
/// converter reads as the formula it implements.
class Composer {
public:
  Composer(GraphImporter &gi, const onnx::NodeProto &node) : gi(gi), node(node) {}

  bool failed() const { return (bool)error; }
  llvm::Error takeError() {
    return error ? std::move(*error) : llvm::Error::success();
  }
  void fail(const llvm::Twine &what) {
    if (!error)
      error = gi.nodeError(node, what);
  }

  /// Operand `i` of the node (null, and an error, when absent).
  Value in(int i);
  /// Operand `i`, or null when the node does not give it.
  Value optionalIn(int i);

  template <typename OpTy>
  Value make(ValueRange operands, ArrayRef<NamedAttribute> attrs = {},
             TypeRange types = {}) {
    Operation *op = makeOp<OpTy>(operands, attrs, types);
    return op ? op->getResult(0) : Value();
  }
  template <typename OpTy>
  Operation *makeOp(ValueRange operands, ArrayRef<NamedAttribute> attrs = {},
                    TypeRange types = {}) {
    if (error || llvm::any_of(operands, [](Value v) { return !v; }))
      return nullptr;
    auto made = gi.make<OpTy>(node, operands, attrs, types);
    if (!made) {
      error = made.takeError();
      return nullptr;
    }
    return *made;
  }
  /// Same-type unary ops (exp, neg, ...).
  template <typename OpTy> Value unary(Value x) {
    return x ? make<OpTy>({x}, {}, x.getType()) : Value();
  }

  Value scalar(double v, Type elem);
  Value constant(ArrayRef<int64_t> shape, Type elem, ArrayRef<double> values);
  Value add(Value a, Value b) { return make<px::AddOp>({a, b}); }
  Value sub(Value a, Value b) { return make<px::SubOp>({a, b}); }
  Value mul(Value a, Value b) { return make<px::MulOp>({a, b}); }
  Value div(Value a, Value b) { return make<px::DivOp>({a, b}); }
  Value max(Value a, Value b) { return make<px::MaxOp>({a, b}); }
  Value min(Value a, Value b) { return make<px::MinOp>({a, b}); }
  Value equal(Value a, Value b) { return make<px::EqualOp>({a, b}); }
  Value less(Value a, Value b) { return make<px::LessOp>({a, b}); }
  Value greater(Value a, Value b) { return make<px::GreaterOp>({a, b}); }
  Value where(Value c, Value x, Value y) { return make<px::WhereOp>({c, x, y}); }
  Value cast(Value x, Type elem);
  Value reshape(Value x, ArrayRef<int64_t> shape);
  Value expand(Value x, ArrayRef<int64_t> shape);
  Value transpose(Value x, ArrayRef<int64_t> perm);
  Value concat(ValueRange xs, int64_t axis);
  Value slice(Value x, ArrayRef<int64_t> starts, ArrayRef<int64_t> steps,
              ArrayRef<int64_t> shape);
  Value gather(Value data, Value indices, int64_t axis);
  /// reduce_sum/mean/max/min/prod over `axes` (all axes when empty).
  template <typename OpTy>
  Value reduce(Value x, ArrayRef<int64_t> axes, bool keepdims) {
    if (!x)
      return Value();
    return make<OpTy>({x}, {gi.named("axes", gi.b.getDenseI64ArrayAttr(axes)),
                            gi.named("keepdims", gi.b.getBoolAttr(keepdims))});
  }
  /// Defines the node's output `i`.
  void define(int i, Value v) {
    if (v)
      gi.define(node, i, v);
  }
  llvm::Expected<bool> done(Value result) {
    define(0, result);
    if (error)
      return takeError();
    return true;
  }

  static mlir::RankedTensorType typeOf(Value v) {
    return mlir::cast<mlir::RankedTensorType>(v.getType());
  }

  GraphImporter &gi;
  const onnx::NodeProto &node;

private:
  std::optional<llvm::Error> error;
};

} // namespace parallax::detail

#endif
