//===- PxBuilder.h - terse construction of px ops in passes ----*- C++ -*-===//
//
// The gradient rules and the synchronization passes build many small px
// computations; this wraps OpBuilder so that `add(a, b)` or
// `unbroadcast(g, type)` reads like the formula it implements. Result types
// come from the ops' shape rules wherever px has one.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_LIB_TRANSFORMS_PXBUILDER_H
#define PARALLAX_LIB_TRANSFORMS_PXBUILDER_H

#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/IR/Builders.h"

namespace parallax {

class PxBuilder {
public:
  PxBuilder(mlir::OpBuilder &b, mlir::Location loc) : b(b), loc(loc) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }
  void setLocation(mlir::Location l) { loc = l; }

  static mlir::RankedTensorType typeOf(mlir::Value v) {
    return mlir::cast<mlir::RankedTensorType>(v.getType());
  }

  /// A rank-0 constant of element type `elem`.
  mlir::Value scalar(double value, mlir::Type elem);
  /// A splat constant of `type`.
  mlir::Value splat(double value, mlir::RankedTensorType type);
  /// A constant i64 vector.
  mlir::Value indexVector(llvm::ArrayRef<int64_t> values);

  mlir::Value add(mlir::Value a, mlir::Value b);
  mlir::Value sub(mlir::Value a, mlir::Value b);
  mlir::Value mul(mlir::Value a, mlir::Value b);
  mlir::Value div(mlir::Value a, mlir::Value b);
  mlir::Value neg(mlir::Value a);
  mlir::Value exp(mlir::Value a);
  mlir::Value log(mlir::Value a);
  mlir::Value pow(mlir::Value a, mlir::Value b);
  mlir::Value scale(mlir::Value a, double factor); ///< a * factor
  mlir::Value greater(mlir::Value a, mlir::Value b);
  mlir::Value less(mlir::Value a, mlir::Value b);
  mlir::Value equal(mlir::Value a, mlir::Value b);
  mlir::Value where(mlir::Value c, mlir::Value x, mlir::Value y);
  mlir::Value cast(mlir::Value a, mlir::Type elem);
  mlir::Value matmul(mlir::Value a, mlir::Value b);
  /// alpha * op(a) * op(b) of two matrices, op(X) = X or X^T (px.gemm
  /// without C).
  mlir::Value gemm(mlir::Value a, mlir::Value b, bool transA, bool transB,
                   double alpha = 1.0);

  mlir::Value reshape(mlir::Value a, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value a, llvm::ArrayRef<int64_t> perm);
  /// Swaps the last two dimensions (rank >= 2).
  mlir::Value transposeLast2(mlir::Value a);
  mlir::Value reduceSum(mlir::Value a, llvm::ArrayRef<int64_t> axes,
                        bool keepdims);
  mlir::Value expand(mlir::Value a, llvm::ArrayRef<int64_t> shape);
  mlir::Value concat(mlir::ValueRange inputs, int64_t axis);
  mlir::Value slice(mlir::Value a, llvm::ArrayRef<int64_t> starts,
                    llvm::ArrayRef<int64_t> steps,
                    llvm::ArrayRef<int64_t> shape);

  /// Sums a gradient of broadcast shape down to `target` (the operand's
  /// type): leading extra dimensions and dimensions that were 1.
  mlir::Value unbroadcast(mlir::Value g, mlir::RankedTensorType target);

  /// Creates an op whose result types come from its shape rule.
  template <typename OpTy>
  mlir::Value inferred(mlir::ValueRange operands,
                       llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    return OpTy::create(b, loc, operands, attrs)->getResult(0);
  }

  mlir::NamedAttribute named(llvm::StringRef name, mlir::Attribute value) {
    return b.getNamedAttr(name, value);
  }

private:
  mlir::OpBuilder &b;
  mlir::Location loc;
};

} // namespace parallax

#endif // PARALLAX_LIB_TRANSFORMS_PXBUILDER_H
