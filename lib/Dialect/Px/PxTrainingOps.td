//===- PxTrainingOps.td - gradients, optimizers, state -------*- tablegen -*-===//
//
// What the training passes add to an imported forward graph: the backward
// kernels the autodiff pass (px-autodiff) emits where a gradient is not a
// composition of forward ops, the marker that hands each variable's gradient
// to the optimizer pass, and the optimizer updates and state writes that end
// a training step.
//
// Updates are side effects on variables, named by the px.variable results
// they take as operands (as TensorFlow's ResourceApply* ops take resource
// handles): every read of a variable in a step sees its value from before
// the step, and the plan runs each update in place once the variable's last
// reader has run.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_DIALECT_PX_PXTRAININGOPS_TD
#define PARALLAX_DIALECT_PX_PXTRAININGOPS_TD

include "PxAttrsAndTypes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Dialect/Shard/IR/ShardBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Px_FloatOrSparseGrad : AnyTypeOf<[Px_FloatTensor, Px_SparseGrad],
                                     "dense or row-sparse gradient">;

//===----------------------------------------------------------------------===//
// Backward kernels.
//===----------------------------------------------------------------------===//

def Px_ConvGradInputOp : Px_Op<"conv_grad_input", [Pure]> {
  let summary = "Gradient of px.conv with respect to its input x";
  let description = [{
    The transposed convolution of `dy` with `w`, with px.conv's window
    attributes; the result type is the type of the forward x (the window
    does not determine it when a stride drops trailing input elements).
  }];
  let arguments = (ins Px_FloatTensor:$dy, Px_FloatTensor:$w,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group);
  let results = (outs Px_FloatTensor:$dx);
  let assemblyFormat = [{
    $dy `,` $w attr-dict `:` type($dy) `,` type($w) `->` type($dx)
  }];
  let hasVerifier = 1;
}

def Px_ConvGradFilterOp : Px_Op<"conv_grad_filter", [Pure]> {
  let summary = "Gradient of px.conv with respect to its weight w";
  let arguments = (ins Px_FloatTensor:$x, Px_FloatTensor:$dy,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group);
  let results = (outs Px_FloatTensor:$dw);
  let assemblyFormat = [{
    $x `,` $dy attr-dict `:` type($x) `,` type($dy) `->` type($dw)
  }];
  let hasVerifier = 1;
}

def Px_MaxPoolGradOp : Px_Op<"max_pool_grad", [Pure,
    AllTypesMatch<["x", "dx"]>]> {
  let summary = "Gradient of px.max_pool: each window's dy goes to its argmax";
  let description = [{
    Ties go to the first maximum in row-major window order, as in
    PyTorch's and onnxruntime's kernels.
  }];
  let arguments = (ins Px_FloatTensor:$x, Px_FloatTensor:$dy,
                       DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, UnitAttr:$ceil_mode);
  let results = (outs Px_FloatTensor:$dx);
  let assemblyFormat = "$x `,` $dy attr-dict `:` type($x) `,` type($dy)";
  let hasVerifier = 1;
}

def Px_AvgPoolGradOp : Px_Op<"avg_pool_grad", [Pure]> {
  let summary = "Gradient of px.avg_pool: each window's dy spread evenly";
  let arguments = (ins Px_FloatTensor:$dy, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       UnitAttr:$ceil_mode, UnitAttr:$count_include_pad);
  let results = (outs Px_FloatTensor:$dx);
  let assemblyFormat = "$dy attr-dict `:` type($dy) `->` type($dx)";
  let hasVerifier = 1;
}

