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
/// Marks ops that evaluate a transcendental function or draw a random number
/// per element of their tensor (Px_CostlyPerElement in PxBase.td).
template <typename ConcreteType>
class CostlyPerElement : public mlir::OpTrait::TraitBase<ConcreteType, CostlyPerElement> {};
} // namespace parallax::px::OpTrait

#define GET_ATTRDEF_CLASSES
#include "parallax/Dialect/Px/PxAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "parallax/Dialect/Px/PxTypes.h.inc"

#define GET_OP_CLASSES
#include "parallax/Dialect/Px/PxOps.h.inc"

namespace parallax::px {

// The px.* attributes the importer, the passes and the plan emitter hand to
// each other are declared in PxBase.td (discardableAttrs); ODS generates a
// PxDialect::<Name>AttrHelper for each, which knows the name and the type:
//
//   if (auto n = px::getAttr<px::PxDialect::WorldSizeAttrHelper>(module))
//     ...n.getInt()...  // an IntegerAttr, null when absent
//   px::setAttr<px::PxDialect::WorldSizeAttrHelper>(module, b.getI64IntegerAttr(4));
//
// The helper is built from the op's context, so these work whether or not
// the px dialect is loaded.

/// The attribute `AttrHelper` manages on `op`; null when absent or not of
/// its type (which the verifier reports).
template <typename AttrHelper>
auto getAttr(mlir::Operation *op) {
  return AttrHelper(op->getContext()).getAttr(op);
}

/// Sets the attribute `AttrHelper` manages on `op` to `value`, which must be
/// of its type.
template <typename AttrHelper, typename AttrT>
void setAttr(mlir::Operation *op, AttrT value) {
  AttrHelper(op->getContext()).setAttr(op, value);
}

/// Whether `op` has the attribute `AttrHelper` manages, of its type.
template <typename AttrHelper>
bool hasAttr(mlir::Operation *op) {
  return AttrHelper(op->getContext()).isAttrPresent(op);
}

/// Removes the attribute `AttrHelper` manages from `op`, if it is there.
template <typename AttrHelper>
void removeAttr(mlir::Operation *op) {
  op->removeAttr(AttrHelper(op->getContext()).getName());
}

} // namespace parallax::px

namespace parallax {

/// The function a training step is built in: the one with `px.loss` (or
/// `@main` in an inference module); null if there is none.
mlir::func::FuncOp getEntryFunction(mlir::ModuleOp module);

/// A px.constant of `type` with every element `value` (a float type's, or
/// an integer type's, truncated).
mlir::Value splatConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::RankedTensorType type,
                          double value);

/// Whether `op` is a collective the runtime runs on its communication
/// thread (joined by a `wait` the plan emitter places before the first
/// reader of its results).
bool runsOnCommThread(mlir::Operation *op);

/// A short name for `loc` in messages: the ONNX node name when there is one,
/// else file:line:col; empty if there is neither.
std::string locationName(mlir::Location loc);

} // namespace parallax

#endif // PARALLAX_DIALECT_PX_PXDIALECT_H
