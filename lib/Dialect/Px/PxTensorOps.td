//===- PxTensorOps.td - px tensor operations -----------------*- tablegen -*-===//
//
// Tensor operations with ONNX semantics. Several ONNX operators map onto one
// px op (Flatten, Squeeze and Unsqueeze are px.reshape; GlobalAveragePool is
// px.reduce_mean); docs/dialect.md lists the mapping. Result types are
// inferred from the operands and attributes wherever ONNX determines them, so
// the verifier and the importer share one shape function per op.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_DIALECT_PX_PXTENSOROPS_TD
#define PARALLAX_DIALECT_PX_PXTENSOROPS_TD

include "PxAttrsAndTypes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Dialect/Shard/IR/ShardBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Graph leaves: variables, data inputs, constants.
//===----------------------------------------------------------------------===//

def Px_VariableOp : Px_Op<"variable",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A named model variable and its initial value";
  let description = [{
    Reads a model variable. `trainable` variables are what the autodiff pass
    differentiates with respect to and what the synchronization passes
    distribute; variables without it are state updated by the step itself
    (BatchNormalization's running statistics). `init` is the initial value:
    an elements attribute, or `#px.onnx_initializer<"name">`, which refers
    to an initializer of the module's `px.source` ONNX model.

    ```mlir
    %emb = px.variable "emb" trainable = #px.onnx_initializer<"emb"> : tensor<100000x256xf32>
    ```

    A variable split over a grid (`grid`, `split_axes` as upstream shard's
    shardings; shard-partition makes them) is this rank's block of the
    value `init` describes whole: its type, written after `->`, is the
    block's.

    ```mlir
    %w = px.variable "w" trainable = #px.onnx_initializer<"w"> : tensor<128x64xf32> -> tensor<64x64xf32> {grid = @g, split_axes = #shard<axisarray[[0]]>}
    ```
  }];
  let arguments = (ins StrAttr:$name, Px_InitialValueAttr:$init,
                       UnitAttr:$trainable, OptionalAttr<FlatSymbolRefAttr>:$grid,
                       OptionalAttr<Shard_GridAxesArrayAttr>:$split_axes);
  let results = (outs Px_AnyTensor:$output);
  let builders = [
    OpBuilder<(ins "::mlir::Type":$type, "::mlir::StringAttr":$name,
                   "::mlir::Attribute":$init, "::mlir::UnitAttr":$trainable), [{
      build($_builder, $_state, type, name, init, trainable, {}, {});
    }]>
  ];
  // Custom: a typed literal carries the type once, as in arith.constant.
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Px_InputOp : Px_Op<"input", [Pure]> {
  let summary = "A named data input of the training step";
  let description = [{
    One batch of a graph input (tokens, images, labels). Its static shape is
    the per-step shape after `--batch-size` / `--input-shape` binding.
    `batched` marks an input whose dimension 0 holds the step's samples (it
    was the model's dynamic batch dimension): data parallelism splits it
    over the ranks. An input without it (e.g. sampled-softmax candidates) is
    the same for every sample and every rank.

    ```mlir
    %tokens = px.input "tokens" : tensor<8x20xi64> batched
    ```
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$batched);
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = "$name attr-dict `:` type($output) (`batched` $batched^)?";
}

def Px_ConstantOp : Px_Op<"constant", [ConstantLike, Pure]> {
  let summary = "A constant tensor";
  let description = [{
    ONNX Constant nodes, non-float and frozen initializers, and values folded
    at import. `value` is an elements attribute or a reference to a large
    initializer kept in the source ONNX file.
  }];
  let arguments = (ins Px_InitialValueAttr:$value);
  let results = (outs Px_AnyTensor:$output);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasFolder = 1;
  let builders = [OpBuilder<(ins "::mlir::ElementsAttr":$value), [{
    build($_builder, $_state, value.getType(), value);
  }]>];
}

//===----------------------------------------------------------------------===//
// Elementwise operations (multidirectional broadcasting, as in ONNX).
//===----------------------------------------------------------------------===//

class Px_BinaryOp<string mnemonic, Type operandType, list<Trait> traits = []>
    : Px_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor, Px_Elementwise])> {
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

// Arithmetic: the result has the broadcast shape and the operands' element type.
class Px_ArithOp<string mnemonic, list<Trait> traits = []>
    : Px_BinaryOp<mnemonic, Px_NumericTensor, traits> {
  let summary = "Elementwise " # mnemonic # " with broadcasting";
}
def Px_AddOp : Px_ArithOp<"add", [Commutative]>;
def Px_SubOp : Px_ArithOp<"sub">;
def Px_MulOp : Px_ArithOp<"mul", [Commutative]>;
def Px_DivOp : Px_ArithOp<"div">;
def Px_MaxOp : Px_ArithOp<"max", [Commutative]>;
def Px_MinOp : Px_ArithOp<"min", [Commutative]>;

def Px_ModOp : Px_Op<"mod", [Pure, InferTypeOpAdaptor, Px_Elementwise]> {
  let summary = "Elementwise remainder with broadcasting (ONNX Mod)";
  let description = [{ Without `fmod` the result has the sign of the divisor
    (Python's %, integers only in ONNX); with `fmod` the sign of the dividend
    (C's fmod). }];
  let arguments = (ins Px_NumericTensor:$lhs, Px_NumericTensor:$rhs, UnitAttr:$fmod);
  let results = (outs Px_NumericTensor:$output);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def Px_PowOp : Px_BinaryOp<"pow", Px_NumericTensor, [Px_CostlyPerElement]> {
  let summary = "Elementwise power with broadcasting (ONNX Pow)";
  let description = [{ The result has the base's element type; the exponent
    may be of another numeric type. }];
}

// Comparisons: the result is i1 of the broadcast shape.
class Px_CompareOp<string mnemonic, Type operandType, list<Trait> traits = []>
    : Px_BinaryOp<mnemonic, operandType, traits> {
  let summary = "Elementwise " # mnemonic # " comparison with broadcasting";
}
def Px_EqualOp : Px_CompareOp<"equal", Px_AnyTensor, [Commutative]>;
def Px_LessOp : Px_CompareOp<"less", Px_NumericTensor>;
def Px_GreaterOp : Px_CompareOp<"greater", Px_NumericTensor>;

def Px_WhereOp : Px_Op<"where", [Pure, InferTypeOpAdaptor, Px_Elementwise]> {
  let summary = "Elementwise select with broadcasting (ONNX Where)";
  let arguments = (ins Px_BoolTensor:$condition, Px_AnyTensor:$x, Px_AnyTensor:$y);
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = [{
    $condition `,` $x `,` $y attr-dict `:` type($condition) `,` type($x) `,` type($y)
  }];
}

class Px_UnaryOp<string mnemonic, Type tensorType, list<Trait> traits = []>
    : Px_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType, Px_Elementwise])> {
  let summary = "Elementwise " # mnemonic;
  let arguments = (ins tensorType:$input);
  let results = (outs tensorType:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}
def Px_NegOp : Px_UnaryOp<"neg", Px_NumericTensor>;
def Px_AbsOp : Px_UnaryOp<"abs", Px_NumericTensor>;
def Px_SqrtOp : Px_UnaryOp<"sqrt", Px_FloatTensor>;
def Px_ReciprocalOp : Px_UnaryOp<"reciprocal", Px_FloatTensor>;
def Px_ExpOp : Px_UnaryOp<"exp", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_LogOp : Px_UnaryOp<"log", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_ReluOp : Px_UnaryOp<"relu", Px_NumericTensor>;
def Px_TanhOp : Px_UnaryOp<"tanh", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_SigmoidOp : Px_UnaryOp<"sigmoid", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_ErfOp : Px_UnaryOp<"erf", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_NotOp : Px_UnaryOp<"not", Px_BoolTensor>;

// Trigonometric and hyperbolic functions (ONNX Sin ... Atanh).
def Px_SinOp : Px_UnaryOp<"sin", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_CosOp : Px_UnaryOp<"cos", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_TanOp : Px_UnaryOp<"tan", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_AsinOp : Px_UnaryOp<"asin", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_AcosOp : Px_UnaryOp<"acos", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_AtanOp : Px_UnaryOp<"atan", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_SinhOp : Px_UnaryOp<"sinh", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_CoshOp : Px_UnaryOp<"cosh", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_AsinhOp : Px_UnaryOp<"asinh", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_AcoshOp : Px_UnaryOp<"acosh", Px_FloatTensor, [Px_CostlyPerElement]>;
def Px_AtanhOp : Px_UnaryOp<"atanh", Px_FloatTensor, [Px_CostlyPerElement]>;
// Piecewise constant: their gradient is zero wherever it exists.
def Px_FloorOp : Px_UnaryOp<"floor", Px_FloatTensor>;
def Px_CeilOp : Px_UnaryOp<"ceil", Px_FloatTensor>;
def Px_RoundOp : Px_UnaryOp<"round", Px_FloatTensor> {
  let summary = "Elementwise round, halves to even (ONNX Round)";
}
def Px_SignOp : Px_UnaryOp<"sign", Px_NumericTensor>;

def Px_LeakyReluOp : Px_UnaryOp<"leaky_relu", Px_FloatTensor> {
  let arguments = (ins Px_FloatTensor:$input, DefaultValuedAttr<F32Attr, "0.01">:$alpha);
}

def Px_ClipOp : Px_UnaryOp<"clip", Px_NumericTensor> {
  let summary = "Elementwise clamp to [min, max]; an absent bound is unbounded";
  let arguments = (ins Px_NumericTensor:$input, OptionalAttr<F64Attr>:$min,
                       OptionalAttr<F64Attr>:$max);
  let hasVerifier = 1;
}

def Px_CastOp : Px_Op<"cast", [Pure, SameOperandsAndResultShape, Px_Elementwise]> {
  let summary = "Elementwise conversion to the result element type (ONNX Cast)";
  let arguments = (ins Px_AnyTensor:$input);
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
}

//===----------------------------------------------------------------------===//
// Indexing.
//===----------------------------------------------------------------------===//

def Px_GatherOp : Px_Op<"gather", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Gather slices of `data` along `axis` (ONNX Gather)";
  let description = [{
    result = data[:axis] ++ indices.shape ++ data[axis+1:]. Negative indices
    count from the end. A `px.variable` read only through `px.gather` on
    axis 0 has a row-sparse gradient: this is what makes an embedding sparse.

    With `block of` a grid (and `grid_axes`, all axes when absent), `data`
    is this rank's block of rows of a table split along axis 0 (which
    `axis` must be) over that group, as upstream shard splits it: the rank
    at place b of its group of G holds rows [b R, (b + 1) R) of the G R
    rows, R being `data`'s. `indices` name rows of the whole table; an
    index outside the rank's rows gives a slice of zeros, so the group's
    results sum to the whole table's gather (the vocabulary-parallel
    embedding of Megatron-LM).

    ```mlir
    %e = px.gather %block[%ids] block of @world grid_axes = [1] : tensor<500x16xf32>, tensor<64xi64>
    ```
  }];
  let arguments = (ins Px_AnyTensor:$data, Px_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       OptionalAttr<Shard_GridAxesAttr>:$grid_axes);
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = [{
    $data `[` $indices `]` (`block` `of` $grid^ (`grid_axes` `=` $grid_axes^)?)?
    attr-dict `:` type($data) `,` type($indices)
  }];
  let builders = [
    // A gather of a whole tensor.
    OpBuilder<(ins "::mlir::Type":$output, "::mlir::Value":$data, "::mlir::Value":$indices,
                   "::mlir::IntegerAttr":$axis), [{
      build($_builder, $_state, output, data, indices, axis, nullptr, nullptr);
    }]>];
  let hasVerifier = 1;
}

def Px_GatherElementsOp : Px_Op<"gather_elements", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gather single elements along `axis` (ONNX GatherElements)";
  let arguments = (ins Px_AnyTensor:$data, Px_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = [{
    $data `[` $indices `]` attr-dict `:` type($data) `,` type($indices)
  }];
}

def Px_SliceOp : Px_Op<"slice", [Pure]> {
  let summary = "Strided slice with one (start, step) per dimension";
  let description = [{
    ONNX Slice and Split, with starts normalised to in-range indices and
    every dimension listed. Result dimension d has `shape[d]` elements
    `starts[d] + i * steps[d]`; steps may be negative but not zero.
  }];
  let arguments = (ins Px_AnyTensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$steps);
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = [{
    $input `starts` `=` $starts `steps` `=` $steps attr-dict `:` type($input) `->` type($output)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra.
//===----------------------------------------------------------------------===//

def Px_MatMulOp : Px_Op<"matmul", [Pure, InferTypeOpAdaptor]> {
  let summary = "Matrix product with numpy semantics (ONNX MatMul)";
  let arguments = (ins Px_NumericTensor:$lhs, Px_NumericTensor:$rhs);
  let results = (outs Px_NumericTensor:$output);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let hasCanonicalizer = 1;
}

def Px_GemmOp : Px_Op<"gemm", [Pure, InferTypeOpAdaptor]> {
  let summary = "alpha * op(A) * op(B) + beta * C (ONNX Gemm)";
  let arguments = (ins Px_FloatTensor:$a, Px_FloatTensor:$b,
                       Optional<Px_FloatTensor>:$c,
                       DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                       DefaultValuedAttr<F32Attr, "1.0">:$beta,
                       UnitAttr:$trans_a, UnitAttr:$trans_b);
  let results = (outs Px_FloatTensor:$output);
  let assemblyFormat = [{
    $a `,` $b (`,` $c^)? attr-dict `:` type($a) `,` type($b) (`,` type($c)^)?
  }];
}

//===----------------------------------------------------------------------===//
// Normalisation, activation with an axis, losses.
//===----------------------------------------------------------------------===//

class Px_AxisOp<string mnemonic, list<Trait> traits = []>
    : Px_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType])> {
  let arguments = (ins Px_FloatTensor:$input, DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Px_FloatTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}
def Px_SoftmaxOp : Px_AxisOp<"softmax", [Px_CostlyPerElement]> {
  let summary = "Softmax along one axis (ONNX Softmax, opset 13)";
}
def Px_LogSoftmaxOp : Px_AxisOp<"log_softmax", [Px_CostlyPerElement]> {
  let summary = "Log-softmax along one axis (ONNX LogSoftmax, opset 13)";
}

// "none", "sum" or "mean"; checked by the shape function.
defvar Px_ReductionAttr = StrAttr;

def Px_SoftmaxCrossEntropyLossOp
    : Px_Op<"softmax_cross_entropy_loss", [Pure, InferTypeOpAdaptor, Px_CostlyPerElement]> {
  let summary = "Softmax cross entropy (ONNX SoftmaxCrossEntropyLoss)";
  let description = [{
    scores are [N, C, D1...], labels [N, D1...]. `loss` is a scalar for
    reduction sum or mean and [N, D1...] for none; `log_prob` is the
    log-softmax of scores along axis 1, kept as a result because the
    gradient needs it. Labels equal to `ignore_index` contribute nothing and
    are left out of the mean's denominator.
  }];
  let arguments = (ins Px_FloatTensor:$scores, Px_IndexTensor:$labels,
                       Optional<Px_FloatTensor>:$weights,
                       DefaultValuedAttr<Px_ReductionAttr, "\"mean\"">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Px_FloatTensor:$loss, Px_FloatTensor:$log_prob);
  let assemblyFormat = [{
    $scores `,` $labels (`,` $weights^)? attr-dict `:` type($scores) `,` type($labels) (`,` type($weights)^)?
  }];
}

def Px_NegativeLogLikelihoodLossOp
    : Px_Op<"nll_loss", [Pure, InferTypeOpAdaptor]> {
  let summary = "Negative log likelihood (ONNX NegativeLogLikelihoodLoss)";
  let description = [{
    With `block of` a grid (set by px-shard-model's partition of a
    vocabulary-parallel softmax cross entropy), `input` is this rank's block
    of the classes (dimension 1 split evenly over `grid_axes`): a target in
    another rank's block adds nothing, yet every target counts in the
    mean's denominator, so the group's sum of the results is the loss.
  }];
  let arguments = (ins Px_FloatTensor:$input, Px_IndexTensor:$target,
                       Optional<Px_FloatTensor>:$weight,
                       DefaultValuedAttr<Px_ReductionAttr, "\"mean\"">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       OptionalAttr<Shard_GridAxesAttr>:$grid_axes);
  let results = (outs Px_FloatTensor:$loss);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $input `,` $target (`,` $weight^)? attr-dict `:` type($input) `,` type($target) (`,` type($weight)^)?
  }];
}

def Px_LayerNormOp : Px_Op<"layer_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "Layer normalisation over dims [axis, rank) (ONNX LayerNormalization)";
  let description = [{
    `mean` and `inv_std_dev` have x's shape with the normalised dimensions
    set to 1; they are results because the gradient needs them.
  }];
  let arguments = (ins Px_FloatTensor:$x, Px_FloatTensor:$scale,
                       Optional<Px_FloatTensor>:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1e-5">:$epsilon);
  let results = (outs Px_FloatTensor:$y, Px_FloatTensor:$mean,
                      Px_FloatTensor:$inv_std_dev);
  let assemblyFormat = [{
    $x `,` $scale (`,` $bias^)? attr-dict `:` type($x) `,` type($scale) (`,` type($bias)^)?
  }];
}

def Px_BatchNormOp : Px_Op<"batch_norm", [Pure, InferTypeOpAdaptor,
    AllTypesMatch<["scale", "bias", "input_mean", "input_var"]>]> {
  let summary = "Batch normalisation over N and the spatial dims (ONNX BatchNormalization)";
  let description = [{
    In `training` mode the batch statistics normalise x, and
    `running_mean`/`running_var` are the updated running statistics
    (momentum * old + (1 - momentum) * batch), with the biased batch
    variance as ONNX BatchNormalization-15 specifies, or with
    `unbiased_running_var` the unbiased one (times n / (n - 1), n values per
    channel in the whole batch), as PyTorch does; the choice changes only
    the running variance, never the loss.
    Otherwise the input statistics normalise x and are returned unchanged.
    With `grid = @g` (set by px-sync) the batch statistics are those of the
    whole grid's batch (synchronized BatchNorm): every rank normalises with
    the mean and variance of all ranks' samples, so results do not depend on
    the rank count. `grid_axes` (empty: all) are the axes whose ranks hold
    different samples: on a Pr x Pc grid the batch axes, since a model
    group's ranks share their samples.
  }];
  let arguments = (ins Px_FloatTensor:$x, Px_FloatTensor:$scale,
                       Px_FloatTensor:$bias, Px_FloatTensor:$input_mean,
                       Px_FloatTensor:$input_var,
                       DefaultValuedAttr<F32Attr, "1e-5">:$epsilon,
                       DefaultValuedAttr<F32Attr, "0.9">:$momentum,
                       UnitAttr:$training,
                       UnitAttr:$unbiased_running_var,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       DefaultValuedAttr<Shard_GridAxesAttr, "{}">:$grid_axes);
  let results = (outs Px_FloatTensor:$y, Px_FloatTensor:$running_mean,
                      Px_FloatTensor:$running_var);
  let assemblyFormat = [{
    $x `,` $scale `,` $bias `,` $input_mean `,` $input_var attr-dict `:` type($x) `,` type($scale)
  }];
}

def Px_DropoutOp : Px_Op<"dropout", [InferTypeOpAdaptor, Px_Elementwise, Px_CostlyPerElement]> {
  let summary = "Training-mode dropout (ONNX Dropout with training_mode = true)";
  let description = [{
    Zeroes each element with probability `ratio` and scales the rest by
    1 / (1 - ratio). `mask` is true where the element was kept. Not Pure:
    each execution draws a new mask (from `seed` and the step number).
    Inference-mode Dropout is the identity and is not imported as this op.
    `sample_stride` (set by px-split-batch) is the number of elements
    between consecutive samples of `input`, 0 when it holds none: the random
    stream is numbered over the global batch's samples, so a sample's mask
    does not depend on the rank count or on where its rank's samples lie.
    With `block of` a grid (set by px-shard-model's partition), `input` is
    this rank's block of a tensor whose dimension `split_dim` is split over
    `grid_axes`: the stream is numbered over the whole tensor, so that a
    model split draws the masks of one rank.
  }];
  let arguments = (ins Px_FloatTensor:$input,
                       F32Attr:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$seed,
                       OptionalAttr<I64Attr>:$sample_stride,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       OptionalAttr<Shard_GridAxesAttr>:$grid_axes,
                       OptionalAttr<I64Attr>:$split_dim);
  let results = (outs Px_FloatTensor:$output, Px_BoolTensor:$mask);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions and data movement.
//===----------------------------------------------------------------------===//

class Px_ReduceOp<string mnemonic> : Px_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = "Reduce over `axes` (ONNX Reduce" # mnemonic # ")";
  let description = [{ `axes` lists every reduced dimension (none may
    repeat); with `keepdims` they stay as size 1. }];
  let arguments = (ins Px_NumericTensor:$input, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs Px_NumericTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}
def Px_ReduceSumOp : Px_ReduceOp<"reduce_sum">;
def Px_ReduceMeanOp : Px_ReduceOp<"reduce_mean">;
def Px_ReduceMaxOp : Px_ReduceOp<"reduce_max">;
def Px_ReduceMinOp : Px_ReduceOp<"reduce_min">;
def Px_ReduceProdOp : Px_ReduceOp<"reduce_prod">;

class Px_ArgReduceOp<string mnemonic> : Px_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let summary = "Index of the " # mnemonic # " along `axis` (ONNX ArgMax/ArgMin)";
  let description = [{ i64 result; ties go to the first index, or the last
    with `select_last_index`; `keepdims` keeps the axis as size 1. }];
  let arguments = (ins Px_NumericTensor:$input, DefaultValuedAttr<I64Attr, "0">:$axis,
                       DefaultValuedAttr<BoolAttr, "true">:$keepdims,
                       UnitAttr:$select_last_index);
  let results = (outs Px_StaticTensorOf<[I64]>:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}
def Px_ArgMaxOp : Px_ArgReduceOp<"arg_max">;
def Px_ArgMinOp : Px_ArgReduceOp<"arg_min">;

def Px_TopKOp : Px_Op<"top_k", [Pure, InferTypeOpAdaptor]> {
  let summary = "The k largest (or smallest) elements along `axis` (ONNX TopK)";
  let description = [{ `values` and their `indices` (i64), ordered largest
    first (smallest first without `largest`); equal values keep their index
    order. Only sorted output exists. }];
  let arguments = (ins Px_NumericTensor:$input, I64Attr:$k,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<BoolAttr, "true">:$largest);
  let results = (outs Px_NumericTensor:$values, Px_StaticTensorOf<[I64]>:$indices);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Px_CumSumOp : Px_Op<"cumsum", [Pure, SameOperandsAndResultType]> {
  let summary = "Cumulative sum along `axis` (ONNX CumSum)";
  let description = [{ `exclusive` leaves each element out of its own sum;
    `reverse` sums from the end. }];
  let arguments = (ins Px_NumericTensor:$input, I64Attr:$axis, UnitAttr:$exclusive,
                       UnitAttr:$reverse);
  let results = (outs Px_NumericTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Px_SegmentReduceOp : Px_Op<"segment_reduce", [Pure, InferTypeOpAdaptor]> {
  let summary = "Reduce row ranges [starts[m], ends[m]) of `data` (nn.EmbeddingBag)";
  let description = [{
    Result row m reduces rows starts[m] .. ends[m] - 1 of `data` (dimension
    0) with `mode` "sum", "mean" or "max"; the bounds are clamped as ONNX
    Slice clamps them (a negative bound counts from the end). An empty range
    gives zeros, as nn.EmbeddingBag does. The importer makes it from a Loop
    that slices ids by runtime offsets, gathers rows and reduces them (how
    PyTorch exports nn.EmbeddingBag with offsets), so the table stays a
    row-gathered (sparse) variable.
  }];
  let arguments = (ins Px_FloatTensor:$data, Px_StaticTensorOf<[I64]>:$starts,
                       Px_StaticTensorOf<[I64]>:$ends, StrAttr:$mode);
  let results = (outs Px_FloatTensor:$output);
  let assemblyFormat = [{
    $data `,` $starts `,` $ends attr-dict `:` type($data) `,` type($starts) `,` type($ends)
  }];
}

def Px_ReshapeOp : Px_Op<"reshape", [Pure]> {
  let summary = "Reinterpret the shape (ONNX Reshape, Flatten, Squeeze, Unsqueeze)";
  let arguments = (ins Px_AnyTensor:$input);
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Px_TransposeOp : Px_Op<"transpose", [Pure, InferTypeOpAdaptor]> {
  let summary = "Permute dimensions: output dim i is input dim perm[i] (ONNX Transpose)";
  let arguments = (ins Px_AnyTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Px_ConcatOp : Px_Op<"concat", [Pure, InferTypeOpAdaptor]> {
  let summary = "Concatenate along `axis` (ONNX Concat)";
  let arguments = (ins Variadic<Px_AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
}

def Px_PadOp : Px_Op<"pad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Pad (or, with negative pads, crop) every dimension (ONNX Pad)";
  let description = [{
    `pads` are [begin..., end...], one pair per dimension. `mode` is
    "constant" (fill with `value`), "reflect" (mirror without repeating the
    edge; a pad must be smaller than its dimension) or "edge" (repeat the
    edge element).
  }];
  let arguments = (ins Px_AnyTensor:$input, DenseI64ArrayAttr:$pads,
                       DefaultValuedAttr<StrAttr, "\"constant\"">:$mode,
                       DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Px_ExpandOp : Px_Op<"expand", [Pure]> {
  let summary = "Broadcast to the result shape (ONNX Expand)";
  let arguments = (ins Px_AnyTensor:$input);
  let results = (outs Px_AnyTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Convolution and pooling (NCHW; pads are [begin..., end...]).
//===----------------------------------------------------------------------===//

def Px_ConvOp : Px_Op<"conv", [Pure, InferTypeOpAdaptor]> {
  let summary = "Grouped N-d convolution (ONNX Conv with explicit pads)";
  let arguments = (ins Px_FloatTensor:$x, Px_FloatTensor:$w,
                       Optional<Px_FloatTensor>:$b,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group);
  let results = (outs Px_FloatTensor:$y);
  let assemblyFormat = [{
    $x `,` $w (`,` $b^)? attr-dict `:` type($x) `,` type($w) (`,` type($b)^)?
  }];
}

class Px_PoolOp<string mnemonic> : Px_Op<mnemonic, [Pure, InferTypeOpAdaptor]> {
  let results = (outs Px_FloatTensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}
def Px_MaxPoolOp : Px_PoolOp<"max_pool"> {
  let summary = "Max pooling (ONNX MaxPool; padding never wins the max)";
  let arguments = (ins Px_FloatTensor:$x, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, UnitAttr:$ceil_mode);
}
def Px_AveragePoolOp : Px_PoolOp<"avg_pool"> {
  let summary = "Average pooling (ONNX AveragePool)";
  let description = [{
    A window over the whole unpadded image (PyTorch's avg_pool2d(x, H) as
    a CIFAR ResNet's head) canonicalizes to `px.reduce_mean` over the
    spatial dimensions, as GlobalAveragePool imports: one form for the
    passes (a reduction's sharding model sums a row-split image's blocks
    instead of gathering it).
  }];
  let arguments = (ins Px_FloatTensor:$x, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       UnitAttr:$ceil_mode, UnitAttr:$count_include_pad);
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Sparse gradients.
//===----------------------------------------------------------------------===//

def Px_MakeSparseGradOp : Px_Op<"make_sparse_grad", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Build a row-sparse gradient from row indices and row values";
  let description = [{
    `indices` is a vector of row numbers into the dense tensor's first
    dimension (-1 marks an unused slot of a fixed-capacity gradient);
    `values` holds one row per index.

    With `block of` a grid (and `grid_axes`), the gradient is of this
    rank's block of rows of a table split over that group (as
    `px.gather ... block of` reads it; the dense type is the block's):
    `indices` name rows of the whole table, those outside the rank's block
    become unused (-1) and the others rows of the block.

    ```mlir
    %g = px.make_sparse_grad %ids, %rows block of @world grid_axes = [1] : tensor<64xi64>, tensor<64x16xf32> -> !px.sparse_grad<64, tensor<500x16xf32>>
    ```
  }];
  let arguments = (ins Px_StaticTensorOf<[I64]>:$indices, Px_FloatTensor:$values,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       OptionalAttr<Shard_GridAxesAttr>:$grid_axes);
  let results = (outs Px_SparseGrad:$output);
  let assemblyFormat = [{
    $indices `,` $values (`block` `of` $grid^ (`grid_axes` `=` $grid_axes^)?)?
    attr-dict `:` type($indices) `,` type($values) `->` qualified(type($output))
  }];
  let builders = [
    // The gradient of a whole tensor.
    OpBuilder<(ins "::mlir::Type":$output, "::mlir::Value":$indices, "::mlir::Value":$values), [{
      build($_builder, $_state, output, indices, values, nullptr, nullptr);
    }]>];
  let hasVerifier = 1;
}

def Px_SparseGradIndicesOp : Px_Op<"sparse_grad_indices", [Pure, InferTypeOpAdaptor]> {
  let summary = "The row indices of a sparse gradient";
  let arguments = (ins Px_SparseGrad:$grad);
  let results = (outs Px_StaticTensorOf<[I64]>:$indices);
  let assemblyFormat = "$grad attr-dict `:` qualified(type($grad))";
}

def Px_SparseGradValuesOp : Px_Op<"sparse_grad_values", [Pure, InferTypeOpAdaptor]> {
  let summary = "The row values of a sparse gradient";
  let arguments = (ins Px_SparseGrad:$grad);
  let results = (outs Px_FloatTensor:$values);
  let assemblyFormat = "$grad attr-dict `:` qualified(type($grad))";
}

def Px_DensifyOp : Px_Op<"densify", [Pure, InferTypeOpAdaptor]> {
  let summary = "Scatter-add a sparse gradient into a dense tensor of zeros";
  let arguments = (ins Px_SparseGrad:$grad);
  let results = (outs Px_FloatTensor:$output);
  let assemblyFormat = "$grad attr-dict `:` qualified(type($grad))";
}

//===----------------------------------------------------------------------===//
// Recurrent layers (ONNX LSTM and GRU, as torch.nn.LSTM / nn.GRU export
// them). Shapes follow ONNX's layout 0: x [T, B, I], w [D, G*H, I],
// r [D, G*H, H], b [D, 2*G*H], states [D, B, H], y [T, D, B, H], with
// D = 2 for "bidirectional" and 1 otherwise (G = 4 for LSTM, 3 for GRU).
//===----------------------------------------------------------------------===//

def Px_LstmOp : Px_Op<"lstm", [Pure, InferTypeOpAdaptor]> {
  let summary = "LSTM layer over a whole sequence (ONNX LSTM, default activations)";
  let description = [{
    ONNX LSTM with its default activations (sigmoid gates, tanh cell and
    output), no peepholes, no clip, no coupled input-forget gate and every
    sequence of the full length T: what torch.nn.LSTM exports, one op per
    layer. Gates are in ONNX's order i, o, f, c along w's and r's rows; `b`
    is [Wb, Rb]. The importer passes zeros for an absent `B`, `initial_h` or
    `initial_c` (what torch exports when the module is called without
    states, and what ONNX means by an absent one). The "reverse" direction
    (and direction 1 of "bidirectional") runs from t = T-1 down to 0; `y[t]`
    is always the state after reading `x[t]`, and `y_h`, `y_c` the states
    after the direction's last step.

    `gates` [D, T, B, 4H] (the activated i, o, f, c of every step) and
    `cells` [D, T, B, H] (every cell state) are results because the
    backward pass (px.lstm_grad) needs them, as cuDNN keeps its reserve
    space: recomputing them would repeat the whole sequential forward pass.
    Nothing else reads them.
  }];
  let arguments = (ins Px_FloatTensor:$x, Px_FloatTensor:$w, Px_FloatTensor:$r,
                       Px_FloatTensor:$b, Px_FloatTensor:$initial_h,
                       Px_FloatTensor:$initial_c,
                       DefaultValuedAttr<StrAttr, "\"forward\"">:$direction);
  let results = (outs Px_FloatTensor:$y, Px_FloatTensor:$y_h,
                      Px_FloatTensor:$y_c, Px_FloatTensor:$gates,
                      Px_FloatTensor:$cells);
  let assemblyFormat = [{
    $x `,` $w `,` $r `,` $b `,` $initial_h `,` $initial_c attr-dict `:`
    type(operands)
  }];
}

def Px_GruOp : Px_Op<"gru", [Pure, InferTypeOpAdaptor]> {
  let summary = "GRU layer over a whole sequence (ONNX GRU, default activations)";
  let description = [{
    ONNX GRU with its default activations (sigmoid gates, tanh candidate),
    no clip and every sequence of the full length T. Gates are in ONNX's
    order z, r, h; `b` is [Wb, Rb]; the importer passes zeros for an absent
    `B` or `initial_h`. With `linear_before_reset` (what torch.nn.GRU
    exports) the candidate is tanh(x Wh^T + Wbh + r * (h Rh^T + Rbh)),
    without it tanh(x Wh^T + Wbh + (r * h) Rh^T + Rbh). Directions as
    px.lstm.

    `gates` [D, T, B, 4H] holds, per step, the activated z, r and candidate
    and the recurrent term the backward pass needs (h Rh^T + Rbh with
    `linear_before_reset`, else r * h): a result for px.gru_grad, which
    would otherwise recompute the whole sequential forward pass.
  }];
  let arguments = (ins Px_FloatTensor:$x, Px_FloatTensor:$w, Px_FloatTensor:$r,
                       Px_FloatTensor:$b, Px_FloatTensor:$initial_h,
                       DefaultValuedAttr<StrAttr, "\"forward\"">:$direction,
                       UnitAttr:$linear_before_reset);
  let results = (outs Px_FloatTensor:$y, Px_FloatTensor:$y_h,
                      Px_FloatTensor:$gates);
  let assemblyFormat = [{
    $x `,` $w `,` $r `,` $b `,` $initial_h attr-dict `:` type(operands)
  }];
}

def Px_RnnOp : Px_Op<"rnn", [Pure, InferTypeOpAdaptor]> {
  let summary = "Simple (Elman) RNN layer over a whole sequence (ONNX RNN)";
  let description = [{
    ONNX RNN as torch.nn.RNN exports it: h = f(x W^T + h_prev R^T + Wb + Rb)
    with `activation` f "tanh" (default) or "relu" (torch's nonlinearity),
    the same in every direction, no clip, every sequence of the full length
    T. w is [D, H, I], r [D, H, H], b [D, 2H] ([Wb, Rb]); the importer
    passes zeros for an absent `B` or `initial_h`. Directions as px.lstm.
    Unlike px.lstm and px.gru it saves nothing beyond `y`: the activation's
    derivative follows from its output (1 - h^2, or h > 0).
  }];
  let arguments = (ins Px_FloatTensor:$x, Px_FloatTensor:$w, Px_FloatTensor:$r,
                       Px_FloatTensor:$b, Px_FloatTensor:$initial_h,
                       DefaultValuedAttr<StrAttr, "\"forward\"">:$direction,
                       DefaultValuedAttr<StrAttr, "\"tanh\"">:$activation);
  let results = (outs Px_FloatTensor:$y, Px_FloatTensor:$y_h);
  let assemblyFormat = [{
    $x `,` $w `,` $r `,` $b `,` $initial_h attr-dict `:` type(operands)
  }];
}

#endif // PARALLAX_DIALECT_PX_PXTENSOROPS_TD
