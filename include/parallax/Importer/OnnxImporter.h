//===- OnnxImporter.h - ONNX training graph -> px dialect ------*- C++ -*-===//
//
// Imports an ONNX model whose output is a scalar loss into a px module:
//
//   module attributes {px.source = "model.onnx", px.opset = 17 : i64} {
//     func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} { ... }
//   }
//
// Float initializers become trainable px.variable ops, graph inputs px.input
// ops; the function returns the graph outputs, `px.loss` is the index of
// the loss among them; the module's `px.outputs` lists their ONNX names. Inputs whose
// dimension 0 was the dynamic batch dimension are `batched`.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_IMPORTER_ONNXIMPORTER_H
#define PARALLAX_IMPORTER_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace parallax {

struct ImportOptions {
  /// Binds dimension 0 of every input whose first dimension is dynamic.
  /// Without it, the model's `parallax.batch_size` metadata is used, if any.
  std::optional<int64_t> batchSize;
  /// Full static shapes for named inputs (override the model's dims).
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Float initializers to keep constant instead of training.
  std::set<std::string> freeze;
  /// The output to train on; empty means "the single scalar output".
  std::string loss;
  /// False for inference: a graph without a scalar output imports, and the
  /// function gets no `px.loss`.
  bool requireLoss = true;
  /// Data parallelism over this many ranks: the batch size (given or from
  /// the metadata) is the global batch, and each rank's inputs get
  /// batch / ranks samples.
  int64_t ranks = 1;
  /// BatchNormalization's running variance: updated with the unbiased batch
  /// variance (PyTorch) or the biased one (the ONNX specification). Unset:
  /// unbiased when the model's producer is PyTorch.
  std::optional<bool> unbiasedBatchnormVariance;
};

/// Imports the ONNX model at `path` (binary protobuf, or the ONNX text syntax
/// when the name ends in `.onnxtxt`). Every failure is an llvm::Error whose
/// message names the file and, where one is involved, the node, op type and
/// opset.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxModel(mlir::MLIRContext &context, const std::string &path,
                const ImportOptions &options);

/// Imports a model held in memory (the fuzzer's entry point, and any caller
/// that has the bytes already); `name` stands for the file in errors and in
/// `px.source`, and decides the syntax as the path does above. A model whose
/// initializers live in external files is refused.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxBuffer(mlir::MLIRContext &context, llvm::StringRef bytes,
                 const std::string &name, const ImportOptions &options);

/// The lowest and highest default-domain opsets the importer accepts.
constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 17;

} // namespace parallax

#endif // PARALLAX_IMPORTER_ONNXIMPORTER_H
