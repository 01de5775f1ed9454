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

class GraphImporter {
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
  llvm::Expected<Type> elementType(int32_t dtype, const llvm::Twine &what);
  llvm::Expected<mlir::RankedTensorType> valueInfoType(const onnx::ValueInfoProto &vi);
  llvm::Expected<mlir::ElementsAttr> tensorAttr(const onnx::TensorProto &tensor,
                                          const llvm::Twine &what);
  llvm::Expected<Value> materialize(const std::string &name);
  llvm::Expected<Value> value(const onnx::NodeProto &node, int index);
  llvm::Expected<std::optional<ConstTensor>>
  constInput(const onnx::NodeProto &node, int index, const char *role,
             bool required);

  //--- Graph leaves ---------------------------------------------------------
  llvm::Error importInputs();
  llvm::Error importInitializers();
  llvm::Error importOutputs();

  //--- Nodes ----------------------------------------------------------------
  llvm::Error importNode(const onnx::NodeProto &node);
  llvm::Error checkAttributes(const onnx::NodeProto &node,
                              std::initializer_list<const char *> known);
  llvm::Error convert(const onnx::NodeProto &node);
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
  /// LSTM and GRU (RecurrentConverters.cpp).
  llvm::Error convertRecurrent(const onnx::NodeProto &node);

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
};

} // namespace parallax::detail

#endif
