//===- Passes.h - Parallax passes ------------------------------*- C++ -*-===//

#ifndef PARALLAX_TRANSFORMS_PASSES_H
#define PARALLAX_TRANSFORMS_PASSES_H

#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace parallax {

#define GEN_PASS_DECL
#include "parallax/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "parallax/Transforms/Passes.h.inc"

} // namespace parallax

#endif // PARALLAX_TRANSFORMS_PASSES_H
