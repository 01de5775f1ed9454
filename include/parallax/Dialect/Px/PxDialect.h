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

} // namespace parallax

#endif // PARALLAX_DIALECT_PX_PXDIALECT_H
