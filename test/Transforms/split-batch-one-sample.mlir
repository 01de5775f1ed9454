// px-split-batch on a dynamic export bound to one sample per rank (AlexNet
// at a batch of 4 on 4 ranks, BERT on as many ranks as samples). Where a
// reshape could place a lone sample along several dimensions, it takes the
// one a batch of two would: the one spanning the fewest elements, then
// the larger trailing size, then a dimension of size 1 nearest the input's. The
// dropout masks then number the same elements as one process's, and no
// note says that the ranks' results can differ.
// RUN: parallax-opt %s --split-input-file --px-split-batch='ranks=4' 2>/dev/null | FileCheck %s
// RUN: parallax-opt %s --split-input-file --px-split-batch='ranks=4' 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// Flatten: [1, 8, 6, 6] -> [1, 288] keeps the sample on dimension 0 (not
// on the 288 features, which the product would sum).
// REMARK: remark: batch: 'x', 'y' hold 1 samples per rank and step (dimension 0 is the model's dynamic batch dimension){{$}}
// CHECK-LABEL: func.func @main
// CHECK: px.dropout %{{.*}} {ratio = 5.000000e-01 : f32, sample_stride = 288 : i64} : tensor<1x288xf32>
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<1x8x6x6xf32> batched
    %y = px.input "y" : tensor<1xi64> batched
    %w = px.variable "w" trainable = dense<0.01> : tensor<10x288xf32>
    %f = px.reshape %x : tensor<1x8x6x6xf32> -> tensor<1x288xf32>
    %d:2 = px.dropout %f {ratio = 0.5 : f32} : tensor<1x288xf32>
    %h = px.gemm %d#0, %w {trans_b} : tensor<1x288xf32>, tensor<10x288xf32>
    %loss, %lp = px.softmax_cross_entropy_loss %h, %y : tensor<1x10xf32>, tensor<1xi64>
    return %loss : tensor<f32>
  }
}

// -----

// DLRM's interaction: [1, 4] -> [1, 1, 4] has two dimensions of size 1;
// the sample stays on dimension 0, so the concatenation along dimension 1
// joins features, not samples.
// REMARK: remark: batch: 'x', 'y' hold 1 samples per rank and step (dimension 0 is the model's dynamic batch dimension){{$}}
// CHECK-LABEL: func.func @main
// CHECK: px.dropout %{{.*}} {ratio = 5.000000e-01 : f32, sample_stride = 8 : i64} : tensor<1x2x4xf32>
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<1x4xf32> batched
    %y = px.input "y" : tensor<1xi64> batched
    %w = px.variable "w" trainable = dense<0.01> : tensor<3x8xf32>
    %u = px.reshape %x : tensor<1x4xf32> -> tensor<1x1x4xf32>
    %r = px.relu %x : tensor<1x4xf32>
    %e = px.reshape %r : tensor<1x4xf32> -> tensor<1x1x4xf32>
    %c = px.concat %u, %e {axis = 1 : i64} : tensor<1x1x4xf32>, tensor<1x1x4xf32>
    %d:2 = px.dropout %c {ratio = 0.5 : f32} : tensor<1x2x4xf32>
    %f = px.reshape %d#0 : tensor<1x2x4xf32> -> tensor<1x8xf32>
    %h = px.gemm %f, %w {trans_b} : tensor<1x8xf32>, tensor<3x8xf32>
    %loss, %lp = px.softmax_cross_entropy_loss %h, %y : tensor<1x3xf32>, tensor<1xi64>
    return %loss : tensor<f32>
  }
}

// -----

// Sequence first: [1, 5, 8] -> [5, 1, 8] -> [5, 1, 2, 4] (heads). Of the
// dimensions that could hold the sample, dimension 1 spans its 8 elements
// only; dimension 0 would take the 5 time steps for samples, dimension 2
// (the heads) would make the sum over the heads a sum over samples.
// REMARK: remark: batch: 'x' hold 1 samples per rank and step (dimension 0 is the model's dynamic batch dimension){{$}}
// CHECK-LABEL: func.func @main
// CHECK: px.dropout %{{.*}} {ratio = 5.000000e-01 : f32, sample_stride = 8 : i64} : tensor<5x1x2x4xf32>
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<1x5x8xf32> batched
    %t = px.transpose %x {perm = array<i64: 1, 0, 2>} : tensor<1x5x8xf32>
    %r = px.reshape %t : tensor<5x1x8xf32> -> tensor<5x1x2x4xf32>
    %d:2 = px.dropout %r {ratio = 0.5 : f32} : tensor<5x1x2x4xf32>
    %h = px.reduce_sum %d#0 {axes = array<i64: 2, 3>, keepdims = false} : tensor<5x1x2x4xf32>
    %s = px.reduce_mean %h {axes = array<i64: 0, 1>, keepdims = false} : tensor<5x1xf32>
    return %s : tensor<f32>
  }
}

// -----

// nn.MultiheadAttention's head split: [5, 1, 8] (sequence first) ->
// [5, 2, 4], the batch merged with the 2 heads. The sample stays on
// dimension 1 (with the heads inside it), as with two samples; on
// dimension 0 the sum over the 5 steps would be a sum over samples.
// REMARK: remark: batch: 'x' hold 1 samples per rank and step (dimension 0 is the model's dynamic batch dimension){{$}}
// CHECK-LABEL: func.func @main
// CHECK: px.dropout %{{.*}} {ratio = 5.000000e-01 : f32, sample_stride = 8 : i64} : tensor<5x2x4xf32>
module {
  func.func @main() -> tensor<f32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<1x5x8xf32> batched
    %t = px.transpose %x {perm = array<i64: 1, 0, 2>} : tensor<1x5x8xf32>
    %r = px.reshape %t : tensor<5x1x8xf32> -> tensor<5x2x4xf32>
    %d:2 = px.dropout %r {ratio = 0.5 : f32} : tensor<5x2x4xf32>
    %h = px.reduce_sum %d#0 {axes = array<i64: 0>, keepdims = false} : tensor<5x2x4xf32>
    %s = px.reduce_mean %h {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32>
    return %s : tensor<f32>
  }
}