class Px_SoftmaxGradBase<string mnemonic, list<Trait> traits = []>
    : Px_Op<mnemonic, !listconcat(traits, [Pure, AllTypesMatch<["y", "dy", "dx"]>])> {
  let arguments = (ins Px_FloatTensor:$y, Px_FloatTensor:$dy,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Px_FloatTensor:$dx);
  let assemblyFormat = "$y `,` $dy attr-dict `:` type($y)";
  let hasVerifier = 1;
}
def Px_SoftmaxGradOp : Px_SoftmaxGradBase<"softmax_grad"> {
  let summary = "dx = y * (dy - sum(dy * y, axis)) for y = softmax(x)";
}
def Px_LogSoftmaxGradOp : Px_SoftmaxGradBase<"log_softmax_grad", [Px_CostlyPerElement]> {
  let summary = "dx = dy - exp(y) * sum(dy, axis) for y = log_softmax(x)";
}

def Px_SoftmaxCrossEntropyLossGradOp
    : Px_Op<"softmax_cross_entropy_loss_grad", [Pure, Px_CostlyPerElement,
        AllTypesMatch<["log_prob", "dscores"]>]> {
  let summary = "Gradient of px.softmax_cross_entropy_loss with respect to the scores";
  let description = [{
    `dloss` has the loss's type; `log_prob` is the forward op's second
    result. dscores = (softmax - onehot(labels)) * w * dloss, where w is the
    class weight (1 without weights) scaled by the reduction (1 / total
    weight for mean), and rows whose label is `ignore_index` get zero.
    With `block of` a grid, `log_prob` is this rank's block of the classes
    (dimension 1 split evenly over `grid_axes`) and `dscores` the same block
    of the gradient: the one-hot is 1 only where the label falls in it.
  }];
  let arguments = (ins Px_FloatTensor:$dloss, Px_FloatTensor:$log_prob,
                       Px_IndexTensor:$labels, Optional<Px_FloatTensor>:$weights,
                       DefaultValuedAttr<StrAttr, "\"mean\"">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       OptionalAttr<Shard_GridAxesAttr>:$grid_axes);
  let results = (outs Px_FloatTensor:$dscores);
  let assemblyFormat = [{
    $dloss `,` $log_prob `,` $labels (`,` $weights^)? attr-dict `:`
    type($dloss) `,` type($log_prob) `,` type($labels) (`,` type($weights)^)?
  }];
  let hasVerifier = 1;
}

def Px_NegativeLogLikelihoodLossGradOp
    : Px_Op<"nll_loss_grad", [Pure]> {
  let summary = "Gradient of px.nll_loss with respect to its input";
  let description = [{
    dinput[n, c, d...] = -w[c] * dloss (scaled as the reduction) where
    c = target[n, d...], and zero elsewhere and for ignored targets.
  }];
  let arguments = (ins Px_FloatTensor:$dloss, Px_IndexTensor:$target,
                       Optional<Px_FloatTensor>:$weight,
                       DefaultValuedAttr<StrAttr, "\"mean\"">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Px_FloatTensor:$dinput);
  let assemblyFormat = [{
    $dloss `,` $target (`,` $weight^)? attr-dict `:` type($dloss) `,`
    type($target) (`,` type($weight)^)? `->` type($dinput)
  }];
  let hasVerifier = 1;
}

def Px_LayerNormGradOp : Px_Op<"layer_norm_grad", [Pure,
    AllTypesMatch<["dy", "x", "dx"]>, AllTypesMatch<["scale", "dscale", "dbias"]>,
    AllTypesMatch<["mean", "inv_std_dev"]>]> {
  let summary = "Gradients of px.layer_norm with respect to x, scale and bias";
  let arguments = (ins Px_FloatTensor:$dy, Px_FloatTensor:$x,
                       Px_FloatTensor:$scale, Px_FloatTensor:$mean,
                       Px_FloatTensor:$inv_std_dev,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Px_FloatTensor:$dx, Px_FloatTensor:$dscale,
                      Px_FloatTensor:$dbias);
  let assemblyFormat = [{
    $dy `,` $x `,` $scale `,` $mean `,` $inv_std_dev attr-dict `:`
    type($x) `,` type($scale) `,` type($mean)
  }];
  let hasVerifier = 1;
}

