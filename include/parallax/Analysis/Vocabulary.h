//===- Vocabulary.h - what px-pad-vocabulary may pad -----------*- C++ -*-===//
//
// The vocabularies of a step: tables read only by row gathers with at
// least as many rows as their width, and the classes of a softmax cross
// entropy over an output layer that is a vocabulary (at least as many
// classes as input features, or tied to a table). px-pad-vocabulary pads those the model ranks do not divide; the
// strategy search offers their split on any grid, as the padding makes it.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_ANALYSIS_VOCABULARY_H
#define PARALLAX_ANALYSIS_VOCABULARY_H

#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/MapVector.h"

#include <vector>

namespace parallax {

struct Vocabulary {
  /// Its size: the table's rows, or the loss's classes.
  int64_t size = 0;
  /// The loss over the classes; null for a table read only by gathers.
  px::SoftmaxCrossEntropyLossOp loss;
  /// The output layer's ops from its product (or its weight's transpose)
  /// to the loss's scores, each with the classes as its result's last
  /// dimension.
  llvm::SmallVector<mlir::Operation *> chain;
  /// Each variable that holds it and the dimension that does: the table,
  /// or the layer's weight (last) and biases.
  llvm::MapVector<px::VariableOp, int64_t> variables;
  /// The output layer's weight (null for a table).
  px::VariableOp weight;
};

/// The vocabularies of `func`, whatever the ranks: each variable in one at
/// most, every use of its variables a row gather or the layer's chain,
/// their initial values ONNX initializers.
std::vector<Vocabulary> vocabulariesOf(mlir::func::FuncOp func);

} // namespace parallax

#endif // PARALLAX_ANALYSIS_VOCABULARY_H
