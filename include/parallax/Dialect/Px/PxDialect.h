//===- PxDialect.h - the px dialect ---------------------------*- C++ -*-===//
//
// Include this header to use the px dialect: it brings the dialect, its
// attributes, types and operations.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_DIALECT_PX_PXDIALECT_H
#define PARALLAX_DIALECT_PX_PXDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "parallax/Dialect/Px/PxDialect.h.inc"

namespace parallax::px::OpTrait {
/// Marks elementwise ops with broadcasting (Px_Elementwise in PxBase.td).
template <typename ConcreteType>
class Elementwise : public mlir::OpTrait::TraitBase<ConcreteType, Elementwise> {};
} // namespace parallax::px::OpTrait

#define GET_ATTRDEF_CLASSES
#include "parallax/Dialect/Px/PxAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "parallax/Dialect/Px/PxTypes.h.inc"

#define GET_OP_CLASSES
#include "parallax/Dialect/Px/PxOps.h.inc"

namespace parallax {

/// The function a training step is built in: the one with `px.loss` (or
/// `@main` in an inference module); null if there is none.
mlir::func::FuncOp getEntryFunction(mlir::ModuleOp module);

/// A short name for `loc` in messages: the ONNX node name when there is one,
/// else file:line:col; empty if there is neither.
std::string locationName(mlir::Location loc);

} // namespace parallax

#endif // PARALLAX_DIALECT_PX_PXDIALECT_H