def Px_BatchNormGradOp : Px_Op<"batch_norm_grad", [Pure,
    AllTypesMatch<["dy", "x", "dx"]>, AllTypesMatch<["scale", "dscale", "dbias"]>]> {
  let summary = "Gradients of training-mode px.batch_norm (x, scale, bias)";
  let description = [{
    Recomputes the batch mean and biased variance of x over N and the
    spatial dimensions (cheaper than keeping them alive across the step).
    With `grid = @g` the statistics, and the sums of dy and dy * xhat that dx
    needs, are those of the whole grid's batch, as PyTorch's
    SyncBatchNorm; dscale and dbias stay this rank's sums (the gradient
    all-reduce averages them like any other gradient). `grid_axes` as
    px.batch_norm's.
  }];
  let arguments = (ins Px_FloatTensor:$dy, Px_FloatTensor:$x,
                       Px_FloatTensor:$scale,
                       DefaultValuedAttr<F32Attr, "1e-5">:$epsilon,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       DefaultValuedAttr<Shard_GridAxesAttr, "{}">:$grid_axes);
  let results = (outs Px_FloatTensor:$dx, Px_FloatTensor:$dscale,
                      Px_FloatTensor:$dbias);
  let assemblyFormat = [{
    $dy `,` $x `,` $scale attr-dict `:` type($x) `,` type($scale)
  }];
  let hasVerifier = 1;
}

def Px_DropoutGradOp : Px_Op<"dropout_grad", [Pure,
    AllTypesMatch<["dy", "dx"]>, AllShapesMatch<["dy", "mask"]>]> {
  let summary = "dx = dy * mask / (1 - ratio)";
  let arguments = (ins Px_FloatTensor:$dy, Px_BoolTensor:$mask, F32Attr:$ratio);
  let results = (outs Px_FloatTensor:$dx);
  let assemblyFormat = "$dy `,` $mask attr-dict `:` type($dy) `,` type($mask)";
}

