//===- PxAttrsAndTypes.td - px attributes and types ----------*- tablegen -*-===//

#ifndef PARALLAX_DIALECT_PX_PXATTRSANDTYPES_TD
#define PARALLAX_DIALECT_PX_PXATTRSANDTYPES_TD

include "PxBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

// The initial value of a variable or large constant that stays in the ONNX
// file it came from (IREE-style external parameters). Keeping a reference
// instead of a literal keeps multi-hundred-megabyte embeddings out of the IR
// text; the file is the module's `px.source` attribute.
// Typed, like dense<...>, so `#px.onnx_initializer<"w"> : tensor<4x4xf32>`
// reads and prints the same way as a literal initial value.
def Px_OnnxInitializerAttr : AttrDef<Px_Dialect, "OnnxInitializer",
                                     [TypedAttrInterface]> {
  let mnemonic = "onnx_initializer";
  let summary = "Reference to an initializer tensor of the source ONNX model";
  let description = [{
    `padded from [d0, d1, ...]` names the initializer's own shape where the
    value is larger than it (px-pad-vocabulary: a vocabulary the model ranks
    do not divide, padded as Megatron-LM pads it): the value is the
    initializer followed by zeros in every dimension, and what a run saves
    back is the initializer's part.

    `block at [o0, o1, ...] of [d0, d1, ...]` makes the value the block of
    its type at that origin of the initializer, whose shape is [d0, d1,
    ...] (px-split-fused-qkv: the query, key and value thirds of one
    projection); a run saves each block back into its place.
  }];
  let parameters = (ins StringRefParameter<"initializer name">:$name,
                        AttributeSelfTypeParameter<"">:$type,
                        OptionalArrayRefParameter<"int64_t",
                            "the initializer's shape, when padded">:$stored,
                        OptionalArrayRefParameter<"int64_t",
                            "the block's origin in the initializer">:$origin,
                        OptionalArrayRefParameter<"int64_t",
                            "the initializer's shape, when a block">:$whole);
  let builders = [
    AttrBuilder<(ins "::llvm::StringRef":$name, "::mlir::Type":$type), [{
      return $_get($_ctxt, name, type, ::llvm::ArrayRef<int64_t>(),
                   ::llvm::ArrayRef<int64_t>(), ::llvm::ArrayRef<int64_t>());
    }]>,
    AttrBuilder<(ins "::llvm::StringRef":$name, "::mlir::Type":$type,
                     "::llvm::ArrayRef<int64_t>":$stored), [{
      return $_get($_ctxt, name, type, stored, ::llvm::ArrayRef<int64_t>(),
                   ::llvm::ArrayRef<int64_t>());
    }]>
  ];
  // `<"w">`, `<"w", padded from [d...]>` or `<"w", block at [o...] of [d...]>`.
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Px_InitialValueAttr : AnyAttrOf<[ElementsAttr, Px_OnnxInitializerAttr]>;

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

// A row-sparse gradient (TensorFlow's IndexedSlices): `rows` rows of a dense
// tensor, given as indices into its first dimension and the rows' values.
// Indices may repeat; a repeated row means the sum of its values.
def Px_SparseGradType : TypeDef<Px_Dialect, "SparseGrad"> {
  let mnemonic = "sparse_grad";
  let summary = "Row-sparse gradient of a tensor (indices, row values, dense shape)";
  let parameters = (ins
    "int64_t":$rows,
    "::mlir::RankedTensorType":$denseType
  );
  let assemblyFormat = "`<` $rows `,` $denseType `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The type of the row values: rows x denseShape[1:].
    ::mlir::RankedTensorType getValuesType() const;
    /// The type of the row indices: a vector of `rows` i64.
    ::mlir::RankedTensorType getIndicesType() const;
  }];
}

def Px_SparseGrad : Type<CPred<"::llvm::isa<::parallax::px::SparseGradType>($_self)">,
                         "row-sparse gradient", "::parallax::px::SparseGradType">;

#endif // PARALLAX_DIALECT_PX_PXATTRSANDTYPES_TD
