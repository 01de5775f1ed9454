//===- Passes.h - Parallax passes ------------------------------*- C++ -*-===//

#ifndef PARALLAX_TRANSFORMS_PASSES_H
#define PARALLAX_TRANSFORMS_PASSES_H

#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace parallax {

#define GEN_PASS_DECL
#include "parallax/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "parallax/Transforms/Passes.h.inc"

/// The function a training step is built in: the one with `px.loss` (or
/// `@main` in an inference module); null if there is none.
mlir::func::FuncOp getEntryFunction(mlir::ModuleOp module);

} // namespace parallax

#endif // PARALLAX_TRANSFORMS_PASSES_H