def Px_ScatterAddOp : Px_Op<"scatter_add", [Pure]> {
  let summary = "Dense gradient of px.gather: zeros, then add each slice back";
  let description = [{
    The result (of the forward data's type) is zero except that, for every
    index position p, the slice `updates[:axis, p, ...]` is added at
    `indices[p]` along `axis`. Negative indices count from the end.
  }];
  let arguments = (ins Px_IndexTensor:$indices, Px_FloatTensor:$updates,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs Px_FloatTensor:$output);
  let assemblyFormat = [{
    $updates `at` $indices attr-dict `:` type($updates) `,` type($indices) `->` type($output)
  }];
  let hasVerifier = 1;
}

def Px_ScatterElementsAddOp : Px_Op<"scatter_elements_add", [Pure]> {
  let summary = "Gradient of px.gather_elements: zeros, then add each element back";
  let arguments = (ins Px_IndexTensor:$indices, Px_FloatTensor:$updates,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs Px_FloatTensor:$output);
  let assemblyFormat = [{
    $updates `at` $indices attr-dict `:` type($updates) `,` type($indices) `->` type($output)
  }];
  let hasVerifier = 1;
}

def Px_SliceGradOp : Px_Op<"slice_grad", [Pure]> {
  let summary = "Gradient of px.slice: dy written into zeros of the input's type";
  let arguments = (ins Px_FloatTensor:$dy, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$steps);
  let results = (outs Px_FloatTensor:$dx);
  let assemblyFormat = [{
    $dy `starts` `=` $starts `steps` `=` $steps attr-dict `:` type($dy) `->` type($dx)
  }];
  let hasVerifier = 1;
}

def Px_PadGradOp : Px_Op<"pad_grad", [Pure]> {
  let summary = "Gradient of px.pad: each dy element added back to its source";
  let description = [{ The result has the forward input's type; elements
    that came from the constant fill contribute nothing, reflected and edge
    elements add to the element they copy. }];
  let arguments = (ins Px_FloatTensor:$dy, DenseI64ArrayAttr:$pads,
                       DefaultValuedAttr<StrAttr, "\"constant\"">:$mode);
  let results = (outs Px_FloatTensor:$dx);
  let assemblyFormat = "$dy attr-dict `:` type($dy) `->` type($dx)";
  let hasVerifier = 1;
}

def Px_SegmentReduceGradOp : Px_Op<"segment_reduce_grad", [Pure,
    AllTypesMatch<["data", "ddata"]>, AllTypesMatch<["starts", "ends"]>]> {
  let summary = "Gradient of px.segment_reduce with respect to its data";
  let description = [{ Each row of dy goes to the rows of its range: as it
    is (sum), divided by the range's length (mean), or, per column, to the
    first maximal row (max). Ranges may overlap; their gradients add. }];
  let arguments = (ins Px_FloatTensor:$dy, Px_FloatTensor:$data,
                       Px_StaticTensorOf<[I64]>:$starts,
                       Px_StaticTensorOf<[I64]>:$ends, StrAttr:$mode);
  let results = (outs Px_FloatTensor:$ddata);
  let assemblyFormat = [{
    $dy `,` $data `,` $starts `,` $ends attr-dict `:` type($dy) `,` type($data) `,` type($starts)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward kernels of the recurrent layers: backpropagation through time
// over the forward op's saved gates, one op per layer (not unrolled).
//===----------------------------------------------------------------------===//

def Px_LstmGradOp : Px_Op<"lstm_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of px.lstm (backpropagation through time)";
  let description = [{
    `x`, `w`, `r`, `initial_h`, `initial_c` are the forward operands; `y`,
    `gates`, `cells` its results; `dy`, `dy_h`, `dy_c` the gradients of y,
    y_h and y_c (px-autodiff passes zeros for a result nothing reads). The
    results are the gradients of x, w, r, b ([D, 8H]: its two halves are
    equal), initial_h and initial_c. The shape rule runs px.lstm's on the
    forward operands and checks y, gates, cells and the incoming gradients
    against it.
  }];
  let arguments = (ins Px_FloatTensor:$x, Px_FloatTensor:$w, Px_FloatTensor:$r,
                       Px_FloatTensor:$initial_h, Px_FloatTensor:$initial_c,
                       Px_FloatTensor:$y, Px_FloatTensor:$gates,
                       Px_FloatTensor:$cells, Px_FloatTensor:$dy,
                       Px_FloatTensor:$dy_h, Px_FloatTensor:$dy_c,
                       DefaultValuedAttr<StrAttr, "\"forward\"">:$direction);
  let results = (outs Px_FloatTensor:$dx, Px_FloatTensor:$dw,
                      Px_FloatTensor:$dr, Px_FloatTensor:$db,
                      Px_FloatTensor:$dinitial_h, Px_FloatTensor:$dinitial_c);
  let assemblyFormat = [{
    $x `,` $w `,` $r `,` $initial_h `,` $initial_c `,` $y `,` $gates `,`
    $cells `,` $dy `,` $dy_h `,` $dy_c attr-dict `:` type(operands)
  }];
}

def Px_GruGradOp : Px_Op<"gru_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of px.gru (backpropagation through time)";
  let description = [{
    As px.lstm_grad: the forward operands, `y` and `gates`, and the
    gradients of y and y_h; results are the gradients of x, w, r, b
    ([D, 6H]) and initial_h, checked against px.gru's shape rule.
  }];
  let arguments = (ins Px_FloatTensor:$x, Px_FloatTensor:$w, Px_FloatTensor:$r,
                       Px_FloatTensor:$initial_h, Px_FloatTensor:$y,
                       Px_FloatTensor:$gates, Px_FloatTensor:$dy,
                       Px_FloatTensor:$dy_h,
                       DefaultValuedAttr<StrAttr, "\"forward\"">:$direction,
                       UnitAttr:$linear_before_reset);
  let results = (outs Px_FloatTensor:$dx, Px_FloatTensor:$dw,
                      Px_FloatTensor:$dr, Px_FloatTensor:$db,
                      Px_FloatTensor:$dinitial_h);
  let assemblyFormat = [{
    $x `,` $w `,` $r `,` $initial_h `,` $y `,` $gates `,` $dy `,` $dy_h
    attr-dict `:` type(operands)
  }];
}

def Px_RnnGradOp : Px_Op<"rnn_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of px.rnn (backpropagation through time)";
  let description = [{
    The forward operands x, w, r, initial_h, its result y, and the
    gradients of y and y_h (zeros for a result nothing reads); results the
    gradients of x, w, r, b ([D, 2H]) and initial_h, checked against
    px.rnn's shape rule. `direction` and `activation` as the forward op.
  }];
  let arguments = (ins Px_FloatTensor:$x, Px_FloatTensor:$w, Px_FloatTensor:$r,
                       Px_FloatTensor:$initial_h, Px_FloatTensor:$y,
                       Px_FloatTensor:$dy, Px_FloatTensor:$dy_h,
                       DefaultValuedAttr<StrAttr, "\"forward\"">:$direction,
                       DefaultValuedAttr<StrAttr, "\"tanh\"">:$activation);
  let results = (outs Px_FloatTensor:$dx, Px_FloatTensor:$dw,
                      Px_FloatTensor:$dr, Px_FloatTensor:$db,
                      Px_FloatTensor:$dinitial_h);
  let assemblyFormat = [{
    $x `,` $w `,` $r `,` $initial_h `,` $y `,` $dy `,` $dy_h attr-dict `:`
    type(operands)
  }];
}

//===----------------------------------------------------------------------===//
// Gradients, state and optimizer updates.
//===----------------------------------------------------------------------===//

// Ops that change a variable's value: not Pure, so they stay when nothing
// reads a result.
class Px_UpdateOp<string mnemonic, list<Trait> traits = []>
    : Px_Op<mnemonic, !listconcat(traits, [MemoryEffects<[MemWrite]>])> {
  let hasVerifier = 1;
}

def Px_GradientOp : Px_UpdateOp<"gradient"> {
  let summary = "The gradient of the loss with respect to a trainable variable";
  let description = [{
    Emitted by px-autodiff, one per trainable variable; consumed by the
    synchronization passes (which replace `grad` by its synchronized form)
    and by px-optimizer, which replaces the op by an update. A variable read
    only through px.gather on axis 0 gets a `!px.sparse_grad`.

    ```mlir
    px.gradient %w, %dw : tensor<64x128xf32>, tensor<64x128xf32>
    ```
  }];
  let arguments = (ins Px_FloatTensor:$variable, Px_FloatOrSparseGrad:$grad);
  let assemblyFormat = [{
    $variable `,` $grad attr-dict `:` type($variable) `,` qualified(type($grad))
  }];
}

def Px_AssignOp : Px_UpdateOp<"assign",
    [AllTypesMatch<["variable", "value"]>]> {
  let summary = "Set a state variable's value for the next step";
  let description = [{
    Used for BatchNormalization's running statistics. The variable must not
    be trainable.
  }];
  let arguments = (ins Px_AnyTensor:$variable, Px_AnyTensor:$value);
  let assemblyFormat = "$variable `,` $value attr-dict `:` type($variable)";
}

// Common hyperparameters; `weight_decay` adds wd * w to the gradient (L2, as
// torch.optim does), for a sparse gradient on the touched rows only.
defvar Px_OptimizerCommonArgs = (ins F64Attr:$lr,
    DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);

// A dense update of a sharded weight update (px-shard-weight-update): the
// rank updates only the bytes of its variable that fall in its block of the
// bucket (`shard_offset`: the variable's offset in the bucket; blocks of
// `shard_bytes` per rank of the group of `grid`/`grid_axes`). With
// `shard_state` (px-shard-optimizer-state) each state operand is one block
// of `shard_bytes`, shared by the bucket's updates, indexed by the element's
// place in the rank's block; its type then follows the op's types after
// `state` (`: tensor<64x8xf32>, tensor<64x8xf32> state tensor<128xf32>`).
defvar Px_ShardedUpdateArgs = (ins OptionalAttr<FlatSymbolRefAttr>:$grid,
    OptionalAttr<Shard_GridAxesAttr>:$grid_axes,
    OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$shard_offset,
    OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$shard_bytes,
    UnitAttr:$shard_state);

def Px_SgdOp : Px_UpdateOp<"sgd"> {
  let summary = "Plain SGD: w -= lr * g";
  let description = [{
    With a sparse gradient only the listed rows change; repeated rows add.
  }];
  let arguments = !con((ins Px_FloatTensor:$variable, Px_FloatOrSparseGrad:$grad),
                       Px_OptimizerCommonArgs, Px_ShardedUpdateArgs);
  let assemblyFormat = [{
    $variable `,` $grad attr-dict `:` type($variable) `,` qualified(type($grad))
  }];
}

def Px_MomentumOp : Px_UpdateOp<"momentum"> {
  let summary = "SGD with momentum (torch.optim.SGD, dampening 0)";
  let description = [{
    buf = momentum * buf + g; w -= lr * (nesterov ? g + momentum * buf : buf).
    A sparse gradient updates (lazily) only the rows it touches, after
    summing repeated rows.
  }];
  let arguments = !con((ins Px_FloatTensor:$variable, Px_FloatTensor:$velocity,
                            Px_FloatOrSparseGrad:$grad),
                       Px_OptimizerCommonArgs,
                       (ins F64Attr:$momentum, UnitAttr:$nesterov), Px_ShardedUpdateArgs);
  let assemblyFormat = [{
    $variable `,` $velocity `,` $grad attr-dict `:` type($variable) `,` qualified(type($grad))
    custom<StateTypes>(ref(type($variable)), type($velocity))
  }];
}

def Px_AdamOp : Px_UpdateOp<"adam"> {
  let summary = "Adam (torch.optim.Adam; lazy torch.optim.SparseAdam for sparse gradients)";
  let description = [{
    With t the step number (1 for the first step):
    m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    dense: w -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps);
    sparse (rows summed first, only those rows change):
    w -= (lr sqrt(1 - b2^t) / (1 - b1^t)) * m / (sqrt(v) + eps).
  }];
  let arguments = !con((ins Px_FloatTensor:$variable, Px_FloatTensor:$m,
                            Px_FloatTensor:$v, Px_FloatOrSparseGrad:$grad),
                       Px_OptimizerCommonArgs,
                       (ins F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon),
                       Px_ShardedUpdateArgs);
  let assemblyFormat = [{
    $variable `,` $m `,` $v `,` $grad attr-dict `:` type($variable) `,` qualified(type($grad))
    custom<StateTypes>(ref(type($variable)), type($m), type($v))
  }];
}

def Px_AdagradOp : Px_UpdateOp<"adagrad"> {
  let summary = "Adagrad (torch.optim.Adagrad, lr_decay 0)";
  let description = [{
    sum += g^2; w -= lr * g / (sqrt(sum) + eps). A sparse gradient updates
    only its rows, after summing repeated rows (as torch's sparse Adagrad).
  }];
  let arguments = !con((ins Px_FloatTensor:$variable, Px_FloatTensor:$sum,
                            Px_FloatOrSparseGrad:$grad),
                       Px_OptimizerCommonArgs, (ins F64Attr:$epsilon), Px_ShardedUpdateArgs);
  let assemblyFormat = [{
    $variable `,` $sum `,` $grad attr-dict `:` type($variable) `,` qualified(type($grad))
    custom<StateTypes>(ref(type($variable)), type($sum))
  }];
}

#endif // PARALLAX_DIALECT_PX_PXTRAININGOPS_TD
