//===- PxBase.td - px dialect definition ---------------------*- tablegen -*-===//
//
// The px dialect: the training graph Parallax compiles. It is a static-shape
// dialect: every value is a ranked tensor of fully known shape. Operands that
// ONNX passes as shape tensors (Reshape's shape, Slice's starts, ...) are
// folded at import and become attributes or the result type, so passes that
// reason about bytes and partitions never see a dynamic dimension.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_DIALECT_PX_PXBASE_TD
#define PARALLAX_DIALECT_PX_PXBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Px_Dialect : Dialect {
  let name = "px";
  let cppNamespace = "::parallax::px";
  let summary = "Training graphs and their synchronization, for distributed SGD";
  let description = [{
    Tensor operations with ONNX semantics (one training step's forward graph,
    its gradients and its optimizer), the variables and data inputs they read,
    and the collective and parameter-server operations that synchronize
    variables across ranks. Collectives act over a grid declared with the
    upstream `shard.grid` op and name its axes, as `shard` collectives do.
  }];
  let dependentDialects = [
    "::mlir::func::FuncDialect",
    "::mlir::shard::ShardDialect"
  ];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasConstantMaterializer = 1;
  // Inherent attributes live in the attribute dictionary, not in properties:
  // the parser infers result types (InferTypeOpAdaptor) from `attr-dict`
  // attributes before it would move them into properties.
  let usePropertiesForAttributes = 0;
}

class Px_Op<string mnemonic, list<Trait> traits = []>
    : Op<Px_Dialect, mnemonic, traits>;

// Elementwise with ONNX multidirectional broadcasting: every result has the
// operands' broadcast shape, and its element at an index depends only on the
// operands' elements at the (broadcast) same index. The batch analysis
// (lib/Analysis/BatchDimension.cpp) follows samples through such ops without
// a rule of their own.
def Px_Elementwise : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::parallax::px::OpTrait";
}

//===----------------------------------------------------------------------===//
// Element and tensor type constraints.
//===----------------------------------------------------------------------===//

def Px_Float : AnyTypeOf<[F16, BF16, F32, F64]>;
def Px_Int : AnyTypeOf<[I8, I16, I32, I64]>;
def Px_Index : AnyTypeOf<[I32, I64]>;
def Px_Bool : I<1>;

// Every px tensor has a static shape; a dynamic dimension is a verifier error.
class Px_StaticTensorOf<list<Type> allowed>
    : StaticShapeTensorOf<allowed>;

def Px_FloatTensor : Px_StaticTensorOf<[Px_Float]>;
def Px_IndexTensor : Px_StaticTensorOf<[Px_Index]>;
def Px_BoolTensor : Px_StaticTensorOf<[Px_Bool]>;
def Px_NumericTensor : Px_StaticTensorOf<[Px_Float, Px_Int]>;
def Px_AnyTensor : Px_StaticTensorOf<[Px_Float, Px_Int, Px_Bool]>;

#endif // PARALLAX_DIALECT_PX_PXBASE_TD
